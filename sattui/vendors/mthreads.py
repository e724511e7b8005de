"""Moore Threads GPUs (MTT S80, S3000, S4000, S5000 …) through ``mthreads-gmi`` (text).

The default view is a half-open table: no bar on the left, three rows per GPU, memory
as "used(total)"::

    ID   Name                 |PCIe                |%GPU  Mem
         Device Type   Perf   |Pcie Lane Width     |Temp  MPC Capable
                                                   |      ECC Mode
    +-------------------------------------------------------------------+
    0    MTT S5000            |00000000:18:00.0    |0%    0MiB(81920MiB)
         Physical      P0     |16x(16x)            |48C   YES
                                                   |      On-die, EDC

gmi 1.x/2.0 lack the Perf column; vGPU hosts say "MPC Parent" for the device type.
Read by header name, so both work. The view has no power column: ``power_w`` is unknown
(``None``). Used memory can exceed total (seen on real cards): both are kept as read;
sattui computes no percentage from them here.
"""

from __future__ import annotations

import re

from sattui.vendors._parse import CardReading, layout_error, one_line, pct, to_bytes
from sattui.vendors.base import register
from sattui.vendors._table import (
    TableToolBackend,
    add_proc,
    find_key,
    first_line,
    read_table,
    search_version,
    split_paren,
    temp_c,
    to_index,
)

MTHREADS_GMI = "mthreads-gmi"


def mthreads_gmi_version(text: str) -> str | None:
    """'mthreads-gmi:2.4.1   Driver Version:5.1.0-server' → '2.4.1'."""
    return search_version(text, r"mthreads-gmi\s*:?\s*v?(\d[\w.\-]*)")


def _is_card_header(labels: set[str]) -> bool:
    return "id" in labels and "name" in labels


def _pcie_width(value: str | None) -> tuple[int | None, int | None]:
    """'16x(16x)' → (current, max) lane width; anything else → unknown."""
    m = re.fullmatch(r"\s*(\d{1,2})x\s*\(\s*(\d{1,2})x\s*\)\s*", value or "")
    if m is None:
        return None, None
    return int(m.group(1)), int(m.group(2))


def parse_mthreads_gmi(text: str) -> dict[int, CardReading]:
    """``mthreads-gmi`` (no arguments) → one reading per GPU, processes included.

    ``procs`` is ``{}`` when the process table lists nothing, ``None`` when the output
    has no process table.
    """
    lines = text.splitlines()
    table = read_table(lines, 0, _is_card_header, what="GPU table")
    if table is None:
        raise layout_error(f"no GPU table (a header with 'ID' and 'Name'); output starts {one_line(first_line(text))}")
    out: dict[int, CardReading] = {}
    for rec in table.records:
        idx = to_index(rec.get("id"), "ID")
        w = f"GPU {idx}"
        r = CardReading(index=idx, name=rec.get("name"), bus=rec.get("pcie"))
        r.util = pct(rec.get(find_key(rec, "%gpu", contains=("gpu", "util")) or "%gpu"), f"{w} %GPU")
        r.temp_c = temp_c(rec.get("temp"), f"{w} Temp")
        used, total = split_paren(rec.get("mem"), f"{w} Mem")
        r.mem_used = to_bytes(used, "MiB", what=f"{w} Mem used")
        r.mem_total = to_bytes(total, "MiB", what=f"{w} Mem total") or None
        r.pcie_width, r.pcie_width_max = _pcie_width(rec.get("pcie lane width"))
        out[idx] = r
    procs = read_table(lines, table.end, lambda labels: "pid" in labels, rows_per_record=1, what="process table")
    if procs is not None:
        for r in out.values():
            r.procs = {}
        for rec in procs.records:
            card = to_index(rec.get("id"), "process ID")
            pid = to_index(rec.get("pid"), "process PID")
            mem_key = find_key(rec, contains=("memory", "usage"))
            mem = to_bytes(rec.get(mem_key) if mem_key else None, "MiB", what=f"process {pid} memory")
            if card in out:
                add_proc(out[card].procs, pid, mem)  # type: ignore[arg-type]
    return out


@register
class MthreadsBackend(TableToolBackend):
    name = "mthreads"
    vendor = "moorethreads"
    # mthreads-gmi goes through MTML for every GPU: a few hundred ms a call.
    min_interval_s = 1.0
    tools = (MTHREADS_GMI,)
    list_args = ()

    parse = staticmethod(parse_mthreads_gmi)
    header_version = staticmethod(mthreads_gmi_version)
