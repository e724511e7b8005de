"""A structural check of Chrome/Perfetto JSON traces (Trace Event Format, JSON object form).

Perfetto's own trace_processor cannot run here (its Python package downloads the binary
on first use, and this machine is offline), so the tests check what its JSON importer
(src/trace_processor/importers/json/) needs of each phase sattui writes, and what the
format's description says: ``X`` needs a numeric ``dur`` and slices of one thread must
nest; ``C`` needs an ``args`` object of numbers (one counter track per key); ``i`` needs
a scope ``s`` of ``g``, ``p`` or ``t``; ``M`` names processes and threads.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any

PHASES = {"X", "C", "i", "M"}
META = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}
SCOPES = ("g", "p", "t")
EPS_US = 1e-3  # timestamps are microseconds: slices closer than a nanosecond touch


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _id(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2 ** 32


def load_trace(path: str) -> dict[str, Any]:
    """Strict JSON (NaN and Infinity are not JSON) of the object form."""
    def no_constants(name: str) -> None:
        raise AssertionError(f"not JSON: {name}")

    with open(path, encoding="utf-8") as f:
        obj = json.load(f, parse_constant=no_constants)
    assert isinstance(obj, dict), f'not the object form {{"traceEvents": [...]}}: a {type(obj).__name__}'
    assert isinstance(obj.get("traceEvents"), list), "traceEvents must be a list"
    assert obj.get("displayTimeUnit", "ms") in ("ms", "ns"), f"displayTimeUnit {obj['displayTimeUnit']!r}"
    return obj


def check_events(events: list[dict[str, Any]], nested: bool = True) -> None:
    """Raise AssertionError naming the first event that breaks the format, and why.
    ``nested=False``: one thread's slices must also never nest (sattui's exports: a
    thread is in one state at a time)."""
    slices: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for i, ev in enumerate(events):
        where = f"event {i}: {ev}"
        assert isinstance(ev, dict), f"{where}: not an object"
        ph = ev.get("ph")
        assert ph in PHASES, f"{where}: ph {ph!r} is not one of {sorted(PHASES)}"
        assert _id(ev.get("pid")), f"{where}: pid must be an int in [0, 2**32)"
        if "tid" in ev:
            assert _id(ev["tid"]), f"{where}: tid must be an int in [0, 2**32)"
        assert isinstance(ev.get("name"), str) and ev["name"], f"{where}: name must be a non-empty string"
        if ph == "M":
            assert ev["name"] in META, f"{where}: M name {ev['name']!r} is not one of {sorted(META)}"
            args = ev.get("args")
            assert isinstance(args, dict), f"{where}: M needs an args object"
            if ev["name"].endswith("_name"):
                assert isinstance(args.get("name"), str) and args["name"], \
                    f"{where}: {ev['name']} needs args.name, a non-empty string"
            else:
                assert isinstance(args.get("sort_index"), int) and not isinstance(args["sort_index"], bool), \
                    f"{where}: {ev['name']} needs args.sort_index, an int"
            continue
        assert _num(ev.get("ts")) and ev["ts"] >= 0, f"{where}: ts must be a finite number >= 0"
        if ph == "X":
            assert _num(ev.get("dur")) and ev["dur"] >= 0, f"{where}: X needs dur, a finite number >= 0"
            slices[(ev["pid"], ev.get("tid", ev["pid"]))].append((ev["ts"], ev["ts"] + ev["dur"]))
        elif ph == "C":
            args = ev.get("args")
            assert isinstance(args, dict) and args, f"{where}: C needs a non-empty args object"
            bad = {k: v for k, v in args.items() if not _num(v)}
            assert not bad, f"{where}: C args must be finite numbers, not {bad}"
        elif ph == "i":
            assert ev.get("s", "t") in SCOPES, f"{where}: i scope s {ev.get('s')!r} is not one of {list(SCOPES)}"
        if "args" in ev:
            assert isinstance(ev["args"], dict), f"{where}: args must be an object"
    for track, spans in slices.items():
        _check_nesting(track, spans, nested)


def _check_nesting(track: tuple[int, int], spans: list[tuple[float, float]], nested: bool) -> None:
    """One thread's slices nest (a child inside its parent) or follow each other: they
    are a call stack, and two that partly overlap are none. The format allows nesting;
    ``nested=False`` refuses it too."""
    # Earlier start first; of two that start together the longer is the parent.
    open_: list[tuple[float, float]] = []  # the slices still open, outermost first
    for b0, b1 in sorted(spans, key=lambda s: (s[0], -s[1])):
        while open_ and open_[-1][1] <= b0 + EPS_US:
            open_.pop()  # ended before this one starts (or just as it starts)
        if open_:
            a0, a1 = open_[-1]
            assert b1 <= a1 + EPS_US, (f"slices overlap on track {track}: {(a0, a1)} and {(b0, b1)} "
                                       "(the second starts inside the first and ends after it)")
            assert nested, f"slices nest on track {track}: {(b0, b1)} inside {(a0, a1)}"
        open_.append((b0, b1))


def state_seconds(events: list[dict[str, Any]], pid: int | None = None) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for ev in events:
        if ev["ph"] == "X" and ev.get("cat") == "state" and (pid is None or ev["pid"] == pid):
            out[ev["name"]] += ev["dur"] / 1e6
    return dict(out)


def shares(seconds: dict[str, float], leave_out: tuple[str, ...] = ("startup",)) -> dict[str, float]:
    total = sum(v for k, v in seconds.items() if k not in leave_out)
    return {k: v / total for k, v in seconds.items() if k not in leave_out} if total else {}
