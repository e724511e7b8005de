"""The hygon backend end to end: a fake hy-smi (or DTK rocm-smi) on PATH printing real outputs.

Expected numbers were read by hand from tests/fixtures/vendors/hygon/ (a copy of
../shared/fixtures/vendors/hygon/); the JSON-mode inputs reuse AMD's captured rocm-smi
JSON (hy-smi is a fork of rocm-smi) with Hygon's key names, as the tests say.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sattui.vendors import hygon, rocm
from sattui.vendors.backend import BackendUnavailable, ParseError, ToolError, open_backend
from sattui.vendors.hygon import HygonBackend, parse_hy_smi_concise
from sattui.vendors.rocm import parse_rocm_smi_json
from tests.vendor_tools import calls, install_tool, isolate_path

VENDORS = Path(__file__).resolve().parents[1] / "fixtures" / "vendors"
CONCISE = VENDORS / "hygon" / "hy-smi_4x-K100-AI_dtk24.04.1_concise.txt"
DTK_ROCM_SMI = VENDORS / "hygon" / "rocm-smi_4x-Z100_dtk23.10.1_concise.txt"
MI100 = VENDORS / "amd" / "rocm-smi-json_4x-mi100_rocm6.0.2.json"

# A test input, not a capture: hy-smi's --version answer.
HY_SMI_VERSION = "HY-SMI version: 1.8.0\nHYHAL version: 6.3.6\n"


@pytest.fixture(autouse=True)
def _only_fake_tools(tmp_path, monkeypatch):
    isolate_path(tmp_path, monkeypatch)
    monkeypatch.setattr(hygon, "HY_SMI_DIRS", ())
    monkeypatch.setattr(hygon, "DTK_DIRS", ())
    monkeypatch.setattr(rocm, "AMD_TOOL_DIRS", ())


def _hygon_json(util_key: str) -> str:
    """MI100's captured rocm-smi JSON with Hygon's utilisation key, wrapped in stray text."""
    d = json.loads(MI100.read_text())
    for k, card in d.items():
        if k.startswith("card"):
            card[util_key] = card.pop("GPU use (%)")
            card["GPU use (%)"] = "N/A"  # must not shadow the Hygon key
    return ("hy-smi: WARNING: driver version mismatch\n"
            "============================ System Management Interface =============================\n"
            + json.dumps(d, indent=4)
            + "\n=================================== End of SMI Log ===================================\n")


def test_hy_smi_concise_k100(tmp_path, monkeypatch):
    # Every argv prints the concise view (as a hy-smi whose --json is broken would):
    # --json does not parse, the backend reads the table.
    tool = install_tool(tmp_path, monkeypatch, "hy-smi", stdout_file=CONCISE, by_args={"--version": HY_SMI_VERSION})
    b = HygonBackend(clock=lambda: 2.0)
    cards = b.discover()
    assert b.mode == "concise"
    assert [c.card for c in cards] == [0, 1, 2, 3]
    assert all(c.vendor == "hygon" for c in cards)
    assert cards[0].power_limit_w == 800.0  # PwrCap "800.0W"
    assert cards[0].mem_total is None  # the concise view has VRAM% only

    s = b.sample()
    # Rows "0  49.0C  118.0W  auto  800.0W  0%  0%  Normal" … "3  49.0C  138.0W …"
    assert [x.temp_c for x in s] == [49.0, 48.0, 53.0, 49.0]
    assert [x.power_w for x in s] == [118.0, 120.0, 116.0, 138.0]
    assert [x.power_limit_w for x in s] == [800.0] * 4
    assert [x.util for x in s] == [0.0] * 4  # DCU%
    assert all(x.mem_used is None for x in s)  # VRAM% "0%" is not bytes: unknown
    assert all(x.t == 2.0 for x in s)
    assert calls(tool)[-1] == []


@pytest.mark.parametrize("util_key", ["DCU use (%)", "HCU use (%)"])
def test_hy_smi_json_with_stray_text(tmp_path, monkeypatch, util_key):
    install_tool(tmp_path, monkeypatch, "hy-smi", stdout_text=_hygon_json(util_key),
                 by_args={"--version": HY_SMI_VERSION})
    b = HygonBackend()
    cards = b.discover()
    assert b.mode == "json"
    assert len(cards) == 4
    assert cards[0].mem_total == 34342961152  # MI100 card0 "VRAM Total Memory (B)"
    s0 = b.sample()[0]
    assert s0.util == 0.0
    assert s0.power_w == 36.0  # card0 "Average Graphics Package Power (W)"
    assert s0.mem_used == 6750208  # card0 "VRAM Total Used Memory (B)"
    assert s0.temp_c == 53.0


def test_dtk_rocm_smi_fallback(tmp_path, monkeypatch):
    tool = install_tool(tmp_path / "opt" / "dtk", monkeypatch, "rocm-smi", stdout_file=CONCISE)
    p = HygonBackend.probe()
    assert p.available and p.path == str(tool)
    assert "DTK's rocm-smi" in (p.reason or "")
    assert p.version is None  # it printed its table for --version: no number is made a version
    assert len(HygonBackend().discover()) == 4
    assert not rocm.RocmBackend.probe().available  # the AMD backend leaves it alone


def test_amd_rocm_smi_is_not_hygons(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "rocm-smi", stdout_file=MI100)
    p = HygonBackend.probe()
    assert not p.available
    assert p.reason.startswith("hy-smi not found")
    assert p.reason.endswith("the rocm-smi on PATH is not Hygon's (it prints no DCU)")
    with pytest.raises(BackendUnavailable, match="hy-smi not found"):
        HygonBackend().discover()


def test_dtk_rocm_smi_on_path_without_hy_smi(tmp_path, monkeypatch):
    # A DTK install with no hy-smi: DTK's rocm-smi on PATH, in no folder named for DTK.
    # It is told from AMD's by what it prints ("DCU  Temp  AvgPwr …").
    tool = install_tool(tmp_path, monkeypatch, "rocm-smi", stdout_file=DTK_ROCM_SMI)
    p = HygonBackend.probe()
    assert (p.available, p.path) == (True, str(tool))
    assert p.reason == "hy-smi not found; using DTK's rocm-smi"
    b = HygonBackend(clock=lambda: 3.0)
    cards = b.discover()
    assert b.mode == "concise"  # every argv prints the table: its --json did not parse
    assert [(c.card, c.vendor, c.power_limit_w) for c in cards] == [(i, "hygon", 280.0) for i in range(4)]
    s = b.sample()
    # Rows "0  30.0c  38.0W  0.0%  auto  280.0W  0%  0%" … "3  29.0c  39.0W …"
    assert [(x.temp_c, x.power_w, x.util, x.mem_used) for x in s] == [
        (30.0, 38.0, 0.0, None), (30.0, 41.0, 0.0, None), (29.0, 38.0, 0.0, None), (29.0, 39.0, 0.0, None)]
    # The AMD backend leaves it alone, saying whose it is.
    with pytest.raises(BackendUnavailable, match="is Hygon DTK's"):
        rocm.RocmBackend().discover()


def test_backend_hygon_and_auto_reach_dtk_rocm_smi_on_path(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "rocm-smi", stdout_file=DTK_ROCM_SMI)
    backend, cards, _ = open_backend("hygon")
    assert backend is not None and backend.name == "hygon" and len(cards) == 4
    backend.close()
    monkeypatch.setitem(sys.modules, "pynvml", None)  # a real NVIDIA driver here must not answer first
    backend, cards, skipped = open_backend("auto")
    assert backend is not None and backend.name == "hygon" and len(cards) == 4
    assert any(s.startswith("rocm: rocm-smi at ") and "is Hygon DTK's" in s for s in skipped), skipped
    backend.close()


def test_a_rocm_smi_on_path_that_fails_says_so(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "rocm-smi", stdout_text="", exit_code=1,
                 stderr_text="ERROR: GPU[0]: Unable to open driver\n")
    p = HygonBackend.probe()
    assert not p.available
    assert p.reason == ("hy-smi not found (nor DTK's rocm-smi in /opt/dtk, /opt/hyhal); the rocm-smi on PATH: "
                        "rocm-smi exited 1: ERROR: GPU[0]: Unable to open driver")


def test_hung_hy_smi(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "hy-smi", stdout_file=CONCISE, sleep_s=30)
    t0 = time.monotonic()
    with pytest.raises(ToolError, match="hy-smi did not answer within 0.5 s"):
        HygonBackend(timeout_s=0.5).discover()
    assert time.monotonic() - t0 < 3.0


def test_hy_smi_hangs_on_a_later_sample(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "hy-smi", stdout_file=CONCISE)
    b = HygonBackend(timeout_s=0.5)
    b.discover()
    install_tool(tmp_path, monkeypatch, "hy-smi", stdout_file=CONCISE, sleep_s=30)
    t0 = time.monotonic()
    with pytest.raises(ToolError, match="hy-smi"):
        b.sample()
    assert time.monotonic() - t0 < 3.0


def test_crashing_hy_smi(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "hy-smi", stdout_text="", exit_code=2,
                 stderr_text="hy-smi: error: no DCU found\n")
    with pytest.raises(ToolError, match="hy-smi exited 2: hy-smi: error: no DCU found"):
        HygonBackend().discover()


def test_garbage_names_tool_and_version(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "hy-smi", stdout_text="段错误 (核心已转储)\n\x00\x1b[0m\n",
                 by_args={"--version": HY_SMI_VERSION})
    with pytest.raises(ParseError) as ei:
        HygonBackend().discover()
    msg = str(ei.value)
    assert msg.startswith("hy-smi 1.8.0: ") and "\n" not in msg
    assert "concise view did not match" in msg


def test_concise_row_with_wrong_column_count(tmp_path, monkeypatch):
    text = CONCISE.read_text().replace("138.0W     auto", "138.0W")  # one column short on DCU 3
    install_tool(tmp_path, monkeypatch, "hy-smi", stdout_text=text, by_args={"--version": HY_SMI_VERSION})
    with pytest.raises(ParseError, match="hy-smi 1.8.0: .*has 7 columns, header has 8"):
        HygonBackend().discover()


def test_concise_na_and_older_dtk_layout():
    # The older DTK rocm-smi concise layout (SCLK/MCLK/Fan, GPU% instead of DCU%),
    # built for this test from hy-smi's own rows: N/A must read as None.
    text = ("GPU  Temp   AvgPwr  SCLK     MCLK     Fan   Perf  PwrCap  VRAM%  GPU%\n"
            "0    49.0C  N/A     1500Mhz  1200Mhz  0.0%  auto  800.0W  3%     97%\n")
    (r,) = parse_hy_smi_concise(text).values()
    assert (r.temp_c, r.power_w, r.sm_clock_mhz, r.power_limit_w, r.util) == (49.0, None, 1500.0, 800.0, 97.0)


# -- parsers never raise anything but ParseError -------------------------------------------

TEXTS = [CONCISE.read_text(encoding="utf-8"), _hygon_json("HCU use (%)")]


def _only_parse_errors(fn, text):
    try:
        fn(text)
    except ParseError as e:
        assert "\n" not in str(e)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([parse_hy_smi_concise, parse_rocm_smi_json]), st.text(max_size=400))
def test_parsers_on_arbitrary_text(fn, text):
    _only_parse_errors(fn, text)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([parse_hy_smi_concise, parse_rocm_smi_json]), st.sampled_from(TEXTS), st.data())
def test_parsers_on_truncated_fixtures(fn, text, data):
    cut = data.draw(st.integers(0, len(text)))
    _only_parse_errors(fn, text[:cut])


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_concise_with_mangled_cells(data):
    lines = CONCISE.read_text().splitlines()
    i = data.draw(st.integers(4, 7))  # one of the four DCU rows
    toks = lines[i].split()
    j = data.draw(st.integers(0, len(toks) - 1))
    toks[j] = data.draw(st.sampled_from(["N/A", "-", "", "1e999C", "nan", "49,0C", "-5%", "200%", "x"])
                        | st.text(max_size=6))
    lines[i] = "   ".join(toks)
    _only_parse_errors(parse_hy_smi_concise, "\n".join(lines))
