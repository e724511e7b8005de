"""Helpers shared by the CLI vendor backends (rocm, hygon, intel, drm).

Vendor tools print the same quantity many ways ("65.0W", "65 W", "N/A", "-", "",
{"value": 65, "unit": "W"}); the number helpers turn each into one float in the unit
sattui records, or ``None`` where the tool gave nothing. They never guess: text that is
neither a known "no value" marker nor a number raises ``ParseError`` (via
``layout_error``), so a changed layout is reported, not recorded as a wrong number.

Also here: ``CardReading`` (what a pure parser returns), ``Tool`` (run a tool and turn
any parse failure into one line naming the tool and its version), ``Presence`` (card
lost / back events), ``extract_json`` (JSON with banners around it) and
``ToolBackend`` (the state and bookkeeping of a backend over one ``Tool``).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sattui.model import CardInfo, CardSample, Event
from sattui.vendors.base import DEFAULT_TOOL_TIMEOUT_S, Backend, BackendError, ParseError, run_tool

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


def layout_error(detail: str) -> ParseError:
    """A ``ParseError`` whose message is one short line (callers prefix tool and version)."""
    line = " ".join(str(detail).split())
    return ParseError(line[:200])


def one_line(text: str, limit: int = 60) -> str:
    """A snippet of tool output fit for a one-line error message."""
    s = " ".join(str(text).split())
    return repr(s[:limit] + ("…" if len(s) > limit else ""))


_INDEX_RE = re.compile(r"[0-9]{1,9}")


def is_index(value: Any) -> bool:
    """A card/device/pid number: ASCII digits only ("²".isdigit() is True, int("²") fails)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0 <= value < 10**9
    return isinstance(value, str) and _INDEX_RE.fullmatch(value.strip()) is not None


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


def pct(value: Any, what: str = "percentage") -> float | None:
    """A percentage 0–100 ("37", "37 %", "37.5%", 37); ``None`` for N/A.

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


def amd_value(obj: Any, what: str) -> tuple[float | None, str]:
    """amd-smi's ``{"value": N, "unit": "W"}`` (or a bare number, or "N/A")."""
    if isinstance(obj, dict):
        if "value" not in obj:
            raise layout_error(f"{what}: object without 'value'")
        unit = obj.get("unit", "")
        if not isinstance(unit, str):
            unit = ""
        x = num(obj["value"], what)
        return x, unit.strip()
    if isinstance(obj, list):
        raise layout_error(f"{what}: list where a value was expected")
    x, unit = num_unit(obj, what)
    return x, unit


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


_VERSION_RES = (
    # Tools whose --version names several components: the tool's own comes first here.
    re.compile(r"AMDSMI Tool:\s*([0-9][^\s|]*)"),
    re.compile(r"ROCM-SMI version:\s*([0-9][^\s|]*)", re.I),
    re.compile(r"version[^0-9\n]{0,24}(\d+(?:\.[0-9A-Za-z]+)+(?:[+~-][0-9A-Za-z.+~-]*)?)", re.I),
)
_BARE_VERSION_RE = re.compile(r"\s*v?(\d+\.\d+(?:\.\d+)*(?:[+~-][0-9A-Za-z.+~-]*)?)\s*")


def version_from(text: str) -> str | None:
    """The tool's version from its ``--version`` answer, or ``None``.

    Only a number labelled "version" (or an answer that is nothing but a number) counts:
    a tool that ignores ``--version`` and prints its table ("49.0C …") has no version.
    """
    if not isinstance(text, str):
        return None
    for rx in _VERSION_RES:
        m = rx.search(text)
        if m:
            return m.group(1)[:40]
    m = _BARE_VERSION_RE.fullmatch(text)
    return m.group(1)[:40] if m else None


def bad_dir_component(path: str, names: Iterable[str]) -> bool:
    """True if a directory of ``path`` is one of ``names`` (or ``name-…``/``name_…``).

    Used to tell Hygon DTK's ``rocm-smi`` (/opt/dtk/bin, /opt/hyhal/bin,
    /opt/dtk-24.04/bin) from AMD's without running it.
    """
    parts = os.path.normpath(os.path.dirname(os.path.realpath(path))).split(os.sep)
    parts += os.path.normpath(os.path.dirname(path)).split(os.sep)
    for p in parts:
        pl = p.lower()
        for n in names:
            if pl == n or pl.startswith(n + "-") or pl.startswith(n + "_"):
                return True
    return False


class Presence:
    """Notices cards that stop (or start again) answering, as events.

    A card missing from one sample is stale (no sample), not zero; the user should
    still hear once that it went away, and once that it came back.
    """

    def __init__(self, backend_name: str, clock: Callable[[], float]) -> None:
        self.backend_name = backend_name
        self.clock = clock
        self.known: set[int] = set()
        self.lost: set[int] = set()

    def set_known(self, cards: Iterable[int]) -> None:
        self.known = set(cards)
        self.lost = set()

    def update(self, seen: Iterable[int]) -> list[Event]:
        seen = set(seen)
        out: list[Event] = []
        for c in sorted(self.known - seen - self.lost):
            self.lost.add(c)
            out.append(Event(self.clock(), "card_lost", f"{self.backend_name}: card {c} no longer reported",
                             {"card": c, "backend": self.backend_name}))
        for c in sorted(self.lost & seen):
            self.lost.discard(c)
            out.append(Event(self.clock(), "card_recovered", f"{self.backend_name}: card {c} reported again",
                             {"card": c, "backend": self.backend_name}))
        return out


def guarded(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a pure parser; any stray exception (a parser bug) becomes a ``ParseError``.

    Parsers are written to raise only ``ParseError``, but a surprise input must still
    never reach the user as a traceback.
    """
    try:
        return fn(*args)
    except ParseError:
        raise
    except RecursionError:
        raise layout_error("output nested too deeply") from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as e:
        raise layout_error(f"unexpected layout ({type(e).__name__})") from None


@dataclass
class CardReading:
    """What one parse of one tool output says about one card (all optional).

    Parsers return these (pure data); backends turn them into ``CardInfo`` once and
    ``CardSample`` per tick, filling what a sample lacks from what discovery found.
    """

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


def version_probe(path: str, timeout_s: float = 3.0, args: Sequence[str] = ("--version",)) -> str | None:
    """``tool --version``, best effort: any failure is "version unknown", never an error."""
    try:
        run = run_tool([path, *args], timeout_s=timeout_s, ok_codes=tuple(range(-64, 256)))
    except BackendError:
        return None
    except Exception:  # a probe must never raise
        return None
    return version_from(run.stdout + "\n" + run.stderr)


class Tool:
    """One vendor tool: where it is, its version, and the safe way to run and parse it.

    ``run`` goes through ``run_tool`` (argument list, timeout, C locale). ``parse``
    turns any parser failure into one ``ParseError`` line naming the tool and its
    version; the version is asked for (once) only when first needed, so a hung tool
    costs one timeout, not two.
    """

    def __init__(self, name: str, path: str, timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
                 version: str | None = None, version_args: Sequence[str] = ("--version",)) -> None:
        self.name = name
        self.path = path
        self.timeout_s = timeout_s
        self.version_args = tuple(version_args)
        self._version = version
        self._version_asked = version is not None

    @property
    def version(self) -> str | None:
        if not self._version_asked:
            self._version_asked = True
            self._version = version_probe(self.path, timeout_s=min(self.timeout_s, 3.0), args=self.version_args)
        return self._version

    def run(self, *args: str) -> str:
        return run_tool([self.path, *args], timeout_s=self.timeout_s).stdout

    def parse(self, fn: Callable[..., Any], text: str, what: str, *extra: Any) -> Any:
        try:
            return guarded(fn, text, *extra)
        except ParseError as e:
            raise ParseError(f"{self.name} {self.version or '(version unknown)'}: {what}: {e}") from None

    def run_parse(self, args: Sequence[str], fn: Callable[..., Any], *extra: Any) -> Any:
        text = self.run(*args)
        return self.parse(fn, text, " ".join(args) or "(no arguments)", *extra)


class ToolBackend(Backend):
    """A backend over one ``Tool`` whose reading ``mode`` (which command, which parser)
    discovery picks: what rocm, hygon and intel share. Subclasses find the tool, set
    ``tool`` and ``mode`` (``_read_json_else_text`` picks between a JSON and a text
    view), and end discovery with ``_remember_cards`` and each sample with ``_samples_of``.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, *,
                 timeout_s: float = DEFAULT_TOOL_TIMEOUT_S) -> None:
        super().__init__(clock)
        self.timeout_s = timeout_s
        self.tool: Tool | None = None
        self.mode: str | None = None
        self.cards: dict[int, CardInfo] = {}
        self._presence = Presence(self.name, clock)

    @property
    def version(self) -> str | None:
        return self.tool.version if self.tool else None

    def _read_json_else_text(self, *, json_mode: str, read_json: Callable[[], dict[int, CardReading]],
                             text_mode: str, read_text: Callable[[], dict[int, CardReading]],
                             text_view: str) -> dict[int, CardReading]:
        """``read_json()`` in ``json_mode``; if its layout is not one we know, the tool's
        text view (``read_text()``, ``text_mode``) instead. Both unknown: one ParseError
        saying why each failed. ``mode`` is set only to the one that parsed."""
        try:
            readings = read_json()
            self.mode = json_mode
        except ParseError as e_json:
            try:
                readings = read_text()
                self.mode = text_mode
            except ParseError as e_text:
                raise ParseError(f"{e_json}; {text_view} did not match either "
                                 f"({str(e_text).split(': ', 2)[-1]})") from None
        return readings

    def _remember_cards(self, readings: dict[int, CardReading]) -> list[CardInfo]:
        """Discovery's result: the cards, from now on watched for going missing."""
        self.cards = {i: readings[i].to_info(i, self.vendor) for i in sorted(readings)}
        self._presence.set_known(self.cards)
        if self.tool is not None:
            _ = self.tool.version  # asked once now (best effort), after the tool proved it answers
        return list(self.cards.values())

    def _samples_of(self, readings: dict[int, CardReading]) -> list[CardSample]:
        """One tick's samples; a known card missing from ``readings`` becomes a lost event."""
        t = self.clock()
        out = [r.to_sample(t, i, self.cards.get(i)) for i, r in sorted(readings.items())]
        self.events.extend(self._presence.update(readings))
        return out
