"""A fake ``pynvml`` (nvidia-ml-py) module: configurable cards, injectable failures.

Put it in place with ``monkeypatch.setitem(sys.modules, "pynvml", fake)``. It carries
only what ``sattui.vendors.nvml`` calls, with the parameter names of the real module
(tests/unit/test_vendor_nvml.py compares both with the installed nvidia-ml-py, and the
constants and error codes too), so a change on either side shows up as a test failure.

What it mimics of the real library, because the backend must cope with it:
- every call needs ``nvmlInit`` first; init is counted and ``nvmlShutdown`` gives one back;
- ``NVMLError(code)`` returns the subclass for that code, each with ``.value``;
- ``nvmlDeviceGetSamples`` raises NOT_FOUND when nothing is newer than the time stamp
  given;
- the unversioned process query raises ``NVMLLibraryMismatchError`` where the v3 symbol
  is missing (pynvml's ``throwOnVersionMismatch``);
- a lost GPU raises ``NVMLError_GpuIsLost`` on every call that names its handle;
- GPM samples are buffers the caller must free; double frees and leaks are counted.

With ``real_structs=True`` results are built from the real ctypes structures of the
installed pynvml (and its error classes are used), so the backend's reading of
``c_nvmlGpmMetricsGet_t``, unions and friendly objects runs against the real types.
"""

from __future__ import annotations

import ctypes
import functools
import time
import types
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# -- constants (values of nvidia-ml-py 13.x; the tests check them against the real one)

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_UNKNOWN = 999

NVML_CLOCK_SM = 1
NVML_TEMPERATURE_GPU = 0
NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1
NVML_GPU_UTILIZATION_SAMPLES = 1
NVML_VALUE_TYPE_DOUBLE = 0
NVML_VALUE_TYPE_UNSIGNED_INT = 1
nvmlMemory_v2 = 0x02000028

NVML_GPM_METRICS_GET_VERSION = 1
NVML_GPM_SUPPORT_VERSION = 1
NVML_GPM_METRIC_GRAPHICS_UTIL = 1
NVML_GPM_METRIC_SM_UTIL = 2
NVML_GPM_METRIC_SM_OCCUPANCY = 3
NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
NVML_GPM_METRIC_DRAM_BW_UTIL = 10
NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20
NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21
NVML_GPM_METRIC_MAX = 477

CONSTANT_NAMES = tuple(n for n in dict(globals()) if n.startswith(("NVML_", "nvmlMemory_")))


# -- errors (the same shape as pynvml's: NVMLError(code) gives the subclass) ---------

class NVMLError(Exception):
    _valClassMapping: dict[int, type] = {}
    _errcode_to_string = {
        NVML_ERROR_UNINITIALIZED: "Uninitialized",
        NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
        NVML_ERROR_NOT_SUPPORTED: "Not Supported",
        NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
        NVML_ERROR_NOT_FOUND: "Not Found",
        NVML_ERROR_INSUFFICIENT_SIZE: "Insufficient Size",
        NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
        NVML_ERROR_TIMEOUT: "Timeout",
        NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
        NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
        NVML_ERROR_GPU_IS_LOST: "GPU is lost",
        NVML_ERROR_RESET_REQUIRED: "GPU requires restart",
        NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
        NVML_ERROR_UNKNOWN: "Unknown Error",
    }
    value: int

    def __new__(cls, value: int = NVML_ERROR_UNKNOWN) -> NVMLError:
        if cls is NVMLError:
            cls = NVMLError._valClassMapping.get(value, cls)
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __str__(self) -> str:
        return self._errcode_to_string.get(self.value, f"NVML Error with code {self.value}")

    def __eq__(self, other: object) -> bool:  # as pynvml: compares codes (and so is unhashable)
        return isinstance(other, NVMLError) and self.value == other.value


def _error_class(name: str, code: int) -> type[NVMLError]:
    def new(cls: type, *args: Any) -> NVMLError:
        return NVMLError.__new__(cls, code)

    cls = type(name, (NVMLError,), {"__new__": new, "__module__": __name__})
    NVMLError._valClassMapping[code] = cls
    return cls


NVMLError_Uninitialized = _error_class("NVMLError_Uninitialized", NVML_ERROR_UNINITIALIZED)
NVMLError_InvalidArgument = _error_class("NVMLError_InvalidArgument", NVML_ERROR_INVALID_ARGUMENT)
NVMLError_NotSupported = _error_class("NVMLError_NotSupported", NVML_ERROR_NOT_SUPPORTED)
NVMLError_NoPermission = _error_class("NVMLError_NoPermission", NVML_ERROR_NO_PERMISSION)
NVMLError_NotFound = _error_class("NVMLError_NotFound", NVML_ERROR_NOT_FOUND)
NVMLError_InsufficientSize = _error_class("NVMLError_InsufficientSize", NVML_ERROR_INSUFFICIENT_SIZE)
NVMLError_DriverNotLoaded = _error_class("NVMLError_DriverNotLoaded", NVML_ERROR_DRIVER_NOT_LOADED)
NVMLError_Timeout = _error_class("NVMLError_Timeout", NVML_ERROR_TIMEOUT)
NVMLError_LibraryNotFound = _error_class("NVMLError_LibraryNotFound", NVML_ERROR_LIBRARY_NOT_FOUND)
NVMLError_FunctionNotFound = _error_class("NVMLError_FunctionNotFound", NVML_ERROR_FUNCTION_NOT_FOUND)
NVMLError_GpuIsLost = _error_class("NVMLError_GpuIsLost", NVML_ERROR_GPU_IS_LOST)
NVMLError_ResetRequired = _error_class("NVMLError_ResetRequired", NVML_ERROR_RESET_REQUIRED)
NVMLError_LibRmVersionMismatch = _error_class("NVMLError_LibRmVersionMismatch", NVML_ERROR_LIB_RM_VERSION_MISMATCH)
NVMLError_ArgumentVersionMismatch = _error_class("NVMLError_ArgumentVersionMismatch",
                                                 NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
NVMLError_Unknown = _error_class("NVMLError_Unknown", NVML_ERROR_UNKNOWN)

ERROR_CLASS_NAMES = tuple(n for n in dict(globals()) if n.startswith("NVMLError_"))


class NVMLLibraryMismatchError(Exception):
    """pynvml raises this (not an NVMLError) from unversioned calls on an older driver."""


# -- plain result objects (the attribute names of pynvml's structures) ---------------

class _Obj(types.SimpleNamespace):
    pass


class FakeHandle:
    """What nvmlDeviceGetHandleByIndex returns (pynvml: a c_nvmlDevice_t pointer)."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<FakeHandle {self.index}>"


class FakeGpmSample:
    """An opaque GPM sample buffer (pynvml: POINTER(struct_c_nvmlGpmSample_t))."""


class _FakeGpmMetric:
    def __init__(self) -> None:
        self.metricId = 0
        self.nvmlReturn = 0
        self.value = 0.0


class c_nvmlGpmMetricsGet_t:  # noqa: N801 - the name pynvml gives it
    """Fields as pynvml's structure: version, numMetrics, sample1, sample2, metrics[]."""

    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: Any = None
        self.sample2: Any = None
        self.metrics = [_FakeGpmMetric() for _ in range(NVML_GPM_METRIC_MAX)]


# -- the cards -----------------------------------------------------------------------

@dataclass
class FakeDevice:
    """One card's values in NVML's own units (mW, KB/s, MHz, bytes, %)."""

    name: str | bytes = "NVIDIA H200"
    uuid: str | bytes = "GPU-00000000-0000-0000-0000-000000000000"
    util_gpu: int = 98
    util_mem: int = 40
    # (wall-clock µs, %) as NVML's sample buffer holds them
    util_samples: list[tuple[int, int]] = field(default_factory=list)
    mem_total: int = 150_754_820_096
    mem_used: int = 71_000_000_000  # v2 "used": without the driver's reserved memory
    mem_reserved: int = 600_000_000
    mem_v2: bool = True  # False: a driver without nvmlDeviceGetMemoryInfo_v2
    power_mw: int = 690_000
    power_limit_mw: int = 700_000
    temp_c: int = 71
    sm_clock_mhz: int = 1755
    sm_clock_max_mhz: int = 1980
    clock_reasons: int = 0x4  # SwPowerCap
    pcie_tx_kBps: int = 97_656
    pcie_rx_kBps: int = 1_953_125
    pcie_gen: int = 5
    pcie_width: int = 16
    pcie_gen_max: int = 5
    pcie_width_max: int = 16
    procs: list[tuple[int, int | None]] = field(default_factory=lambda: [(4242, 70_000_000_000)])
    gpm_supported: bool = True
    gpm: dict[int, float] = field(default_factory=lambda: {
        NVML_GPM_METRIC_SM_UTIL: 85.0,
        NVML_GPM_METRIC_SM_OCCUPANCY: 40.0,
        NVML_GPM_METRIC_ANY_TENSOR_UTIL: 35.0,
        NVML_GPM_METRIC_DRAM_BW_UTIL: 30.0,
        NVML_GPM_METRIC_PCIE_TX_PER_SEC: 95.0,
        NVML_GPM_METRIC_PCIE_RX_PER_SEC: 1900.0,
    })
    # failure state
    lost: bool = False
    lose_after: int | None = None  # calls naming this card still answered before it is lost


def h200(**kw: Any) -> FakeDevice:
    """A Hopper card: GPM supported."""
    return FakeDevice(**kw)


def a100(**kw: Any) -> FakeDevice:
    """An Ampere card: no GPM, so no SM activity from NVML alone."""
    base: dict[str, Any] = dict(
        name="NVIDIA A100-SXM4-80GB", uuid="GPU-11111111-2222-3333-4444-555555555555",
        util_gpu=35, util_mem=12, mem_total=85_899_345_920, mem_used=20_000_000_000, mem_reserved=500_000_000,
        power_mw=210_500, power_limit_mw=400_000, temp_c=48, sm_clock_mhz=1410,
        sm_clock_max_mhz=1410, clock_reasons=0x1, pcie_tx_kBps=1_000, pcie_rx_kBps=250_000, pcie_gen=4,
        pcie_width=16, pcie_gen_max=4, pcie_width_max=16, procs=[(5151, 19_000_000_000), (5152, None)],
        gpm_supported=False, gpm={},
    )
    base.update(kw)
    return FakeDevice(**base)


class FakeClock:
    """One fake time for both the backend's monotonic clock and NVML's wall clock."""

    WALL0 = 1_780_000_000.0

    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def wall(self) -> float:
        return self.WALL0 + self.t

    def advance(self, dt: float) -> None:
        self.t += dt


@dataclass
class _Failure:
    make: Callable[[], BaseException]
    times: int | None  # None: every call


@dataclass
class _GpmState:
    device: int | None = None
    t: float | None = None


# -- the module ----------------------------------------------------------------------

class FakePynvml(types.ModuleType):
    """A module object standing in for ``pynvml``.

    Configure cards with ``devices``; make calls fail with ``fail``, lose a card with
    ``lose_gpu``, simulate an older nvidia-ml-py with ``remove``, make ``nvmlInit`` fail
    with ``init_error``. ``calls`` counts calls by name; ``init_count`` is NVML's
    reference count; ``gpm_allocated`` holds the GPM buffers not yet freed.
    """

    def __init__(self, devices: list[FakeDevice] | None = None, clock: FakeClock | None = None,
                 real_structs: bool = False) -> None:
        super().__init__("pynvml")
        self.devices = devices if devices is not None else [h200(), a100()]
        self.clock = clock or FakeClock(time.monotonic())
        self.real_structs = real_structs
        self.driver_version: str | bytes = "570.124.06"
        self.init_error: type[BaseException] | BaseException | None = None
        self.init_count = 0
        self.calls: Counter[str] = Counter()
        self.gpm_allocated: dict[int, Any] = {}
        self.gpm_double_free = 0
        self.gpm_short_intervals = 0
        self._gpm_state: dict[int, _GpmState] = {}
        self._gpm_keepalive: dict[int, Any] = {}
        self._failures: dict[tuple[str, int | None], _Failure] = {}

        g = globals()
        for n in CONSTANT_NAMES:
            setattr(self, n, g[n])
        if real_structs:
            import pynvml as real  # the installed nvidia-ml-py, for its ctypes types and errors

            self._real = real
            for n in ("NVMLError", *ERROR_CLASS_NAMES, "NVMLLibraryMismatchError"):
                setattr(self, n, getattr(real, n))
            self.c_nvmlGpmMetricsGet_t = real.c_nvmlGpmMetricsGet_t
        else:
            self._real = None
            for n in ("NVMLError", *ERROR_CLASS_NAMES, "NVMLLibraryMismatchError"):
                setattr(self, n, g[n])
            self.c_nvmlGpmMetricsGet_t = c_nvmlGpmMetricsGet_t

        for attr in dir(type(self)):
            if attr.startswith("_nvml"):
                self._install(attr[1:], getattr(self, attr))

    # -- test controls --

    def fail(self, name: str, error: type[BaseException] | BaseException, card: int | None = None,
             times: int | None = None) -> None:
        """Make ``name`` raise ``error`` (for one card, or all; ``times`` calls, or always).

        ``nvmlDeviceGetMemoryInfo_v2`` names the versioned memory query on its own.
        An error class given by its fake name is mapped to the real one in real mode.
        """
        err = error
        if self.real_structs and isinstance(error, type) and error.__module__ == __name__:
            err = getattr(self._real, error.__name__)

        def make() -> BaseException:
            return err() if isinstance(err, type) else err

        self._failures[(name, card)] = _Failure(make, times)

    def lose_gpu(self, card: int, after_calls: int = 0) -> None:
        """Card ``card`` answers ``after_calls`` more calls, then is lost for good."""
        self.devices[card].lose_after = after_calls

    def remove(self, name: str) -> None:
        """Drop a function, as an older nvidia-ml-py would not have it."""
        self.__dict__.pop(name, None)

    def push_util_samples(self, card: int, values: list[int], period_s: float = 1 / 6) -> None:
        """Append GPU-Util samples ending at the current wall time, ``period_s`` apart."""
        end = self.clock.wall()
        n = len(values)
        for k, v in enumerate(values):
            ts = int(round((end - (n - 1 - k) * period_s) * 1e6))
            self.devices[card].util_samples.append((ts, v))

    # -- plumbing --

    def _install(self, name: str, impl: Callable[..., Any]) -> None:
        @functools.wraps(impl)
        def api(*args: Any, **kwargs: Any) -> Any:
            return self._dispatch(name, impl, args, kwargs)

        self.__dict__[name] = api

    def _err(self, code: int) -> BaseException:
        return self.NVMLError(code)

    def _dispatch(self, name: str, impl: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        self.calls[name] += 1
        if name != "nvmlInit" and self.init_count <= 0:
            raise self._err(NVML_ERROR_UNINITIALIZED)
        card = next((a.index for a in args if isinstance(a, FakeHandle)), None)
        if card is None and name == "nvmlDeviceGetHandleByIndex" and args:
            card = int(args[0])
        if card is not None and 0 <= card < len(self.devices):
            d = self.devices[card]
            if d.lose_after is not None:
                if d.lose_after <= 0:
                    d.lost = True
                d.lose_after -= 1
            if d.lost:
                raise self._err(NVML_ERROR_GPU_IS_LOST)
        self._maybe_fail(name, card)
        return impl(*args, **kwargs)

    def _maybe_fail(self, name: str, card: int | None) -> None:
        f = self._failures.get((name, card)) or self._failures.get((name, None))
        if f is None:
            return
        if f.times is not None:
            if f.times <= 0:
                return
            f.times -= 1
        raise f.make()

    def _dev(self, handle: Any) -> FakeDevice:
        if not isinstance(handle, FakeHandle) or not 0 <= handle.index < len(self.devices):
            raise self._err(NVML_ERROR_INVALID_ARGUMENT)
        return self.devices[handle.index]

    # -- the API (parameter names as in pynvml; each is installed without the "_") --

    def _nvmlInit(self) -> None:
        if self.init_error is not None:
            e = self.init_error
            if self.real_structs and isinstance(e, type) and e.__module__ == __name__:
                e = getattr(self._real, e.__name__)
            raise e() if isinstance(e, type) else e
        self.init_count += 1

    def _nvmlShutdown(self) -> None:
        self.init_count -= 1

    def _nvmlSystemGetDriverVersion(self) -> str | bytes:
        return self.driver_version

    def _nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def _nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        if not 0 <= index < len(self.devices):
            raise self._err(NVML_ERROR_INVALID_ARGUMENT)
        return FakeHandle(index)

    def _nvmlDeviceGetName(self, handle: Any) -> str | bytes:
        return self._dev(handle).name

    def _nvmlDeviceGetUUID(self, handle: Any) -> str | bytes:
        return self._dev(handle).uuid

    def _nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        d = self._dev(handle)
        if self._real is not None:
            return self._real.c_nvmlUtilization_t(gpu=d.util_gpu, memory=d.util_mem)
        return _Obj(gpu=d.util_gpu, memory=d.util_mem)

    def _nvmlDeviceGetSamples(self, device: Any, sampling_type: int, timeStamp: int) -> tuple[int, list]:  # noqa: N803
        d = self._dev(device)
        if sampling_type != NVML_GPU_UTILIZATION_SAMPLES:
            raise self._err(NVML_ERROR_NOT_SUPPORTED)
        new = sorted(s for s in d.util_samples if s[0] > timeStamp)
        if not new:
            raise self._err(NVML_ERROR_NOT_FOUND)  # NVML: "sample entries are not found"
        out = []
        for ts, v in new:
            if self._real is not None:
                smp = self._real.c_nvmlSample_t()
                smp.timeStamp = ts
                smp.sampleValue.uiVal = v
            else:
                smp = _Obj(timeStamp=ts, sampleValue=_Obj(uiVal=v))
            out.append(smp)
        return NVML_VALUE_TYPE_UNSIGNED_INT, out

    def _nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:
        d = self._dev(handle)
        if version:
            if not d.mem_v2:
                raise self._err(NVML_ERROR_FUNCTION_NOT_FOUND)  # no nvmlDeviceGetMemoryInfo_v2 symbol
            if version != nvmlMemory_v2:
                raise self._err(NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            self._maybe_fail("nvmlDeviceGetMemoryInfo_v2", handle.index)
            free = d.mem_total - d.mem_used - d.mem_reserved
            if self._real is not None:
                m = self._real.c_nvmlMemory_v2_t()
                m.version, m.total, m.reserved, m.free, m.used = version, d.mem_total, d.mem_reserved, free, d.mem_used
                return m
            return _Obj(version=version, total=d.mem_total, reserved=d.mem_reserved, free=free, used=d.mem_used)
        used = d.mem_used + d.mem_reserved  # v1 counts the reserved memory as used
        if self._real is not None:
            m1 = self._real.c_nvmlMemory_t()
            m1.total, m1.free, m1.used = d.mem_total, d.mem_total - used, used
            return m1
        return _Obj(total=d.mem_total, free=d.mem_total - used, used=used)

    def _nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return self._dev(handle).power_mw

    def _nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        return self._dev(handle).power_limit_mw

    def _nvmlDeviceGetTemperatureV(self, handle: Any, sensor: int, version: int = 16777228) -> int:
        if sensor != NVML_TEMPERATURE_GPU:
            raise self._err(NVML_ERROR_INVALID_ARGUMENT)
        return self._dev(handle).temp_c

    def _nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        if sensor != NVML_TEMPERATURE_GPU:
            raise self._err(NVML_ERROR_INVALID_ARGUMENT)
        return self._dev(handle).temp_c

    def _nvmlDeviceGetClockInfo(self, handle: Any, type: int) -> int:  # noqa: A002 - pynvml's name
        if type != NVML_CLOCK_SM:
            raise self._err(NVML_ERROR_INVALID_ARGUMENT)
        return self._dev(handle).sm_clock_mhz

    def _nvmlDeviceGetMaxClockInfo(self, handle: Any, type: int) -> int:  # noqa: A002
        if type != NVML_CLOCK_SM:
            raise self._err(NVML_ERROR_INVALID_ARGUMENT)
        return self._dev(handle).sm_clock_max_mhz

    def _nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        return self._dev(handle).clock_reasons

    def _nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        return self._dev(handle).clock_reasons

    def _nvmlDeviceGetPcieThroughput(self, device: Any, counter: int) -> int:
        d = self._dev(device)
        if counter == NVML_PCIE_UTIL_TX_BYTES:
            return d.pcie_tx_kBps
        if counter == NVML_PCIE_UTIL_RX_BYTES:
            return d.pcie_rx_kBps
        raise self._err(NVML_ERROR_INVALID_ARGUMENT)

    def _nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any) -> int:
        return self._dev(handle).pcie_gen

    def _nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any) -> int:
        return self._dev(handle).pcie_width

    def _nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any) -> int:
        return self._dev(handle).pcie_gen_max

    def _nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any) -> int:
        return self._dev(handle).pcie_width_max

    def _procs(self, handle: Any) -> list[Any]:
        out = []
        for pid, used in self._dev(handle).procs:
            if self._real is not None:
                st = self._real.c_nvmlProcessInfo_v2_t(pid=pid, usedGpuMemory=2**64 - 1 if used is None else used,
                                                       gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
                obj = self._real.nvmlStructToFriendlyObject(st)
                if obj.usedGpuMemory == 2**64 - 1:
                    obj.usedGpuMemory = None  # what pynvml does for NVML_VALUE_NOT_AVAILABLE
                out.append(obj)
            else:
                out.append(_Obj(pid=pid, usedGpuMemory=used, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF))
        return out

    def _nvmlDeviceGetComputeRunningProcesses_v3(self, handle: Any) -> list[Any]:
        return self._procs(handle)

    def _nvmlDeviceGetComputeRunningProcesses_v2(self, handle: Any) -> list[Any]:
        return self._procs(handle)

    def _nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        # pynvml: "return nvmlDeviceGetComputeRunningProcesses_v3(handle)" under
        # @throwOnVersionMismatch, so a missing v3 symbol becomes NVMLLibraryMismatchError.
        v3 = self._failures.get(("nvmlDeviceGetComputeRunningProcesses_v3", handle.index)) or \
            self._failures.get(("nvmlDeviceGetComputeRunningProcesses_v3", None))
        if v3 is not None and getattr(v3.make(), "value", None) == NVML_ERROR_FUNCTION_NOT_FOUND:
            raise self.NVMLLibraryMismatchError("Unversioned function called and the pyNVML version does not match")
        return self._procs(handle)

    # GPM

    def _nvmlGpmQueryDeviceSupport(self, device: Any) -> Any:
        d = self._dev(device)
        if self._real is not None:
            sup = self._real.c_nvmlGpmSupport_t()
            sup.version, sup.isSupportedDevice = NVML_GPM_SUPPORT_VERSION, int(d.gpm_supported)
            return sup
        return _Obj(version=NVML_GPM_SUPPORT_VERSION, isSupportedDevice=int(d.gpm_supported))

    def _gpm_key(self, sample: Any) -> int:
        if self._real is not None:
            return int(ctypes.cast(sample, ctypes.c_void_p).value or 0)
        return id(sample)

    def _nvmlGpmSampleAlloc(self) -> Any:
        if self._real is not None:
            buf = ctypes.create_string_buffer(64)  # something to point at: the address is the identity
            sample = ctypes.cast(buf, self._real.c_nvmlGpmSample_t)
            key = self._gpm_key(sample)
            self._gpm_keepalive[key] = buf
        else:
            sample = FakeGpmSample()
            key = self._gpm_key(sample)
        self.gpm_allocated[key] = sample
        self._gpm_state[key] = _GpmState()
        return sample

    def _nvmlGpmSampleFree(self, gpmSample: Any) -> None:  # noqa: N803
        key = self._gpm_key(gpmSample)
        if key not in self.gpm_allocated:
            self.gpm_double_free += 1
            raise self._err(NVML_ERROR_INVALID_ARGUMENT)
        del self.gpm_allocated[key]

    def _nvmlGpmSampleGet(self, device: Any, gpmSample: Any) -> Any:  # noqa: N803
        d = self._dev(device)
        key = self._gpm_key(gpmSample)
        if key not in self.gpm_allocated:
            raise self._err(NVML_ERROR_INVALID_ARGUMENT)
        if not d.gpm_supported:
            raise self._err(NVML_ERROR_NOT_SUPPORTED)
        st = self._gpm_state[key]
        st.device, st.t = device.index, self.clock()
        return gpmSample

    def _nvmlGpmMetricsGet(self, metricsGet: Any) -> Any:  # noqa: N803
        if metricsGet.version != NVML_GPM_METRICS_GET_VERSION:
            raise self._err(NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        k1, k2 = self._gpm_key(metricsGet.sample1), self._gpm_key(metricsGet.sample2)
        if k1 == k2 or k1 not in self.gpm_allocated or k2 not in self.gpm_allocated:
            raise self._err(NVML_ERROR_INVALID_ARGUMENT)
        s1, s2 = self._gpm_state[k1], self._gpm_state[k2]
        if s1.t is None or s2.t is None or s1.device != s2.device or s2.t <= s1.t:
            raise self._err(NVML_ERROR_INVALID_ARGUMENT)
        if s2.t - s1.t < 0.1:
            self.gpm_short_intervals += 1
        d = self.devices[s1.device]
        for k in range(metricsGet.numMetrics):
            m = metricsGet.metrics[k]
            v = d.gpm.get(int(m.metricId))
            if v is None:
                m.nvmlReturn, m.value = NVML_ERROR_NOT_SUPPORTED, 0.0
            else:
                m.nvmlReturn, m.value = NVML_SUCCESS, v
        return metricsGet


def make_fake(devices: list[FakeDevice] | None = None, clock: FakeClock | None = None,
              real_structs: bool = False) -> FakePynvml:
    return FakePynvml(devices, clock, real_structs)


# Names the fake offers as functions (for the drift test).
FUNCTION_NAMES = tuple(a[1:] for a in dir(FakePynvml) if a.startswith("_nvml"))
