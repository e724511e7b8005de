"""Cambricon MLU cards through ``cnmon`` (text only).

cnmon prints an nvidia-smi-like box, two rows per card. Two generations are known::

    v4.x | Card  VF  Name       Firmware | Inited        Driver | Util        Ecc-Error |
         | Fan   Temp      Pwr:Usage/Cap |         Memory-Usage |         vMemory-Usage |
    v5.x | Card  VF  Name       Firmware |               Bus-Id | Util        Ecc-Error |
         | Fan   Temp      Pwr:Usage/Cap |         Memory-Usage | SR-IOV   Compute-Mode |

The table reader itself is shared with the other text-table backends (``_table``).
"""

from __future__ import annotations

from sattui.vendors._parse import CardReading, layout_error, one_line, pct, to_bytes
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
from sattui.vendors.base import register

CNMON = "cnmon"


def cnmon_version(text: str) -> str | None:
    return search_version(text, r"CNMON\s+v?(\d[\w.\-]*)")


def parse_cnmon(text: str) -> dict[int, CardReading]:
    """``cnmon`` (no arguments) → one reading per card, processes included.

    ``procs`` is ``{}`` for every card when the process table says nothing runs, and
    ``None`` when the output has no process table at all (unknown, not empty).
    """
    lines = text.splitlines()
    table = read_table(lines, 0, lambda labels: "card" in labels and "name" in labels, what="card table")
    if table is None:
        raise layout_error("no card table (a header with 'Card' and 'Name'); "
                           f"output starts {one_line(first_line(text))}")
    out: dict[int, CardReading] = {}
    for rec in table.records:
        idx = to_index(rec.get("card"), "Card")
        w = f"card {idx}"
        r = CardReading(index=idx, name=rec.get("name"), bus=rec.get("bus-id"))
        r.util = pct(rec.get(find_key(rec, "util", contains=("util",)) or "util"), f"{w} Util")
        r.temp_c = temp_c(rec.get("temp"), f"{w} Temp")
        used, cap = split_pair(rec.get(find_key(rec, "pwr:usage/cap", contains=("pwr",)) or "pwr"), f"{w} Pwr")
        r.power_w = watts(used, f"{w} Pwr:Usage")
        r.power_limit_w = watts(cap, f"{w} Pwr:Cap")
        r.mem_used, r.mem_total = mem_pair(*split_pair(rec.get("memory-usage"), f"{w} Memory-Usage"),
                                           f"{w} Memory-Usage")
        out[idx] = r
    procs = read_table(lines, table.end, lambda labels: "pid" in labels, rows_per_record=1, what="process table")
    if procs is not None:
        for r in out.values():
            r.procs = {}
        for rec in procs.records:
            card = to_index(rec.get(find_key(rec, "card", "dev") or "card"), "process Card")
            pid = to_index(rec.get("pid"), "process PID")
            mem_key = find_key(rec, contains=("memory", "usage"))
            mem = to_bytes(rec.get(mem_key) if mem_key else None, "MiB", what=f"process {pid} memory")
            if card in out:
                add_proc(out[card].procs, pid, mem)  # type: ignore[arg-type]
    return out


@register
class CambriconBackend(TableToolBackend):
    name = "cambricon"
    vendor = "cambricon"
    # cnmon walks every card through the driver: a few hundred ms a call.
    min_interval_s = 1.0
    tools = (CNMON,)
    list_args = ()
    version_args = ("version",)

    parse = staticmethod(parse_cnmon)
    header_version = staticmethod(cnmon_version)
