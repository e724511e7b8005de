"""``CardReading``: what one parse of one tool output says about one card.

Parsers return readings (pure data, every field optional); backends turn them into
``CardInfo`` once and ``CardSample`` per tick, filling what a sample lacks from what
discovery found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sattui.model import CardInfo, CardSample


@dataclass
class CardReading:
    """One card as one tool output shows it; ``None`` wherever the output says nothing."""

    index: int
    name: str | None = None
    uuid: str | None = None
    bus: str | None = None
    util: float | None = None
    dram_active: float | None = None
    mem_used: int | None = None
    mem_total: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    procs: dict[str, int | None] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def merge_missing(self, other: CardReading | None) -> None:
        """Fill this reading's ``None`` fields from ``other`` (a second source)."""
        if other is None:
            return
        for name in self.__dataclass_fields__:
            if name in ("index", "extra"):
                continue
            if getattr(self, name) is None and getattr(other, name) is not None:
                setattr(self, name, getattr(other, name))

    def to_info(self, card: int, vendor: str) -> CardInfo:
        return CardInfo(card=card, vendor=vendor, name=self.name, uuid=self.uuid, mem_total=self.mem_total,
                        power_limit_w=self.power_limit_w, sm_clock_max_mhz=self.sm_clock_max_mhz,
                        pcie_gen_max=self.pcie_gen_max, pcie_width_max=self.pcie_width_max)

    def to_sample(self, t: float, card: int, info: CardInfo | None = None) -> CardSample:
        """A sample; totals and limits the tool printed only at discovery come from ``info``."""
        return CardSample(
            t=t, card=card, util=self.util, dram_active=self.dram_active,
            mem_used=self.mem_used,
            mem_total=self.mem_total if self.mem_total is not None else (info.mem_total if info else None),
            power_w=self.power_w,
            power_limit_w=self.power_limit_w if self.power_limit_w is not None
            else (info.power_limit_w if info else None),
            temp_c=self.temp_c, sm_clock_mhz=self.sm_clock_mhz,
            sm_clock_max_mhz=self.sm_clock_max_mhz if self.sm_clock_max_mhz is not None
            else (info.sm_clock_max_mhz if info else None),
            pcie_gen=self.pcie_gen, pcie_width=self.pcie_width, procs=self.procs,
        )


def add_proc(procs: dict[str, int | None], pid: int | str, mem: int | None) -> None:
    """Add a process row; a pid listed twice on one card (several contexts) sums, and a
    row without memory never hides one with it."""
    key = str(pid)
    old = procs.get(key)
    if old is not None and mem is not None:
        procs[key] = old + mem
    elif old is None:
        procs[key] = mem
