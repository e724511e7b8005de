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

from sattui.vendors.backend import register
from sattui.vendors.box_table import BoxLayout, Column, find_key, parse_box_listing, split_pair
from sattui.vendors.cli_backend import CliBackend
from sattui.vendors.reading import CardReading
from sattui.vendors.tool import search_version
from sattui.vendors.values import mem_pair, watts

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


def _read_power_and_memory(r: CardReading, rec: dict[str, str], where: str) -> None:
    """Power as one value or a "usage / cap" pair, memory under any of several names:
    the layout is a guess, so either may be missing (left unknown)."""
    pwr_key = find_key(rec, "pwr:usage/cap", contains=("pwr", "power"))
    if pwr_key is not None:
        val = rec[pwr_key]
        used, cap = split_pair(val, f"{where} {pwr_key}") if "/" in val.replace("N/A", "") else (val, None)
        r.power_w = watts(used, f"{where} power")
        r.power_limit_w = watts(cap, f"{where} power cap")
    mem_key = find_key(rec, *_MEM_LABELS)
    if mem_key is not None:
        r.mem_used, r.mem_total = mem_pair(*split_pair(rec[mem_key], f"{where} {mem_key}"), f"{where} {mem_key}")


BRSMI_LAYOUT = BoxLayout(
    what="GPU table",
    missing="no nvidia-smi-like GPU table (an index column and a Name, Util or Memory column)",
    is_header=_is_card_header,
    card_word="GPU",
    index=Column(_INDEX_LABELS, label="GPU index"),
    process_card=Column(_INDEX_LABELS, label="process GPU"),
    util=Column(contains=("util",)),  # errors name it as the header did
    bus=Column(contains=("bus",)),
    temp=Column(("temp",), ("temp",), "Temp"),
    power=None,
    memory=None,
    read_more=_read_power_and_memory,
)


def parse_brsmi(text: str) -> dict[int, CardReading]:
    """``brsmi`` (no arguments) → one reading per GPU, if it is an nvidia-smi-like table."""
    return parse_box_listing(text, BRSMI_LAYOUT)


@register
class BirenBackend(CliBackend):
    name = "biren"
    vendor = "biren"
    auto_rank = 80
    verified = False
    min_interval_s = 1.0
    tools = (BRSMI,)
    list_args = ()
    probe_note = UNVERIFIED

    parse = staticmethod(parse_brsmi)
    header_version = staticmethod(brsmi_version)
