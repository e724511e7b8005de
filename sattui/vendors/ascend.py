"""Huawei Ascend NPUs through ``npu-smi`` (text only; about half a second a call).

``npu-smi info`` prints one box per chip, two rows each, then a process table::

    | NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
    | Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
    | 0     910B3               | OK            | 99.4        34                0    / 0             |
    | 0                         | 0000:C1:00.0  | 0           0    / 0          59189/ 65536         |

Known variations, all read by header name: 910B (one chip per NPU, HBM column),
two-chip boards (A3/910C, 310P: "Chip  Phy-ID" or "Chip  Device", a box per chip, the
board's power only on its first chip, "-" on the second), 310B/310P (no HBM column:
"Memory-Usage(MB)" is the card's memory), "NA"/"-" for values the chip lacks.

Each chip is one sattui card. Its index is the chip's Phy-ID/Device number when the
table prints one (the global id the runtime uses), else the NPU id on one-chip boards,
else the position in the table.

AICore % is the utilisation. When the overview lacks it (or memory) for a chip,
``npu-smi info -t usages -i N`` fills in; when it has no process table,
``npu-smi info -t proc-mem -i N`` gives the processes. ``-t common -i N`` of one NPU
at discovery gives the rated AICore clock (same model ⇒ same rating).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from sattui.model import CardInfo, CardSample, Event
from sattui.vendors.backend import BackendError, ParseError, ToolError, register
from sattui.vendors.box_table import Column, attach_processes, find_key, read_card_table, split_pair
from sattui.vendors.cli_backend import CliBackend
from sattui.vendors.reading import CardReading, add_proc
from sattui.vendors.tool import first_line, search_version
from sattui.vendors.values import layout_error, mem_pair, num, one_line, parse_pct, temp_c, to_bytes, to_index, watts

NPU_SMI = "npu-smi"


def npu_smi_version(text: str) -> str | None:
    """'| npu-smi 23.0.2.1   Version: 23.0.2.1 |' → '23.0.2.1'."""
    return search_version(text, r"npu-smi\s+v?(\d[\w.\-]*)", r"(?i)\bversion\s*:\s*v?(\d[\w.\-]*)")


def _is_device_header(labels: set[str]) -> bool:
    return "npu" in labels and "name" in labels and "health" in labels


def _is_proc_header(labels: set[str]) -> bool:
    return "process id" in labels or "pid" in labels


_PROCESS_ID = Column(("process id", "pid"), label="process id")
_PROCESS_MEMORY = Column(contains=("memory",))


def _assign_cards(chips: list[tuple[int, int, int | None]]) -> list[int]:
    """Card index per chip (npu, chip, phy): phy ids if all given and unique, else NPU
    ids if one chip per NPU, else table order — never two chips on one index."""
    phys = [p for _, _, p in chips]
    if chips and all(p is not None for p in phys) and len(set(phys)) == len(phys):
        return [p for p in phys if p is not None]
    npus = [n for n, _, _ in chips]
    if len(set(npus)) == len(npus):
        return npus
    return list(range(len(chips)))


def parse_npu_smi_info(text: str) -> dict[int, CardReading]:
    """``npu-smi info`` → one reading per chip, keyed by card index.

    ``extra`` carries ``npu``/``chip`` (for the per-NPU calls).
    ``procs`` is ``{}`` for all chips when a process table is printed (a chip without
    rows runs nothing), ``None`` when there is no process table.
    """
    lines, table = read_card_table(text, _is_device_header, what="NPU table",
                                   missing="no NPU table (a header with 'NPU', 'Name', 'Health')",
                                   rows_per_record=2, stop=lambda ln: "process id" in ln.lower())
    chips: list[tuple[int, int, int | None]] = []
    readings: list[CardReading] = []
    for rec in table.records:
        npu = to_index(rec.get("npu"), "NPU")
        chip = to_index(rec.get("chip"), f"NPU {npu} Chip")
        phy_key = find_key(rec, "phy-id", "device", "logic-id")
        phy = to_index(rec.get(phy_key), f"NPU {npu} {phy_key}") if phy_key else None
        w = f"NPU {npu} chip {chip}"
        bus = rec.get("bus-id")
        r = CardReading(index=-1, name=rec.get("name"),
                        bus=None if bus is None or bus.upper() in ("NA", "N/A", "-") else bus)
        r.extra = {"npu": npu, "chip": chip}
        r.power_w = watts(rec.get(find_key(rec, "power(w)", contains=("power",)) or "power(w)"), f"{w} Power")
        r.temp_c = temp_c(rec.get(find_key(rec, "temp(c)", contains=("temp",)) or "temp(c)"), f"{w} Temp")
        r.util = parse_pct(rec.get(find_key(rec, "aicore(%)", contains=("aicore",)) or "aicore(%)"), f"{w} AICore")
        # 910B and later: the HBM column is the device memory; the 310 family has only
        # "Memory-Usage", and on 910B that column is an empty "0 / 0" DDR.
        hbm_key = find_key(rec, "hbm-usage(mb)", contains=("hbm",))
        mem_key = find_key(rec, "memory-usage(mb)", contains=("memory-usage",))
        for key in (hbm_key, mem_key):
            if key is None:
                continue
            used, total = mem_pair(*split_pair(rec.get(key), f"{w} {key}"), f"{w} {key}", "MiB")
            if total:
                r.mem_used, r.mem_total = used, total
                break
        chips.append((npu, chip, phy))
        readings.append(r)
    cards = _assign_cards(chips)
    out: dict[int, CardReading] = {}
    for idx, r in zip(cards, readings):
        r.index = idx
        out[idx] = r
    by_chip = {(r.extra["npu"], r.extra["chip"]): r for r in out.values()}

    def chip_of_process(rec: dict[str, str]) -> CardReading | None:
        npu = to_index(rec.get("npu"), "process NPU")
        chip = to_index(rec.get("chip"), "process Chip") if "chip" in rec else 0
        return by_chip.get((npu, chip))  # None: a chip the table above did not list (it raced the listing)

    attach_processes(lines, table.end, out.values(), chip_of_process, is_header=_is_proc_header,
                     pid=_PROCESS_ID, memory=_PROCESS_MEMORY)
    return out


# -- "key : value" views (-t usages / common / proc-mem -i N) -------------------------

_PROC_LINE_RE = re.compile(r"Process id\s*:\s*(\d{1,9})\s+Process name\s*:\s*(.*?)\s+Process memory\(MB\)\s*:\s*(\S+)",
                           re.I)


def _chip_blocks(text: str) -> list[tuple[int, dict[str, str], list[str]]]:
    """Each blank-line-separated block of one chip as (chip id, first value per key, raw
    lines). The MCU block ("Chip Name : mcu") is left out; no "NPU ID" line at all is a
    view we do not know."""
    npu: int | None = None
    blocks: list[tuple[int | None, dict[str, str], list[str]]] = []
    cur: list[str] = []
    for ln in [*text.splitlines(), ""]:
        if ln.strip():
            cur.append(ln)
            continue
        if not cur:
            continue
        kv: dict[str, str] = {}
        for c in cur:
            key, sep, value = c.partition(":")
            if sep:
                kv.setdefault(" ".join(key.lower().split()), value.strip())
        cur_lines, cur = cur, []
        if "npu id" in kv and npu is None:
            npu = to_index(kv["npu id"], "NPU ID")
        if kv.get("chip name", "").lower() == "mcu":
            continue
        chip = to_index(kv["chip id"], "Chip ID") if "chip id" in kv else None
        blocks.append((chip, kv, cur_lines))
    if npu is None:
        raise layout_error(f"no 'NPU ID : N' line; output starts {one_line(first_line(text))}")
    # One-chip NPUs of some versions print no "Chip ID"; the data block is chip 0 then.
    data = [b for b in blocks if set(b[1]) - {"npu id", "chip count"}]
    if data and all(b[0] is None for b in data) and len(data) == 1:
        data = [(0, data[0][1], data[0][2])]
    return [(chip, kv, raw) for chip, kv, raw in data if chip is not None]


def parse_usages(text: str) -> dict[int, CardReading]:
    """``npu-smi info -t usages -i N`` → per chip id: util (Aicore Usage Rate) and the
    memory size (HBM capacity, else DDR). Only a rate is printed for used memory, so
    ``mem_used`` stays unknown rather than rounded from it."""
    out: dict[int, CardReading] = {}
    for chip, kv, _ in _chip_blocks(text):
        w = f"chip {chip}"
        r = CardReading(index=chip)
        r.util = parse_pct(kv.get("aicore usage rate(%)"), f"{w} Aicore Usage Rate")
        for cap in ("hbm capacity(mb)", "ddr capacity(mb)"):
            size = to_bytes(kv.get(cap), "MiB", what=f"{w} {cap}")
            if size:
                r.mem_total = size
                break
        r.extra["hbm_usage_pct"] = parse_pct(kv.get("hbm usage rate(%)"), f"{w} HBM Usage Rate")
        if r.util is None and r.mem_total is None and "aicore usage rate(%)" not in kv:
            continue
        out[chip] = r
    if not out:
        raise layout_error("no chip block with 'Aicore Usage Rate(%)'")
    return out


def parse_common(text: str) -> dict[int, CardReading]:
    """``npu-smi info -t common -i N`` → per chip id: util, AICore clock now and rated,
    temperature (the chip's, not the MCU's printed after it), power."""
    out: dict[int, CardReading] = {}
    for chip, kv, _ in _chip_blocks(text):
        w = f"chip {chip}"
        r = CardReading(index=chip)
        r.util = parse_pct(kv.get("aicore usage rate(%)"), f"{w} Aicore Usage Rate")
        r.sm_clock_max_mhz = num(kv.get("aicore freq(mhz)"), f"{w} Aicore Freq")
        r.sm_clock_mhz = num(kv.get("aicore curfreq(mhz)"), f"{w} Aicore curFreq")
        r.temp_c = temp_c(kv.get("temperature(c)"), f"{w} Temperature")
        r.power_w = watts(kv.get("npu real-time power(w)"), f"{w} NPU Real-time Power")
        if all(v is None for v in (r.util, r.sm_clock_max_mhz, r.sm_clock_mhz, r.temp_c, r.power_w)) \
                and not any(k in kv for k in ("aicore freq(mhz)", "aicore usage rate(%)", "temperature(c)")):
            continue
        out[chip] = r
    if not out:
        raise layout_error("no chip block with AICore or temperature fields")
    return out


def parse_proc_mem(text: str) -> dict[int, dict[str, int | None]]:
    """``npu-smi info -t proc-mem -i N`` → per chip id: pid → bytes (``{}``: none run)."""
    out: dict[int, dict[str, int | None]] = {}
    for chip, kv, raw in _chip_blocks(text):
        foreign = set(kv) - {"chip id", "process id", "chip name"}
        if foreign:
            # A usages/common view has a Chip ID too; reading it as "no processes"
            # would be a wrong (empty) answer.
            raise layout_error(f"not a proc-mem view (chip {chip} has {one_line(sorted(foreign)[0])})")
        procs = out.setdefault(chip, {})
        for ln in raw:
            if "process id" not in ln.lower():
                continue
            m = _PROC_LINE_RE.search(ln)
            if m is None:
                raise layout_error(f"process line {one_line(ln.strip())} not understood")
            add_proc(procs, int(m.group(1)), to_bytes(m.group(3), "MiB", what=f"process {m.group(1)} memory"))
    if not out:
        raise layout_error("no chip block")
    return out


# -- the backend --------------------------------------------------------------------------


@register
class AscendBackend(CliBackend):
    name = "ascend"
    vendor = "huawei"
    auto_rank = 40
    # npu-smi takes ~0.5 s a call (more with many cards): a 2 s period keeps it a
    # small share of one core, and the per-NPU fallbacks fit in.
    min_interval_s = 2.0
    default_timeout_s = 8.0
    tools = (NPU_SMI,)
    list_args = ("info",)
    version_args = ("-v",)

    parse = staticmethod(parse_npu_smi_info)
    header_version = staticmethod(npu_smi_version)

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, timeout_s: float | None = None) -> None:
        super().__init__(clock, timeout_s=timeout_s)
        self._warned: set[str] = set()
        # (view, NPU) whose answer did not parse: asking again every tick would only
        # cost another half second for the same error.
        self._unreadable: set[tuple[str, int]] = set()

    def _note_once(self, key: str, message: str) -> None:
        # A fallback that fails says so once, not every two seconds.
        if key not in self._warned:
            self._warned.add(key)
            self.events.append(Event(self.clock(), "backend_degraded", f"{self.name}: {message}",
                                     {"backend": self.name}))

    def _per_npu(self, kind: str, npu: int, fn: Callable[[str], object]) -> object | None:
        """One ``npu-smi info -t KIND -i NPU`` parsed, or None (noted once) if it fails."""
        if (kind, npu) in self._unreadable:
            return None
        tool = self._tool()
        try:
            return tool.run_parse(("info", "-t", kind, "-i", str(npu)), fn)
        except ToolError:
            raise  # a hung/crashing tool: the caller stops asking this round
        except ParseError as e:  # its message already names the command
            self._unreadable.add((kind, npu))
            self._note_once(f"{kind}:{npu}", str(e))
            return None
        except BackendError as e:
            self._note_once(f"{kind}:{npu}", f"npu-smi info -t {kind} -i {npu}: {e}")
            return None

    def discover(self) -> list[CardInfo]:
        readings = self.read()
        # Rated AICore clock from one NPU; every chip of the same model shares it. The
        # listing already worked, so a failure here only leaves the rating unknown.
        if readings:
            first = readings[min(readings)]
            try:
                common = self._per_npu("common", first.extra["npu"], parse_common)
            except ToolError:
                common = None
            if isinstance(common, dict):
                rated = next((c.sm_clock_max_mhz for c in common.values() if c.sm_clock_max_mhz), None)
                for r in readings.values():
                    if r.name == first.name:
                        r.sm_clock_max_mhz = rated
        return self._remember_cards(readings)

    def _fill_missing(self, readings: dict[int, CardReading]) -> None:
        """Per-NPU calls for what the overview left out (each NPU asked once)."""
        by_npu: dict[int, list[CardReading]] = {}
        for r in readings.values():
            by_npu.setdefault(r.extra["npu"], []).append(r)
        try:
            for npu, rs in sorted(by_npu.items()):
                if any(r.util is None or r.mem_total is None for r in rs):
                    usages = self._per_npu("usages", npu, parse_usages)
                    if isinstance(usages, dict):
                        for r in rs:
                            r.merge_missing(usages.get(r.extra["chip"]))
                if any(r.procs is None for r in rs):
                    procmem = self._per_npu("proc-mem", npu, parse_proc_mem)
                    if isinstance(procmem, dict):
                        for r in rs:
                            if r.procs is None and r.extra["chip"] in procmem:
                                r.procs = procmem[r.extra["chip"]]
        except ToolError as e:
            # The overview answered, the detail call hung: keep what we have.
            self._note_once("toolerror", f"per-NPU detail skipped: {e}")

    def sample(self) -> list[CardSample]:
        if not self.cards:
            self.discover()
        readings = self.read()
        self._fill_missing(readings)
        return self._samples_of(readings)

