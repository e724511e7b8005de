"""Cambricon MLU cards through ``cnmon`` (text only).

cnmon prints an nvidia-smi-like box, two rows per card. Two generations are known::

    v4.x | Card  VF  Name       Firmware | Inited        Driver | Util        Ecc-Error |
         | Fan   Temp      Pwr:Usage/Cap |         Memory-Usage |         vMemory-Usage |
    v5.x | Card  VF  Name       Firmware |               Bus-Id | Util        Ecc-Error |
         | Fan   Temp      Pwr:Usage/Cap |         Memory-Usage | SR-IOV   Compute-Mode |

The table reader itself is shared with the other box-table backends (``box_table``).
"""

from __future__ import annotations

from sattui.vendors.backend import register
from sattui.vendors.box_table import BoxLayout, Column, parse_box_listing
from sattui.vendors.cli_backend import CliBackend
from sattui.vendors.reading import CardReading
from sattui.vendors.tool import search_version

CNMON = "cnmon"

CNMON_LAYOUT = BoxLayout(
    what="card table",
    missing="no card table (a header with 'Card' and 'Name')",
    is_header=lambda labels: "card" in labels and "name" in labels,
    card_word="card",
    index=Column(("card",), label="Card"),
    process_card=Column(("card", "dev"), label="process Card"),
    util=Column(("util",), ("util",), "Util"),
)


def cnmon_version(text: str) -> str | None:
    return search_version(text, r"CNMON\s+v?(\d[\w.\-]*)")


def parse_cnmon(text: str) -> dict[int, CardReading]:
    """``cnmon`` (no arguments) → one reading per card, processes included.

    ``procs`` is ``{}`` for every card when the process table says nothing runs, and
    ``None`` when the output has no process table at all (unknown, not empty).
    """
    return parse_box_listing(text, CNMON_LAYOUT)


@register
class CambriconBackend(CliBackend):
    name = "cambricon"
    vendor = "cambricon"
    auto_rank = 50
    # cnmon walks every card through the driver: a few hundred ms a call.
    min_interval_s = 1.0
    tools = (CNMON,)
    list_args = ()
    version_args = ("version",)

    parse = staticmethod(parse_cnmon)
    header_version = staticmethod(cnmon_version)
