"""The rocm backend end to end: a fake amd-smi / rocm-smi on PATH printing real captured outputs.

Every expected number below was read by hand from the fixture file named in the test
(tests/fixtures/vendors/amd/, copies of ../shared/fixtures/vendors/amd/).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sattui.vendors import rocm, tool, values
from sattui.vendors.backend import BackendUnavailable, ParseError, ToolError
from sattui.vendors.rocm import (
    ROCM_SMI_DISCOVER_ARGS,
    ROCM_SMI_SAMPLE_ARGS,
    RocmBackend,
    parse_amd_smi_default,
    parse_amd_smi_metric,
    parse_amd_smi_process,
    parse_amd_smi_static,
    parse_rocm_smi_json,
)
from tests.vendor_tools import calls, install_tool, isolate_path

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vendors" / "amd"
MI100 = FIX / "rocm-smi-json_4x-mi100_rocm6.0.2.json"
RX6700 = FIX / "rocm-smi-json_rx6700xt_rocm5.7.1.json"
AMDSMI_DEFAULT = FIX / "amd-smi_default-view_2x-radeon-ai-pro-r9700_amdsmi26.2.1.txt"
AMDSMI_PROCESS = FIX / "amd-smi-process-json_2x-radeon-ai-pro-r9700_amdsmi26.2.1.json"
MiB = 1024 * 1024

# Test inputs, not captures: what the tools print for --version (layout as in AMD's docs).
ROCM_SMI_VERSION = "ROCM-SMI version: 2.0.0+6.0.2\nROCM-SMI-LIB version: 6.0.2\n"
AMD_SMI_VERSION = "AMDSMI Tool: 26.2.1+fc0010cf6a | AMDSMI Library version: 26.2.1 | ROCm version: 7.2.0\n"


def _metric_json(wrapped: bool) -> str:
    """An ``amd-smi metric --json`` answer built on the layout AMD's issue threads show.

    NOT a captured file (no public full capture was found): keys as in ROCm/amdsmi and
    henrygd/beszel#737 (list of {"gpu", "usage": {"gfx_activity": {"value", "unit"}}})
    and nathaninline/ajean#39 (amd-smi 26: gpu_data[0].mem_usage.total_vram, MB).
    """
    gpus = [
        {"gpu": 0,
         "usage": {"gfx_activity": {"value": 42, "unit": "%"}, "umc_activity": {"value": 7, "unit": "%"},
                   "mm_activity": "N/A", "vcn_activity": [{"value": 0, "unit": "%"}, "N/A"]},
         "power": {"socket_power": {"value": 103, "unit": "W"}, "gfx_voltage": "N/A",
                   "throttle_status": "UNTHROTTLED", "power_management": "ENABLED"},
         "clock": {"gfx_0": {"clk": {"value": 2350, "unit": "MHz"}, "min_clk": {"value": 600, "unit": "MHz"},
                             "max_clk": {"value": 2920, "unit": "MHz"}, "clk_locked": "N/A", "deep_sleep": "N/A"}},
         "temperature": {"edge": {"value": 79, "unit": "C"}, "hotspot": {"value": 85, "unit": "C"},
                         "mem": {"value": 70, "unit": "C"}},
         "pcie": {"width": 16, "speed": {"value": 32, "unit": "GT/s"}},
         "mem_usage": {"total_vram": {"value": 32624, "unit": "MB"}, "used_vram": {"value": 29777, "unit": "MB"},
                       "free_vram": {"value": 2847, "unit": "MB"}}},
        {"gpu": 1,
         "usage": {"gfx_activity": {"value": 100, "unit": "%"}, "umc_activity": "N/A"},
         "power": {"socket_power": "N/A"},
         "clock": {"gfx_0": {"clk": "N/A", "max_clk": "N/A"}},
         "temperature": {"edge": "N/A", "hotspot": {"value": 80, "unit": "C"}},
         "pcie": "N/A",
         "mem_usage": {"total_vram": {"value": 32624, "unit": "MB"}, "used_vram": {"value": 1024, "unit": "MB"}}},
    ]
    return json.dumps({"gpu_data": gpus} if wrapped else gpus, indent=4)


def _static_json() -> str:
    """``amd-smi static --json`` built on the documented layout (not a capture)."""
    gpus = [{"gpu": i, "asic": {"market_name": "AMD Radeon AI PRO R9700", "device_id": "0x7551"},
             "bus": {"bdf": bdf, "max_pcie_width": 16, "max_pcie_speed": {"value": 32, "unit": "GT/s"},
                     "pcie_interface_version": "Gen 5"},
             "vram": {"type": "GDDR6", "size": {"value": 32624, "unit": "MB"}},
             "limit": {"max_power": {"value": 300, "unit": "W"}, "socket_power": {"value": 300, "unit": "W"}}}
            for i, bdf in ((0, "0000:03:00.0"), (1, "0000:43:00.0"))]
    return json.dumps({"gpu_data": gpus}, indent=4)


@pytest.fixture(autouse=True)
def _only_fake_tools(tmp_path, monkeypatch):
    isolate_path(tmp_path, monkeypatch)
    monkeypatch.setattr(rocm, "AMD_TOOL_DIRS", ())


# -- rocm-smi --json, ROCm 6.0.2, 4x MI100 ------------------------------------------------

def test_rocm_smi_mi100(tmp_path, monkeypatch):
    tool = install_tool(tmp_path, monkeypatch, "rocm-smi", stdout_file=MI100,
                        by_args={"--version": ROCM_SMI_VERSION})
    b = RocmBackend(clock=lambda: 12.5)
    cards = b.discover()
    assert [c.card for c in cards] == [0, 1, 2, 3]
    c0 = cards[0]
    assert c0.vendor == "amd"
    assert c0.name == "Arcturus GL-XL [Instinct MI100]"  # "Card series"
    assert c0.uuid == "0x79ccd55167a2124a"  # card0 "Unique ID"
    assert c0.mem_total == 34342961152  # card0 "VRAM Total Memory (B)"
    assert c0.power_limit_w == 290.0  # "Max Graphics Package Power (W)"

    samples = b.sample()
    assert [s.card for s in samples] == [0, 1, 2, 3]
    s0, s1, s2, s3 = samples
    assert s0.t == 12.5
    assert s0.util == 0.0  # card0 "GPU use (%)": "0"
    assert s0.dram_active == 0.0  # card0 "GPU memory use (%)": "0"
    assert s0.mem_used == 6750208  # card0 "VRAM Total Used Memory (B)"
    assert s0.mem_total == 34342961152
    assert s0.power_w == 36.0  # card0 "Average Graphics Package Power (W)": "36.0"
    assert s0.power_limit_w == 290.0
    assert s0.temp_c == 53.0  # card0 "Temperature (Sensor edge) (C)": "53.0"
    assert s0.sm_clock_mhz == 300.0  # card0 "sclk clock speed:": "(300Mhz)"
    assert (s0.pcie_gen, s0.pcie_width) == (4, 16)  # "pcie clock level": "0 (16.0GT/s x16)"
    assert s0.procs is None  # rocm-smi gives no per-process VRAM here: unknown, not {}
    # card1..3 "Average Graphics Package Power (W)" 44.0 / 43.0 / 39.0, edge 55.0 / 54.0 / 51.0
    assert [s.power_w for s in (s1, s2, s3)] == [44.0, 43.0, 39.0]
    assert [s.temp_c for s in (s1, s2, s3)] == [55.0, 54.0, 51.0]
    assert b.take_events() == []

    argvs = calls(tool)
    assert argvs[0] == list(ROCM_SMI_DISCOVER_ARGS)
    assert argvs[1] == ["--version"]  # once, best effort, after the tool answered
    assert b.version == "2.0.0+6.0.2"
    assert argvs[2:] == [list(ROCM_SMI_SAMPLE_ARGS)]  # one call per tick, nothing else


# -- rocm-smi --json, ROCm 5.7.1, RX 6700 XT ----------------------------------------------

def test_rocm_smi_rx6700xt(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "rocm-smi", stdout_file=RX6700, by_args={"--version": ROCM_SMI_VERSION})
    b = RocmBackend(clock=lambda: 1.0)
    (c,) = b.discover()
    assert c.name == "Navi 22 [Radeon RX 6700/6700 XT / 6800M]"  # "Card series"
    assert c.uuid is None  # "Unique ID": "N/A"
    assert c.mem_total == 12868124672  # "VRAM Total Memory (B)"
    assert c.power_limit_w == 211.0  # "Max Graphics Package Power (W)"
    (s,) = b.sample()
    assert s.util == 0.0  # "GPU use (%)": "0"
    assert s.mem_used == 1564491776  # "VRAM Total Used Memory (B)"
    assert s.power_w == 6.0  # "Average Graphics Package Power (W)": "6.0"
    assert s.temp_c == 45.0  # "Temperature (Sensor edge) (C)": "45.0"
    assert s.sm_clock_mhz == 500.0  # "sclk clock speed:": "(500Mhz)"
    assert (s.pcie_gen, s.pcie_width) == (4, 16)  # "pcie clock level": "1 (16.0GT/s x16)"


def test_rocm_smi_61_key_names_and_na(tmp_path, monkeypatch):
    """ROCm ≥ 6.1 names (power key, "Card Series"), N/A values and the stdout warning."""
    d = json.loads(MI100.read_text())
    card = d["card0"]
    card["Current Socket Graphics Package Power (W)"] = card.pop("Average Graphics Package Power (W)")
    card["Card Series"] = card.pop("Card series")
    d["card1"]["Average Graphics Package Power (W)"] = "N/A"
    d["card1"]["Temperature (Sensor edge) (C)"] = "N/A"
    text = ("WARNING: AMD GPU device(s) is/are in a low-power state. Check power control/runtime_status\n\n"
            + json.dumps(d))
    install_tool(tmp_path, monkeypatch, "rocm-smi", stdout_text=text, by_args={"--version": ROCM_SMI_VERSION})
    b = RocmBackend()
    cards = b.discover()
    assert cards[0].name == "Arcturus GL-XL [Instinct MI100]"
    s0, s1 = b.sample()[:2]
    assert s0.power_w == 36.0
    assert s1.power_w is None  # "N/A" is unknown, never 0
    assert s1.temp_c == 58.0  # edge N/A → junction, card1 "Temperature (Sensor junction) (C)": "58.0"


# -- amd-smi 26.2.1: default view (text) -------------------------------------------------

def test_amd_smi_default_view(tmp_path, monkeypatch):
    # Every argv prints the default view, so "metric --json" does not parse and the
    # backend falls back to the table; "static --json" fails quietly.
    tool = install_tool(tmp_path, monkeypatch, "amd-smi", stdout_file=AMDSMI_DEFAULT,
                        by_args={"--version": AMD_SMI_VERSION})
    b = RocmBackend(clock=lambda: 3.0)
    cards = b.discover()
    assert b.mode == "amd-text"
    assert [c.card for c in cards] == [0, 1]
    assert cards[0].name == "...Radeon AI PRO R9700"  # truncated by the tool itself
    assert cards[0].mem_total == 32624 * MiB  # "29777/32624 MB" (amd-smi's MB are MiB)
    assert cards[0].power_limit_w == 300.0  # "103/300 W"

    s0, s1 = b.sample()
    # GPU 0 rows: "| 1 %      79 °C   0           103/300 W |" / "| 100 %   38.82           29777/32624 MB |"
    assert s0.util == 100.0  # GFX-Uti (stuck at 100 % while idle: the bug that issue reports)
    assert s0.dram_active == 1.0  # Mem-Uti
    assert s0.temp_c == 79.0
    assert s0.power_w == 103.0
    assert s0.power_limit_w == 300.0
    assert s0.mem_used == 29777 * MiB
    assert s0.mem_total == 32624 * MiB
    # GPU 1 rows: "| 0 %      80 °C   0            92/300 W |" / "| 100 %   40.0 %          29777/32624 MB |"
    assert (s1.util, s1.dram_active, s1.temp_c, s1.power_w) == (100.0, 0.0, 80.0, 92.0)
    # Process table: "0     213952  python3.12  7.9 MB   19.6 GB ..." (VRAM_MEM, binary units)
    assert s0.procs == {"213534": round(54.7 * 1024), "213890": round(54.7 * 1024),
                        "213952": round(19.6 * 1024**3), "213953": round(19.1 * 1024**3)}
    assert s1.procs == s0.procs  # the same PIDs appear under both GPUs in the capture
    assert calls(tool)[-1] == []  # the default view is amd-smi with no arguments


# -- amd-smi 26.2.1: metric --json (constructed) + process --json (captured) ---------------

@pytest.mark.parametrize("wrapped", [True, False], ids=["gpu_data-amdsmi26", "list-amdsmi24"])
def test_amd_smi_metric_and_process_json(tmp_path, monkeypatch, wrapped):
    tool = install_tool(tmp_path, monkeypatch, "amd-smi", stdout_text="unexpected call\n", by_args={
        "--version": AMD_SMI_VERSION,
        "metric --json": _metric_json(wrapped),
        "static --json": _static_json(),
        "process --json": AMDSMI_PROCESS,
    })
    b = RocmBackend(clock=lambda: 7.0)
    cards = b.discover()
    assert b.mode == "amd-json"
    assert cards[0].name == "AMD Radeon AI PRO R9700"  # static: asic.market_name
    assert cards[0].mem_total == 32624 * MiB
    assert cards[0].power_limit_w == 300.0
    assert (cards[0].pcie_gen_max, cards[0].pcie_width_max) == (5, 16)
    assert cards[0].sm_clock_max_mhz == 2920.0

    s0, s1 = b.sample()
    assert (s0.util, s0.dram_active, s0.power_w, s0.temp_c) == (42.0, 7.0, 103.0, 79.0)
    assert s0.sm_clock_mhz == 2350.0
    assert (s0.mem_used, s0.mem_total) == (29777 * MiB, 32624 * MiB)
    assert (s0.pcie_gen, s0.pcie_width) == (5, 16)
    assert s1.power_w is None and s1.dram_active is None and s1.sm_clock_mhz is None  # "N/A"
    assert s1.temp_c == 80.0  # edge "N/A" → hotspot
    assert s1.power_limit_w == 300.0  # from static, at discovery
    # From the captured process JSON: gpu 0 process_list[*].process_info.memory_usage.vram_mem.value (B)
    assert s0.procs == {"213534": 56000, "213890": 56000, "213952": 21008920000, "213953": 20503796000}
    assert s1.procs == s0.procs  # gpu 1 lists the same four pids with the same values
    argvs = calls(tool)
    assert ["metric", "--json"] in argvs and ["process", "--json"] in argvs and ["static", "--json"] in argvs


def test_amd_smi_process_layout_unknown_keeps_metrics(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "amd-smi", stdout_text="", by_args={
        "--version": AMD_SMI_VERSION, "metric --json": _metric_json(True), "process --json": "Segfault?\n"})
    b = RocmBackend()
    b.discover()
    s0, _ = b.sample()
    assert s0.util == 42.0
    assert s0.procs is None  # unknown, not "no processes"


# -- failures ------------------------------------------------------------------------------

def test_probe_without_tools():
    p = RocmBackend.probe()
    assert not p.available
    assert p.reason == "amd-smi/rocm-smi not on PATH"
    with pytest.raises(BackendUnavailable, match="amd-smi/rocm-smi not on PATH"):
        RocmBackend().discover()


def test_probe_with_rocm_smi(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "rocm-smi", stdout_file=MI100, by_args={"--version": ROCM_SMI_VERSION})
    p = RocmBackend.probe()
    assert p.available and p.version == "2.0.0+6.0.2" and p.path.endswith("rocm-smi")


@pytest.mark.parametrize("name", ["rocm-smi", "amd-smi"])
def test_hung_tool_is_a_tool_error_within_the_timeout(tmp_path, monkeypatch, name):
    install_tool(tmp_path, monkeypatch, name, stdout_file=MI100, sleep_s=30)
    b = RocmBackend(timeout_s=0.5)
    t0 = time.monotonic()
    with pytest.raises(ToolError, match=f"{name} did not answer within 0.5 s"):
        b.discover()
    assert time.monotonic() - t0 < 3.0


def test_tool_that_hangs_later_makes_sample_fail_fast(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "rocm-smi", stdout_file=MI100, by_args={"--version": ROCM_SMI_VERSION})
    b = RocmBackend(timeout_s=0.5)
    b.discover()
    install_tool(tmp_path, monkeypatch, "rocm-smi", stdout_file=MI100, sleep_s=30)
    t0 = time.monotonic()
    with pytest.raises(ToolError, match="rocm-smi"):
        b.sample()
    assert time.monotonic() - t0 < 3.0


def test_crashing_tool(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "rocm-smi", stdout_text="", exit_code=139,
                 stderr_text="Segmentation fault (core dumped)\n")
    with pytest.raises(ToolError, match=r"rocm-smi exited 139: Segmentation fault"):
        RocmBackend().discover()


@pytest.mark.parametrize("name,version,ver", [("rocm-smi", ROCM_SMI_VERSION, "2.0.0+6.0.2"),
                                              ("amd-smi", AMD_SMI_VERSION, "26.2.1+fc0010cf6a")])
def test_garbage_is_a_parse_error_naming_tool_and_version(tmp_path, monkeypatch, name, version, ver):
    install_tool(tmp_path, monkeypatch, name, stdout_text="\x00\x01 totally not a table {[ ]\n",
                 by_args={"--version": version})
    with pytest.raises(ParseError) as ei:
        RocmBackend().discover()
    msg = str(ei.value)
    assert msg.startswith(f"{name} {ver}: ")
    assert "\n" not in msg


def test_garbage_on_a_later_sample(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "rocm-smi", stdout_file=MI100, by_args={"--version": ROCM_SMI_VERSION})
    b = RocmBackend()
    b.discover()
    install_tool(tmp_path, monkeypatch, "rocm-smi", stdout_text='{"card0": {"GPU use (%)": "lots"}}',
                 by_args={"--version": ROCM_SMI_VERSION})
    with pytest.raises(ParseError,
                       match=r"^rocm-smi 2\.0\.0\+6\.0\.2: --json: card0 .gpu use \(%\).: .lots. is not a number"):
        b.sample()


def test_hygon_fork_is_refused(tmp_path, monkeypatch):
    d = json.loads(MI100.read_text())
    for k, card in d.items():
        if k.startswith("card"):
            card["DCU use (%)"] = card.pop("GPU use (%)")
    install_tool(tmp_path, monkeypatch, "rocm-smi", stdout_text=json.dumps(d))
    with pytest.raises(BackendUnavailable, match="Hygon"):
        RocmBackend().discover()


def test_dtk_rocm_smi_on_path_is_not_amds(tmp_path, monkeypatch):
    install_tool(tmp_path / "opt" / "dtk", monkeypatch, "rocm-smi", stdout_file=MI100)
    p = RocmBackend.probe()
    assert not p.available and "Hygon" in p.reason


def test_card_lost_and_back_are_events(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "rocm-smi", stdout_file=MI100)
    b = RocmBackend(clock=lambda: 5.0)
    b.discover()
    d = json.loads(MI100.read_text())
    del d["card3"]
    install_tool(tmp_path, monkeypatch, "rocm-smi", stdout_text=json.dumps(d))
    assert [s.card for s in b.sample()] == [0, 1, 2]  # card 3: no sample (stale), not zeros
    (ev,) = b.take_events()
    assert ev.type == "card_lost" and ev.data["card"] == 3
    install_tool(tmp_path, monkeypatch, "rocm-smi", stdout_file=MI100)
    assert len(b.sample()) == 4
    assert [e.type for e in b.take_events()] == ["card_recovered"]


# -- parsers never raise anything but ParseError -------------------------------------------

PARSERS = [parse_rocm_smi_json, parse_amd_smi_metric, parse_amd_smi_static, parse_amd_smi_process,
           parse_amd_smi_default]
FIXTURE_TEXTS = [p.read_text(encoding="utf-8") for p in (MI100, RX6700, AMDSMI_DEFAULT, AMDSMI_PROCESS)] + [
    _metric_json(True), _metric_json(False), _static_json()]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
    | st.sampled_from(["N/A", "0", "36.0", "(300Mhz)", "0 (16.0GT/s x16)", "-", "1e999", "nan", "²", "-1"]),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
        st.sampled_from(["gpu", "gpu_data", "card0", "card1", "usage", "gfx_activity", "value", "unit", "power",
                         "socket_power", "temperature", "edge", "mem_usage", "total_vram", "used_vram",
                         "process_list", "process_info", "pid", "memory_usage", "vram_mem", "GPU use (%)",
                         "VRAM Total Memory (B)", "sclk clock speed:", "pcie", "width", "speed", "clock",
                         "gfx_0", "clk", "asic", "market_name", "vram", "size", "limit", "bus"]) | st.text(max_size=8),
        kids, max_size=6),
    max_leaves=30)


def _only_parse_errors(fn, text):
    try:
        fn(text)
    except ParseError as e:
        assert "\n" not in str(e)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PARSERS), st.text(max_size=400))
def test_parsers_on_arbitrary_text(fn, text):
    _only_parse_errors(fn, text)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PARSERS), st.sampled_from(FIXTURE_TEXTS), st.data())
def test_parsers_on_truncated_fixtures(fn, text, data):
    cut = data.draw(st.integers(0, len(text)))
    _only_parse_errors(fn, text[:cut])


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(PARSERS), json_values)
def test_parsers_on_arbitrary_json(fn, value):
    _only_parse_errors(fn, json.dumps(value))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(FIXTURE_TEXTS), st.data())
def test_default_view_line_drops(text, data):
    lines = text.splitlines()
    drop = data.draw(st.sets(st.integers(0, max(len(lines) - 1, 0)), max_size=3))
    _only_parse_errors(parse_amd_smi_default, "\n".join(ln for i, ln in enumerate(lines) if i not in drop))


# -- the shared number/unit helpers (sattui/vendors/values.py, tool.py) ------------------

def test_number_helpers():
    assert values.expect_unit("65.0W", ("W",), "power") == 65.0
    assert values.expect_unit("49.0C", ("C",), "temp") == 49.0
    assert values.expect_unit("79 °C", ("C",), "temp") == 79.0
    assert values.parse_pct("37 %") == 37.0 and values.parse_pct("100.4") == 100.0 and values.parse_pct("250%") is None
    for na in ("N/A", "-", "", "  ", None, "Not Supported"):
        assert values.num(na) is None and values.parse_pct(na) is None and values.to_bytes(na) is None
    assert values.to_bytes("1024MiB") == 1024 * MiB
    assert values.to_bytes("2068 KiB") == 2068 * 1024
    assert values.to_bytes("5.9 MB") == round(5.9 * MiB)  # binary by default (amd-smi)
    assert values.to_bytes("5 MB", binary=False) == 5_000_000
    assert values.to_bytes("34342961152") == 34342961152
    assert rocm.amd_value({"value": 103, "unit": "W"}, "p") == (103.0, "W")
    assert rocm.amd_value("N/A", "p") == (None, "")
    assert values.extract_json('noise {"a": 1} tail') == {"a": 1}
    assert tool.version_from(AMD_SMI_VERSION) == "26.2.1+fc0010cf6a"
    assert tool.version_from("hy-smi version: 1.8.0") == "1.8.0"
    for bad in ("lots", "12abc", "1e999"):  # a word, a stray unit, an infinity
        with pytest.raises(ParseError):
            values.num(bad)
    with pytest.raises(ParseError, match="unexpected unit"):
        values.expect_unit("12 furlongs", ("W",), "x")


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([values.num, values.num_unit, values.parse_pct, values.to_bytes, values.extract_json,
                        lambda v: rocm.amd_value(v, "x"), lambda v: values.expect_unit(v, ("W",), "x")]),
       st.text(max_size=40) | json_values)
def test_number_helpers_only_raise_parse_errors(fn, value):
    try:
        fn(value)
    except ParseError as e:
        assert "\n" not in str(e)
    assert tool.version_from(str(value)) is None or isinstance(tool.version_from(str(value)), str)
    assert isinstance(values.is_na(value), bool) and isinstance(values.is_index(value), bool)
