"""Each unit the NVML backend converts, pinned to the line of NVIDIA's header that gives it.

The fake pynvml (tests/fakes/fake_pynvml.py) answers in NVML's units, so the unit tests
are only as right as the fake. Here every conversion is checked against a quoted line of
``nvml.h``, the header NVIDIA's NVML API Reference Guide (docs.nvidia.com/deploy/nvml-api)
is generated from, so a reviewer can check each without a GPU: open the header at the
line given and compare. The copy read is the one NVIDIA vendors in its Go bindings:
https://github.com/NVIDIA/go-nvml, ``gen/nvml/nvml.h`` at commit
2f9e261fe40a7a1c54783d66805e8920564763b4 (``NVML_API_VERSION 13``). Where the installed
nvidia-ml-py carries the same comment, ``test_the_quotes_nvidia_ml_py_carries_too``
checks it against the library itself.

Each raw value is one no other field uses, so a conversion applied to the wrong field
shows too.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from sattui.vendors.nvml import NvmlBackend
from tests.fakes import fake_pynvml as fk
from tests.fakes.fake_pynvml import FakeClock, a100, h200, make_fake

# (where in nvml.h, the quoted line)
POWER_USAGE = ("nvml.h:6534, nvmlDeviceGetPowerUsage",
               "Retrieves power usage for this GPU in milliwatts and its associated circuitry (e.g. memory)")
POWER_LIMIT = ("nvml.h:6628, nvmlDeviceGetEnforcedPowerLimit",
               "@param limit                            Reference in which to return the power management limit "
               "in milliwatts")
PCIE_KBPS = ("nvml.h:5580, nvmlDeviceGetPcieThroughput",
             "@param value                                Reference in which to return throughput in KB/s")
GPM_PCIE_TX = ("nvml.h:13495, nvmlGpmMetricId_t",
               "NVML_GPM_METRIC_PCIE_TX_PER_SEC             = 20,   //!< PCIe traffic from this GPU in MiB/sec")
GPM_PCIE_RX = ("nvml.h:13496, nvmlGpmMetricId_t",
               "NVML_GPM_METRIC_PCIE_RX_PER_SEC             = 21,   //!< PCIe traffic to this GPU in MiB/sec")
SAMPLE_TIMESTAMP = ("nvml.h:681, nvmlSample_t",
                    "unsigned long long timeStamp;       //!< CPU Timestamp in microseconds")
MEMORY_V2_USED = ("nvml.h:274, nvmlMemory_v2_t",
                  "unsigned long long used;         //!< Allocated device memory (in bytes).")
MEMORY_V1_USED = ("nvml.h:259, nvmlMemory_t",
                  "unsigned long long used;         //!< Sum of Reserved and Allocated device memory (in bytes).")
MEMORY_TOTAL = ("nvml.h:271, nvmlMemory_v2_t",
                "unsigned long long total;        //!< Total physical device memory (in bytes)")
PROC_MEMORY = ("nvml.h:307, nvmlProcessInfo_v2_t (= nvmlProcessInfo_t)",
               "unsigned long long  usedGpuMemory;      //!< Amount of used GPU memory in bytes.")
TEMPERATURE = ("nvml.h:5999, nvmlDeviceGetTemperatureV",
               "Retrieves the current temperature readings (in degrees C) for the given device.")
CLOCK = ("nvml.h:5619, nvmlDeviceGetClockInfo",
         "@param clock                                Reference in which to return the clock speed in MHz")


def _run(monkeypatch, devices, *, ticks: int = 2):
    """Discover, then ``ticks`` samples 0.5 s apart (GPM needs two snapshots); the last."""
    clock = FakeClock()
    fake = make_fake(devices, clock)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    b = NvmlBackend(clock, wall_clock=clock.wall)
    b.discover()
    samples = []
    for _ in range(ticks):
        clock.advance(0.5)
        samples = b.sample()
    return b, fake, clock, {s.card: s for s in samples}


def test_power_is_milliwatts(monkeypatch):
    # POWER_USAGE, POWER_LIMIT: mW, so W = raw / 1000.
    b, _, _, s = _run(monkeypatch, [h200(power_mw=123_457, power_limit_mw=654_321)])
    assert s[0].power_w == 123.457
    assert s[0].power_limit_w == 654.321
    assert b.discover()[0].power_limit_w == 654.321
    b.close()


def test_legacy_pcie_throughput_is_kilobytes_per_second(monkeypatch):
    # PCIE_KBPS: "KB/s". nvml.h does not say how many bytes its KB has (the same header
    # writes "KiB" where it means 1024, e.g. NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX);
    # sattui reads KB as 1024 bytes, so B/s = raw * 1024 (with a 1000-byte KB sattui's
    # figure would be 2.4 % high). docs/backends-nvml.md says so.
    b, _, _, s = _run(monkeypatch, [a100(pcie_tx_kBps=1_234, pcie_rx_kBps=56_789)])  # no GPM: the legacy counter
    assert s[0].pcie_tx_Bps == 1_234 * 1024
    assert s[0].pcie_rx_Bps == 56_789 * 1024
    b.close()


def test_gpm_pcie_traffic_is_mebibytes_per_second(monkeypatch):
    # GPM_PCIE_TX, GPM_PCIE_RX: MiB/sec, so B/s = raw * 1048576.
    gpm = dict(h200().gpm)
    gpm[fk.NVML_GPM_METRIC_PCIE_TX_PER_SEC] = 12.5
    gpm[fk.NVML_GPM_METRIC_PCIE_RX_PER_SEC] = 3456.0
    b, _, _, s = _run(monkeypatch, [h200(gpm=gpm)])
    assert s[0].pcie_tx_Bps == 12.5 * 1_048_576
    assert s[0].pcie_rx_Bps == 3456.0 * 1_048_576
    b.close()


def test_utilization_sample_time_stamps_are_microseconds(monkeypatch):
    # SAMPLE_TIMESTAMP: µs on the CPU (wall) clock. A sample 0.5 s before discovery is
    # history sattui did not watch; two 0.75 s and 0.25 s before "now" (1 s after
    # discovery) are new. Read as anything but µs, the cut at discovery moves and the
    # old 100 % sample counts (or the new ones do not).
    clock = FakeClock()
    fake = make_fake([h200()], clock)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    b = NvmlBackend(clock, wall_clock=clock.wall)
    discovered_us = int(round(clock.wall() * 1e6))
    b.discover()
    clock.advance(1.0)
    now_us = int(round(clock.wall() * 1e6))
    fake.devices[0].util_samples += [(discovered_us - 500_000, 100), (now_us - 750_000, 20), (now_us - 250_000, 60)]
    (s,) = b.sample()
    assert s.util == 40.0
    b.close()


def test_memory_is_bytes(monkeypatch):
    # MEMORY_V2_USED, MEMORY_TOTAL, PROC_MEMORY: bytes, taken as they are.
    b, _, _, s = _run(monkeypatch, [h200(mem_total=98_765_432_109, mem_used=1_234_567_890, mem_reserved=111_111,
                                         procs=[(31337, 987_654_321)])])
    assert (s[0].mem_used, s[0].mem_total) == (1_234_567_890, 98_765_432_109)
    assert s[0].procs == {"31337": 987_654_321}
    b.close()


def test_memory_v1_used_counts_the_reserved_part(monkeypatch):
    # MEMORY_V1_USED: v1's "used" is reserved + allocated, both bytes.
    b, _, _, s = _run(monkeypatch, [h200(mem_v2=False, mem_used=1_234_567_890, mem_reserved=111_111)])
    assert s[0].mem_used == 1_234_567_890 + 111_111
    b.close()


def test_temperature_and_clock_are_taken_as_they_are(monkeypatch):
    # TEMPERATURE (degrees C), CLOCK (MHz): no conversion. (Energy is not read: sattui
    # shows power, and the energy counter had no reader.)
    b, _, _, s = _run(monkeypatch, [h200(temp_c=63, sm_clock_mhz=1234, sm_clock_max_mhz=1987)])
    assert (s[0].temp_c, s[0].sm_clock_mhz, s[0].sm_clock_max_mhz) == (63.0, 1234.0, 1987.0)
    b.close()


def test_the_quotes_nvidia_ml_py_carries_too():
    # nvidia-ml-py copies nvml.h's enum comments: the installed library must say the
    # same as the quotes above, or the quote (or the library) has moved on.
    # nvidia-ml-py is a runtime dependency of sattui: read its source, not a fake in sys.modules.
    src = Path(importlib.util.find_spec("pynvml").origin).read_text(encoding="utf-8")
    for _, quote in (GPM_PCIE_TX, GPM_PCIE_RX):
        name, comment = quote.split("//!<")
        name = name.split("=")[0].strip()
        line = next(ln for ln in src.splitlines() if ln.startswith(name + " "))
        assert line.split("#", 1)[1].strip() == comment.strip(), line
