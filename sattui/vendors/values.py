"""Numbers as vendor tools print them, read into the units sattui records.

Tools print the same quantity many ways ("65.0W", "65 W", "N/A", "-", "", "30.0c");
each helper here turns one into a float in the unit sattui records, or ``None`` where
the tool gave nothing. They never guess: text that is neither a known "no value" marker
nor a number raises ``ParseError`` (via ``layout_error``), so a changed layout is
reported, not recorded as a wrong number.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

from sattui.vendors.backend import ParseError

# What tools print for "no value". Compared lower-cased and stripped.
NA_MARKERS = frozenset({
    "", "n/a", "na", "-", "--", "---", "none", "null", "nan", "unknown", "not supported",
    "not available", "unavailable", "[not supported]", "[n/a]", "[unknown error]",
})

# Decimal and binary byte units. Tools disagree on what "MB" means; callers that know
# (amd-smi prints MiB and labels it "MB") pass ``binary=True``.
_BYTE_UNITS = {
    "b": 0, "byte": 0, "bytes": 0,
    "k": 1, "kb": 1, "kib": 1,
    "m": 2, "mb": 2, "mib": 2,
    "g": 3, "gb": 3, "gib": 3,
    "t": 4, "tb": 4, "tib": 4,
}

_NUM_RE = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
# The unit part allows "°"/"?"/U+FFFD: in the C locale a tool's "°C" can come out as
# either of the last two.
_NUM_UNIT_RE = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z%°/?\ufffd ]*?)\s*$")
# A card/device/pid number: ASCII digits only ("²".isdigit() is True, int("²") fails).
_INDEX_RE = re.compile(r"[0-9]{1,9}")


def layout_error(detail: str) -> ParseError:
    """A ``ParseError`` whose message is one short line (callers prefix tool and version)."""
    line = " ".join(str(detail).split())
    return ParseError(line[:200])


def one_line(text: str, limit: int = 60) -> str:
    """A snippet of tool output fit for a one-line error message."""
    s = " ".join(str(text).split())
    return repr(s[:limit] + ("…" if len(s) > limit else ""))


def is_index(value: Any) -> bool:
    """A card/device/pid number (an int, or ASCII digits)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0 <= value < 10**9
    return isinstance(value, str) and _INDEX_RE.fullmatch(value.strip()) is not None


def to_index(value: str | None, what: str) -> int:
    """A card/process number; anything else is a layout we do not know."""
    if value is None or not is_index(value):
        raise layout_error(f"{what}: {one_line(value or '')} is not a number")
    return int(value.strip())


def is_na(value: Any) -> bool:
    """True for the markers tools print instead of a value."""
    if value is None:
        return True
    if isinstance(value, str):
        return value.strip().lower() in NA_MARKERS
    return False


def _finite(x: float, what: str) -> float:
    if not math.isfinite(x):
        raise layout_error(f"{what}: not a finite number")
    return x


def num(value: Any, what: str = "value") -> float | None:
    """A plain number from a str/int/float; ``None`` for N/A-like markers.

    Trailing units are not accepted here (use ``num_unit``): a bare number field that
    suddenly carries text means the layout changed.
    """
    if is_na(value):
        return None
    if isinstance(value, bool):
        raise layout_error(f"{what}: boolean where a number was expected")
    if isinstance(value, (int, float)):
        return _finite(float(value), what)
    if isinstance(value, str):
        s = value.strip()
        m = _NUM_RE.fullmatch(s)
        if m is None:
            raise layout_error(f"{what}: {one_line(s)} is not a number")
        try:
            return _finite(float(s), what)
        except (ValueError, OverflowError):
            raise layout_error(f"{what}: {one_line(s)} is not a number") from None
    raise layout_error(f"{what}: {type(value).__name__} where a number was expected")


def num_unit(value: Any, what: str = "value") -> tuple[float | None, str]:
    """Split "65.0W" / "49.0C" / "1024 MiB" / "0%" into (number, unit text).

    The unit is returned as printed (stripped, "°" removed); N/A markers give
    ``(None, "")``.
    """
    if is_na(value):
        return None, ""
    if isinstance(value, bool):
        raise layout_error(f"{what}: boolean where a number was expected")
    if isinstance(value, (int, float)):
        return _finite(float(value), what), ""
    if not isinstance(value, str):
        raise layout_error(f"{what}: {type(value).__name__} where a number was expected")
    m = _NUM_UNIT_RE.match(value)
    if m is None:
        raise layout_error(f"{what}: {one_line(value)} is not a number with a unit")
    try:
        x = _finite(float(m.group(1)), what)
    except (ValueError, OverflowError):
        raise layout_error(f"{what}: {one_line(value)} is not a number") from None
    unit = m.group(2).replace("°", "").replace("\ufffd", "").replace("?", "").strip()
    return x, unit


def expect_unit(value: Any, units: Iterable[str], what: str) -> float | None:
    """A number whose printed unit (if any) is one of ``units`` (case-insensitive)."""
    x, unit = num_unit(value, what)
    if x is None:
        return None
    allowed = {u.lower() for u in units}
    if unit and unit.lower() not in allowed:
        raise layout_error(f"{what}: unexpected unit {unit!r}")
    return x


def parse_pct(value: Any, what: str = "percentage") -> float | None:
    """A vendor tool's percentage, parsed to 0–100 ("37", "37 %", "37.5%", 37); ``None`` for N/A.

    A little above 100 (rounding in the tool) is clamped; anything outside
    [0, 110] is not a utilisation and becomes ``None`` rather than a wrong number.
    """
    x = expect_unit(value, ("%",), what)
    return clamp_pct(x)


def clamp_pct(x: float | None) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    if x < 0 or x > 110:
        return None
    return min(x, 100.0)


def temp_c(value: Any, what: str) -> float | None:
    """°C; a reading no sensor gives (a sentinel like 65535, below absolute zero) is unknown."""
    x = expect_unit(value, ("C",), what)
    if x is None or not (-60.0 <= x <= 250.0):
        return None
    return x


def watts(value: Any, what: str) -> float | None:
    x = expect_unit(value, ("W",), what)
    if x is None or x < 0:
        return None
    return x


def to_bytes(value: Any, default_unit: str = "B", binary: bool = True, what: str = "memory") -> int | None:
    """Bytes from "1024MiB", "5.9 MB", "2068 KiB", "34342961152", 12; ``None`` for N/A.

    ``binary`` says whether an ambiguous "KB"/"MB"/"GB" means powers of 1024 (the tools
    sattui reads all print binary sizes; "KiB"/"MiB" are always binary and only an
    explicit ``binary=False`` makes "MB" decimal).
    """
    x, unit = num_unit(value, what)
    if x is None:
        return None
    return scale_bytes(x, unit or default_unit, binary=binary, what=what)


def scale_bytes(x: float, unit: str, binary: bool = True, what: str = "memory") -> int:
    u = unit.strip().lower()
    if u not in _BYTE_UNITS:
        raise layout_error(f"{what}: unknown size unit {unit!r}")
    if x < 0:
        raise layout_error(f"{what}: negative size")
    power = _BYTE_UNITS[u]
    base = 1024 if (binary or u.endswith("ib")) else 1000
    try:
        return int(round(x * base**power))
    except (OverflowError, ValueError):
        raise layout_error(f"{what}: size out of range") from None


def mem_pair(used: Any, total: Any, what: str, unit: str = "MiB") -> tuple[int | None, int | None]:
    """Bytes of a used/total pair. A total of 0 means the tool has no such memory: unknown."""
    u = to_bytes(used, unit, what=f"{what} used")
    t = to_bytes(total, unit, what=f"{what} total")
    if not t:
        return None, None
    return u, t


def pcie_gen_from_speed(gts: float | None) -> int | None:
    """PCIe generation from the per-lane rate in GT/s (2.5 → 1 … 64 → 6)."""
    if gts is None:
        return None
    for gen, rate in ((1, 2.5), (2, 5.0), (3, 8.0), (4, 16.0), (5, 32.0), (6, 64.0), (7, 128.0)):
        if abs(gts - rate) < 0.3:
            return gen
    return None


def extract_json(text: str, what: str = "output") -> Any:
    """The first JSON object or array in ``text``, ignoring text around it.

    Some tools (hy-smi, rocm-smi forks) print warnings or banners before or after the
    JSON; a strict ``json.loads`` would reject a perfectly good answer.
    """
    if not isinstance(text, str):
        raise layout_error(f"{what}: not text")
    dec = json.JSONDecoder()
    starts = [m.start() for m in re.finditer(r"[\[{]", text)]
    last_err = "no JSON object in it"
    for i in starts[:200]:  # banners are short; don't go quadratic on garbage
        try:
            obj, _end = dec.raw_decode(text, i)
        except (json.JSONDecodeError, RecursionError, ValueError) as e:
            last_err = f"bad JSON ({type(e).__name__})"
            continue
        if isinstance(obj, (dict, list)) and obj:
            return obj
        # "[]" or "{}" inside a banner is not the answer; keep looking
        last_err = "empty JSON"
    raise layout_error(f"{what}: {last_err}")
