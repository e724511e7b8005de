"""NVIDIA cards through NVML (nvidia-ml-py's ``pynvml``), in-process.

Why in-process: one NVML call costs microseconds (the PCIe counters ~20 ms), where
``nvidia-smi`` costs a process start per poll. The price is that a bad driver can make
any call fail, so every field is read on its own: an ``NVMLError`` for one field makes
that field ``None`` and the card stays. ``NVMLError_GpuIsLost`` on any call drops the
card (one ``card_lost`` event); the other cards go on.

Functions a library or driver lacks (``AttributeError`` on the module, or
``NVMLError_FunctionNotFound`` from the driver) and fields a card does not support
(``NVMLError_NotSupported``) are remembered, so they cost one call, not one per tick.

On Hopper and newer (``nvmlGpmQueryDeviceSupport``) GPM gives what GPU-Util cannot:
SM activity, occupancy, tensor and DRAM activity, PCIe rates, each averaged over the
interval between two GPM samples (NVML asks for at least 100 ms between them).

``pynvml`` is imported lazily through ``_load_pynvml`` so that the package imports
without it and tests can put a fake in ``sys.modules["pynvml"]``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, ClassVar

from sattui.model import CardInfo, CardSample, Event
from sattui.vendors.backend import Backend, BackendUnavailable, Probe, register

# Every pynvml function this module may call. Where one replaces another, the
# preferred one comes first. tests/unit/test_vendor_nvml.py checks that each exists in
# the installed nvidia-ml-py with the parameters the fake gives it, and that this list
# covers every name the source mentions, so code, fake and library cannot drift apart.
NVML_FUNCTIONS: tuple[str, ...] = (
    "nvmlInit",
    "nvmlShutdown",
    "nvmlSystemGetDriverVersion",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetSamples",
    "nvmlDeviceGetMemoryInfo",  # with version=nvmlMemory_v2 first, then v1
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetTemperatureV",  # the old one is deprecated, to go in CUDA 14
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetCurrentClocksEventReasons",  # renamed from ...ThrottleReasons in 12.x
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetPcieThroughput",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlGpmQueryDeviceSupport",
    "nvmlGpmSampleAlloc",
    "nvmlGpmSampleGet",
    "nvmlGpmMetricsGet",
    "nvmlGpmSampleFree",
)
# Constants and structure types read from the module (each with a fallback value where
# the number is fixed by the NVML ABI, so an old pynvml that lacks the name still works).
NVML_CONSTANTS: tuple[str, ...] = (
    "nvmlMemory_v2",
    "c_nvmlGpmMetricsGet_t",
)

# NVML return codes (nvml.h; pynvml mirrors them as NVML_ERROR_*).
_SUCCESS = 0
_ERR_NO_PERMISSION = 4
_ERR_NOT_SUPPORTED = 3
_ERR_NOT_FOUND = 6
_ERR_DRIVER_NOT_LOADED = 9
_ERR_LIBRARY_NOT_FOUND = 12
_ERR_FUNCTION_NOT_FOUND = 13
_ERR_GPU_IS_LOST = 15
_ERR_LIB_RM_VERSION_MISMATCH = 18

_NVML_CLOCK_SM = 1
_NVML_TEMPERATURE_GPU = 0
_NVML_PCIE_UTIL_TX_BYTES = 0
_NVML_PCIE_UTIL_RX_BYTES = 1
_NVML_GPU_UTILIZATION_SAMPLES = 1
_NVML_GPM_METRICS_GET_VERSION = 1

# nvmlValueType_t → the member of nvmlValue_t that holds the value.
_VALUE_FIELDS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
# NVML_VALUE_NOT_AVAILABLE for an unsigned long long: what old bindings hand back
# instead of None when a process's memory is unknown (WDDM, some MIG setups).
_NOT_AVAILABLE_ULL = 2**64 - 1

# "The interval between these two nvmlGpmSampleGet() calls should be greater than
# 100ms due to the internal sample refresh rate" (NVML API reference, GPM).
GPM_MIN_INTERVAL_S = 0.1

# (CardSample field or GPM key, pynvml constant, nvmlGpmMetricId_t value)
_GPM_METRICS: tuple[tuple[str, str, int], ...] = (
    ("sm_active", "NVML_GPM_METRIC_SM_UTIL", 2),
    ("sm_occupancy", "NVML_GPM_METRIC_SM_OCCUPANCY", 3),
    ("tensor_active", "NVML_GPM_METRIC_ANY_TENSOR_UTIL", 5),
    ("dram_active", "NVML_GPM_METRIC_DRAM_BW_UTIL", 10),
    ("pcie_tx_MiBps", "NVML_GPM_METRIC_PCIE_TX_PER_SEC", 20),  # nvml.h: "in MiB/sec"
    ("pcie_rx_MiBps", "NVML_GPM_METRIC_PCIE_RX_PER_SEC", 21),
)

KIB = 1024
MIB = 1024 * 1024


def _load_pynvml() -> ModuleType:
    """The ``pynvml`` module, imported on first use (tests inject a fake via sys.modules)."""
    import pynvml  # noqa: PLC0415 - lazy on purpose: optional at import time, fakeable

    return pynvml


class _CardLost(Exception):
    """Raised inside a card's sampling when NVML says the GPU is lost."""


class _Fail:
    """The one failure marker: a call that gave nothing (distinct from a None result)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<failed>"


_FAIL: Any = _Fail()


def _text(v: Any) -> str | None:
    """NVML strings as str: old bindings return bytes, new ones str."""
    if v is None or v is _FAIL:
        return None
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace").strip("\x00").strip() or None
    return str(v).strip() or None


def _one_line(e: BaseException) -> str:
    try:
        msg = str(e)
    except Exception:  # a pynvml error's __str__ may call into the library
        msg = ""
    msg = " ".join(msg.split())
    return msg or type(e).__name__


def _error_code(nv: Any, e: BaseException) -> int | None:
    """The NVML return code of a pynvml error, None for any other exception."""
    base = getattr(nv, "NVMLError", None)
    if isinstance(base, type) and isinstance(e, base):
        code = getattr(e, "value", None)
        return code if isinstance(code, int) else None
    return None


def init_failure_reason(nv: Any, e: BaseException) -> str:
    """One line saying why ``nvmlInit`` failed, with the likely fix."""
    code = _error_code(nv, e)
    if code == getattr(nv, "NVML_ERROR_LIBRARY_NOT_FOUND", _ERR_LIBRARY_NOT_FOUND):
        return "NVIDIA driver library (libnvidia-ml.so.1) not found"
    if code == getattr(nv, "NVML_ERROR_DRIVER_NOT_LOADED", _ERR_DRIVER_NOT_LOADED):
        return "NVIDIA driver is not loaded (nvmlInit: Driver Not Loaded)"
    if code == getattr(nv, "NVML_ERROR_NO_PERMISSION", _ERR_NO_PERMISSION):
        return "no permission to use the NVIDIA driver (/dev/nvidia*): nvmlInit: Insufficient Permissions"
    if code == getattr(nv, "NVML_ERROR_LIB_RM_VERSION_MISMATCH", _ERR_LIB_RM_VERSION_MISMATCH):
        return "NVIDIA driver and libnvidia-ml versions differ (reboot, or reload the nvidia kernel module)"
    if isinstance(e, AttributeError):
        return "the pynvml module has no nvmlInit: another package shadows nvidia-ml-py"
    return f"nvmlInit failed: {_one_line(e)}"


@dataclass
class _Gpm:
    """One card's pair of GPM sample buffers: ``prev`` holds the older snapshot."""

    prev: Any
    cur: Any
    t_prev: float
    primed: bool
    values: dict[str, float] = field(default_factory=dict)


@register
class NvmlBackend(Backend):
    """NVIDIA GPUs through NVML: every tick reads only what a ``CardSample`` holds."""

    name: ClassVar[str] = "nvml"
    vendor: ClassVar[str] = "nvidia"
    # First: in-process, no tool to start, and the richest source there is.
    auto_rank: ClassVar[int | None] = 10
    # NVML calls are cheap, but the two PCIe counters each wait ~20 ms per card.
    min_interval_s = 0.2

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time) -> None:
        super().__init__(clock)
        # NVML time-stamps its utilization samples in µs on the wall clock.
        self.wall_clock = wall_clock
        self._nv: Any = None
        self._initialised = False
        # The poller samples on its own thread; close() must not free GPM buffers or
        # shut NVML down in the middle of a sample.
        self._lock = threading.Lock()
        self._cards: list[CardInfo] = []
        self._handles: dict[int, Any] = {}
        self._names: dict[int, str | None] = {}
        self._lost: set[int] = set()
        self._missing: set[str] = set()  # call keys the library or driver lacks
        self._unsupported: set[tuple[int, str]] = set()  # (card, call key) NotSupported
        # Last seen time stamp (µs) of each card's utilization samples; 0 until the
        # first answer, so that the series never depends on which clock NVML stamps
        # with. Samples older than discovery (``_since_us``) are history we did not
        # watch and are dropped from the first answer only.
        self._util_ts: dict[int, int] = {}
        self._since_us: dict[int, int] = {}
        self._util_primed: set[int] = set()
        self._gpm: dict[int, _Gpm] = {}
        # The last error of each call that failed, "card:key" → message (a card with no
        # handle is reported with it).
        self.failures: dict[str, str] = {}

    # -- availability -------------------------------------------------------------

    @classmethod
    def probe(cls) -> Probe:
        try:
            nv = _load_pynvml()
        except ImportError:
            return Probe(cls.name, False, "nvidia-ml-py (pynvml) is not installed: pip install nvidia-ml-py")
        except Exception as e:  # a broken module must not take doctor down
            return Probe(cls.name, False, f"pynvml failed to import: {type(e).__name__}: {_one_line(e)}")
        try:
            nv.nvmlInit()
        except Exception as e:
            return Probe(cls.name, False, init_failure_reason(nv, e))
        # NVML counts nvmlInit calls: a probe always gives its own one back.
        try:
            count = int(nv.nvmlDeviceGetCount())
            try:
                version = _text(nv.nvmlSystemGetDriverVersion())
            except Exception:
                version = None
        except Exception as e:
            return Probe(cls.name, False, f"NVML could not count the GPUs: {_one_line(e)}")
        finally:
            try:
                nv.nvmlShutdown()
            except Exception:
                pass
        if count == 0:
            return Probe(cls.name, False, "NVML sees no NVIDIA GPU", version=version)
        return Probe(cls.name, True, f"{count} GPU{'s' if count != 1 else ''}", version=version)

    def _start(self) -> Any:
        if self._initialised:
            return self._nv
        try:
            nv = _load_pynvml()
        except ImportError:
            raise BackendUnavailable("nvidia-ml-py (pynvml) is not installed: pip install nvidia-ml-py") from None
        try:
            nv.nvmlInit()
        except Exception as e:
            raise BackendUnavailable(init_failure_reason(nv, e)) from None
        self._nv = nv
        self._initialised = True
        return nv

    # -- one guarded call ---------------------------------------------------------

    def _call(self, card: int, fname: str, *args: Any, key: str | None = None,
              quiet: dict[int, Any] | None = None, **kwargs: Any) -> Any:
        """``pynvml.<fname>(*args)``, or ``_FAIL``. Raises ``_CardLost`` only.

        ``key`` names what is remembered as missing/unsupported when one function
        serves several reads (memory v2 vs v1). ``quiet`` maps return codes that mean
        "nothing new" (NVML_ERROR_NOT_FOUND for samples) to the value to return.
        """
        key = key or fname
        if key in self._missing or (card, key) in self._unsupported:
            return _FAIL
        fn = getattr(self._nv, fname, None)
        if not callable(fn):
            self._missing.add(key)  # an older nvidia-ml-py
            return _FAIL
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            code = _error_code(self._nv, e)
            if code == _ERR_GPU_IS_LOST:
                raise _CardLost from e
            if quiet is not None and code in quiet:
                return quiet[code]
            if code == _ERR_FUNCTION_NOT_FOUND or isinstance(e, TypeError):
                # The driver lacks the symbol, or this binding takes other arguments:
                # neither changes while we run.
                self._missing.add(key)
            elif code == _ERR_NOT_SUPPORTED:
                self._unsupported.add((card, key))
            self.failures[f"{card}:{key}"] = f"{type(e).__name__}: {_one_line(e)}"
            return _FAIL

    def _const(self, name: str, default: int) -> int:
        v = getattr(self._nv, name, default)
        return v if isinstance(v, int) else default

    # -- discover -----------------------------------------------------------------

    def discover(self) -> list[CardInfo]:
        with self._lock:
            if self._cards:
                return list(self._cards)
            nv = self._start()
            try:
                count = int(nv.nvmlDeviceGetCount())
            except Exception as e:
                raise BackendUnavailable(f"NVML could not count the GPUs: {_one_line(e)}") from None
            if count == 0:
                raise BackendUnavailable("NVML sees no NVIDIA GPU")
            now, wall = self.clock(), self.wall_clock()
            for i in range(count):
                try:
                    info = self._discover_card(i, now, wall)
                except _CardLost:
                    self._mark_lost(i, now)
                    continue
                if info is not None:
                    self._cards.append(info)
            if not self._cards:
                raise BackendUnavailable(f"NVML sees {count} GPU{'s' if count != 1 else ''} but none can be read")
            return list(self._cards)

    def _discover_card(self, i: int, now: float, wall: float) -> CardInfo | None:
        handle = self._call(i, "nvmlDeviceGetHandleByIndex", i)
        if handle is _FAIL:
            why = self.failures.get(f"{i}:nvmlDeviceGetHandleByIndex", "no handle")
            self.events.append(Event(now, "card_unreadable", f"card {i}: NVML gives no handle ({why})", {"card": i}))
            return None
        self._handles[i] = handle
        name = _text(self._call(i, "nvmlDeviceGetName", handle))
        self._names[i] = name
        uuid = _text(self._call(i, "nvmlDeviceGetUUID", handle))
        mem = self._memory(i, handle)
        limit = self._call(i, "nvmlDeviceGetEnforcedPowerLimit", handle)
        clk_max = self._call(i, "nvmlDeviceGetMaxClockInfo", handle, self._const("NVML_CLOCK_SM", _NVML_CLOCK_SM))
        gen_max = self._call(i, "nvmlDeviceGetMaxPcieLinkGeneration", handle)
        width_max = self._call(i, "nvmlDeviceGetMaxPcieLinkWidth", handle)
        self._util_ts[i] = 0
        self._since_us[i] = int(wall * 1e6)
        self._gpm_setup(i, handle, now)
        return CardInfo(
            card=i,
            vendor=self.vendor,
            name=name,
            uuid=uuid,
            mem_total=mem[1] if mem is not None else None,
            power_limit_w=None if limit is _FAIL else float(limit) / 1000.0,
            sm_clock_max_mhz=None if clk_max is _FAIL else float(clk_max),
            pcie_gen_max=None if gen_max is _FAIL else int(gen_max),
            pcie_width_max=None if width_max is _FAIL else int(width_max),
        )

    def _gpm_setup(self, i: int, handle: Any, now: float) -> None:
        sup = self._call(i, "nvmlGpmQueryDeviceSupport", handle)
        if sup is _FAIL or not getattr(sup, "isSupportedDevice", 0) or not hasattr(self._nv, "c_nvmlGpmMetricsGet_t"):
            return
        a = self._call(i, "nvmlGpmSampleAlloc")
        b = self._call(i, "nvmlGpmSampleAlloc") if a is not _FAIL else _FAIL
        if b is _FAIL:
            if a is not _FAIL:
                self._free_gpm_sample(a)
            return
        g = _Gpm(prev=a, cur=b, t_prev=now, primed=False)
        self._gpm[i] = g
        # The first snapshot now, so the first tick already spans >= 100 ms.
        g.primed = self._call(i, "nvmlGpmSampleGet", handle, a) is not _FAIL

    # -- sample -------------------------------------------------------------------

    def sample(self) -> list[CardSample]:
        with self._lock:
            if not self._initialised:
                return []
            now = self.clock()
            out: list[CardSample] = []
            for info in self._cards:
                i = info.card
                if i in self._lost:
                    continue
                try:
                    out.append(self._sample_card(info, now))
                except _CardLost:
                    self._mark_lost(i, now)
            return out

    def _mark_lost(self, i: int, now: float) -> None:
        if i in self._lost:
            return
        self._lost.add(i)
        name = self._names.get(i) or "unknown name"
        self.events.append(Event(now, "card_lost", f"card {i} ({name}) lost: GPU is lost", {"card": i}))

    def _guard(self, i: int, what: str, fn: Callable[[], None]) -> None:
        """Run one group of reads; a surprise in decoding leaves its fields None."""
        try:
            fn()
        except _CardLost:
            raise
        except Exception as e:
            self.failures[f"{i}:{what}"] = f"{type(e).__name__}: {_one_line(e)}"

    def _sample_card(self, info: CardInfo, now: float) -> CardSample:
        i = info.card
        h = self._handles[i]
        # Maximum SM clock and total memory are properties of the part: the values
        # from discovery stay true when a later read fails.
        s = CardSample(t=now, card=i, mem_total=info.mem_total, sm_clock_max_mhz=info.sm_clock_max_mhz)
        gpm: dict[str, float] = {}

        def do_gpm() -> None:
            gpm.update(self._gpm_tick(i, h, now))
            s.sm_active = gpm.get("sm_active")
            s.sm_occupancy = gpm.get("sm_occupancy")
            s.tensor_active = gpm.get("tensor_active")
            s.dram_active = gpm.get("dram_active")

        def do_util() -> None:
            subs = self._util_samples(i, h)
            if subs:
                # Their mean: a 0.5 s poll of GPU-Util alone would see one of them.
                s.util = sum(subs) / len(subs)
                return
            u = self._call(i, "nvmlDeviceGetUtilizationRates", h)
            if u is not _FAIL:
                s.util = float(u.gpu)

        def do_memory() -> None:
            mem = self._memory(i, h)
            if mem is not None:
                s.mem_used, s.mem_total = mem

        def do_power() -> None:
            p = self._call(i, "nvmlDeviceGetPowerUsage", h)
            if p is not _FAIL:
                s.power_w = float(p) / 1000.0  # mW
            lim = self._call(i, "nvmlDeviceGetEnforcedPowerLimit", h)
            if lim is not _FAIL:
                s.power_limit_w = float(lim) / 1000.0  # mW; the limit can be changed at run time

        def do_temp() -> None:
            sensor = self._const("NVML_TEMPERATURE_GPU", _NVML_TEMPERATURE_GPU)
            tc = self._call(i, "nvmlDeviceGetTemperatureV", h, sensor)
            if tc is _FAIL:
                tc = self._call(i, "nvmlDeviceGetTemperature", h, sensor)
            if tc is not _FAIL:
                s.temp_c = float(tc)

        def do_clocks() -> None:
            c = self._call(i, "nvmlDeviceGetClockInfo", h, self._const("NVML_CLOCK_SM", _NVML_CLOCK_SM))
            if c is not _FAIL:
                s.sm_clock_mhz = float(c)
            r = self._call(i, "nvmlDeviceGetCurrentClocksEventReasons", h)
            if r is _FAIL:
                r = self._call(i, "nvmlDeviceGetCurrentClocksThrottleReasons", h)
            if r is not _FAIL:
                s.clock_reasons = int(r)

        def do_pcie() -> None:
            if "pcie_tx_MiBps" in gpm and "pcie_rx_MiBps" in gpm:
                # GPM's rates average the whole interval; the legacy counter is a 20 ms
                # snapshot that also blocks for those 20 ms, twice per card.
                s.pcie_tx_Bps = gpm["pcie_tx_MiBps"] * MIB
                s.pcie_rx_Bps = gpm["pcie_rx_MiBps"] * MIB
            else:
                tx = self._call(i, "nvmlDeviceGetPcieThroughput", h,
                                self._const("NVML_PCIE_UTIL_TX_BYTES", _NVML_PCIE_UTIL_TX_BYTES))
                rx = self._call(i, "nvmlDeviceGetPcieThroughput", h,
                                self._const("NVML_PCIE_UTIL_RX_BYTES", _NVML_PCIE_UTIL_RX_BYTES))
                s.pcie_tx_Bps = None if tx is _FAIL else float(tx) * KIB  # KB/s
                s.pcie_rx_Bps = None if rx is _FAIL else float(rx) * KIB
            g = self._call(i, "nvmlDeviceGetCurrPcieLinkGeneration", h)
            w = self._call(i, "nvmlDeviceGetCurrPcieLinkWidth", h)
            s.pcie_gen = None if g is _FAIL else int(g)
            s.pcie_width = None if w is _FAIL else int(w)

        def do_procs() -> None:
            s.procs = self._procs(i, h)

        # GPM first: the PCIe reading depends on whether it gave rates.
        for what, fn in (("gpm", do_gpm), ("util", do_util), ("memory", do_memory), ("power", do_power),
                         ("temp", do_temp), ("clocks", do_clocks), ("pcie", do_pcie), ("procs", do_procs)):
            self._guard(i, what, fn)
        return s

    # -- field helpers ------------------------------------------------------------

    def _memory(self, i: int, h: Any) -> tuple[int, int] | None:
        """(used, total) bytes. v2's ``used`` leaves out the driver's reserved memory."""
        m = _FAIL
        v2 = getattr(self._nv, "nvmlMemory_v2", None)
        if v2 is not None:
            m = self._call(i, "nvmlDeviceGetMemoryInfo", h, version=v2, key="nvmlDeviceGetMemoryInfo_v2")
        if m is _FAIL:
            m = self._call(i, "nvmlDeviceGetMemoryInfo", h)
        if m is _FAIL:
            return None
        return int(m.used), int(m.total)

    def _util_samples(self, i: int, h: Any) -> list[float]:
        """GPU-Util samples (NVML takes one every 1/6–1 s) newer than the last ones seen."""
        kind = self._const("NVML_GPU_UTILIZATION_SAMPLES", _NVML_GPU_UTILIZATION_SAMPLES)
        not_found = self._const("NVML_ERROR_NOT_FOUND", _ERR_NOT_FOUND)
        res = self._call(i, "nvmlDeviceGetSamples", h, kind, self._util_ts[i], quiet={not_found: (None, [])})
        if res is _FAIL:
            return []
        vtype, raw = res
        member = _VALUE_FIELDS.get(int(vtype) if vtype is not None else 1, "uiVal")
        last = self._util_ts[i]
        pts: list[tuple[int, float]] = []
        for smp in raw:
            ts = int(smp.timeStamp)
            if ts <= last:
                continue  # NVML should not return these; a stale repeat must not count twice
            v = float(getattr(smp.sampleValue, member))
            if math.isfinite(v):
                pts.append((ts, v))
        if not pts:
            return []
        pts.sort()
        newest = pts[-1][0]
        self._util_ts[i] = newest
        if i not in self._util_primed:
            # NVML time stamps are µs on the wall clock (what NVIDIA's own tools pass
            # as lastSeenTimeStamp): the first answer's samples from before discovery
            # are history we did not watch.
            self._util_primed.add(i)
            pts = [p for p in pts if p[0] > self._since_us[i]]
        return [v for _, v in pts]

    def _procs(self, i: int, h: Any) -> dict[str, int | None] | None:
        res = _FAIL
        for fname in ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
                      "nvmlDeviceGetComputeRunningProcesses"):
            res = self._call(i, fname, h)
            if res is not _FAIL:
                break
        if res is _FAIL:
            return None
        out: dict[str, int | None] = {}
        for p in res:
            used = getattr(p, "usedGpuMemory", None)
            used = None if used is None or int(used) == _NOT_AVAILABLE_ULL else int(used)
            out[str(int(p.pid))] = used
        return out

    def _gpm_tick(self, i: int, h: Any, now: float) -> dict[str, float]:
        g = self._gpm.get(i)
        if g is None:
            return {}
        if not g.primed:
            g.primed = self._call(i, "nvmlGpmSampleGet", h, g.prev) is not _FAIL
            g.t_prev = now
            return {}
        if now - g.t_prev < GPM_MIN_INTERVAL_S:
            # Too soon for a new snapshot: the last interval's figures are the latest
            # measurement there is.
            return dict(g.values)
        if self._call(i, "nvmlGpmSampleGet", h, g.cur) is _FAIL:
            g.values = {}
            return {}
        mg = self._nv.c_nvmlGpmMetricsGet_t()
        mg.version = self._const("NVML_GPM_METRICS_GET_VERSION", _NVML_GPM_METRICS_GET_VERSION)
        mg.numMetrics = len(_GPM_METRICS)
        mg.sample1 = g.prev
        mg.sample2 = g.cur
        for k, (_, const, default) in enumerate(_GPM_METRICS):
            mg.metrics[k].metricId = self._const(const, default)
        # The newer snapshot is the baseline of the next interval, whatever comes next.
        g.prev, g.cur = g.cur, g.prev
        g.t_prev = now
        values: dict[str, float] = {}
        if self._call(i, "nvmlGpmMetricsGet", mg) is not _FAIL:
            for k, (key, _, _) in enumerate(_GPM_METRICS):
                m = mg.metrics[k]
                v = float(m.value)
                if int(m.nvmlReturn) == _SUCCESS and math.isfinite(v):
                    values[key] = v
        g.values = values
        return dict(values)

    # -- close --------------------------------------------------------------------

    def _free_gpm_sample(self, buf: Any) -> None:
        fn = getattr(self._nv, "nvmlGpmSampleFree", None)
        if callable(fn):
            try:
                fn(buf)
            except Exception:
                pass

    def close(self) -> None:
        with self._lock:
            if self._nv is None:
                return
            for g in self._gpm.values():
                self._free_gpm_sample(g.prev)
                self._free_gpm_sample(g.cur)
            self._gpm.clear()
            if self._initialised:
                self._initialised = False
                try:
                    self._nv.nvmlShutdown()
                except Exception:
                    pass
