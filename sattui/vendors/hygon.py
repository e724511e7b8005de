"""Hygon DCUs through ``hy-smi`` (DTK ≥ 24, often /opt/hyhal/bin) or DTK's ``rocm-smi``.

DTK installs without hy-smi have Hygon's fork of rocm-smi, in DTK's folders or simply on
PATH; the latter is told from AMD's tool of the same name by what it prints ("DCU"
where AMD's says "GPU"), and the rocm backend declines it the same way.

hy-smi is a fork of AMD's rocm-smi: its ``--json`` has the same ``cardN`` layout
(with "DCU"/"HCU" where AMD says "GPU") and can carry stray text around the JSON; its
no-argument "concise" view is a whitespace table::

    DCU     Temp     AvgPwr     Perf     PwrCap     VRAM%      DCU%      Mode
    0       49.0C    118.0W     auto     800.0W     0%         0%        Normal

DCU% (HCU% on newer DTKs) is the utilisation. The concise view gives VRAM only as a
percentage, so in that mode ``mem_used`` is unknown (``None``), not derived.
"""

from __future__ import annotations

import os
import shutil

from sattui.model import CardInfo, CardSample
from sattui.vendors.backend import BackendError, BackendUnavailable, Probe, register
from sattui.vendors.cli_backend import CliBackend
from sattui.vendors.reading import CardReading
from sattui.vendors.rocm import parse_rocm_smi_json, rocm_smi_is_hygon
from sattui.vendors.tool import DEFAULT_TOOL_TIMEOUT_S, Tool, find_tool, in_dir_named, run_tool, version_probe
from sattui.vendors.values import expect_unit, is_index, layout_error, one_line, parse_pct

HY_SMI_DIRS = ("/opt/hyhal/bin",)
DTK_DIRS = ("/opt/dtk/bin", "/opt/hyhal/bin")
HYGON_DIR_NAMES = ("dtk", "hyhal")

JSON_SAMPLE_ARGS = ("--showuse", "--showmeminfo", "vram", "--showpower", "--showtemp", "--json")
JSON_DISCOVER_ARGS = ("--showproductname", "--showbus", "--showmaxpower", *JSON_SAMPLE_ARGS)

_UTIL_COLS = ("DCU%", "HCU%", "GPU%")
_INDEX_COLS = ("DCU", "HCU", "GPU", "DEVICE")


def parse_hy_smi_concise(text: str) -> dict[int, CardReading]:
    """The concise table of ``hy-smi`` / DTK ``rocm-smi`` (no arguments) → readings.

    Columns are found by their header names, so the older DTK layout (with SCLK, MCLK,
    Fan and no Mode) reads as well as hy-smi's.
    """
    lines = text.splitlines()
    header: list[str] | None = None
    start = 0
    for i, ln in enumerate(lines):
        toks = ln.split()
        if len(toks) >= 3 and toks[0].upper() in _INDEX_COLS and "Temp" in toks \
                and any(t.upper() in _UTIL_COLS for t in toks):
            header, start = toks, i + 1
            break
    if header is None:
        raise layout_error("concise view: header 'DCU Temp … DCU%' not found")
    cols = [h.upper() for h in header]
    out: dict[int, CardReading] = {}
    for ln in lines[start:]:
        toks = ln.split()
        if not toks:
            continue
        if toks[0].startswith("="):
            if out:
                break  # the closing rule; what follows ("End of SMI Log") is not ours
            continue
        if not is_index(toks[0]):
            continue
        if len(toks) != len(cols):
            raise layout_error(f"concise view: row {one_line(ln.strip())} has {len(toks)} columns, "
                               f"header has {len(cols)}")
        row = dict(zip(cols, toks))
        idx = int(toks[0])
        w = f"DCU {idx}"
        r = CardReading(index=idx)
        if "TEMP" in row:
            r.temp_c = expect_unit(row["TEMP"], ("C",), f"{w} Temp")
        for pc in ("AVGPWR", "POWER", "PWR"):
            if pc in row:
                r.power_w = expect_unit(row[pc], ("W",), f"{w} {pc}")
                break
        if "PWRCAP" in row:
            r.power_limit_w = expect_unit(row["PWRCAP"], ("W",), f"{w} PwrCap")
        if "SCLK" in row:
            r.sm_clock_mhz = expect_unit(row["SCLK"], ("MHz",), f"{w} SCLK")
        for uc in _UTIL_COLS:
            if uc in row:
                r.util = parse_pct(row[uc], f"{w} {uc}")
                break
        out[idx] = r
    if not out:
        raise layout_error("concise view: no DCU rows")
    return out


def find_hygon_tool(timeout_s: float = DEFAULT_TOOL_TIMEOUT_S) -> tuple[str | None, str | None, str | None]:
    """(tool, path, why-not): hy-smi, else DTK's rocm-smi.

    DTK's rocm-smi is found in DTK's folders, or on PATH: by its folder (/opt/dtk-24.04/bin)
    or, anywhere else, by what it prints (``rocm_smi_is_hygon``: "DCU"/"HCU" where AMD's
    says "GPU"), since a rocm-smi on PATH may well be AMD's.
    """
    p = find_tool("hy-smi", HY_SMI_DIRS)
    if p:
        return "hy-smi", p, None
    for d in DTK_DIRS:
        cand = os.path.join(d, "rocm-smi")
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return "rocm-smi", cand, None
    not_found = "hy-smi not found (nor DTK's rocm-smi in /opt/dtk, /opt/hyhal)"
    p = shutil.which("rocm-smi")
    if p is None:
        return None, None, not_found
    if in_dir_named(p, HYGON_DIR_NAMES):
        return "rocm-smi", p, None
    try:
        run = run_tool([p], timeout_s=timeout_s)
    except BackendError as e:
        return None, None, f"{not_found}; the rocm-smi on PATH: {e}"
    if rocm_smi_is_hygon(run.stdout):
        return "rocm-smi", p, None
    return None, None, f"{not_found}; the rocm-smi on PATH is not Hygon's (it prints no DCU)"


@register
class HygonBackend(CliBackend):
    name = "hygon"
    vendor = "hygon"
    auto_rank = 30
    # hy-smi is rocm-smi's Python CLI: ~0.3 s a call.
    min_interval_s = 0.5
    mode: str | None  # "json" | "concise"

    @classmethod
    def probe(cls) -> Probe:
        try:
            tool, path, why = find_hygon_tool(cls.default_timeout_s)
            if path is None:
                return Probe(cls.name, False, why)
            return Probe(cls.name, True, None if tool == "hy-smi" else "hy-smi not found; using DTK's rocm-smi",
                         version_probe(path), path)
        except Exception as e:  # never take doctor down
            return Probe(cls.name, False, f"probe failed: {type(e).__name__}: {e}")

    def discover(self) -> list[CardInfo]:
        tool, path, why = find_hygon_tool(self.timeout_s)
        if path is None or tool is None:
            raise BackendUnavailable(why or "hy-smi not found")
        self.tool = hy_smi = Tool(tool, path, self.timeout_s)
        # Builds whose --json is broken or absent still print the concise table.
        readings = self._read_json_else_text(
            json_mode="json",
            read_json=lambda: hy_smi.parse(parse_rocm_smi_json, hy_smi.run(*JSON_DISCOVER_ARGS), view="--json"),
            text_mode="concise",
            read_text=lambda: self._run_view((), parse_hy_smi_concise),
            text_view="the concise view")
        return self._remember_cards(readings)

    def sample(self) -> list[CardSample]:
        if self.tool is None or self.mode is None:
            self.discover()
        assert self.tool is not None
        if self.mode == "json":
            readings = self.tool.parse(parse_rocm_smi_json, self.tool.run(*JSON_SAMPLE_ARGS), view="--json")
        else:
            readings = self._run_view((), parse_hy_smi_concise)
        return self._samples_of(readings)

