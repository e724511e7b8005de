"""Any Linux DRM GPU (amdgpu, i915, xe) from sysfs and DRM fdinfo: no vendor tool.

Per card, under ``/sys/class/drm/cardN/device``:

* ``gpu_busy_percent`` (amdgpu): utilisation %.
* ``mem_info_vram_used`` / ``mem_info_vram_total`` (amdgpu): bytes.
* ``hwmon/hwmon*/``: ``power1_average`` or ``power1_input`` (µW), ``power1_cap`` (µW),
  ``energy1_input`` (µJ; i915/xe have only this: power is its rate), ``temp1_input``
  (m°C), ``freq1_input`` (Hz, amdgpu's current sclk).
* ``pp_dpm_sclk`` (amdgpu; "*" marks the current level), ``gt_act_freq_mhz`` (i915).
* ``current_link_speed``/``width``, ``max_link_speed``/``width``: PCIe.

Per process, ``/proc/PID/fdinfo/FD`` of each fd open on ``/dev/dri/*``: ``drm-pdev``
(which card), ``drm-client-id`` (fds sharing a client are counted once),
``drm-memory-vram`` / ``drm-resident-vram0`` / ``drm-resident-local0`` (device memory)
and ``drm-engine-<class>`` (busy ns) or ``drm-cycles-<class>`` / ``drm-total-cycles-``
(xe). Cards without ``gpu_busy_percent`` (i915, xe) get their utilisation from those
counters: the busiest engine class's share of the elapsed time, summed over clients.

Both roots are constructor parameters so tests run over a fake tree.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sattui.model import CardInfo, CardSample
from sattui.vendors.backend import Backend, BackendUnavailable, Probe, register
from sattui.vendors.presence import Presence
from sattui.vendors.reading import CardReading
from sattui.vendors.values import clamp_pct, is_index, layout_error, pcie_gen_from_speed

GPU_DRIVERS = ("amdgpu", "i915", "xe", "radeon", "nouveau")
PCI_VENDORS = {"0x1002": "amd", "0x8086": "intel", "0x10de": "nvidia", "0x1d94": "hygon"}
_CARD_RE = re.compile(r"card(\d+)")
_SIZE_UNITS = {"": 1, "b": 1, "kib": 1024, "mib": 1024**2, "gib": 1024**3, "kb": 1024, "mb": 1024**2}


# -- fdinfo ----------------------------------------------------------------------------

@dataclass
class DrmClient:
    """One ``/proc/PID/fdinfo/FD`` of a DRM fd."""

    driver: str
    pdev: str | None = None
    client_id: str | None = None
    engines_ns: dict[str, int] = field(default_factory=dict)
    engine_capacity: dict[str, int] = field(default_factory=dict)
    cycles: dict[str, int] = field(default_factory=dict)
    total_cycles: dict[str, int] = field(default_factory=dict)
    # region ("vram", "vram0", "local0", "gtt", "system0", …) → {"resident"/"total"/"memory": bytes}
    memory: dict[str, dict[str, int]] = field(default_factory=dict)

    def vram_bytes(self) -> int | None:
        """Device-local memory of this client (resident if given, else total), or None."""
        total = None
        for region, kinds in self.memory.items():
            if not (region.startswith("vram") or region.startswith("local")):
                continue
            v = kinds.get("resident", kinds.get("memory", kinds.get("total")))
            if v is not None:
                total = (total or 0) + v
        return total


def _leading_int(v: str) -> int | None:
    # The kernel prints "107322799 ns"; anything after the number and unit is noise
    # (the fixture even carries a user's annotation there).
    m = re.match(r"\s*(\d+)", v)
    return int(m.group(1)) if m else None


def _size(v: str) -> int | None:
    m = re.match(r"\s*(\d+)\s*([KMGkmg]i?B|B)?\b", v)
    if m is None:
        return None
    unit = (m.group(2) or "").lower()
    if unit not in _SIZE_UNITS:
        return None
    return int(m.group(1)) * _SIZE_UNITS[unit]


def parse_fdinfo(text: str) -> DrmClient | None:
    """One fdinfo file → a ``DrmClient``, or None if the fd is not a DRM client.

    Lenient on purpose: the keys are a kernel ABI that grows, and a line sattui does not
    understand is skipped (that value stays unknown) rather than failing the card.
    """
    if not isinstance(text, str):
        raise layout_error("fdinfo: not text")
    kv: list[tuple[str, str]] = []
    for ln in text.splitlines():
        k, sep, v = ln.partition(":")
        if sep:
            kv.append((k.strip(), v.strip()))
    driver = next((v for k, v in kv if k == "drm-driver"), None)
    if not driver:
        return None
    c = DrmClient(driver=driver.split()[0])
    for k, v in kv:
        if k == "drm-pdev":
            c.pdev = v.split()[0] if v else None
        elif k == "drm-client-id":
            c.client_id = v.split()[0] if v else None
        elif k.startswith("drm-engine-capacity-"):
            n = _leading_int(v)
            if n:
                c.engine_capacity[k[len("drm-engine-capacity-"):]] = n
        elif k.startswith("drm-engine-"):
            n = _leading_int(v)
            if n is not None:
                c.engines_ns[k[len("drm-engine-"):]] = n
        elif k.startswith("drm-total-cycles-"):
            n = _leading_int(v)
            if n is not None:
                c.total_cycles[k[len("drm-total-cycles-"):]] = n
        elif k.startswith("drm-cycles-"):
            n = _leading_int(v)
            if n is not None:
                c.cycles[k[len("drm-cycles-"):]] = n
        else:
            m = re.fullmatch(r"drm-(memory|resident|total|shared|active|purgeable)-(.+)", k)
            if m:
                b = _size(v)
                if b is not None:
                    c.memory.setdefault(m.group(2), {})[m.group(1)] = b
    return c


# -- small sysfs readers (missing/unreadable/garbage → None) ----------------------------

def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except (OSError, ValueError):
        return None


def _read_int(path: Path) -> int | None:
    s = _read(path)
    if s is None:
        return None
    s = s.strip()
    return int(s) if re.fullmatch(r"-?\d+", s) else None


def parse_pp_dpm(text: str) -> tuple[float | None, float | None]:
    """amdgpu ``pp_dpm_sclk`` → (current MHz, highest level MHz)."""
    if not isinstance(text, str):
        raise layout_error("pp_dpm: not text")
    cur = top = None
    for ln in text.splitlines():
        m = re.match(r"\s*\d+:\s*(\d+)\s*[Mm][Hh][Zz]\s*(\*)?", ln)
        if not m:
            continue
        mhz = float(m.group(1))
        top = mhz if top is None else max(top, mhz)
        if m.group(2):
            cur = mhz
    return cur, top


def parse_link_speed(text: str) -> int | None:
    """``current_link_speed`` ("16.0 GT/s PCIe", "8 GT/s") → PCIe generation."""
    if not isinstance(text, str):
        raise layout_error("link speed: not text")
    m = re.match(r"\s*([0-9.]+)\s*GT/s", text)
    if m is None:
        return None
    try:
        return pcie_gen_from_speed(float(m.group(1)))
    except ValueError:
        return None


def _uevent(dev: Path) -> dict[str, str]:
    s = _read(dev / "uevent") or ""
    out = {}
    for ln in s.splitlines():
        k, sep, v = ln.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


@dataclass
class _Card:
    index: int  # sattui's card number (0.. in cardN order)
    drm_name: str  # "card1"
    dev: Path
    driver: str | None
    slot: str | None
    vendor: str
    hwmon: Path | None


def _hwmon(dev: Path) -> Path | None:
    try:
        hs = sorted((dev / "hwmon").glob("hwmon*"))
    except OSError:
        return None
    return hs[0] if hs else None


def find_cards(sys_root: str | os.PathLike[str]) -> list[_Card]:
    """The DRM GPUs under ``sys_root`` (connectors like card0-DP-1 and BMC VGAs left out)."""
    base = Path(sys_root) / "class" / "drm"
    try:
        names = sorted((p.name for p in base.iterdir() if _CARD_RE.fullmatch(p.name)),
                       key=lambda n: int(n[4:]))
    except OSError:
        return []
    cards: list[_Card] = []
    for n in names:
        dev = base / n / "device"
        ue = _uevent(dev)
        driver = ue.get("DRIVER")
        if not driver:
            try:
                driver = os.path.basename(os.readlink(dev / "driver"))
            except OSError:
                driver = None
        if driver not in GPU_DRIVERS and not (dev / "gpu_busy_percent").exists():
            continue  # e.g. the ASPEED BMC's "ast" card: not an accelerator
        slot = ue.get("PCI_SLOT_NAME")
        if not slot:
            real = os.path.basename(os.path.realpath(dev))
            slot = real if re.fullmatch(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d", real) else None
        vid = (_read(dev / "vendor") or "").strip().lower()
        vendor = PCI_VENDORS.get(vid) or {"amdgpu": "amd", "radeon": "amd", "i915": "intel", "xe": "intel",
                                          "nouveau": "nvidia"}.get(driver or "", driver or "unknown")
        cards.append(_Card(len(cards), n, dev, driver, slot, vendor, _hwmon(dev)))
    return cards


@register
class DrmBackend(Backend):
    name = "drm"
    vendor = "linux-drm"
    # Last: any DRM GPU, read from sysfs; a vendor tool, where there is one, tells more.
    auto_rank = 100
    # sysfs reads are cheap; the fdinfo walk over /proc is what costs.
    min_interval_s = 0.25

    def __init__(self, clock: Callable[[], float] = time.monotonic, sys_root: str | os.PathLike[str] = "/sys",
                 proc_root: str | os.PathLike[str] = "/proc") -> None:
        super().__init__(clock)
        self.sys_root = Path(sys_root)
        self.proc_root = Path(proc_root)
        self._cards: list[_Card] = []
        self.cards: dict[int, CardInfo] = {}
        self._presence = Presence(self.name, clock)
        # Previous counters for rates: energy (µJ) per card, engine/cycle counters per client.
        self._energy: dict[int, tuple[float, int]] = {}
        self._engines: dict[tuple[str, str], tuple[float, dict[str, int], dict[str, int], dict[str, int]]] = {}

    @classmethod
    def probe_at(cls, sys_root: str | os.PathLike[str]) -> Probe:
        try:
            cards = find_cards(sys_root)
            if not cards:
                return Probe(cls.name, False, f"no DRM GPU (amdgpu/i915/xe) under {Path(sys_root) / 'class/drm'}")
            drivers = ", ".join(sorted({c.driver or "?" for c in cards}))
            return Probe(cls.name, True, None, f"kernel {os.uname().release} ({drivers})", None)
        except Exception as e:  # never take doctor down
            return Probe(cls.name, False, f"probe failed: {type(e).__name__}: {e}")

    @classmethod
    def probe(cls) -> Probe:
        return cls.probe_at("/sys")

    def discover(self) -> list[CardInfo]:
        self._cards = find_cards(self.sys_root)
        if not self._cards:
            raise BackendUnavailable(f"no DRM GPU (amdgpu/i915/xe) under {self.sys_root / 'class/drm'}")
        self.cards = {}
        for c in self._cards:
            dev = c.dev
            name = (_read(dev / "product_name") or "").strip() or None
            if name is None:
                ue = _uevent(dev)
                name = f"{c.driver or 'drm'} {ue.get('PCI_ID', c.slot or c.drm_name)} ({c.drm_name})"
            uuid = (_read(dev / "unique_id") or "").strip() or None
            _cur, top = parse_pp_dpm(_read(dev / "pp_dpm_sclk") or "")
            if top is None:
                gt_max = _read_int(dev.parent / "gt_max_freq_mhz")
                top = float(gt_max) if gt_max is not None else None
            cap = _read_int(c.hwmon / "power1_cap") if c.hwmon else None
            width = _read_int(dev / "max_link_width")
            self.cards[c.index] = CardInfo(
                card=c.index, vendor=c.vendor, name=name, uuid=uuid,
                mem_total=_read_int(dev / "mem_info_vram_total"),
                power_limit_w=cap / 1e6 if cap else None,
                sm_clock_max_mhz=top,
                pcie_gen_max=parse_link_speed(_read(dev / "max_link_speed") or ""),
                pcie_width_max=width if width and width > 0 else None,
            )
        self._presence.set_known(self.cards)
        return list(self.cards.values())

    # -- per tick ----------------------------------------------------------------------

    def _read_card(self, c: _Card, now: float) -> CardReading | None:
        dev = c.dev
        if not dev.exists():
            return None  # unplugged / driver unbound: stale, and Presence says so
        r = CardReading(index=c.index)
        busy = _read_int(dev / "gpu_busy_percent")
        r.util = clamp_pct(float(busy)) if busy is not None else None
        r.mem_used = _read_int(dev / "mem_info_vram_used")
        r.mem_total = _read_int(dev / "mem_info_vram_total")
        hw = c.hwmon
        if hw is not None:
            p = _read_int(hw / "power1_average")
            if p is None:
                p = _read_int(hw / "power1_input")
            if p is not None and p >= 0:
                r.power_w = p / 1e6
            else:
                r.power_w = self._power_from_energy(c.index, _read_int(hw / "energy1_input"), now)
            cap = _read_int(hw / "power1_cap")
            r.power_limit_w = cap / 1e6 if cap else None
            temp = _read_int(hw / "temp1_input")
            r.temp_c = temp / 1000.0 if temp is not None else None
            f = _read_int(hw / "freq1_input")
            r.sm_clock_mhz = f / 1e6 if f is not None and f > 0 else None
        if r.sm_clock_mhz is None:
            cur, _top = parse_pp_dpm(_read(dev / "pp_dpm_sclk") or "")
            if cur is None:
                act = _read_int(dev.parent / "gt_act_freq_mhz")
                cur = float(act) if act is not None else None
            r.sm_clock_mhz = cur
        r.pcie_gen = parse_link_speed(_read(dev / "current_link_speed") or "")
        w = _read_int(dev / "current_link_width")
        r.pcie_width = w if w and w > 0 else None
        return r

    def _power_from_energy(self, card: int, uj: int | None, now: float) -> float | None:
        if uj is None:
            return None
        prev = self._energy.get(card)
        self._energy[card] = (now, uj)
        if prev is None or now <= prev[0] or uj < prev[1]:
            return None  # first read, or the counter wrapped: no rate yet
        return (uj - prev[1]) / 1e6 / (now - prev[0])

    def _scan_fdinfo(self) -> tuple[dict[tuple[str | None, str], tuple[int, DrmClient]], int]:
        """Every DRM client, keyed (pdev, client id) → (lowest pid holding it, client)."""
        clients: dict[tuple[str | None, str], tuple[int, DrmClient]] = {}
        denied = 0
        try:
            pids = sorted(int(e.name) for e in os.scandir(self.proc_root) if is_index(e.name))
        except OSError:
            return clients, 1
        for pid in pids:
            fd_dir = self.proc_root / str(pid) / "fd"
            try:
                fds = list(os.scandir(fd_dir))
            except PermissionError:
                denied += 1
                continue
            except OSError:
                continue  # exited meanwhile
            for e in fds:
                try:
                    target = os.readlink(e.path)
                except OSError:
                    continue
                if not target.startswith("/dev/dri/"):
                    continue
                text = _read(self.proc_root / str(pid) / "fdinfo" / e.name)
                if text is None:
                    denied += 1
                    continue
                try:
                    cl = parse_fdinfo(text)
                except Exception:
                    continue
                if cl is None:
                    continue
                key = (cl.pdev, cl.client_id or f"{pid}/{e.name}")
                if key not in clients:
                    clients[key] = (pid, cl)
        return clients, denied

    def _engine_util(self, key: tuple[str | None, str], cl: DrmClient, now: float,
                     busy: dict[str, float], wall: dict[str, float]) -> None:
        """Accumulate this client's busy share per engine class since the last tick."""
        prev = self._engines.get((str(key[0]), key[1]))
        self._engines[(str(key[0]), key[1])] = (now, dict(cl.engines_ns), dict(cl.cycles), dict(cl.total_cycles))
        if prev is None:
            return
        t0, ns0, cy0, tot0 = prev
        dt_ns = (now - t0) * 1e9
        if dt_ns <= 0:
            return
        for eng, ns in cl.engines_ns.items():
            if eng in ns0 and ns >= ns0[eng]:
                cap = cl.engine_capacity.get(eng, 1)
                busy[eng] = busy.get(eng, 0.0) + (ns - ns0[eng]) / cap
                wall[eng] = max(wall.get(eng, 0.0), dt_ns)
        for eng, cyc in cl.cycles.items():
            tot = cl.total_cycles.get(eng)
            if eng in cy0 and tot is not None and eng in tot0 and cyc >= cy0[eng] and tot > tot0[eng]:
                k = "cycles:" + eng
                busy[k] = busy.get(k, 0.0) + (cyc - cy0[eng])
                wall[k] = max(wall.get(k, 0.0), float(tot - tot0[eng]))

    def sample(self) -> list[CardSample]:
        if not self._cards:
            self.discover()
        now = self.clock()
        readings: dict[int, CardReading] = {}
        for c in self._cards:
            r = self._read_card(c, now)
            if r is not None:
                readings[c.index] = r
        clients, denied = self._scan_fdinfo()
        by_slot = {c.slot: c for c in self._cards if c.slot}
        procs: dict[int, dict[str, int | None]] = {c.index: {} for c in self._cards}
        busy: dict[int, dict[str, float]] = {c.index: {} for c in self._cards}
        wall: dict[int, dict[str, float]] = {c.index: {} for c in self._cards}
        for key, (pid, cl) in clients.items():
            card = by_slot.get(cl.pdev) if cl.pdev else (self._cards[0] if len(self._cards) == 1 else None)
            if card is None:
                continue
            d = procs[card.index]
            v = cl.vram_bytes()
            spid = str(pid)
            if v is not None:
                d[spid] = (d.get(spid) or 0) + v
            else:
                d.setdefault(spid, None)
            self._engine_util(key, cl, now, busy[card.index], wall[card.index])
        seen_keys = {(str(k[0]), k[1]) for k in clients}
        for k in list(self._engines):
            if k not in seen_keys:
                del self._engines[k]  # closed clients: their counters are gone
        for idx, r in readings.items():
            # Nothing found while some /proc entries were unreadable is "unknown", not "none".
            r.procs = procs[idx] if (procs[idx] or not denied) else None
            if r.util is None and busy[idx]:
                shares = [busy[idx][e] / wall[idx][e] * 100.0 for e in busy[idx] if wall[idx].get(e)]
                r.util = clamp_pct(min(max(shares), 100.0)) if shares else None
        t = self.clock()
        out = [r.to_sample(t, i, self.cards.get(i)) for i, r in sorted(readings.items())]
        self.events.extend(self._presence.update(readings))
        return out
