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


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def load_trace(path: str) -> dict[str, Any]:
    """Strict JSON (NaN and Infinity are not JSON) of the object form."""
    def no_constants(name: str) -> None:
        raise AssertionError(f"not JSON: {name}")

    with open(path, encoding="utf-8") as f:
        obj = json.load(f, parse_constant=no_constants)
    assert isinstance(obj, dict), "the object form: {\"traceEvents\": [...]}"
    assert isinstance(obj.get("traceEvents"), list)
    assert obj.get("displayTimeUnit", "ms") in ("ms", "ns")
    return obj


def check_events(events: list[dict[str, Any]]) -> None:
    """Raise AssertionError naming the first event that breaks the format."""
    slices: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for i, ev in enumerate(events):
        where = f"event {i}: {ev}"
        assert isinstance(ev, dict), where
        ph = ev.get("ph")
        assert ph in PHASES, where
        assert isinstance(ev.get("pid"), int) and 0 <= ev["pid"] < 2 ** 32, where
        if "tid" in ev:
            assert isinstance(ev["tid"], int) and 0 <= ev["tid"] < 2 ** 32, where
        assert isinstance(ev.get("name"), str) and ev["name"], where
        if ph == "M":
            assert ev["name"] in META, where
            args = ev.get("args")
            assert isinstance(args, dict), where
            if ev["name"].endswith("_name"):
                assert isinstance(args.get("name"), str) and args["name"], where
            else:
                assert isinstance(args.get("sort_index"), int), where
            continue
        assert _num(ev.get("ts")) and ev["ts"] >= 0, where
        if ph == "X":
            assert _num(ev.get("dur")) and ev["dur"] >= 0, where
            slices[(ev["pid"], ev.get("tid", ev["pid"]))].append((ev["ts"], ev["ts"] + ev["dur"]))
        elif ph == "C":
            args = ev.get("args")
            assert isinstance(args, dict) and args, where
            assert all(_num(v) for v in args.values()), where
        elif ph == "i":
            assert ev.get("s", "t") in ("g", "p", "t"), where
        if "args" in ev:
            assert isinstance(ev["args"], dict), where
    for track, spans in slices.items():
        spans.sort()
        for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
            # One thread's slices nest or follow each other; sattui's states never nest.
            assert b0 >= a1 - 1e-3, f"slices overlap on track {track}: {(a0, a1)} and {(b0, b1)}"


def state_seconds(events: list[dict[str, Any]], pid: int | None = None) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for ev in events:
        if ev["ph"] == "X" and ev.get("cat") == "state" and (pid is None or ev["pid"] == pid):
            out[ev["name"]] += ev["dur"] / 1e6
    return dict(out)


def shares(seconds: dict[str, float], leave_out: tuple[str, ...] = ("startup",)) -> dict[str, float]:
    total = sum(v for k, v in seconds.items() if k not in leave_out)
    return {k: v / total for k, v in seconds.items() if k not in leave_out} if total else {}
