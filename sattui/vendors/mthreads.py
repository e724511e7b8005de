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

from sattui.vendors.backend import register
from sattui.vendors.box_table import BoxLayout, Column, parse_box_listing, split_paren
from sattui.vendors.cli_backend import CliBackend
from sattui.vendors.reading import CardReading
from sattui.vendors.tool import search_version
from sattui.vendors.values import to_bytes

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


def _read_memory_and_lanes(r: CardReading, rec: dict[str, str], where: str) -> None:
    """Memory as "used(total)" and the PCIe lane width, both gmi's own way of printing."""
    used, total = split_paren(rec.get("mem"), f"{where} Mem")
    r.mem_used = to_bytes(used, "MiB", what=f"{where} Mem used")
    r.mem_total = to_bytes(total, "MiB", what=f"{where} Mem total") or None
    r.pcie_width, r.pcie_width_max = _pcie_width(rec.get("pcie lane width"))


MTHREADS_GMI_LAYOUT = BoxLayout(
    what="GPU table",
    missing="no GPU table (a header with 'ID' and 'Name')",
    is_header=_is_card_header,
    card_word="GPU",
    index=Column(("id",), label="ID"),
    process_card=Column(("id",), label="process ID"),
    util=Column(("%gpu",), ("gpu", "util"), "%GPU"),
    bus=Column(("pcie",)),
    power=None,  # this view has no power column
    memory=None,  # "used(total)", not a "used / total" pair
    read_more=_read_memory_and_lanes,
)


def parse_mthreads_gmi(text: str) -> dict[int, CardReading]:
    """``mthreads-gmi`` (no arguments) → one reading per GPU, processes included.

    ``procs`` is ``{}`` when the process table lists nothing, ``None`` when the output
    has no process table.
    """
    return parse_box_listing(text, MTHREADS_GMI_LAYOUT)


@register
class MthreadsBackend(CliBackend):
    name = "mthreads"
    vendor = "moorethreads"
    auto_rank = 70
    # mthreads-gmi goes through MTML for every GPU: a few hundred ms a call.
    min_interval_s = 1.0
    tools = (MTHREADS_GMI,)
    list_args = ()

    parse = staticmethod(parse_mthreads_gmi)
    header_version = staticmethod(mthreads_gmi_version)
