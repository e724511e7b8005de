"""NVML's clock-event reasons: why a GPU runs below its top clock, as a bit mask.

``CardSample.clock_reasons`` holds the mask as NVML gives it
(``nvmlDeviceGetCurrentClocksEventReasons``; other vendors: ``None``). This is the one
place its bits are named, for the views and the advisor alike.
"""

from __future__ import annotations

# nvmlClocksEventReason* bits (nvml.h), in bit order.
CLOCK_REASONS = {
    0x1: "GpuIdle", 0x2: "ApplicationsClocksSetting", 0x4: "SwPowerCap", 0x8: "HwSlowdown",
    0x10: "SyncBoost", 0x20: "SwThermalSlowdown", 0x40: "HwThermalSlowdown",
    0x80: "HwPowerBrakeSlowdown", 0x100: "DisplayClockSetting",
}
GPU_IDLE = 0x1
SW_POWER_CAP = 0x4
# The hardware slowing the clock: HwSlowdown, Sw/HwThermalSlowdown, HwPowerBrakeSlowdown.
HW_SLOWDOWN = 0x8 | 0x20 | 0x40 | 0x80
# Bits that mean the card is held back (the rest are benign or informational).
CLOCK_REASONS_BAD = SW_POWER_CAP | HW_SLOWDOWN


def known_clock_reasons(mask: int) -> list[str]:
    """The names of the known bits set in ``mask``, in bit order."""
    return [name for bit, name in CLOCK_REASONS.items() if mask & bit]


def decode_clock_reasons(mask: int | None) -> list[str]:
    """Every bit set in ``mask``: the known ones by name, the rest as one hex number."""
    if mask is None:
        return []
    names = known_clock_reasons(mask)
    rest = mask & ~sum(CLOCK_REASONS)
    if rest:
        names.append(f"0x{rest:x}")
    return names
