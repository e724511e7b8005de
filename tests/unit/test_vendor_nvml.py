"""The NVML backend against a fake ``pynvml`` (tests/fakes/fake_pynvml.py).

No GPU here: the fake stands in for the library, and the drift tests below hold the
fake (and the backend's list of calls) to the installed nvidia-ml-py, so the fake cannot
quietly diverge from what a real card would be asked.
"""

from __future__ import annotations

import ctypes
import inspect
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sattui.model import CardInfo, CardSample
from sattui.vendors import backend as base
from sattui.vendors import nvml
from sattui.vendors.backend import BackendUnavailable, open_backend
from sattui.vendors.nvml import KIB, MIB, NvmlBackend
from tests.fakes import fake_pynvml as fk
from tests.fakes.fake_pynvml import FakeClock, a100, h200, make_fake


def setup(monkeypatch: pytest.MonkeyPatch, devices: list[fk.FakeDevice] | None = None,
          real_structs: bool = False) -> tuple[fk.FakePynvml, NvmlBackend, FakeClock]:
    clock = FakeClock()
    fake = make_fake(devices, clock, real_structs)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake, NvmlBackend(clock, wall_clock=clock.wall), clock


def h200_sample(t: float, **over: object) -> CardSample:
    s = CardSample(
        t=t, card=0, util=98.0, sm_active=85.0, sm_occupancy=40.0, tensor_active=35.0, dram_active=30.0,
        mem_used=71_000_000_000, mem_total=150_754_820_096, power_w=690.0, power_limit_w=700.0, temp_c=71.0,
        sm_clock_mhz=1755.0, sm_clock_max_mhz=1980.0, clock_reasons=0x4,
        pcie_rx_Bps=1900.0 * MIB, pcie_tx_Bps=95.0 * MIB, pcie_gen=5, pcie_width=16,
        procs={"4242": 70_000_000_000},
    )
    for k, v in over.items():
        setattr(s, k, v)
    return s


def a100_sample(t: float, **over: object) -> CardSample:
    s = CardSample(
        t=t, card=1, util=35.0, sm_active=None, sm_occupancy=None, tensor_active=None, dram_active=None,
        mem_used=20_000_000_000, mem_total=85_899_345_920, power_w=210.5, power_limit_w=400.0, temp_c=48.0,
        sm_clock_mhz=1410.0, sm_clock_max_mhz=1410.0, clock_reasons=0x1,
        pcie_rx_Bps=250_000.0 * KIB, pcie_tx_Bps=1_000.0 * KIB, pcie_gen=4, pcie_width=16,
        procs={"5151": 19_000_000_000, "5152": None},
    )
    for k, v in over.items():
        setattr(s, k, v)
    return s


# -- normal values --------------------------------------------------------------------

@pytest.mark.parametrize("real_structs", [False, True], ids=["plain", "real-ctypes"])
def test_two_cards_every_field_with_units_converted(monkeypatch, real_structs):
    fake, b, clock = setup(monkeypatch, real_structs=real_structs)
    cards = b.discover()
    assert cards == [
        CardInfo(card=0, vendor="nvidia", name="NVIDIA H200", uuid="GPU-00000000-0000-0000-0000-000000000000",
                 mem_total=150_754_820_096, power_limit_w=700.0, sm_clock_max_mhz=1980.0,
                 pcie_gen_max=5, pcie_width_max=16),
        CardInfo(card=1, vendor="nvidia", name="NVIDIA A100-SXM4-80GB",
                 uuid="GPU-11111111-2222-3333-4444-555555555555", mem_total=85_899_345_920,
                 power_limit_w=400.0, sm_clock_max_mhz=1410.0, pcie_gen_max=4, pcie_width_max=16),
    ]

    clock.advance(0.5)
    fake.push_util_samples(0, [100, 90, 80])  # three samples since discovery: mean 90
    s0, s1 = b.sample()
    assert s0 == h200_sample(clock.t, util=90.0)
    assert s1 == a100_sample(clock.t)  # no GPM on the A100: SM activity unknown, not 0

    # next tick: no new sub-samples, so the coarse GPU-Util; GPM over the new interval
    clock.advance(0.5)
    s0, s1 = b.sample()
    assert s0 == h200_sample(clock.t)
    assert s1 == a100_sample(clock.t)
    assert fake.gpm_short_intervals == 0
    # the H200 took its PCIe rates from GPM: only the A100 read the 20 ms counters
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 4
    b.close()
    assert fake.init_count == 0 and fake.gpm_allocated == {}


def test_card_records_match_the_contract_shape(monkeypatch):
    fake, b, clock = setup(monkeypatch)
    b.discover()
    clock.advance(0.5)
    rec = b.sample()[0].to_record()
    assert rec["kind"] == "card"
    assert set(rec) == {"kind", "t", "card", "util", "sm_active", "sm_occupancy", "tensor_active", "dram_active",
                        "mem_used", "mem_total", "power_w", "power_limit_w", "temp_c", "sm_clock_mhz",
                        "sm_clock_max_mhz", "clock_reasons", "pcie_rx_Bps", "pcie_tx_Bps", "pcie_gen",
                        "pcie_width", "procs"}
    b.close()


def test_a_tick_asks_nvml_only_for_what_a_sample_holds(monkeypatch):
    # Every call of a tick fills a CardSample field: nothing is read per card per tick
    # that no one shows (energy counters, per-process utilization, MIG mode).
    fake, b, clock = setup(monkeypatch)  # the H200 with GPM, the A100 without
    b.discover()
    before = dict(fake.calls)
    clock.advance(0.5)
    b.sample()
    asked = {n: c - before.get(n, 0) for n, c in fake.calls.items() if c > before.get(n, 0)}
    per_card = {  # field(s) it fills
        "nvmlDeviceGetSamples": 2, "nvmlDeviceGetUtilizationRates": 2,  # util (no sub-samples yet)
        "nvmlDeviceGetMemoryInfo": 2,  # mem_used, mem_total
        "nvmlDeviceGetPowerUsage": 2, "nvmlDeviceGetEnforcedPowerLimit": 2,  # power_w, power_limit_w
        "nvmlDeviceGetTemperatureV": 2,  # temp_c
        "nvmlDeviceGetClockInfo": 2, "nvmlDeviceGetCurrentClocksEventReasons": 2,  # sm_clock_mhz, clock_reasons
        "nvmlDeviceGetCurrPcieLinkGeneration": 2, "nvmlDeviceGetCurrPcieLinkWidth": 2,  # pcie_gen, pcie_width
        "nvmlDeviceGetComputeRunningProcesses_v3": 2,  # procs
        "nvmlDeviceGetPcieThroughput": 2,  # the A100's pcie_tx/rx_Bps (the H200's come from GPM)
        "nvmlGpmSampleGet": 1, "nvmlGpmMetricsGet": 1,  # the H200's sm_active, … dram_active, PCIe rates
    }
    assert asked == per_card
    b.close()


def test_bytes_from_an_old_binding_are_decoded(monkeypatch):
    fake, b, _ = setup(monkeypatch, [h200(name=b"NVIDIA H200", uuid=b"GPU-abc")])
    fake.driver_version = b"535.104.05"
    (card,) = b.discover()
    assert (card.name, card.uuid, NvmlBackend.probe().version) == ("NVIDIA H200", "GPU-abc", "535.104.05")
    b.close()


def test_samples_from_before_discovery_are_not_counted(monkeypatch):
    fake, b, clock = setup(monkeypatch)
    fake.push_util_samples(0, [0, 0, 0, 0])  # history: the card was idle before we looked
    b.discover()
    clock.advance(0.5)
    fake.push_util_samples(0, [60, 80])
    s0 = b.sample()[0]
    assert s0.util == 70.0  # the mean of 60 and 80: the idle history is not in it
    b.close()


def test_sub_samples_on_another_clock_still_work_after_the_first_tick(monkeypatch):
    # Should NVML stamp samples on a clock other than the wall clock, the first answer
    # (all history by our filter) falls back to the coarse value and later ones work.
    fake, b, clock = setup(monkeypatch)
    fake.devices[0].util_samples = [(5_000_000, 10), (5_166_667, 20)]  # µs since some boot
    b.discover()
    clock.advance(0.5)
    assert b.sample()[0].util == 98.0
    fake.devices[0].util_samples += [(5_333_333, 40), (5_500_000, 60)]
    clock.advance(0.5)
    s0 = b.sample()[0]
    assert s0.util == 50.0
    b.close()


# -- failures -------------------------------------------------------------------------

def test_not_supported_fields_are_none_not_zero_and_not_retried(monkeypatch):
    fake, b, clock = setup(monkeypatch)
    for name in ("nvmlDeviceGetPowerUsage", "nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature",
                 "nvmlDeviceGetPcieThroughput", "nvmlDeviceGetCurrentClocksEventReasons",
                 "nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetUtilizationRates",
                 "nvmlDeviceGetSamples", "nvmlDeviceGetCurrPcieLinkGeneration"):
        fake.fail(name, fk.NVMLError_NotSupported, card=1)
    b.discover()
    for _ in range(3):
        clock.advance(0.5)
        s0, s1 = b.sample()
        assert s0 == h200_sample(clock.t)
        assert s1 == a100_sample(clock.t, power_w=None, temp_c=None, pcie_rx_Bps=None, pcie_tx_Bps=None,
                                 clock_reasons=None, util=None, pcie_gen=None)
    # the A100 was asked once; the H200 every tick
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 3 + 1
    assert fake.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 1
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 1  # TX said NotSupported: RX not asked
    assert "1:nvmlDeviceGetPowerUsage" in b.failures
    b.close()


def test_a_passing_error_costs_one_tick_only(monkeypatch):
    fake, b, clock = setup(monkeypatch)
    b.discover()
    fake.fail("nvmlDeviceGetPowerUsage", fk.NVMLError_Unknown, times=2)  # both cards, once each
    fake.fail("nvmlDeviceGetComputeRunningProcesses_v3", fk.NVMLError_NoPermission, card=0)
    clock.advance(0.5)
    s0, s1 = b.sample()
    assert s0.power_w is None and s1.power_w is None
    assert s0.procs == {"4242": 70_000_000_000}  # v2 answered
    clock.advance(0.5)
    s0, s1 = b.sample()
    assert (s0.power_w, s1.power_w) == (690.0, 210.5)
    b.close()


def test_unexpected_exception_in_a_call_leaves_only_that_field_none(monkeypatch):
    fake, b, clock = setup(monkeypatch)
    b.discover()
    fake.fail("nvmlDeviceGetClockInfo", RuntimeError("ctypes went wrong"), card=0)
    clock.advance(0.5)
    s0, _ = b.sample()
    assert s0 == h200_sample(clock.t, sm_clock_mhz=None)
    b.close()


def test_gpu_lost_mid_run_gives_one_event_and_the_other_card_goes_on(monkeypatch):
    fake, b, clock = setup(monkeypatch)
    b.discover()
    clock.advance(0.5)
    assert len(b.sample()) == 2
    fake.lose_gpu(0, after_calls=5)  # lost in the middle of its next sample
    for _ in range(3):
        clock.advance(0.5)
        (s1,) = b.sample()
        assert s1 == a100_sample(clock.t)
    ev = b.take_events()
    assert len(ev) == 1
    assert (ev[0].type, ev[0].message, ev[0].data) == ("card_lost", "card 0 (NVIDIA H200) lost: GPU is lost",
                                                       {"card": 0})
    assert ev[0].to_record()["card"] == 0
    assert b.take_events() == []
    b.close()
    assert fake.init_count == 0 and fake.gpm_allocated == {}


def test_gpu_lost_at_discovery_is_left_out_with_an_event(monkeypatch):
    fake, b, clock = setup(monkeypatch)
    fake.lose_gpu(1, after_calls=3)  # handle and name answered, then lost
    cards = b.discover()
    assert [c.card for c in cards] == [0]
    (ev,) = b.take_events()
    assert ev.message == "card 1 (NVIDIA A100-SXM4-80GB) lost: GPU is lost"
    clock.advance(0.5)
    assert [s.card for s in b.sample()] == [0]
    b.close()


def test_every_card_lost_at_discovery_is_unavailable(monkeypatch):
    fake, b, _ = setup(monkeypatch)
    fake.lose_gpu(0)
    fake.lose_gpu(1)
    with pytest.raises(BackendUnavailable, match="none can be read"):
        open_backend("nvml")
    assert fake.init_count == 0


def test_v3_process_list_function_not_found_falls_back_to_v2_once(monkeypatch):
    fake, b, clock = setup(monkeypatch)
    fake.fail("nvmlDeviceGetComputeRunningProcesses_v3", fk.NVMLError_FunctionNotFound)
    b.discover()
    for _ in range(2):
        clock.advance(0.5)
        s0, s1 = b.sample()
        assert s0.procs == {"4242": 70_000_000_000}
        assert s1.procs == {"5151": 19_000_000_000, "5152": None}
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses_v3"] == 1  # a missing symbol is not retried
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses_v2"] == 4
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses"] == 0
    b.close()


def test_old_library_without_versioned_process_functions_uses_the_plain_one(monkeypatch):
    fake, b, clock = setup(monkeypatch)
    fake.remove("nvmlDeviceGetComputeRunningProcesses_v3")
    fake.remove("nvmlDeviceGetComputeRunningProcesses_v2")
    b.discover()
    clock.advance(0.5)
    assert b.sample()[1].procs == {"5151": 19_000_000_000, "5152": None}
    b.close()


def test_old_library_without_clocks_event_reasons_uses_throttle_reasons(monkeypatch):
    fake, b, clock = setup(monkeypatch)
    fake.remove("nvmlDeviceGetCurrentClocksEventReasons")
    fake.remove("nvmlDeviceGetTemperatureV")
    b.discover()
    for _ in range(2):
        clock.advance(0.5)
        s0, s1 = b.sample()
        assert (s0.clock_reasons, s1.clock_reasons) == (0x4, 0x1)
        assert (s0.temp_c, s1.temp_c) == (71.0, 48.0)
    assert fake.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 4
    b.close()


def test_driver_without_clocks_event_reasons_symbol_uses_throttle_reasons(monkeypatch):
    fake, b, clock = setup(monkeypatch)
    fake.fail("nvmlDeviceGetCurrentClocksEventReasons", fk.NVMLError_FunctionNotFound)
    b.discover()
    for _ in range(2):
        clock.advance(0.5)
        assert [s.clock_reasons for s in b.sample()] == [0x4, 0x1]
    assert fake.calls["nvmlDeviceGetCurrentClocksEventReasons"] == 1
    b.close()


def test_memory_falls_back_to_v1_where_v2_is_missing(monkeypatch):
    fake, b, clock = setup(monkeypatch, [h200(mem_v2=False), a100()])
    b.discover()
    clock.advance(0.5)
    s0, s1 = b.sample()
    assert s0.mem_used == 71_000_000_000 + 600_000_000  # v1 "used" includes the reserved memory
    # a missing symbol is missing from the library, for every card: not asked again
    assert s1.mem_used == 20_000_000_000 + 500_000_000
    assert "nvmlDeviceGetMemoryInfo_v2" in b._missing
    b.close()
    fake, b, clock = setup(monkeypatch)
    del fake.nvmlMemory_v2  # a pynvml from before v2
    b.discover()
    clock.advance(0.5)
    assert b.sample()[1].mem_used == 20_500_000_000
    b.close()


# -- GPM ------------------------------------------------------------------------------

def test_gpm_absent_gives_none_and_allocates_nothing(monkeypatch):
    fake, b, clock = setup(monkeypatch, [a100()])
    b.discover()
    assert fake.gpm_allocated == {}
    clock.advance(0.5)
    (s,) = b.sample()
    assert (s.sm_active, s.sm_occupancy, s.tensor_active, s.dram_active) == (None, None, None, None)
    assert fake.calls["nvmlGpmSampleGet"] == 0
    b.close()


def test_old_library_without_gpm_functions(monkeypatch):
    fake, b, clock = setup(monkeypatch, [h200()])
    fake.remove("nvmlGpmQueryDeviceSupport")
    b.discover()
    assert fake.gpm_allocated == {}
    clock.advance(0.5)
    (s,) = b.sample()
    assert s.sm_active is None and s.pcie_tx_Bps == 97_656 * KIB  # the legacy counter instead
    b.close()


def test_gpm_waits_100_ms_between_snapshots_and_reuses_the_last_figures(monkeypatch):
    fake, b, clock = setup(monkeypatch, [h200()])
    b.discover()
    (s,) = b.sample()  # at once: no interval yet
    assert s.sm_active is None
    assert s.pcie_tx_Bps == 97_656 * KIB
    clock.advance(0.2)
    (s,) = b.sample()
    assert s.sm_active == 85.0
    gets = fake.calls["nvmlGpmSampleGet"]
    fake.devices[0].gpm[fk.NVML_GPM_METRIC_SM_UTIL] = 10.0
    clock.advance(0.05)
    (s,) = b.sample()
    assert s.sm_active == 85.0 and fake.calls["nvmlGpmSampleGet"] == gets
    clock.advance(0.1)
    (s,) = b.sample()
    assert s.sm_active == 10.0
    assert fake.gpm_short_intervals == 0
    b.close()
    assert fake.gpm_allocated == {} and fake.gpm_double_free == 0


def test_gpm_metric_not_supported_leaves_that_field_none(monkeypatch):
    dev = h200()
    del dev.gpm[fk.NVML_GPM_METRIC_ANY_TENSOR_UTIL]
    del dev.gpm[fk.NVML_GPM_METRIC_PCIE_RX_PER_SEC]
    fake, b, clock = setup(monkeypatch, [dev])
    b.discover()
    clock.advance(0.5)
    (s,) = b.sample()
    assert (s.sm_active, s.tensor_active, s.dram_active) == (85.0, None, 30.0)
    # without both GPM PCIe rates, both come from the legacy counter
    assert (s.pcie_tx_Bps, s.pcie_rx_Bps) == (97_656 * KIB, 1_953_125 * KIB)
    b.close()


def test_gpm_snapshot_not_supported_is_remembered(monkeypatch):
    fake, b, clock = setup(monkeypatch, [h200()])
    b.discover()
    fake.fail("nvmlGpmSampleGet", fk.NVMLError_NotSupported)
    for _ in range(3):
        clock.advance(0.5)
        (s,) = b.sample()
        assert s.sm_active is None and s.util == 98.0
    assert fake.calls["nvmlGpmSampleGet"] == 2  # at discovery, then once NotSupported
    b.close()
    assert fake.gpm_allocated == {}


# -- availability ---------------------------------------------------------------------

def test_no_library_probe_and_open_backend(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml → ImportError
    p = NvmlBackend.probe()
    assert (p.name, p.available) == ("nvml", False)
    assert "nvidia-ml-py" in p.reason
    with pytest.raises(BackendUnavailable) as ei:
        open_backend("nvml")
    msg = str(ei.value)
    assert "nvidia-ml-py" in msg and "\n" not in msg


@pytest.mark.parametrize(("error", "reason"), [
    (fk.NVMLError_LibraryNotFound, "NVIDIA driver library (libnvidia-ml.so.1) not found"),
    (fk.NVMLError_DriverNotLoaded, "NVIDIA driver is not loaded (nvmlInit: Driver Not Loaded)"),
    (fk.NVMLError_NoPermission, "no permission to use the NVIDIA driver"),
    (fk.NVMLError_LibRmVersionMismatch, "NVIDIA driver and libnvidia-ml versions differ"),
    (fk.NVMLError_Unknown, "nvmlInit failed: Unknown Error"),
])
def test_init_failure_probe_and_open_backend(monkeypatch, error, reason):
    fake, _, _ = setup(monkeypatch)
    fake.init_error = error
    p = NvmlBackend.probe()
    assert not p.available and p.reason.startswith(reason)
    with pytest.raises(BackendUnavailable) as ei:
        open_backend("nvml")
    assert str(ei.value).startswith(reason) and "\n" not in str(ei.value)
    assert fake.init_count == 0


def test_probe_is_cheap_and_gives_nvml_back(monkeypatch):
    fake, _, _ = setup(monkeypatch)
    p = NvmlBackend.probe()
    assert (p.available, p.reason, p.version) == (True, "2 GPUs", "570.124.06")
    assert fake.init_count == 0
    assert set(fake.calls) == {"nvmlInit", "nvmlDeviceGetCount", "nvmlSystemGetDriverVersion", "nvmlShutdown"}


def test_no_gpu_is_unavailable(monkeypatch):
    fake, _, _ = setup(monkeypatch, [])
    p = NvmlBackend.probe()
    assert not p.available and p.reason == "NVML sees no NVIDIA GPU"
    with pytest.raises(BackendUnavailable, match="no NVIDIA GPU"):
        open_backend("nvml")
    assert fake.init_count == 0


def test_open_backend_auto_picks_nvml(monkeypatch):
    fake, _, _ = setup(monkeypatch)
    backend, cards, skipped = open_backend("auto")
    try:
        assert isinstance(backend, NvmlBackend)
        assert [c.name for c in cards] == ["NVIDIA H200", "NVIDIA A100-SXM4-80GB"]
        assert skipped == []
        assert base.REGISTRY["nvml"] is NvmlBackend
    finally:
        backend.close()
    assert fake.init_count == 0


def test_close_is_safe_twice_and_sample_after_close_is_empty(monkeypatch):
    fake, b, clock = setup(monkeypatch)
    b.close()  # never opened
    b.discover()
    b.close()
    b.close()
    assert fake.init_count == 0 and fake.gpm_allocated == {} and fake.gpm_double_free == 0
    assert b.sample() == []


def _libnvidia_ml_loadable() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


def test_real_pynvml_probe_on_this_machine():
    """The real library path, no fake: here without a driver it must say so in one line."""
    real = pytest.importorskip("pynvml")
    assert not isinstance(real, fk.FakePynvml)
    p = NvmlBackend.probe()
    assert p.name == "nvml"
    if _libnvidia_ml_loadable():
        assert p.available or (p.reason and "\n" not in p.reason)
    else:
        assert (p.available, p.reason) == (False, "NVIDIA driver library (libnvidia-ml.so.1) not found")
        with pytest.raises(BackendUnavailable, match=r"^NVIDIA driver library \(libnvidia-ml.so.1\) not found$"):
            open_backend("nvml")


# -- the fake against the real nvidia-ml-py --------------------------------------------

@pytest.fixture(scope="module")
def real_pynvml():
    mod = pytest.importorskip("pynvml")  # every test that put a fake there has given it back
    assert not isinstance(mod, fk.FakePynvml)
    return mod


def _params(fn) -> list[tuple[str, object]]:
    return [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()]


def test_every_function_the_backend_calls_exists_in_real_pynvml_with_the_fakes_parameters(real_pynvml):
    fake = make_fake()
    for name in nvml.NVML_FUNCTIONS:
        real_fn = getattr(real_pynvml, name, None)
        assert callable(real_fn), f"nvidia-ml-py has no {name}"
        assert name in fk.FUNCTION_NAMES, f"the fake lacks {name}"
        assert _params(getattr(fake, name)) == _params(real_fn), name
    for name in nvml.NVML_CONSTANTS:
        assert hasattr(real_pynvml, name) and hasattr(fake, name), name
    # and the fake offers nothing the backend does not use (so it cannot hide a typo)
    assert set(fk.FUNCTION_NAMES) <= set(nvml.NVML_FUNCTIONS)


def test_the_declared_list_covers_every_nvml_name_in_the_backend_source(real_pynvml):
    src = Path(nvml.__file__).read_text()
    # API functions (not struct fields such as nvmlReturn, nor C type names *_t)
    functions = {n for n in re.findall(r"(?<!\w)(nvml(?:Init|Shutdown|System|Device|Gpm|Memory)\w*)", src)
                 if not n.endswith("_t")}
    assert "nvmlShutdown" in functions and "nvmlGpmMetricsGet" in functions
    # the v2 memory query is one pynvml function with version=; its C symbol is only a key
    assert functions - {"nvmlDeviceGetMemoryInfo_v2"} <= set(nvml.NVML_FUNCTIONS) | set(nvml.NVML_CONSTANTS)
    for const in set(re.findall(r"\"(NVML_[A-Z0-9_]+)\"", src)):
        assert hasattr(real_pynvml, const), const


def test_the_backends_fallback_codes_and_ids_match_real_pynvml(real_pynvml):
    r = real_pynvml
    assert (nvml._ERR_NOT_SUPPORTED, nvml._ERR_NOT_FOUND, nvml._ERR_FUNCTION_NOT_FOUND, nvml._ERR_GPU_IS_LOST,
            nvml._ERR_LIBRARY_NOT_FOUND, nvml._ERR_DRIVER_NOT_LOADED, nvml._ERR_NO_PERMISSION,
            nvml._ERR_LIB_RM_VERSION_MISMATCH, nvml._SUCCESS) == (
        r.NVML_ERROR_NOT_SUPPORTED, r.NVML_ERROR_NOT_FOUND, r.NVML_ERROR_FUNCTION_NOT_FOUND,
        r.NVML_ERROR_GPU_IS_LOST, r.NVML_ERROR_LIBRARY_NOT_FOUND, r.NVML_ERROR_DRIVER_NOT_LOADED,
        r.NVML_ERROR_NO_PERMISSION, r.NVML_ERROR_LIB_RM_VERSION_MISMATCH, r.NVML_SUCCESS)
    assert (nvml._NVML_CLOCK_SM, nvml._NVML_TEMPERATURE_GPU, nvml._NVML_PCIE_UTIL_TX_BYTES,
            nvml._NVML_PCIE_UTIL_RX_BYTES, nvml._NVML_GPU_UTILIZATION_SAMPLES,
            nvml._NVML_GPM_METRICS_GET_VERSION) == (
        r.NVML_CLOCK_SM, r.NVML_TEMPERATURE_GPU, r.NVML_PCIE_UTIL_TX_BYTES, r.NVML_PCIE_UTIL_RX_BYTES,
        r.NVML_GPU_UTILIZATION_SAMPLES, r.NVML_GPM_METRICS_GET_VERSION)
    for _, const, default in nvml._GPM_METRICS:
        assert getattr(r, const) == default, const
    for _code, member in nvml._VALUE_FIELDS.items():
        assert member in dict(r.c_nvmlValue_t._fields_), member
    assert len(nvml._GPM_METRICS) <= r.NVML_GPM_METRIC_MAX


def test_fake_constants_and_error_codes_equal_real_pynvml(real_pynvml):
    for name in fk.CONSTANT_NAMES:
        if name == "NVML_GPM_METRIC_MAX":
            continue  # grows with each release; only the array length depends on it
        assert getattr(real_pynvml, name) == getattr(fk, name), name
    for name in fk.ERROR_CLASS_NAMES:
        real_cls = getattr(real_pynvml, name)
        assert real_cls().value == getattr(fk, name)().value, name
        assert type(real_pynvml.NVMLError(real_cls().value)) is real_cls
        assert type(fk.NVMLError(getattr(fk, name)().value)) is getattr(fk, name)
    assert str(fk.NVMLError_GpuIsLost()) == "GPU is lost"


def test_fake_results_have_the_fields_of_real_structures(real_pynvml):
    r = real_pynvml
    fields = {
        r.c_nvmlUtilization_t: {"gpu"},
        r.c_nvmlMemory_v2_t: {"version", "total", "reserved", "free", "used"},
        r.c_nvmlMemory_t: {"total", "free", "used"},
        r.c_nvmlSample_t: {"timeStamp", "sampleValue"},
        r.c_nvmlProcessInfo_v2_t: {"pid", "usedGpuMemory", "gpuInstanceId", "computeInstanceId"},
        r.c_nvmlGpmSupport_t: {"version", "isSupportedDevice"},
        r.c_nvmlGpmMetricsGet_t: {"version", "numMetrics", "sample1", "sample2", "metrics"},
        r.c_nvmlGpmMetric_t: {"metricId", "nvmlReturn", "value"},
    }
    for struct, names in fields.items():
        assert names <= {f[0] for f in struct._fields_}, struct.__name__
    clock = FakeClock()
    fake = make_fake([h200(util_samples=[(2**60, 5)])], clock)
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    objs = {
        r.c_nvmlUtilization_t: fake.nvmlDeviceGetUtilizationRates(h),
        r.c_nvmlMemory_v2_t: fake.nvmlDeviceGetMemoryInfo(h, version=fake.nvmlMemory_v2),
        r.c_nvmlMemory_t: fake.nvmlDeviceGetMemoryInfo(h),
        r.c_nvmlSample_t: fake.nvmlDeviceGetSamples(h, fake.NVML_GPU_UTILIZATION_SAMPLES, 0)[1][0],
        r.c_nvmlProcessInfo_v2_t: fake.nvmlDeviceGetComputeRunningProcesses_v3(h)[0],
        r.c_nvmlGpmSupport_t: fake.nvmlGpmQueryDeviceSupport(h),
        r.c_nvmlGpmMetricsGet_t: fake.c_nvmlGpmMetricsGet_t(),
        r.c_nvmlGpmMetric_t: fake.c_nvmlGpmMetricsGet_t().metrics[0],
    }
    for struct, obj in objs.items():
        for name in fields[struct]:
            assert hasattr(obj, name), (struct.__name__, name)


def test_fake_mimics_nvml_rules(monkeypatch):
    fake = make_fake()
    with pytest.raises(fk.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(fk.NVMLError_NotFound):
        fake.nvmlDeviceGetSamples(h, fake.NVML_GPU_UTILIZATION_SAMPLES, 0)
    fake.remove("nvmlDeviceGetCurrentClocksEventReasons")
    with pytest.raises(AttributeError):
        fake.nvmlDeviceGetCurrentClocksEventReasons(h)
    fake.fail("nvmlDeviceGetComputeRunningProcesses_v3", fk.NVMLError_FunctionNotFound)
    with pytest.raises(fk.NVMLLibraryMismatchError):
        fake.nvmlDeviceGetComputeRunningProcesses(h)
    fake.lose_gpu(1, after_calls=1)
    h1 = fake.nvmlDeviceGetHandleByIndex(1)
    with pytest.raises(fk.NVMLError_GpuIsLost):
        fake.nvmlDeviceGetName(h1)
    assert fake.nvmlDeviceGetName(h) == "NVIDIA H200"


# -- property: no failure pattern escapes sample() -------------------------------------

ERRORS = [fk.NVMLError_NotSupported, fk.NVMLError_FunctionNotFound, fk.NVMLError_Unknown, fk.NVMLError_NoPermission,
          fk.NVMLError_Timeout, fk.NVMLError_GpuIsLost, fk.NVMLError_InvalidArgument, fk.NVMLError_NotFound,
          RuntimeError, TypeError, fk.NVMLLibraryMismatchError]
FAILABLE = sorted(set(nvml.NVML_FUNCTIONS) - {"nvmlInit", "nvmlDeviceGetCount"}) + ["nvmlDeviceGetMemoryInfo_v2"]


def _allowed(dev: fk.FakeDevice, gpm: bool) -> dict[str, set]:
    """What each field may honestly be: the card's value by some route, or None."""
    g = dev.gpm if gpm else {}

    def opt(*vals):
        return {None, *vals}

    util_means = {float(dev.util_gpu), 70.0}
    return {
        "util": opt(*util_means),
        "sm_active": opt(g.get(fk.NVML_GPM_METRIC_SM_UTIL)),
        "sm_occupancy": opt(g.get(fk.NVML_GPM_METRIC_SM_OCCUPANCY)),
        "tensor_active": opt(g.get(fk.NVML_GPM_METRIC_ANY_TENSOR_UTIL)),
        "dram_active": opt(g.get(fk.NVML_GPM_METRIC_DRAM_BW_UTIL)),
        "mem_used": opt(dev.mem_used, dev.mem_used + dev.mem_reserved),
        "mem_total": opt(dev.mem_total),
        "power_w": opt(dev.power_mw / 1000),
        "power_limit_w": opt(dev.power_limit_mw / 1000),
        "temp_c": opt(float(dev.temp_c)),
        "sm_clock_mhz": opt(float(dev.sm_clock_mhz)),
        "sm_clock_max_mhz": opt(float(dev.sm_clock_max_mhz)),
        "clock_reasons": opt(dev.clock_reasons),
        "pcie_tx_Bps": opt(dev.pcie_tx_kBps * KIB, *([g[20] * MIB] if 20 in g else [])),
        "pcie_rx_Bps": opt(dev.pcie_rx_kBps * KIB, *([g[21] * MIB] if 21 in g else [])),
        "pcie_gen": opt(dev.pcie_gen),
        "pcie_width": opt(dev.pcie_width),
        "procs": opt(frozenset({str(p): u for p, u in dev.procs}.items())),
    }


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    failures=st.lists(st.tuples(st.sampled_from(FAILABLE), st.sampled_from(ERRORS),
                                st.sampled_from([None, 0, 1]), st.sampled_from([None, 1, 2])), max_size=8),
    lose=st.one_of(st.none(), st.tuples(st.integers(0, 1), st.integers(0, 60))),
    ticks=st.integers(1, 4),
)
def test_random_failures_never_escape_and_never_invent_values(failures, lose, ticks):
    with pytest.MonkeyPatch.context() as mp:
        clock = FakeClock()
        devices = [h200(), a100()]
        fake = make_fake(devices, clock)
        mp.setitem(sys.modules, "pynvml", fake)
        for name, err, card, times in failures:
            fake.fail(name, err, card=card, times=times)
        if lose is not None:
            fake.lose_gpu(*lose)
        b = NvmlBackend(clock, wall_clock=clock.wall)
        allowed = [_allowed(devices[0], True), _allowed(devices[1], False)]
        try:
            try:
                b.discover()
                found = True
            except BackendUnavailable:
                found = False  # the leak checks below still run: NVML must be shut down here too
            for _ in range(ticks if found else 0):
                clock.advance(0.5)
                fake.push_util_samples(0, [60, 80])
                for s in b.sample():
                    for name, ok in allowed[s.card].items():
                        v = getattr(s, name)
                        if name == "procs" and v is not None:
                            v = frozenset(v.items())
                        assert v in ok, (s.card, name, v)
            events = b.take_events()
            lost_cards = [e.data["card"] for e in events if e.type == "card_lost"]
            assert len(lost_cards) == len(set(lost_cards))
        finally:
            b.close()
        if not any(n == "nvmlShutdown" for n, *_ in failures):
            assert fake.init_count == 0
        if not any(n == "nvmlGpmSampleFree" for n, *_ in failures):
            assert fake.gpm_allocated == {}
        assert fake.gpm_double_free == 0
