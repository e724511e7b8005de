"""Short number formats for narrow columns (no Textual here). ``None`` is always "n/a"."""

from __future__ import annotations

NA = "n/a"


def pct_text(v: float | None, width: int = 0) -> str:
    """A percentage on the 0–100 scale as text: 37.4 → "37%" (right-aligned to ``width``).
    (A 0–1 share is ``advisor.context.share_text``; a tool's text is ``vendors.values.parse_pct``.)"""
    s = NA if v is None else f"{v:.0f}%"
    return s.rjust(width) if width else s


def size(n: float | None) -> str:
    """Bytes in at most 5 characters, binary steps: ``950M``, ``71.0G``, ``1.2T``."""
    if n is None:
        return NA
    v = float(n)
    for suffix in ("B", "K", "M", "G", "T", "P"):
        if abs(v) < 1000 or suffix == "P":
            if suffix == "B":
                return f"{v:.0f}B"
            return f"{v:.1f}{suffix}" if abs(v) < 100 else f"{v:.0f}{suffix}"
        v /= 1024
    return NA  # unreachable


def rate(bps: float | None) -> str:
    """Bytes per second, decimal units as disks and links are quoted: ``20M/s``."""
    if bps is None:
        return NA
    v = float(bps)
    for suffix in ("B", "K", "M", "G", "T"):
        if abs(v) < 1000 or suffix == "T":
            return f"{v:.0f}{suffix}/s" if suffix == "B" or abs(v) >= 10 else f"{v:.1f}{suffix}/s"
        v /= 1000
    return NA


def cores(v: float | None) -> str:
    return NA if v is None else f"{v:.2f}"


def watts(v: float | None) -> str:
    return NA if v is None else f"{v:.0f}W"


def temp(v: float | None) -> str:
    return NA if v is None else f"{v:.0f}°C"


def mhz(v: float | None) -> str:
    return NA if v is None else f"{v:.0f}MHz"


def duration(s: float | None) -> str:
    """``45s``, ``2m13s``, ``1h02m``."""
    if s is None:
        return NA
    s = max(0.0, s)
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


def clock(s: float) -> str:
    """Replay positions: ``1:05``, ``1:02:05``."""
    s = max(0, int(s))
    if s >= 3600:
        return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


def window(s: float) -> str:
    """Zoom levels: ``30s``, ``1m``, ``1h``."""
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.0f}h"


def short_card_name(name: str | None) -> str:
    """``NVIDIA H200`` → ``H200``: the label column is narrow and the vendor is in the header."""
    if not name:
        return "?"
    for prefix in ("NVIDIA ", "AMD ", "Instinct ", "Radeon ", "Intel(R) ", "Intel "):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name
