"""Biren GPUs (BR100/BR104 …) through ``brsmi`` — UNVERIFIED.

No real ``brsmi`` output was found publicly while this was written, so the parser is a
defensive guess: an nvidia-smi-like box table (which Biren's tool is said to imitate),
read by header *name* (an index column such as "GPU"/"ID"/"Card", plus any of
"Name", "…Util…", "Memory-Usage", "Temp", "Pwr:Usage/Cap"). Anything else is a ``ParseError``
naming the tool and its version, never a guessed number. ``probe`` says "unverified"
so ``sattui doctor`` shows it; a user with a Biren card who sends one real output makes
this a tested backend.
"""

from __future__ import annotations

from sattui.vendors._parse import CardReading, layout_error, one_line, pct, to_bytes
from sattui.vendors.base import register
from sattui.vendors._table import (
    TableToolBackend,
    add_proc,
    find_key,
    first_line,
    mem_pair,
    read_table,
    search_version,
    split_pair,
    temp_c,
    to_index,
    watts,
)

BRSMI = "brsmi"
UNVERIFIED = "unverified: no real brsmi output seen"

_INDEX_LABELS = ("gpu", "id", "card", "dev", "device", "index", "gpu id", "card id", "supa")
_MEM_LABELS = ("memory-usage", "mem-usage", "memory usage", "mem usage", "memory", "mem")


def brsmi_version(text: str) -> str | None:
    return search_version(text, r"(?i)\bbrsmi\b[^0-9\n]{0,20}v?(\d+(?:\.\d+)+[\w.\-]*)",
                          r"(?i)driver version\s*:?\s*v?(\d[\w.\-]*)")


def _is_card_header(labels: set[str]) -> bool:
    # The first header line: nvidia-smi's has "GPU  Name …" (util and memory sit on the
    # second line); a one-row table has them all on one line.
    return any(i in labels for i in _INDEX_LABELS) \
        and ("name" in labels or any("util" in lab for lab in labels) or any(m in labels for m in _MEM_LABELS))


def parse_brsmi(text: str) -> dict[int, CardReading]:
    """``brsmi`` (no arguments) → one reading per GPU, if it is an nvidia-smi-like table."""
    lines = text.splitlines()
    table = read_table(lines, 0, _is_card_header, what="GPU table")
    if table is None:
        raise layout_error("no nvidia-smi-like GPU table (an index column and a Name, Util or Memory column); "
                           f"output starts {one_line(first_line(text))}")
    out: dict[int, CardReading] = {}
    for rec in table.records:
        idx_key = find_key(rec, *_INDEX_LABELS)
        idx = to_index(rec.get(idx_key) if idx_key else None, "GPU index")
        w = f"GPU {idx}"
        r = CardReading(index=idx, name=rec.get("name"), bus=rec.get(find_key(rec, contains=("bus",)) or "bus-id"))
        util_key = find_key(rec, contains=("util",))
        r.util = pct(rec.get(util_key) if util_key else None, f"{w} {util_key}")
        temp_key = find_key(rec, "temp", contains=("temp",))
        r.temp_c = temp_c(rec.get(temp_key) if temp_key else None, f"{w} Temp")
        pwr_key = find_key(rec, "pwr:usage/cap", contains=("pwr", "power"))
        if pwr_key is not None:
            val = rec[pwr_key]
            used, cap = split_pair(val, f"{w} {pwr_key}") if "/" in val.replace("N/A", "") else (val, None)
            r.power_w = watts(used, f"{w} power")
            r.power_limit_w = watts(cap, f"{w} power cap")
        mem_key = find_key(rec, *_MEM_LABELS)
        if mem_key is not None:
            r.mem_used, r.mem_total = mem_pair(*split_pair(rec[mem_key], f"{w} {mem_key}"), f"{w} {mem_key}")
        out[idx] = r
    procs = read_table(lines, table.end, lambda labels: "pid" in labels, rows_per_record=1, what="process table")
    if procs is not None:
        for r in out.values():
            r.procs = {}
        for rec in procs.records:
            idx_key = find_key(rec, *_INDEX_LABELS)
            card = to_index(rec.get(idx_key) if idx_key else None, "process GPU")
            pid = to_index(rec.get("pid"), "process PID")
            mem_key = find_key(rec, contains=("memory", "usage"))
            mem = to_bytes(rec.get(mem_key) if mem_key else None, "MiB", what=f"process {pid} memory")
            if card in out:
                add_proc(out[card].procs, pid, mem)  # type: ignore[arg-type]
    return out


@register
class BirenBackend(TableToolBackend):
    name = "biren"
    vendor = "biren"
    verified = False
    min_interval_s = 1.0
    tools = (BRSMI,)
    list_args = ()
    probe_note = UNVERIFIED

    parse = staticmethod(parse_brsmi)
    header_version = staticmethod(brsmi_version)
