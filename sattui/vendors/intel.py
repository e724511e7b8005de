"""Intel data-center GPUs through Intel XPU Manager's ``xpu-smi``.

Calls (all argument lists, each with a timeout):

* ``xpu-smi discovery -j``: ``{"device_list": [{"device_id": 0, "device_name": …}]}``.
* ``xpu-smi discovery -d N``: the detailed table (memory size, PCIe maxima), best effort.
* ``xpu-smi stats -d N``: a two-column table per tick; rows may be blank (no value),
  labels wrap onto a second row ("Average % utilization of" / "all GPU Engines").
* ``xpu-smi dump -d N -m 0,1,2,3,18 -n 1``: CSV, used when ``stats`` prints a layout
  that is not known.

Kunlunxin also ships an ``xpu-smi``; which one is on PATH is told from what it prints,
never from the name (``sattui.vendors.xpu_smi``).
"""

from __future__ import annotations

import re

from sattui.model import CardInfo, CardSample
from sattui.vendors.backend import BackendError, BackendUnavailable, ParseError, Probe, register
from sattui.vendors.cli_backend import CliBackend
from sattui.vendors.reading import CardReading
from sattui.vendors.tool import ANY_EXIT, VERSION_TIMEOUT_S, Tool, find_tool, first_line, run_tool, version_from
from sattui.vendors.values import (
    expect_unit,
    extract_json,
    is_index,
    is_na,
    layout_error,
    num,
    num_unit,
    one_line,
    parse_pct,
    scale_bytes,
)
from sattui.vendors.xpu_smi import INTEL, KUNLUN, identify_xpu_smi

# xpumanager installs into /usr/bin; /usr/local/xpu/bin is Kunlunxin's, so no extra dirs.
INTEL_TOOL_DIRS: tuple[str, ...] = ()
DUMP_METRICS = "0,1,2,3,18"  # util %, power W, frequency MHz, core temp C, memory used MiB
KUNLUN_REASON = "xpu-smi on PATH is Kunlunxin's (the kunlun backend reads it)"

def parse_xpu_discovery_json(text: str) -> dict[int, CardReading]:
    """``xpu-smi discovery -j`` → readings (name, uuid, bus) by device id."""
    obj = extract_json(text, "discovery JSON")
    if not isinstance(obj, dict) or not isinstance(obj.get("device_list"), list):
        raise layout_error("discovery JSON: no 'device_list' list")
    out: dict[int, CardReading] = {}
    for dev in obj["device_list"]:
        if not isinstance(dev, dict):
            raise layout_error("discovery JSON: device entry is not an object")
        did = dev.get("device_id")
        if not is_index(did):
            raise layout_error(f"discovery JSON: device_id {one_line(str(did))} is not an index")
        idx = int(str(did).strip())
        r = CardReading(index=idx)
        for key, attr in (("device_name", "name"), ("uuid", "uuid"), ("pci_bdf_address", "bus")):
            v = dev.get(key)
            if isinstance(v, str) and not is_na(v):
                setattr(r, attr, v.strip())
        out[idx] = r
    return out


def _table_rows(text: str) -> list[tuple[str, str]]:
    """(left, right) cells of each ``| a | b |`` row of an xpu-smi table."""
    rows = []
    for ln in text.splitlines():
        s = ln.strip()
        if not (s.startswith("|") and s.endswith("|")) or len(s) < 2:
            continue
        cells = [c.strip() for c in s[1:-1].split("|")]
        if len(cells) < 2:
            continue
        rows.append((cells[0], cells[-1]))
    return rows


def parse_xpu_discovery_detail(text: str) -> CardReading:
    """``xpu-smi discovery -d N`` (table) → name, uuid, VRAM size, PCIe generation/width."""
    rows = _table_rows(text)
    idx: int | None = None
    kv: dict[str, str] = {}
    for left, right in rows:
        if is_index(left) and idx is None:
            idx = int(left)
        m = re.match(r"^([^:]+):\s*(.*)$", right)
        if m and idx is not None:
            kv.setdefault(m.group(1).strip().lower(), m.group(2).strip())
    if idx is None or not kv:
        raise layout_error("discovery -d: no 'Device ID | key: value' table")
    r = CardReading(index=idx)
    name = kv.get("device name")
    r.name = name if name and not is_na(name) else None
    uid = kv.get("uuid")
    r.uuid = uid if uid and not is_na(uid) else None
    bdf = kv.get("pci bdf address")
    r.bus = bdf if bdf and not is_na(bdf) else None
    if "memory physical size" in kv:
        x, unit = num_unit(kv["memory physical size"], "Memory Physical Size")
        r.mem_total = scale_bytes(x, unit or "MiB", what="Memory Physical Size") if x is not None else None
    if "pcie generation" in kv:
        g = num(kv["pcie generation"], "PCIe Generation")
        r.pcie_gen_max = int(g) if g is not None else None
    if "pcie max link width" in kv:
        w = num(kv["pcie max link width"], "PCIe Max Link Width")
        r.pcie_width_max = int(w) if w is not None else None
    return r


# Label prefixes (lower-case) of the stats rows sattui reads, and where they go.
_STATS_FIELDS: tuple[tuple[str, str], ...] = (
    ("average % utilization of", "util"),
    ("gpu utilization (%)", "util"),
    ("gpu power (w)", "power_w"),
    ("gpu frequency (mhz)", "sm_clock_mhz"),
    ("gpu core temperature (c)", "temp_c"),
    ("gpu memory used (mib)", "mem_used"),
    ("gpu memory bandwidth (%)", "dram_active"),
)


def parse_xpu_stats(text: str) -> CardReading:
    """``xpu-smi stats -d N`` (table) → one reading.

    Blank rows are ``None`` (the guide: some telemetry needs root). Rows after a
    "Tile ID" row are per tile; the device-level rows come first and win.
    """
    rows = _table_rows(text)
    idx: int | None = None
    values: dict[str, str] = {}
    for left, right in rows:
        low = left.lower()
        if low == "device id":
            if idx is not None:
                break  # a second device's table: not ours
            if not is_index(right):
                raise layout_error(f"stats: Device ID {one_line(right)} is not an index")
            idx = int(right.strip())
            continue
        if low.startswith("tile id"):
            break
        if left and left not in values:
            values[left] = right
    if idx is None:
        raise layout_error("stats: no 'Device ID' row")
    r = CardReading(index=idx)
    found = 0
    for label, right in values.items():
        low = label.lower()
        for prefix, attr in _STATS_FIELDS:
            if not low.startswith(prefix) or getattr(r, attr) is not None:
                continue
            found += 1
            what = f"device {idx} {label}"
            if attr in ("util", "dram_active"):
                setattr(r, attr, parse_pct(right, what))
            elif attr == "mem_used":
                x = expect_unit(right, ("MiB",), what)
                r.mem_used = scale_bytes(x, "MiB", what=what) if x is not None else None
            elif attr == "temp_c":
                r.temp_c = expect_unit(right, ("C",), what)
            elif attr == "power_w":
                r.power_w = expect_unit(right, ("W",), what)
            else:
                r.sm_clock_mhz = expect_unit(right, ("MHz",), what)
    if found == 0:
        raise layout_error(f"stats: device {idx}: none of the known rows (GPU Power (W), …)")
    return r


_DUMP_COLS: tuple[tuple[str, str], ...] = (
    ("average % utilization", "util"),
    ("gpu utilization", "util"),
    ("gpu power", "power_w"),
    ("gpu frequency", "sm_clock_mhz"),
    ("gpu core temperature", "temp_c"),
    ("gpu memory used", "mem_used"),
    ("gpu memory bandwidth utilization", "dram_active"),
)


def parse_xpu_dump_csv(text: str) -> dict[int, CardReading]:
    """``xpu-smi dump -d N -m … -n K`` (CSV) → the last row of each device."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    hi = next((i for i, ln in enumerate(lines) if ln.lstrip().lower().startswith("timestamp,")), None)
    if hi is None:
        raise layout_error("dump: no 'Timestamp, DeviceId, …' header")
    header = [h.strip() for h in lines[hi].split(",")]
    if len(header) < 3 or header[1].lower() != "deviceid":
        raise layout_error("dump: second column is not DeviceId")
    attrs: list[str | None] = []
    for h in header[2:]:
        hl = h.lower()
        attrs.append(next((a for p, a in _DUMP_COLS if hl.startswith(p)), None))
    out: dict[int, CardReading] = {}
    for ln in lines[hi + 1:]:
        cells = [c.strip() for c in ln.split(",")]
        if len(cells) != len(header):
            raise layout_error(f"dump: row {one_line(ln)} has {len(cells)} fields, header has {len(header)}")
        did = cells[1]
        if not is_index(did):
            raise layout_error(f"dump: DeviceId {one_line(did)} is not an index")
        idx = int(did)
        r = CardReading(index=idx)
        for attr, h, v in zip(attrs, header[2:], cells[2:]):
            if attr is None:
                continue
            what = f"device {idx} {h}"
            if attr in ("util", "dram_active"):
                setattr(r, attr, parse_pct(v, what))
            elif attr == "mem_used":
                x = num(v, what)
                r.mem_used = scale_bytes(x, "MiB", what=what) if x is not None else None
            else:
                setattr(r, attr, num(v, what))
        out[idx] = r  # later rows are newer
    if not out:
        raise layout_error("dump: header but no rows")
    return out


def _classify(path: str, timeout_s: float) -> tuple[str | None, str | None]:
    """(kind, version) of the xpu-smi at ``path``: ``-v`` first, ``discovery -j`` if unsure."""
    texts = []
    for args in (("-v",), ("discovery", "-j")):
        try:
            run = run_tool([path, *args], timeout_s=timeout_s, ok_codes=ANY_EXIT)
        except BackendError:
            continue
        text = run.stdout + "\n" + run.stderr
        texts.append(text)
        kind = identify_xpu_smi(text)
        if kind is not None:
            ver = version_from(texts[0]) if kind == INTEL else None
            return kind, ver
    return None, None


@register
class IntelBackend(CliBackend):
    name = "intel"
    vendor = "intel"
    auto_rank = 90
    # One stats call per device per tick, each ~0.1–0.5 s through the xpum daemon.
    min_interval_s = 1.0
    mode: str | None  # "stats" | "dump", chosen on the first sample

    @classmethod
    def probe(cls) -> Probe:
        try:
            path = find_tool("xpu-smi", INTEL_TOOL_DIRS)
            if path is None:
                return Probe(cls.name, False, "xpu-smi not on PATH")
            kind, ver = _classify(path, VERSION_TIMEOUT_S)
            if kind == KUNLUN:
                return Probe(cls.name, False, KUNLUN_REASON, None, path)
            if kind is None:
                return Probe(cls.name, False, "xpu-smi on PATH printed nothing Intel XPU Manager prints",
                             None, path)
            return Probe(cls.name, True, None, ver, path)
        except Exception as e:  # never take doctor down
            return Probe(cls.name, False, f"probe failed: {type(e).__name__}: {e}")

    def discover(self) -> list[CardInfo]:
        path = find_tool("xpu-smi", INTEL_TOOL_DIRS)
        if path is None:
            raise BackendUnavailable("xpu-smi not on PATH")
        self.tool = Tool("xpu-smi", path, self.timeout_s, version_args=("-v",))
        # Kunlunxin's tool may reject "discovery -j" with a non-zero exit and its table:
        # read the output whatever the exit code, and tell the two apart first.
        run = run_tool([path, "discovery", "-j"], timeout_s=self.timeout_s, ok_codes=ANY_EXIT)
        text = run.stdout
        if identify_xpu_smi(run.stdout + "\n" + run.stderr) == KUNLUN:
            raise BackendUnavailable(KUNLUN_REASON)
        if run.returncode != 0:
            first = first_line(run.stderr + "\n" + run.stdout)
            raise BackendError(f"xpu-smi discovery -j exited {run.returncode}" + (f": {first[:160]}" if first else ""))
        readings = self.tool.parse(parse_xpu_discovery_json, text, view="discovery -j")
        for i, r in readings.items():
            # Memory size and PCIe maxima: best effort, once.
            try:
                r.merge_missing(self._run_view(("discovery", "-d", str(i)), parse_xpu_discovery_detail))
            except BackendError:
                pass
        return self._remember_cards(readings)

    def _sample_one(self, dev: int) -> CardReading:
        assert self.tool is not None
        if self.mode != "dump":
            try:
                r = self._run_view(("stats", "-d", str(dev)), parse_xpu_stats)
                self.mode = "stats"
                return r
            except ParseError:
                if self.mode == "stats":
                    raise  # it parsed before: a changed answer is an error, not a switch
        readings = self._run_view(("dump", "-d", str(dev), "-m", DUMP_METRICS, "-n", "1"), parse_xpu_dump_csv)
        if dev not in readings:
            raise ParseError(f"xpu-smi {self.tool.version() or '(version unknown)'}: dump: no row for device {dev}")
        self.mode = "dump"
        return readings[dev]

    def sample(self) -> list[CardSample]:
        if self.tool is None:
            self.discover()
        readings: dict[int, CardReading] = {}
        for dev in sorted(self.cards):
            r = self._sample_one(dev)
            readings[dev] = r
        return self._samples_of(readings)
