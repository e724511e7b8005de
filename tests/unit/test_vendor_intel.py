"""The intel backend end to end: a fake xpu-smi on PATH printing real outputs from Intel's guide.

Expected numbers were read by hand from tests/fixtures/vendors/intel/ (copies of
../shared/fixtures/vendors/intel/, plus the discovery -d table and Kunlunxin's xpu-smi
output from ../shared/fixtures/vendors/kunlun/, each with its .source.md).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sattui.vendors import intel
from sattui.vendors.backend import BackendUnavailable, ParseError, ToolError
from sattui.vendors.intel import (
    DUMP_METRICS,
    KUNLUN_REASON,
    IntelBackend,
    identify_xpu_smi,
    parse_xpu_discovery_detail,
    parse_xpu_discovery_json,
    parse_xpu_dump_csv,
    parse_xpu_stats,
)
from tests.vendor_tools import calls, install_tool, isolate_path

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vendors" / "intel"
DISCOVERY_J = FIX / "xpu-smi-discovery-j_1x-0x020a.json"
DISCOVERY_D = FIX / "xpu-smi-discovery-d0_detail.txt"
STATS = FIX / "xpu-smi-stats-d0_blank-fields.txt"
DUMP = FIX / "xpu-smi-dump-d0-m012_csv.csv"
KUNLUN = FIX / "kunlun-xpu_smi_8x-P800-OAM_drv5.0.21.26.txt"
MiB = 1024 * 1024

# The layout of `xpu-smi -v` as printed in Intel's guide (doc/smi_user_guide.md), with
# a later version number: a test input, not a capture.
XPU_SMI_VERSION = ("CLI:\n    Version: 1.2.39.20240716\n    Build ID: 5f6e2d1c\n\n"
                   "Service:\n    Version: 1.2.39.20240716\n    Build ID: 5f6e2d1c\n    Level Zero Version: 1.17.0\n")


@pytest.fixture(autouse=True)
def _only_fake_tools(tmp_path, monkeypatch):
    isolate_path(tmp_path, monkeypatch)
    monkeypatch.setattr(intel, "INTEL_TOOL_DIRS", ())


def _intel(tmp_path, monkeypatch, **by_args):
    args = {"-v": XPU_SMI_VERSION, "discovery -j": DISCOVERY_J, "discovery -d 0": DISCOVERY_D}
    args.update({k.replace("_", " "): v for k, v in by_args.items()})
    return install_tool(tmp_path, monkeypatch, "xpu-smi", stdout_text="", by_args=args)


def test_stats_table_with_blank_fields(tmp_path, monkeypatch):
    tool = _intel(tmp_path, monkeypatch, **{"stats -d 0": STATS})
    p = IntelBackend.probe()
    assert p.available and p.version == "1.2.39.20240716"
    b = IntelBackend(clock=lambda: 4.0)
    (c,) = b.discover()
    # discovery -j: "device_name": "Intel(R) Graphics [0x020a]", "uuid": "00000000-…-020a00008086"
    assert (c.card, c.vendor, c.name) == (0, "intel", "Intel(R) Graphics [0x020a]")
    assert c.uuid == "00000000-0000-0000-0000-020a00008086"
    # discovery -d: "Memory Physical Size: 32768.00 MiB", "PCIe Generation: 4", "PCIe Max Link Width: 16"
    assert c.mem_total == 32768 * MiB
    assert (c.pcie_gen_max, c.pcie_width_max) == (4, 16)

    (s,) = b.sample()
    assert b.mode == "stats"
    assert s.util == 0.0  # "Average % utilization of | 0" (label wraps onto "all GPU Engines")
    assert s.power_w == 15.0  # "GPU Power (W) | 15"
    assert s.sm_clock_mhz == 2050.0  # "GPU Frequency (MHz) | 2050"
    assert s.temp_c == 41.0  # "GPU Core Temperature (C) | 41"
    assert s.mem_used == 24 * MiB  # "GPU Memory Used (MiB) | 24"
    assert s.mem_total == 32768 * MiB  # from discovery
    assert s.dram_active is None  # "GPU Memory Bandwidth (%)" is blank: unknown, not 0
    assert s.t == 4.0
    assert calls(tool)[-1] == ["stats", "-d", "0"]
    assert b.version == "1.2.39.20240716"


STATS_BUSY = FIX / "xpu-smi-stats-d0_busy-util73_DERIVED.txt"


def test_stats_of_a_busy_card_derived(tmp_path, monkeypatch):
    # DERIVED (not a capture): no public xpu-smi/xpumcli stats table with a non-zero
    # utilization was found (docs/testing.md, "Busy cards"). The real idle table above with
    # its two utilization cells made 73 (the .source.md says which); every other line is real.
    real, busy = STATS.read_text().splitlines(), STATS_BUSY.read_text().splitlines()
    assert [(a, b) for a, b in zip(real, busy) if a != b] == [
        ("| Average % utilization of    | 0                                                                  |",
         "| Average % utilization of    | 73                                                                 |"),
        ("| Compute Engine Util (%)     | 0; Engine 0: 0                                                     |",
         "| Compute Engine Util (%)     | 73; Engine 0: 73                                                   |")]
    assert len(real) == len(busy)
    tool = _intel(tmp_path, monkeypatch, **{"stats -d 0": STATS_BUSY})
    b = IntelBackend()
    b.discover()
    (s,) = b.sample()
    assert b.mode == "stats"  # read from stats, no dump call
    assert calls(tool)[-1] == ["stats", "-d", "0"]
    assert not any(c[0] == "dump" for c in calls(tool))
    assert s.util == 73.0  # "Average % utilization of | 73" (wrapping onto "all GPU Engines")
    # The unedited rows: "GPU Power (W) | 15", "GPU Frequency (MHz) | 2050",
    # "GPU Core Temperature (C) | 41", "GPU Memory Used (MiB) | 24", "GPU Memory Bandwidth (%)" blank.
    assert (s.power_w, s.sm_clock_mhz, s.temp_c, s.mem_used) == (15.0, 2050.0, 41.0, 24 * MiB)
    assert s.dram_active is None
    b.sample()
    assert calls(tool)[-1] == ["stats", "-d", "0"]  # stays on stats


def test_dump_csv_when_stats_layout_is_unknown(tmp_path, monkeypatch):
    # stats prints nothing parseable (here: nothing at all); dump's CSV is read instead.
    tool = _intel(tmp_path, monkeypatch, **{"stats -d 0": "", "dump -d 0": DUMP})
    b = IntelBackend()
    b.discover()
    (s,) = b.sample()
    assert b.mode == "dump"
    # Last CSV row "06:14:50.000,    0, 0.00, 14.61,    0"
    assert s.util == 0.0
    assert s.power_w == 14.61
    assert s.sm_clock_mhz == 0.0  # the tool says 0 MHz while idle: a reading, kept
    assert s.temp_c is None  # metric 3 is not in this capture's columns
    assert calls(tool)[-1] == ["dump", "-d", "0", "-m", DUMP_METRICS, "-n", "1"]
    b.sample()
    assert calls(tool)[-1][0] == "dump"  # stays on dump, no stats retry each tick


DUMP_BUSY = FIX / "xpumcli-dump-d0-m0123_flex170-0x56c0_busy.csv"


def test_dump_of_a_busy_flex_170(tmp_path, monkeypatch):
    # A real BUSY capture (XPU Manager's README, a Flex 170 at ~99.5 %); stats prints
    # nothing readable here, so the backend reads dump's CSV, through the fake xpu-smi.
    tool = _intel(tmp_path, monkeypatch, **{"stats -d 0": "", "dump -d 0": DUMP_BUSY})
    b = IntelBackend()
    b.discover()
    (s,) = b.sample()
    assert b.mode == "dump"
    assert calls(tool)[-1] == ["dump", "-d", "0", "-m", DUMP_METRICS, "-n", "1"]
    # The last row "21:23:03.000,    0, 99.65, 119.24, 1700, 51.00" under "GPU Utilization (%),
    # GPU Power (W), GPU Frequency (MHz), GPU Core Temperature (Celsius Degree)".
    assert (s.util, s.power_w, s.sm_clock_mhz, s.temp_c) == (99.65, 119.24, 1700.0, 51.0)
    assert s.mem_used is None  # metric 18 is not in this capture's columns: unknown, not 0


DUMP_NA = FIX / "xpu-smi-dump-d3-m0518_util-na_itex-issue64.csv"


def test_dump_with_na_utilization_and_memory_used():
    # Real (intel-extension-for-tensorflow issue 64): "12:39:06.000,    3,  N/A, 87.55, 43020.16"
    # under "GPU Utilization (%), GPU Memory Utilization (%), GPU Memory Used (MiB)".
    (r,) = parse_xpu_dump_csv(DUMP_NA.read_text()).values()
    assert r.index == 3
    assert r.util is None  # "N/A": unknown, never 0
    # A column sattui does not read ("GPU Memory Utilization") sits before one it does.
    assert r.mem_used == round(43020.16 * MiB)
    assert r.dram_active is None  # memory *utilization* is not DRAM bandwidth


def test_dump_of_one_row_as_the_backend_asks_for():
    # DERIVED: the backend runs "dump ... -n 1", which prints the header and one row; here
    # the busy capture cut after its first row "21:23:00.000,    0, 99.55, 119.61, 1800, 49.00".
    header, first = DUMP_BUSY.read_text().splitlines()[:2]
    r = parse_xpu_dump_csv(header + "\n" + first + "\n")[0]
    assert (r.util, r.power_w, r.sm_clock_mhz, r.temp_c) == (99.55, 119.61, 1800.0, 49.0)


def test_stats_with_a_device_but_no_known_row_is_a_parse_error():
    # DERIVED: the real stats table kept to its Device ID and error-counter rows, none of
    # which sattui reads: that is a layout it does not know, not a card with no values.
    keep = [ln for ln in STATS.read_text().splitlines()
            if ln.startswith("+") or ln.startswith("| Device ID") or "Errors" in ln or ln.startswith("| Reset")]
    with pytest.raises(ParseError, match="none of the known rows"):
        parse_xpu_stats("\n".join(keep) + "\n")


def test_dump_rows_pick_the_last_per_device():
    # The fixture's rows give power 14.61, 14.59, 14.61, 14.61, 14.61: the last one is kept
    r = parse_xpu_dump_csv(DUMP.read_text())[0]
    assert r.power_w == 14.61 and r.util == 0.0


def test_kunlun_xpu_smi_is_not_intel(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "xpu-smi", stdout_file=KUNLUN)
    p = IntelBackend.probe()
    assert not p.available
    assert p.reason == KUNLUN_REASON
    assert p.reason.startswith("xpu-smi on PATH is Kunlunxin's")
    with pytest.raises(BackendUnavailable, match="xpu-smi on PATH is Kunlunxin's"):
        IntelBackend().discover()


def test_kunlun_xpu_smi_rejecting_intel_args(tmp_path, monkeypatch):
    # Kunlunxin's tool may exit non-zero on "-v"/"discovery -j" and still print its table.
    install_tool(tmp_path, monkeypatch, "xpu-smi", stdout_file=KUNLUN, exit_code=1)
    assert IntelBackend.probe().reason == KUNLUN_REASON
    with pytest.raises(BackendUnavailable, match="Kunlunxin"):
        IntelBackend().discover()


def test_identify():
    assert identify_xpu_smi(KUNLUN.read_text()) == "kunlun"
    for f in (DISCOVERY_J, DISCOVERY_D, STATS):
        assert identify_xpu_smi(f.read_text()) == "intel"
    assert identify_xpu_smi(XPU_SMI_VERSION) == "intel"
    assert identify_xpu_smi("") is None


def test_probe_without_tool():
    p = IntelBackend.probe()
    assert not p.available and p.reason == "xpu-smi not on PATH"


def test_hung_xpu_smi(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "xpu-smi", stdout_file=DISCOVERY_J, sleep_s=30)
    t0 = time.monotonic()
    with pytest.raises(ToolError, match="xpu-smi did not answer within 0.5 s"):
        IntelBackend(timeout_s=0.5).discover()
    assert time.monotonic() - t0 < 3.0


def test_xpu_smi_hangs_on_a_later_sample(tmp_path, monkeypatch):
    _intel(tmp_path, monkeypatch, **{"stats -d 0": STATS})
    b = IntelBackend(timeout_s=0.5)
    b.discover()
    install_tool(tmp_path, monkeypatch, "xpu-smi", stdout_file=STATS, sleep_s=30)
    t0 = time.monotonic()
    with pytest.raises(ToolError, match="xpu-smi"):
        b.sample()
    assert time.monotonic() - t0 < 3.0


def test_crashing_xpu_smi(tmp_path, monkeypatch):
    _intel(tmp_path, monkeypatch, **{"stats -d 0": STATS})
    b = IntelBackend()
    b.discover()
    install_tool(tmp_path, monkeypatch, "xpu-smi", stdout_text="", exit_code=134,
                 stderr_text="terminate called after throwing an instance of 'std::runtime_error'\n")
    with pytest.raises(ToolError, match="xpu-smi exited 134: terminate called"):
        b.sample()


def test_garbage_names_tool_and_version(tmp_path, monkeypatch):
    _intel(tmp_path, monkeypatch, **{"discovery -j": '{"device_list": "oops"} ... Intel(R)'})
    with pytest.raises(ParseError) as ei:
        IntelBackend().discover()
    assert str(ei.value).startswith("xpu-smi 1.2.39.20240716: discovery -j: ")


def test_garbage_stats_and_dump(tmp_path, monkeypatch):
    _intel(tmp_path, monkeypatch, **{"stats -d 0": "| Device ID | zero |\n", "dump -d 0": "nope\n"})
    b = IntelBackend()
    b.discover()
    with pytest.raises(ParseError, match=r"^xpu-smi 1\.2\.39\.20240716: dump .*Timestamp"):
        b.sample()


def test_stats_that_parsed_once_then_changes_is_an_error(tmp_path, monkeypatch):
    _intel(tmp_path, monkeypatch, **{"stats -d 0": STATS})
    b = IntelBackend()
    b.discover()
    b.sample()
    _intel(tmp_path, monkeypatch, **{"stats -d 0": STATS.read_text().replace("| 15 ", "| hot")})
    with pytest.raises(ParseError, match="GPU Power"):
        b.sample()


# -- parsers never raise anything but ParseError -------------------------------------------

PARSERS = [parse_xpu_discovery_json, parse_xpu_discovery_detail, parse_xpu_stats, parse_xpu_dump_csv]
TEXTS = [f.read_text(encoding="utf-8") for f in (DISCOVERY_J, DISCOVERY_D, STATS, STATS_BUSY, DUMP, DUMP_BUSY, DUMP_NA,
                                                   KUNLUN)]


def _only_parse_errors(fn, text):
    try:
        fn(text)
    except ParseError as e:
        assert "\n" not in str(e)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PARSERS), st.text(max_size=400))
def test_parsers_on_arbitrary_text(fn, text):
    _only_parse_errors(fn, text)
    assert identify_xpu_smi(text) in ("intel", "kunlun", None)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PARSERS), st.sampled_from(TEXTS), st.data())
def test_parsers_on_truncated_fixtures(fn, text, data):
    cut = data.draw(st.integers(0, len(text)))
    _only_parse_errors(fn, text[:cut])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([parse_xpu_stats, parse_xpu_dump_csv, parse_xpu_discovery_detail]),
       st.sampled_from([STATS, DUMP, DISCOVERY_D]), st.data())
def test_parsers_on_mangled_values(fn, path, data):
    text = path.read_text()
    digits = [i for i, ch in enumerate(text) if ch.isdigit()]
    i = data.draw(st.sampled_from(digits))
    repl = data.draw(st.sampled_from(["N/A", "", "-", "x", "1e999", "nan", "|", ",", "\n"]) | st.text(max_size=3))
    _only_parse_errors(fn, text[:i] + repl + text[i + 1:])
