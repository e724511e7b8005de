"""AMD cards through ``amd-smi`` (ROCm ≥ 6) or, failing that, ``rocm-smi --json``.

Layouts read (each backed by a captured output under tests/fixtures/vendors/amd, or
by the layout AMD's own issue threads show where noted):

* ``amd-smi metric --json``: a list of ``{"gpu": N, "usage": …, "power": …}``
  (amd-smi 24/25) or the same list wrapped as ``{"gpu_data": [...]}`` (amd-smi 26).
  Every number is ``{"value": N, "unit": "…"}`` or the bare string ``"N/A"``.
* ``amd-smi`` with no arguments: the default summary table (amd-smi 26), used when
  ``metric --json`` prints something no known JSON layout matches.
* ``amd-smi process --json``: per-GPU process lists (VRAM per pid).
* ``rocm-smi --json``: ``{"card0": {"GPU use (%)": "0", …}, "system": {…}}``, all
  values strings, units in the key names; both key generations (ROCm ≤ 6.0 "Average
  Graphics Package Power (W)", ROCm ≥ 6.1 "Current Socket Graphics Package Power (W)").

amd-smi prints binary sizes with decimal labels ("32624 MB" is MiB, "54.7 KB" is KiB:
the fixture's process table and its JSON agree only that way), so "MB" here is MiB.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sattui.model import CardInfo, CardSample
from sattui.vendors.backend import BackendError, BackendUnavailable, ParseError, Probe, ToolError, register
from sattui.vendors.cli_backend import CliBackend
from sattui.vendors.reading import CardReading, add_proc
from sattui.vendors.tool import Tool, find_tool, in_dir_named, version_probe
from sattui.vendors.values import (
    clamp_pct,
    expect_unit,
    extract_json,
    is_index,
    is_na,
    layout_error,
    num,
    num_unit,
    one_line,
    parse_pct,
    pcie_gen_from_speed,
    scale_bytes,
    to_bytes,
)

# AMD's own install dirs only: /opt/dtk and /opt/hyhal hold Hygon's rocm-smi fork.
AMD_TOOL_DIRS = ("/opt/rocm/bin",)
HYGON_DIRS = ("dtk", "hyhal")

# rocm-smi flags for one tick: utilisation, VRAM, power, temperature, clocks.
ROCM_SMI_SAMPLE_ARGS = ("--showuse", "--showmemuse", "--showmeminfo", "vram", "--showpower", "--showtemp",
                        "--showclocks", "--json")
# Once at discovery: add the names, bus ids, unique ids and power caps.
ROCM_SMI_DISCOVER_ARGS = ("--showproductname", "--showuniqueid", "--showbus", "--showmaxpower",
                          *ROCM_SMI_SAMPLE_ARGS)


# -- rocm-smi --json -----------------------------------------------------------------

def _norm_keys(d: dict[str, Any]) -> dict[str, Any]:
    """Keys lower-cased with runs of spaces collapsed: ROCm releases differ in case."""
    return {" ".join(str(k).lower().split()): v for k, v in d.items()}


def _label(v: Any) -> str | None:
    """A name or id as printed, or None where it is blank or "N/A"."""
    if isinstance(v, str) and v.strip() and v.strip().upper() != "N/A":
        return v.strip()
    return None


def _first(d: dict[str, Any], *keys: str) -> Any:
    """The first of ``keys`` with a value: an "N/A" edge sensor falls through to junction."""
    for k in keys:
        if k in d and not is_na(d[k]):
            return d[k]
    return None


_MHZ_IN_PARENS = re.compile(r"\(\s*([0-9.]+)\s*mhz\s*\)", re.I)
_PCIE_LEVEL = re.compile(r"([0-9.]+)\s*GT/s\s*x\s*(\d+)", re.I)


def _mhz_in_parens(v: Any, what: str) -> float | None:
    """"(300Mhz)" or "0 (300Mhz)" → 300."""
    if v is None or not isinstance(v, str):
        return None
    m = _MHZ_IN_PARENS.search(v)
    if m is None:
        x, unit = num_unit(v, what)  # "N/A" → None; "300Mhz" → 300
        if x is not None and unit.lower() not in ("mhz", ""):
            raise layout_error(f"{what}: {one_line(v)} is not a clock")
        return x
    return num(m.group(1), what)


def parse_rocm_smi_json(text: str) -> dict[int, CardReading]:
    """``rocm-smi … --json`` (any ROCm 5.x/6.x, and Hygon's forks) → readings by card.

    Only ``cardN`` entries are cards; ``system`` and stray text around the JSON (the
    "low-power state" warning rocm-smi prints on stdout) are ignored.
    """
    obj = extract_json(text, "rocm-smi JSON")
    if not isinstance(obj, dict):
        raise layout_error("rocm-smi JSON: top level is not an object")
    out: dict[int, CardReading] = {}
    for key, raw in obj.items():
        m = re.fullmatch(r"card(\d+)", str(key))
        if m is None:
            continue
        if not isinstance(raw, dict):
            raise layout_error(f"rocm-smi JSON: {key} is not an object")
        d = _norm_keys(raw)
        idx = int(m.group(1))
        r = CardReading(index=idx)

        def val(conv: Callable[[Any, str], Any], *keys: str, d: dict[str, Any] = d, key: str = key) -> Any:
            # Errors name the card and the key as rocm-smi printed it (lower-cased).
            k = next((k for k in keys if k in d and not is_na(d[k])), None)
            return None if k is None else conv(d[k], f"{key} {k!r}")

        r.util = val(parse_pct, "gpu use (%)", "dcu use (%)", "hcu use (%)")
        # mem_busy_percent (memory controller busy), not VRAM allocated: ROCm ≥ 6.1
        # moved the allocation figure to "GPU Memory Allocated (VRAM%)", left out here.
        r.dram_active = val(parse_pct, "gpu memory use (%)", "gpu memory read/write activity (%)")
        r.power_w = val(num, "average graphics package power (w)", "current socket graphics package power (w)",
                        "current graphics package power (w)", "average socket graphics package power (w)")
        r.power_limit_w = val(num, "max graphics package power (w)")
        r.temp_c = val(num, "temperature (sensor edge) (c)", "temperature (sensor junction) (c)",
                       "temperature (sensor hotspot) (c)")
        r.mem_total = val(lambda v, w: to_bytes(v, what=w), "vram total memory (b)")
        r.mem_used = val(lambda v, w: to_bytes(v, what=w), "vram total used memory (b)")
        sclk = _first(d, "sclk clock speed:", "current sclk clock speed:", "sclk clock speed")
        if sclk is None:
            sclk = _first(d, "sclk clock level")
        r.sm_clock_mhz = _mhz_in_parens(sclk, f"{key} sclk clock")
        pcie = _first(d, "pcie clock level")
        if isinstance(pcie, str):
            pm = _PCIE_LEVEL.search(pcie)
            if pm:
                r.pcie_gen = pcie_gen_from_speed(num(pm.group(1), f"{key} pcie clock level"))
                r.pcie_width = int(pm.group(2))
        r.name = _label(_first(d, "card series", "device name", "card sku", "market name"))
        r.uuid = _label(_first(d, "unique id"))
        r.bus = _label(_first(d, "pci bus"))
        out[idx] = r
    if not out:
        raise layout_error("rocm-smi JSON: no 'cardN' entries")
    return out


def rocm_smi_is_hygon(text: str) -> bool:
    """True if a rocm-smi answer is Hygon DTK's fork (DCU/HCU wording, Hygon names)."""
    return re.search(r"\b(DCU|HCU)\b|Hygon", text) is not None


# -- amd-smi JSON ----------------------------------------------------------------------

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
    return num_unit(obj, what)


def _amd_gpus(text: str, what: str) -> list[tuple[int, dict[str, Any]]]:
    """(GPU index, its entry) of an amd-smi JSON answer, whether the per-GPU list is
    bare (amd-smi ≤ 25) or wrapped in ``gpu_data`` (26)."""
    obj = extract_json(text, what)
    if isinstance(obj, dict) and "gpu_data" in obj:
        obj = obj["gpu_data"]
    elif isinstance(obj, dict) and "gpu" in obj:
        obj = [obj]  # one GPU asked for with -g
    if not isinstance(obj, list):
        raise layout_error(f"{what}: neither a list of GPUs nor {{'gpu_data': [...]}}")
    items = []
    for it in obj:
        if not isinstance(it, dict) or "gpu" not in it:
            raise layout_error(f"{what}: entry without 'gpu'")
        g = it["gpu"]
        if not is_index(g):
            raise layout_error(f"{what}: 'gpu' is not an index")
        items.append((int(str(g).strip()), it))
    if not items:
        raise layout_error(f"{what}: no GPUs")
    return items


def _sub(d: Any, key: str) -> Any:
    """``d[key]`` if ``d`` is a dict, else None ("N/A" in place of a whole section)."""
    return d.get(key) if isinstance(d, dict) else None


def _amd_num(obj: Any, what: str, units: tuple[str, ...]) -> float | None:
    if obj is None:
        return None
    x, unit = amd_value(obj, what)
    if x is None:
        return None
    if unit and unit.replace("°", "").lower() not in {u.lower() for u in units}:
        raise layout_error(f"{what}: unexpected unit {unit!r}")
    return x


def _amd_watts(obj: Any, what: str) -> float | None:
    if obj is None:
        return None
    x, unit = amd_value(obj, what)
    if x is None:
        return None
    scale = {"": 1.0, "w": 1.0, "mw": 1e-3, "uw": 1e-6, "µw": 1e-6}.get(unit.lower())
    if scale is None:
        raise layout_error(f"{what}: unexpected unit {unit!r}")
    return x * scale


def _amd_bytes(obj: Any, what: str, default_unit: str = "MB") -> int | None:
    if obj is None:
        return None
    x, unit = amd_value(obj, what)
    if x is None:
        return None
    return scale_bytes(x, unit or default_unit, binary=True, what=what)


def _amd_link(width: Any, speed: Any, width_what: str, speed_what: str) -> tuple[int | None, int | None]:
    """(PCIe generation, lane count) from amd-smi's width and per-lane speed."""
    lanes = _amd_num(width, width_what, ("",))
    gen = None
    if speed is not None:
        x, unit = amd_value(speed, speed_what)
        if x is not None:
            # Reported in GT/s; some versions print MT/s.
            gen = pcie_gen_from_speed(x / 1000.0 if unit.lower() == "mt/s" else x)
    return gen, int(lanes) if lanes is not None else None


def _amd_readings(text: str, what: str, read: Callable[[dict[str, Any], CardReading, str], None]
                  ) -> dict[int, CardReading]:
    """One reading per GPU entry of an amd-smi JSON answer, filled by ``read(entry, reading, "gpu N")``."""
    out: dict[int, CardReading] = {}
    for idx, it in _amd_gpus(text, what):
        r = out[idx] = CardReading(index=idx)
        read(it, r, f"gpu {idx}")
    return out


def _read_metric(it: dict[str, Any], r: CardReading, w: str) -> None:
    usage = it.get("usage")
    if usage is not None and not isinstance(usage, (dict, str)):
        raise layout_error(f"{w}: 'usage' is not an object")
    r.util = clamp_pct(_amd_num(_sub(usage, "gfx_activity"), f"{w} gfx_activity", ("%",)))
    r.dram_active = clamp_pct(_amd_num(_sub(usage, "umc_activity"), f"{w} umc_activity", ("%",)))
    power = it.get("power")
    r.power_w = _amd_watts(_first(power, "socket_power", "average_socket_power", "current_socket_power")
                           if isinstance(power, dict) else None, f"{w} socket_power")
    temp = it.get("temperature")
    # An "N/A" edge sensor (MI300) falls through to hotspot.
    r.temp_c = _amd_num(_first(temp, "edge", "hotspot", "junction") if isinstance(temp, dict) else None,
                        f"{w} temperature", ("C",))
    clock = it.get("clock")
    if isinstance(clock, dict):
        gfx = clock.get("gfx_0", clock.get("gfx"))
        if isinstance(gfx, dict):
            r.sm_clock_mhz = _amd_num(gfx.get("clk"), f"{w} gfx clk", ("MHz",))
            r.sm_clock_max_mhz = _amd_num(gfx.get("max_clk"), f"{w} gfx max_clk", ("MHz",))
    mem = it.get("mem_usage")
    if isinstance(mem, dict):
        r.mem_total = _amd_bytes(mem.get("total_vram"), f"{w} total_vram")
        r.mem_used = _amd_bytes(mem.get("used_vram"), f"{w} used_vram")
    pcie = it.get("pcie")
    if isinstance(pcie, dict):
        r.pcie_gen, r.pcie_width = _amd_link(pcie.get("width"), pcie.get("speed"), f"{w} pcie width",
                                             f"{w} pcie speed")


def parse_amd_smi_metric(text: str) -> dict[int, CardReading]:
    """``amd-smi metric --json`` → readings by GPU index."""
    return _amd_readings(text, "amd-smi metric JSON", _read_metric)


def _read_static(it: dict[str, Any], r: CardReading, w: str) -> None:
    r.name = _label(_sub(it.get("asic"), "market_name"))
    vram = it.get("vram")
    if isinstance(vram, dict):
        r.mem_total = _amd_bytes(vram.get("size"), f"{w} vram size")
    limit = it.get("limit")
    if isinstance(limit, dict):
        r.power_limit_w = _amd_watts(_first(limit, "socket_power", "max_power", "power_cap"),
                                    f"{w} power limit")
    bus = it.get("bus")
    if isinstance(bus, dict):
        r.bus = _label(bus.get("bdf"))
        r.pcie_gen_max, r.pcie_width_max = _amd_link(bus.get("max_pcie_width"), bus.get("max_pcie_speed"),
                                                     f"{w} max_pcie_width", f"{w} max_pcie_speed")
        if r.pcie_gen_max is None:
            gen = bus.get("pcie_interface_version")
            if isinstance(gen, str):
                gm = re.search(r"(\d+)", gen)
                r.pcie_gen_max = int(gm.group(1)) if gm else None
    r.uuid = _label(it.get("uuid"))


def parse_amd_smi_static(text: str) -> dict[int, CardReading]:
    """``amd-smi static --json`` → names, VRAM size, power cap, PCIe maxima by GPU."""
    return _amd_readings(text, "amd-smi static JSON", _read_static)


def parse_amd_smi_process(text: str) -> dict[int, dict[str, int | None]]:
    """``amd-smi process --json`` → ``{gpu: {pid: VRAM bytes or None}}``.

    A GPU with no processes gives ``{}`` (known to be none), not ``None``.
    """
    out: dict[int, dict[str, int | None]] = {}
    for idx, it in _amd_gpus(text, "amd-smi process JSON"):
        procs: dict[str, int | None] = out.setdefault(idx, {})
        plist = it.get("process_list", [])
        if isinstance(plist, str) or plist is None:
            continue  # "N/A" / "No running processes detected"
        if not isinstance(plist, list):
            raise layout_error(f"gpu {idx}: 'process_list' is not a list")
        for entry in plist:
            info = entry.get("process_info", entry) if isinstance(entry, dict) else entry
            if isinstance(info, str):
                continue  # amd-smi's "No running processes detected"
            if not isinstance(info, dict):
                raise layout_error(f"gpu {idx}: process entry is not an object")
            pid_v = info.get("pid")
            if isinstance(pid_v, bool) or pid_v is None:
                raise layout_error(f"gpu {idx}: process without pid")
            pid_f = num(pid_v, f"gpu {idx} pid")
            if pid_f is None or pid_f < 0 or pid_f != int(pid_f):
                raise layout_error(f"gpu {idx}: pid {one_line(str(pid_v))} is not a pid")
            pid = str(int(pid_f))
            mu = info.get("memory_usage")
            vram = _amd_bytes(mu.get("vram_mem"), f"gpu {idx} pid {pid} vram_mem", "B") \
                if isinstance(mu, dict) and "vram_mem" in mu else None
            if vram is None and "mem_usage" in info:
                vram = _amd_bytes(info.get("mem_usage"), f"gpu {idx} pid {pid} mem_usage", "B")
            add_proc(procs, pid, vram)
    return out


# -- amd-smi default view (text) -------------------------------------------------------

_BDF = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_SIZE = r"(?:N/A|[0-9.]+\s*[KMGT]?i?B)"
_PROC_ROW = re.compile(rf"^\|\s*(\d+)\s+(\d+)\s+(.*?)\s+({_SIZE})\s+({_SIZE})\s+({_SIZE})\s+(\S.*?)?\s*\|\s*$")


def _cells(line: str) -> list[str]:
    s = line.strip()
    if not (s.startswith("|") and s.endswith("|")):
        return []
    return [c.strip() for c in s[1:-1].split("|")]


def _cols(cell: str) -> list[str]:
    """A table cell's columns: values are separated by two or more spaces."""
    return [c for c in re.split(r"\s{2,}", cell.strip()) if c]


def _pair(v: str, unit_re: str, what: str) -> tuple[float | None, float | None]:
    """"103/300 W" / "29777/32624 MB" / "N/A/300 W" / "N/A" → (a, b)."""
    s = v.strip()
    if s.upper() == "N/A":
        return None, None
    m = re.fullmatch(rf"(N/A|[0-9.]+)\s*/\s*(N/A|[0-9.]+)\s*({unit_re})", s, re.I)
    if m is None:
        raise layout_error(f"{what}: {one_line(s)} is not 'used/total unit'")
    return num(m.group(1), what), num(m.group(2), what)


def parse_amd_smi_default(text: str) -> dict[int, CardReading]:
    """``amd-smi`` (no arguments, amd-smi 26): the summary table and its process table.

    Two lines per GPU::

        | BDF  GPU-Name             | Mem-Uti  Temp  UEC  Power-Usage |
        | GPU HIP-ID OAM-ID Part.   | GFX-Uti  Fan        Mem-Usage   |
    """
    lines = text.splitlines()
    if not any("GPU-Name" in ln and "Mem-Uti" in ln for ln in lines) or \
            not any("GFX-Uti" in ln and "Mem-Usage" in ln for ln in lines):
        raise layout_error("amd-smi default view: header 'GPU-Name … Mem-Uti' / 'GFX-Uti … Mem-Usage' not found")
    out: dict[int, CardReading] = {}
    pending: tuple[str, str, list[str]] | None = None  # (bdf, name, right columns) of line 1
    in_procs = False
    saw_proc_header = False
    procs: dict[int, dict[str, int | None]] = {}
    for ln in lines:
        if "Processes:" in ln:
            in_procs = True
            continue
        if in_procs:
            if "PID" in ln and "VRAM_MEM" in ln:
                saw_proc_header = True
                continue
            m = _PROC_ROW.match(ln.rstrip())
            if m:
                gpu = int(m.group(1))
                pid = m.group(2)
                vram = to_bytes(m.group(5), binary=True, what=f"gpu {gpu} pid {pid} VRAM_MEM")
                add_proc(procs.setdefault(gpu, {}), pid, vram)
            continue
        cells = _cells(ln)
        if len(cells) != 2:
            continue
        left, right = cells
        m1 = re.match(rf"^({_BDF})\s+(.*)$", left)
        if m1:
            pending = (m1.group(1), m1.group(2).strip(), _cols(right))
            continue
        if pending is not None:
            lcols = left.split()
            if not lcols or not is_index(lcols[0]):
                raise layout_error(f"amd-smi default view: GPU index missing under {pending[0]}")
            idx = int(lcols[0])
            bdf, name, c1 = pending
            c2 = _cols(right)
            pending = None
            if len(c1) != 4 or len(c2) != 3:
                raise layout_error(f"amd-smi default view: gpu {idx}: expected 4+3 columns, "
                                   f"got {len(c1)}+{len(c2)}")
            w = f"gpu {idx}"
            r = CardReading(index=idx, name=name or None, bus=bdf)
            r.dram_active = parse_pct(c1[0], f"{w} Mem-Uti")
            r.temp_c = expect_unit(c1[1], ("C",), f"{w} Temp")
            r.power_w, r.power_limit_w = _pair(c1[3], "W", f"{w} Power-Usage")
            r.util = parse_pct(c2[0], f"{w} GFX-Uti")
            used, total = _pair(c2[2], "[KMGT]?i?B", f"{w} Mem-Usage")
            unit = re.search(r"([KMGT]?i?B)\s*$", c2[2].strip())
            u = unit.group(1) if unit else "MB"
            r.mem_used = scale_bytes(used, u, what=f"{w} Mem-Usage") if used is not None else None
            r.mem_total = scale_bytes(total, u, what=f"{w} Mem-Usage") if total is not None else None
            out[idx] = r
    if not out:
        raise layout_error("amd-smi default view: no GPU rows")
    if saw_proc_header:
        for idx, r in out.items():
            r.procs = procs.get(idx, {})
    return out


# -- the backend ---------------------------------------------------------------------

def find_amd_tool() -> tuple[str | None, str | None, str | None]:
    """(tool, path, why-not): amd-smi first, then AMD's rocm-smi (not Hygon's fork)."""
    p = find_tool("amd-smi", AMD_TOOL_DIRS)
    if p:
        return "amd-smi", p, None
    p = find_tool("rocm-smi", AMD_TOOL_DIRS)
    if p:
        if in_dir_named(p, HYGON_DIRS):
            return None, None, f"rocm-smi at {p} is Hygon DTK's (the hygon backend reads it)"
        return "rocm-smi", p, None
    return None, None, "amd-smi/rocm-smi not on PATH"


@register
class RocmBackend(CliBackend):
    name = "rocm"
    vendor = "amd"
    auto_rank = 20
    # amd-smi is a Python CLI taking ~0.3–1 s a call, and a tick calls it twice
    # (metrics + processes); rocm-smi alone is lighter (set per instance).
    min_interval_s = 1.0
    mode: str | None  # "amd-json" | "amd-text" | "rocm-smi"
    _procs_layout_ok = True  # False once amd-smi's process view proved unreadable

    @classmethod
    def probe(cls) -> Probe:
        try:
            tool, path, why = find_amd_tool()
            if path is None:
                return Probe(cls.name, False, why)
            ver = version_probe(path)
            return Probe(cls.name, True, None if tool == "amd-smi" else "amd-smi not found; using rocm-smi",
                         ver, path)
        except Exception as e:  # never take doctor down
            return Probe(cls.name, False, f"probe failed: {type(e).__name__}: {e}")

    def discover(self) -> list[CardInfo]:
        tool, path, why = find_amd_tool()
        if path is None or tool is None:
            raise BackendUnavailable(why or "amd-smi/rocm-smi not on PATH")
        self.tool = Tool(tool, path, self.timeout_s)
        if tool == "amd-smi":
            readings = self._discover_amd_smi()
        else:
            readings = self._discover_rocm_smi()
        return self._remember_cards(readings)

    def _discover_amd_smi(self) -> dict[int, CardReading]:
        assert self.tool is not None
        self.min_interval_s = 1.0
        # Not a JSON layout we know: the default summary table still has the numbers.
        readings = self._read_json_else_text(
            json_mode="amd-json",
            read_json=lambda: self._run_view(("metric", "--json"), parse_amd_smi_metric),
            text_mode="amd-text",
            read_text=lambda: self._run_view((), parse_amd_smi_default),
            text_view="the default view")
        # Names, VRAM size and power cap: best effort (a second, slower call, once).
        try:
            static = self._run_view(("static", "--json"), parse_amd_smi_static)
        except BackendError:
            static = {}
        for i, r in readings.items():
            s = static.get(i)
            if s is not None and s.name and (r.name is None or r.name.startswith("...")):
                r.name = s.name  # the table truncates long names with "..."
            r.merge_missing(s)
        return readings

    def _discover_rocm_smi(self) -> dict[int, CardReading]:
        assert self.tool is not None
        self.min_interval_s = 0.5
        text = self.tool.run(*ROCM_SMI_DISCOVER_ARGS)
        if rocm_smi_is_hygon(text):
            raise BackendUnavailable(f"rocm-smi at {self.tool.path} is Hygon DTK's (the hygon backend reads it)")
        self.mode = "rocm-smi"
        return self.tool.parse(parse_rocm_smi_json, text, view="--json")

    def sample(self) -> list[CardSample]:
        if self.tool is None or self.mode is None:
            self.discover()
        assert self.tool is not None
        if self.mode == "amd-json":
            readings = self._run_view(("metric", "--json"), parse_amd_smi_metric)
            procs = self._amd_procs()
            for i, r in readings.items():
                r.procs = procs.get(i, {}) if procs is not None else None
        elif self.mode == "amd-text":
            readings = self._run_view((), parse_amd_smi_default)
        else:
            readings = self.tool.parse(parse_rocm_smi_json, self.tool.run(*ROCM_SMI_SAMPLE_ARGS), view="--json")
        return self._samples_of(readings)

    def _amd_procs(self) -> dict[int, dict[str, int | None]] | None:
        """Per-GPU VRAM by pid; None (unknown) when the call fails — the metrics stand."""
        if not self._procs_layout_ok or self.tool is None:
            return None
        try:
            return self._run_view(("process", "--json"), parse_amd_smi_process)
        except ParseError:
            self._procs_layout_ok = False  # an unknown layout will not change: stop asking
            return None
        except (ToolError, BackendUnavailable):
            return None
