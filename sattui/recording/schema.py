"""Field types of the recording format (docs/format.md), checked as each line is read.

A line of the right ``kind`` but with, say, a string ``cpu`` or a ``samples`` entry that
points past ``stacks`` is damage or a foreign writer: it must stop the reader with an
error naming the line and the field, not a ``TypeError`` deep inside the report or the
replay. Fields not listed here are free (a reader ignores fields it does not know).

The checks cost a few ``type()`` calls per field, which the 2 GB figure in README was
measured with (``bench/scale.py --big``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Check = Callable[[Any], bool]


def _num(v: Any) -> bool:
    return type(v) is int or type(v) is float  # not bool: True is not a time or a rate


def _int(v: Any) -> bool:
    return type(v) is int


def _str(v: Any) -> bool:
    return type(v) is str


def _bool(v: Any) -> bool:
    return type(v) is bool


def _is_list(v: Any) -> bool:
    return type(v) is list


_NONE = type(None)
# The plain checks as sets of the types they allow: ``type(v) in allowed`` costs no call,
# and most fields of the records read most (proc, card, stacks) are plain. A list or an
# object of a plain check is checked by the set of its items' types, in C: a 1-hour
# recording's stacks records hold 72,000 samples, its card records 7,200 process lists.
_TYPES: dict[Check, frozenset[type]] = {
    _num: frozenset({int, float}), _int: frozenset({int}), _str: frozenset({str}), _bool: frozenset({bool}),
    _is_list: frozenset({list}),
}


def _nullable(check: Check) -> Check:
    def ok(v: Any) -> bool:
        return v is None or check(v)
    ok.__name__ = f"{check.__name__} or null"
    if check in _TYPES:
        _TYPES[ok] = _TYPES[check] | {_NONE}
    return ok


def _list_of(check: Check) -> Check:
    allowed = _TYPES.get(check)
    if allowed is not None:
        def ok(v: Any) -> bool:
            return type(v) is list and set(map(type, v)) <= allowed
    else:
        def ok(v: Any) -> bool:
            return type(v) is list and all(check(x) for x in v)
    ok.__name__ = f"list of {check.__name__}"
    return ok


def _dict_of(check: Check) -> Check:
    allowed = _TYPES.get(check)
    if allowed is not None:
        def ok(v: Any) -> bool:
            return type(v) is dict and set(map(type, v.values())) <= allowed
    else:
        def ok(v: Any) -> bool:
            return type(v) is dict and all(check(x) for x in v.values())
    ok.__name__ = f"object of {check.__name__}"
    return ok


def _card_info(v: Any) -> bool:
    return type(v) is dict and _int(v.get("card"))


_num.__name__, _int.__name__, _str.__name__, _card_info.__name__ = "number", "int", "string", "card object"
_bool.__name__, _is_list.__name__ = "boolean", "list"
_NUM, _INT, _STR = _nullable(_num), _nullable(_int), _nullable(_str)

# kind -> {field: (check, required)}
_FIELDS: dict[str, dict[str, tuple[Check, bool]]] = {
    "header": {
        "started_at": (_STR, False), "host": (_STR, False), "pid": (_INT, False),
        "cmdline": (_nullable(_list_of(_str)), False), "backend": (_STR, False),
        "cards": (_list_of(_card_info), False), "env": (_nullable(_dict_of(_str)), False),
        "nspid": (_nullable(_list_of(_int)), False), "launcher": (_STR, False),
        "interval_s": (_NUM, False), "stack_rate_hz": (_NUM, False), "cpu_usable": (_INT, False),
    },
    "proc": {
        "pid": (_int, True), "ppid": (_INT, False), "role": (_STR, False), "rank": (_INT, False),
        "name": (_STR, False), "cpu": (_NUM, False), "state": (_STR, False), "rss": (_INT, False),
        "read_Bps": (_NUM, False), "write_Bps": (_NUM, False), "threads": (_INT, False), "nspid": (_INT, False),
        "cpu_main": (_NUM, False), "run_delay": (_NUM, False), "uss": (_INT, False),
        "started_t": (_NUM, False), "local_rank": (_INT, False), "world_size": (_INT, False),
        "run_id": (_STR, False),
    },
    "host": {
        "cpu_busy": (_NUM, False), "cpu_steal": (_NUM, False), "cpus": (_INT, False), "cg_version": (_INT, False),
        "cg_cpu_limit": (_NUM, False), "cg_periods": (_INT, False), "cg_throttled_periods": (_INT, False),
        "cg_throttled_s": (_NUM, False), "freq_mhz": (_NUM, False), "freq_max_mhz": (_NUM, False),
        "governor": (_STR, False), "mem_total": (_INT, False), "mem_available": (_INT, False),
    },
    "worker_stack": {
        "pid": (_int, True), "state": (_str, True), "active": (_nullable(_bool), False),
        "frames": (_list_of(_is_list), True),
    },
    "card": {
        "card": (_int, True), "util": (_NUM, False), "sm_active": (_NUM, False), "sm_occupancy": (_NUM, False),
        "tensor_active": (_NUM, False), "dram_active": (_NUM, False), "mem_used": (_INT, False),
        "mem_total": (_INT, False), "power_w": (_NUM, False), "power_limit_w": (_NUM, False),
        "temp_c": (_NUM, False), "sm_clock_mhz": (_NUM, False), "sm_clock_max_mhz": (_NUM, False),
        "clock_reasons": (_INT, False), "pcie_rx_Bps": (_NUM, False), "pcie_tx_Bps": (_NUM, False),
        "pcie_gen": (_INT, False), "pcie_width": (_INT, False), "procs": (_nullable(_dict_of(_INT)), False),
    },
    "event": {
        "type": (_str, True), "message": (_STR, False), "pid": (_INT, False), "card": (_INT, False),
        "exit_code": (_INT, False), "role": (_STR, False), "ended_by": (_STR, False), "backend": (_STR, False),
    },
    "finding": {
        "rule": (_str, True), "severity": (_str, True), "impact": (_NUM, False), "summary": (_STR, False),
        "card": (_INT, False), "rank": (_INT, False), "evidence": (_nullable(_dict_of(lambda v: True)), False),
        "fix": (_STR, False), "since_s": (_NUM, False),
        "impact_ci": (_nullable(_list_of(lambda v: type(v) in (int, float))), False),
    },
    "stacks": {
        "t_end": (_num, True), "pid": (_int, True), "rate_hz": (_NUM, False), "errors": (_INT, False),
        "threads": (_nullable(_dict_of(_STR)), False), "frames": (_list_of(_is_list), True),
        "stacks": (_list_of(_is_list), True), "samples": (_list_of(_is_list), True),
    },
}


def _what(v: Any) -> str:
    return "null" if v is None else type(v).__name__


_PLAIN: dict[Check, frozenset[type]] = {c: _TYPES[c] for c in (_num, _int, _str, _bool, _NUM, _INT, _STR)}


@dataclass(frozen=True)
class _KindSpec:
    required: tuple[str, ...]
    plain: dict[str, frozenset[type]]
    other: dict[str, Check]


_SPECS = {kind: _KindSpec(tuple(n for n, (_, req) in fs.items() if req),
                          {n: _PLAIN[c] for n, (c, _) in fs.items() if c in _PLAIN},
                          {n: c for n, (c, _) in fs.items() if c not in _PLAIN})
          for kind, fs in _FIELDS.items()}


# Record shapes (kind, field names, field types) whose plain fields have passed: a writer
# repeats a few shapes, so most records skip the per-field checks of those. Bounded: a
# foreign writer with ever new shapes only empties it now and then.
_PASSED: set[tuple[Any, ...]] = set()
_PASSED_MAX = 4096


def problem(rec: dict[str, Any]) -> str | None:
    """What is wrong with one record's fields (``kind`` already known), or None."""
    kind = rec["kind"]
    spec = _SPECS[kind]
    other = spec.other
    shape = (kind, tuple(rec), tuple(map(type, rec.values())))
    if shape in _PASSED:
        # The same names with the same types passed before: only the fields whose check
        # looks inside the value are left.
        for name, nested in other.items():
            if name in rec and not nested(rec[name]):
                return _bad(kind, name, rec[name])
    else:
        for name in spec.required:
            if name not in rec:
                return f"{kind} record without {name!r}"
        plain = spec.plain
        for name, v in rec.items():
            allowed = plain.get(name)
            if allowed is not None:
                if type(v) not in allowed:
                    return _bad(kind, name, v)
            else:
                check = other.get(name)
                if check is not None and not check(v):
                    return _bad(kind, name, v)
        if len(_PASSED) >= _PASSED_MAX:
            _PASSED.clear()
        _PASSED.add(shape)
    if kind == "stacks":
        return _stacks_problem(rec)
    if kind == "worker_stack" and not all(_frame_ok(f) for f in rec["frames"]):
        return "worker_stack record: a frame is not [function, filename, line]"
    return None


def _bad(kind: str, name: str, v: Any) -> str:
    return f"{kind} record: {name!r} is {_what(v)}, not {_FIELDS[kind][name][0].__name__}"


def _frame_ok(f: list[Any]) -> bool:
    return len(f) == 3 and _str(f[0]) and _str(f[1]) and (f[2] is None or _int(f[2]))


def _stacks_problem(rec: dict[str, Any]) -> str | None:
    # The report and the replay index frames by stack and stacks by sample. Type checks
    # are inlined: a 1-hour recording has 72,000 samples per thread.
    frames, stacks = rec["frames"], rec["stacks"]
    for f in frames:
        if not _frame_ok(f):
            return "stacks record: a frame is not [function, filename, line]"
    n_frames, n_stacks = len(frames), len(stacks)
    for s in stacks:
        for i in s:
            if type(i) is not int or not 0 <= i < n_frames:
                return "stacks record: a stack points outside 'frames'"
    num, state_ok = (int, float), (str, _NONE)
    for smp in rec["samples"]:
        if (len(smp) != 5 or type(smp[0]) not in num or type(smp[1]) not in num or type(smp[2]) is not int
                or type(smp[3]) is not int or not 0 <= smp[3] < n_stacks or type(smp[4]) not in state_ok):
            return "stacks record: a sample is not [t, dur, tid, stack, state]"
    return None
