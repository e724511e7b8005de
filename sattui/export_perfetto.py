"""`sattui export FILE --perfetto OUT.json`: a recording as a Chrome / Perfetto JSON trace.

The output is the Trace Event Format's JSON object form (``{"traceEvents": [...]}``), which
Perfetto (ui.perfetto.dev) and Chrome's ``about:tracing`` open, so sattui's recording can
sit next to a PyTorch profiler trace. docs/format.md lists every track it makes.

* one process track per sampled trainer process (the trainer, or each rank), with
  ``X`` (complete) slices of the main thread's states: consecutive stack samples of one
  state become one slice;
* counters (``C``) per card (utilization, SM activity, memory used, power), each under a
  pseudo-process named after the card, and the CPU of each trainer process, worker and
  pin-memory thread under the process track of the rank they belong to;
* findings and events as instant events (``i``);
* process and thread names as metadata events (``M``), the host and the recording's
  start in ``otherData``.

It streams: every record is turned into events as it is read and written at once; only
one open slice per sampled process and the names already given are kept, so memory does
not grow with the recording's length.
"""

from __future__ import annotations

import json
import math
import os
import shlex
from collections.abc import Callable
from typing import Any, TextIO, TypeGuard

from sattui import __version__
from sattui.errors import SattuiError
from sattui.frames import frame_label, is_user_frame
from sattui.model import Frame
from sattui.recording import RecordingReader, clean_json
from sattui.safefile import open_output

# Card tracks need pids no real process has: Linux pids stay below 2**22 (pid_max).
CARD_PID_BASE = 1 << 30
# Consecutive samples of one state closer than this are one slice (py-spy's spans of a
# chunk touch, and chunks follow each other within the 4 decimals a recording keeps).
MERGE_GAP_S = 1e-3
# Card counters: recording field → (counter name, unit key). A null field writes no point.
CARD_COUNTERS = (
    ("util", "utilization", "percent"),
    ("sm_active", "SM activity", "percent"),
    ("mem_used", "memory used", "bytes"),
    ("power_w", "power", "watts"),
)
# Whose CPU gets a counter: the processes that do the trainer's work.
CPU_ROLES = ("main", "rank", "worker", "pin", "compile")
MAX_NAME = 120


def _us(t: float) -> float:
    """Seconds since the recording's start → the format's microseconds (ns kept)."""
    return round(float(t) * 1e6, 3)


_STR_CACHE: dict[str, str] = {}
_LABEL_CACHE: dict[tuple[str, str, Any], str] = {}
_CACHE_MAX = 20000


def _js(text: str) -> str:
    """``text`` as a JSON string; the few distinct names of a trace are encoded once."""
    out = _STR_CACHE.get(text)
    if out is None:
        if len(_STR_CACHE) > _CACHE_MAX:
            _STR_CACHE.clear()
        out = _STR_CACHE[text] = json.dumps(text)
    return out


def _num(v: float) -> str:
    # repr of a finite float or an int is what json.dumps writes for it
    return repr(v)


def _label(name: Any, filename: Any, line: Any) -> str:
    key = (name, filename, line)
    out = _LABEL_CACHE.get(key)
    if out is None:
        if len(_LABEL_CACHE) > _CACHE_MAX:
            _LABEL_CACHE.clear()
        out = _LABEL_CACHE[key] = frame_label(Frame(str(name), str(filename), line if isinstance(line, int) else None))
    return out


def _finite(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _short(text: str, n: int = MAX_NAME) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


class _Slice:
    """The open state slice of one sampled process."""

    __slots__ = ("state", "start", "end", "best_dur", "where", "samples")

    def __init__(self, state: str, start: float, end: float) -> None:
        self.state = state
        self.start = start
        self.end = end
        self.best_dur = -1.0
        self.where: str | None = None
        self.samples = 0


class PerfettoExporter:
    """Turns recording records, in file order, into trace events written to ``out``.

    ``add()`` each record after the header, then ``close()`` (ends the open slices and
    the JSON). Counters of the figures written are kept in ``counts`` for the caller.
    """

    def __init__(self, out: TextIO, header: dict[str, Any]) -> None:
        self.out = out
        self.header = header
        self.host = str(header.get("host") or "")
        main_pid = header.get("pid")
        self.main_pid: int | None = main_pid if isinstance(main_pid, int) else None
        self.first = True
        self.open: dict[int, _Slice] = {}
        self.names: dict[int, str] = {}  # pid (real or card) → process name given
        self.thread_named: set[int] = set()
        self.rank_pid: dict[int | None, int] = {}  # rank → pid of its trainer process
        self.roles: dict[int, tuple[str, int | None, str]] = {}  # pid → (role, rank, comm)
        self.cmdlines: dict[int, list[str]] = {}  # trainers found below a launcher → their command line
        self.counts = {"slices": 0, "counters": 0, "instants": 0, "metadata": 0}
        self._begin()

    # -- output

    def _begin(self) -> None:
        other = {
            "source": "sattui",
            "sattui_version": __version__,
            "recording_format": self.header.get("format"),
            "host": self.header.get("host"),
            "started_at": self.header.get("started_at"),
            "trainer_pid": self.main_pid,
            "trainer_cmdline": self.header.get("cmdline"),
            "backend": self.header.get("backend"),
            "ts_origin": "ts 0 is the recording's start (started_at); ts is in microseconds",
        }
        self.out.write('{"displayTimeUnit":"ms","otherData":')
        self.out.write(json.dumps(other, separators=(",", ":")))
        self.out.write(',"traceEvents":[\n')
        for c in self.header.get("cards") or []:
            if isinstance(c.get("card"), int):
                self._name_card(c["card"], c)
        if self.main_pid is not None and not self.header.get("launcher"):
            self._name_trainer(self.main_pid)  # under a launcher, the trainers found get the tracks

    def _emit(self, ev: dict[str, Any]) -> None:
        # NaN is not JSON (a recording's reader lets it through): null, as the recorder writes it
        self._raw(json.dumps(clean_json(ev), separators=(",", ":"), allow_nan=False))

    def _raw(self, text: str) -> None:
        # The hot events (slices, counters) are formatted by hand: json.dumps per event
        # was most of the export's time.
        if not self.first:
            self.out.write(",\n")
        self.first = False
        self.out.write(text)

    def _counter(self, pid: int, name: str, ts: float, cat: str, unit: str, value: int | float) -> None:
        self._raw(f'{{"ph":"C","name":{_js(name)},"pid":{pid},"tid":{pid},"ts":{_num(ts)},"cat":"{cat}",'
                  f'"args":{{{_js(unit)}:{_num(value)}}}}}')
        self.counts["counters"] += 1

    def _meta(self, name: str, pid: int, args: dict[str, Any], tid: int | None = None) -> None:
        ev: dict[str, Any] = {"ph": "M", "name": name, "pid": pid, "args": args}
        if tid is not None:
            ev["tid"] = tid
        self._emit(ev)
        self.counts["metadata"] += 1

    # -- names

    def _name_card(self, card: int, info: dict[str, Any]) -> None:
        pid = CARD_PID_BASE + card
        label = f"card {card}: {info.get('name') or info.get('vendor') or '?'}"
        if info.get("simulated") and "SIMULATED" not in label:
            label += " (SIMULATED)"
        self._set_name(pid, label, sort_index=1000 + card)

    def _name_trainer(self, pid: int) -> None:
        role, rank, comm = self.roles.get(pid, ("main" if pid == self.main_pid else "rank", None, ""))
        if role == "rank" or rank is not None and pid != self.main_pid:
            who = f"rank {rank}" if rank is not None else "rank ?"
        else:
            who = "trainer"
        what = comm
        cmd = self.cmdlines.get(pid) or (self.header.get("cmdline") if pid == self.main_pid else None)
        if isinstance(cmd, list) and cmd:
            what = shlex.join([os.path.basename(str(cmd[0])) or str(cmd[0]), *map(str, cmd[1:])])
        label = f"{who} pid {pid}" + (f": {what}" if what else "") + (f" on {self.host}" if self.host else "")
        sort = rank if isinstance(rank, int) and rank >= 0 else 0
        self._set_name(pid, _short(label), sort_index=sort)
        if pid not in self.thread_named:
            self.thread_named.add(pid)
            self._meta("thread_name", pid, {"name": "main thread (state)"}, tid=pid)

    def _set_name(self, pid: int, label: str, sort_index: int) -> None:
        if self.names.get(pid) == label:
            return
        first = pid not in self.names
        self.names[pid] = label
        self._meta("process_name", pid, {"name": label})
        if first:
            self._meta("process_sort_index", pid, {"sort_index": sort_index})

    # -- records

    def add(self, rec: dict[str, Any]) -> None:
        if not _finite(rec.get("t")):
            return  # no time, no place on a timeline
        kind = rec.get("kind")
        if kind == "stacks":
            self._stacks(rec)
        elif kind == "card":
            self._card(rec)
        elif kind == "proc":
            self._proc(rec)
        elif kind == "finding":
            self._finding(rec)
        elif kind == "event":
            self._event(rec)

    def _owner(self, rank: int | None) -> int | None:
        """The process track a rank's helpers (workers, pin thread) are drawn under."""
        pid = self.rank_pid.get(rank)
        if pid is None:
            pid = self.rank_pid.get(None, self.main_pid)
        return pid

    def _proc(self, rec: dict[str, Any]) -> None:
        pid = int(rec["pid"])
        role = str(rec.get("role") or "other")
        rank = rec.get("rank") if isinstance(rec.get("rank"), int) else None
        comm = str(rec.get("name") or "")
        if role in ("main", "rank"):
            self.rank_pid[rank] = pid  # the newest: a restarted rank, the next trainer of a script
            if self.roles.get(pid) != (role, rank, comm):
                self.roles[pid] = (role, rank, comm)
                self._name_trainer(pid)
            owner: int | None = pid
        else:
            if self.rank_pid.get(rank) == pid:
                del self.rank_pid[rank]  # a launcher that was main until a trainer showed up below it
            owner = self._owner(rank)
        cpu = rec.get("cpu")
        if role not in CPU_ROLES or owner is None or not _finite(cpu):
            return
        if owner not in self.names:
            self._name_trainer(owner)
        name = "CPU" if pid == owner else f"{role} {pid} CPU"
        self._counter(owner, name, _us(rec["t"]), "cpu", "cores", cpu)

    def _card(self, rec: dict[str, Any]) -> None:
        card = int(rec["card"])
        pid = CARD_PID_BASE + card
        if pid not in self.names:
            self._name_card(card, {})
        ts = _us(rec["t"])
        for field, name, unit in CARD_COUNTERS:
            v = rec.get(field)
            if _finite(v):
                self._counter(pid, name, ts, "card", unit, v)

    def _stacks(self, rec: dict[str, Any]) -> None:
        pid = int(rec["pid"])
        if pid not in self.names:
            self._name_trainer(pid)
        samples = sorted((s for s in rec["samples"] if int(s[2]) == pid), key=lambda s: float(s[0]))
        labels: dict[int, str | None] = {}

        def where(si: int) -> str | None:
            # The user's own innermost frame says most; else the innermost frame.
            if si not in labels:
                frames = [rec["frames"][i] for i in rec["stacks"][si]]
                pick = next((f for f in frames if is_user_frame(str(f[1]))), frames[0] if frames else None)
                labels[si] = _label(*pick) if pick is not None else None
            return labels[si]

        for t, dur, _tid, si, state in samples:
            if not (_finite(t) and _finite(dur)):
                continue
            t, dur = float(t), float(dur)
            cur = self.open.get(pid)
            if state is None:  # unknown (a torn read): the slice ends here
                if cur is not None:
                    self._close_slice(pid, cur)
                continue
            end = t + dur
            if cur is not None and t < cur.end:
                t = cur.end  # never overlap the slice before: slices on one track must nest
                if end <= t:
                    continue
            if cur is not None and (cur.state != state or t - cur.end > MERGE_GAP_S):
                self._close_slice(pid, cur)
                cur = None
            if cur is None:
                cur = self.open[pid] = _Slice(str(state), t, end)
            cur.end = end
            cur.samples += 1
            if dur > cur.best_dur:
                cur.best_dur = dur
                cur.where = where(int(si))

    def _close_slice(self, pid: int, s: _Slice) -> None:
        self.open.pop(pid, None)
        ts = _us(s.start)
        where = f',"where":{_js(s.where)}' if s.where else ""
        self._raw(f'{{"ph":"X","name":{_js(s.state)},"cat":"state","pid":{pid},"tid":{pid},"ts":{_num(ts)},'
                  f'"dur":{_num(round(_us(s.end) - ts, 3))},"args":{{"samples":{s.samples}{where}}}}}')
        self.counts["slices"] += 1

    def _finding(self, rec: dict[str, Any]) -> None:
        args = {k: rec.get(k) for k in ("summary", "impact", "card", "rank", "fix", "evidence") if k in rec}
        self._emit({"ph": "i", "s": "g", "name": f"{rec.get('rule')} ({rec.get('severity')})", "cat": "finding",
                    "pid": self.main_pid if self.main_pid is not None else 0, "tid": 0, "ts": _us(rec["t"]),
                    "args": args})
        self.counts["instants"] += 1

    def _event(self, rec: dict[str, Any]) -> None:
        args = {k: v for k, v in rec.items() if k not in ("kind", "t", "type")}
        if rec.get("type") == "trainer_found" and isinstance(rec.get("pid"), int):
            cmd = rec.get("cmdline")
            if isinstance(cmd, list) and cmd and all(isinstance(x, str) for x in cmd):
                self.cmdlines[rec["pid"]] = cmd
            if rec["pid"] in self.names:
                self._name_trainer(rec["pid"])
        ev: dict[str, Any] = {"ph": "i", "name": str(rec.get("type")), "cat": "event", "ts": _us(rec["t"]),
                              "args": args}
        pid = rec.get("pid")
        card = rec.get("card")
        if isinstance(pid, int) and pid in self.names:
            ev.update(s="p", pid=pid, tid=pid)
        elif isinstance(card, int) and CARD_PID_BASE + card in self.names:
            ev.update(s="p", pid=CARD_PID_BASE + card, tid=CARD_PID_BASE + card)
        else:
            ev.update(s="g", pid=self.main_pid if self.main_pid is not None else 0, tid=0)
        self._emit(ev)
        self.counts["instants"] += 1

    def close(self) -> None:
        for pid, s in list(self.open.items()):
            self._close_slice(pid, s)
        self.out.write("\n]}\n")


# --------------------------------------------------------------------------- the file


def _remove_if_ours(path: str, st: os.stat_result) -> None:
    """Remove the half-written trace, but only if the name still points at our file."""
    try:
        now = os.lstat(path)
        if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
            os.unlink(path)
    except OSError:
        pass


def export_perfetto(recording: str, out_path: str, *, force: bool = False,
                    on_warning: Callable[[str], None] | None = None) -> dict[str, int]:
    """Write ``recording`` as a trace to ``out_path``; returns the counts of events.

    A recording that turns out bad part-way leaves no half-written trace behind.
    """
    reader = RecordingReader(recording)  # a foreign or unreadable file fails before OUT exists
    try:
        fd = open_output(out_path, force)
    except BaseException:
        reader.close()
        raise
    st = os.fstat(fd)
    ok = False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            exp = PerfettoExporter(f, reader.header)
            for rec in reader.records():
                exp.add(rec)
            exp.close()
        ok = True
    except OSError as e:
        raise SattuiError(f"cannot write {out_path}: {e.strerror or e}") from None
    finally:
        if not ok:
            _remove_if_ours(out_path, st)
    for w in reader.warnings:
        if on_warning is not None:
            on_warning(w)
    return exp.counts
