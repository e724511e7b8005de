"""Recordings: JSON Lines, format ``sattui/1`` (docs/format.md documents every field).

The writer creates the file with mode 0600 (a recording names processes and command
lines), never through a link nor over a file unasked (sattui/safefile.py), writes one
object per line and flushes after every batch, so whatever stops sattui leaves a file
that reads back, at worst with a torn last line. The reader streams: a 2 GB recording
is read with bounded memory.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TextIO

import orjson

from sattui.errors import RecordingError, SattuiError
from sattui.model import Frame, StackChunk, StackSample
from sattui.recording import schema
from sattui.safefile import open_output

FORMAT = "sattui/1"
FORMAT_FAMILY = "sattui/"
# What a record kind a newer writer may add looks like; anything else is damage.
_KIND_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
KINDS = frozenset({"header", "card", "proc", "stacks", "finding", "event", "host", "worker_stack"})


def clean_json(value: Any) -> Any:
    """NaN and infinities are not JSON; a value the source could not give is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_json(v) for v in value]
    return value


def make_header(*, pid: int | None, cmdline: list[str] | None, backend: str | None,
                cards: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    header: dict[str, Any] = {
        "kind": "header",
        "format": FORMAT,
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "pid": pid,
        "cmdline": cmdline,
        "backend": backend,
        "cards": cards or [],
    }
    header.update(extra)
    return header


def stacks_to_record(chunk: StackChunk) -> dict[str, Any]:
    """One py-spy chunk as a self-contained ``stacks`` record.

    Frames and stacks are interned per record (not per file) so that every record
    stands alone: a reader can start anywhere and a torn file loses only its tail.
    """
    frame_ids: dict[Frame, int] = {}
    stack_ids: dict[tuple[int, ...], int] = {}
    threads: dict[str, str | None] = {}
    samples = []
    for s in chunk.samples:
        ids = []
        for f in s.frames:
            i = frame_ids.get(f)
            if i is None:
                i = frame_ids[f] = len(frame_ids)
            ids.append(i)
        key = tuple(ids)
        si = stack_ids.get(key)
        if si is None:
            si = stack_ids[key] = len(stack_ids)
        threads.setdefault(str(s.tid), s.thread_name)
        samples.append([round(s.t, 4), round(s.dur, 4), s.tid, si, s.state])
    return {
        "kind": "stacks",
        "t": round(chunk.t, 4),
        "t_end": round(chunk.t_end, 4),
        "pid": chunk.pid,
        "rate_hz": chunk.rate_hz,
        "errors": chunk.errors,
        "threads": threads,
        "frames": [[f.name, f.filename, f.line] for f in frame_ids],
        "stacks": [list(k) for k in stack_ids],
        "samples": samples,
    }


def samples_from_record(rec: dict[str, Any], only_tid: int | None = None) -> list[StackSample]:
    """The inverse of :func:`stacks_to_record` (``only_tid``: that thread's samples only;
    frames are built only for the stacks they use)."""
    frames_raw = rec["frames"]
    stacks_raw = rec["stacks"]
    threads = rec.get("threads") or {}
    pid = int(rec["pid"])
    frames: dict[int, Frame] = {}
    stacks: dict[int, tuple[Frame, ...]] = {}

    def stack(si: int) -> tuple[Frame, ...]:
        got = stacks.get(si)
        if got is None:
            parts = []
            for i in stacks_raw[si]:
                f = frames.get(i)
                if f is None:
                    n, fn, ln = frames_raw[i]
                    f = frames[i] = Frame(str(n), str(fn), ln if isinstance(ln, int) else None)
                parts.append(f)
            got = stacks[si] = tuple(parts)
        return got

    out: list[StackSample] = []
    append = out.append
    if only_tid is not None:
        # One thread (the feed's main thread: 72,000 spans an hour): its name looked up once.
        name, is_main = threads.get(str(only_tid)), only_tid == pid
        for t, dur, tid, si, state in rec["samples"]:
            if tid != only_tid:
                continue
            got = stacks.get(si)
            append(StackSample(float(t), float(dur), pid, only_tid, name, is_main,
                               stack(si) if got is None else got, state))
        return out
    for t, dur, tid, si, state in rec["samples"]:
        tid = int(tid)
        append(StackSample(float(t), float(dur), pid, tid, threads.get(str(tid)), tid == pid, stack(si), state))
    return out


class RecordingWriter:
    """Appends records to a new recording; every ``write`` ends flushed.

    The file is created by :func:`sattui.safefile.open_output`: never through a link, and
    an existing file only replaced with ``force`` (``--force``).
    """

    def __init__(self, path: str, header: dict[str, Any], force: bool = False) -> None:
        self.path = path
        fd = open_output(path, force)
        self._f: TextIO | None = os.fdopen(fd, "w", encoding="utf-8")
        self.records_written = 0
        self.write_many([header])

    def write(self, record: dict[str, Any]) -> None:
        self.write_many([record])

    def write_many(self, records: list[dict[str, Any]]) -> None:
        if self._f is None:
            raise SattuiError(f"cannot write {self.path}: already closed")
        try:
            for r in records:
                self._f.write(json.dumps(clean_json(r), separators=(",", ":"), allow_nan=False) + "\n")
            self._f.flush()
        except OSError as e:
            raise SattuiError(f"cannot write {self.path}: {e.strerror or e}") from None
        self.records_written += len(records)

    def close(self) -> None:
        if self._f is not None:
            f, self._f = self._f, None
            try:
                f.close()
            except OSError as e:
                raise SattuiError(f"cannot write {self.path}: {e.strerror or e}") from None


def _loads(raw: bytes) -> Any:
    """One line's JSON. orjson parses a recording's lines several times faster than the
    standard library (the report of a 1-hour recording reads 27,000 of them); what it
    refuses (a lone surrogate escape from a thread name, a byte-order mark) goes to
    ``json.loads``, which decides as before."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


@dataclass
class RecordingReader:
    """Streams a recording: ``header`` is read at once, ``records()`` yields the rest.

    ``warnings`` collects what was tolerated (a torn last line, records of kinds this
    sattui does not know: a newer one wrote them; they are skipped, said once per kind).
    """

    path: str
    header: dict[str, Any] = field(init=False)
    warnings: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self._unknown: dict[str, int] = {}
        try:
            self._f = open(self.path, "rb")
        except OSError as e:
            raise RecordingError(f"cannot read {self.path}: {e.strerror or e}") from None
        first = self._f.readline()
        if not first.strip():
            self._f.close()
            raise RecordingError(f"{self.path}: empty file, not a sattui recording")
        self.header = self._parse_header(first)
        self._line_no = 1

    def _parse_header(self, raw: bytes) -> dict[str, Any]:
        try:
            obj = _loads(raw)
        except (ValueError, UnicodeDecodeError):
            obj = None
        if not isinstance(obj, dict) or obj.get("kind") != "header" or not isinstance(obj.get("format"), str):
            self._f.close()
            raise RecordingError(f"{self.path}: line 1 is not a sattui header: not a sattui recording")
        fmt = obj["format"]
        bad = schema.problem(obj) if fmt == FORMAT else None
        if bad is not None:
            self._f.close()
            raise RecordingError(f"{self.path}: line 1: {bad}")
        if fmt != FORMAT:
            self._f.close()
            if fmt.startswith(FORMAT_FAMILY):
                raise RecordingError(f"{self.path}: format {fmt} is not one this sattui reads ({FORMAT}); "
                                     "a newer sattui wrote it")
            raise RecordingError(f"{self.path}: line 1 has format {fmt!r}: not a sattui recording")
        return obj

    def last_t(self, tail_bytes: int = 1 << 18) -> float | None:
        """The time the recording reaches (its last whole record's ``t_end`` or ``t``),
        from the file's tail alone and without moving the reader; None when the tail holds
        no such record (a pipe, a file torn beyond its last quarter megabyte)."""
        fd = self._f.fileno()
        try:
            size = os.fstat(fd).st_size
            offset = max(0, size - tail_bytes)
            tail = os.pread(fd, size - offset, offset)
        except OSError:
            return None
        lines = tail.split(b"\n")
        if offset > 0:
            lines = lines[1:]  # the first piece may start mid-line
        for raw in reversed(lines):
            if not raw.strip():
                continue
            try:
                obj = _loads(raw)
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(obj, dict) and type(obj.get("t")) in (int, float) and obj.get("kind") != "header":
                end = obj.get("t_end")
                return float(max(obj["t"], end)) if type(end) in (int, float) else float(obj["t"])
        return None

    def records(self) -> Iterator[dict[str, Any]]:
        """Every record after the header, in file order; raises RecordingError on a bad line."""
        f = self._f
        pending: bytes | None = None
        pending_no = 0
        for raw in f:
            self._line_no += 1
            if pending is not None:
                # A bad line followed by more lines is not a torn tail: it is damage.
                raise RecordingError(f"{self.path}: line {pending_no}: not a JSON record")
            rec = self._parse_line(raw)
            if rec is None:
                pending, pending_no = raw, self._line_no
                continue
            if not isinstance(rec, dict):  # a line the reader skips
                continue
            yield rec
        if pending is not None:
            if pending.endswith(b"\n"):
                raise RecordingError(f"{self.path}: line {pending_no}: not a JSON record")
            self.warnings.append(f"{self.path}: line {pending_no} is torn (the writer was stopped); skipped")
        for kind, n in sorted(self._unknown.items()):
            self.warnings.append(f"{self.path}: {n} record(s) of kind {kind!r} skipped: "
                                 "a newer sattui wrote them")
        f.close()

    def _parse_line(self, raw: bytes) -> dict[str, Any] | None | bool:
        if not raw.strip():
            return False
        try:
            obj = _loads(raw)
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(obj, dict) or obj.get("kind") not in KINDS:
            kind = obj.get("kind") if isinstance(obj, dict) else type(obj).__name__
            if isinstance(obj, dict) and isinstance(kind, str) and _KIND_NAME.fullmatch(kind) \
                    and type(obj.get("t")) in (int, float):
                # Kinds are added without a new format version (docs/format.md): a record
                # of a kind this reader does not know is skipped, not an error.
                self._unknown[kind] = self._unknown.get(kind, 0) + 1
                return False
            raise RecordingError(f"{self.path}: line {self._line_no}: unknown record kind {kind!r}")
        if obj["kind"] == "header":
            raise RecordingError(f"{self.path}: line {self._line_no}: a second header (two recordings joined?)")
        if type(obj.get("t")) not in (int, float):
            raise RecordingError(f"{self.path}: line {self._line_no}: record without a time 't'")
        bad = schema.problem(obj)
        if bad is not None:
            raise RecordingError(f"{self.path}: line {self._line_no}: {bad}")
        return obj

    def close(self) -> None:
        self._f.close()

