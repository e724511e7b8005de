"""The kunlun backend on Kunlunxin's 4.x-driver ``xpu_smi`` layout, through a fake tool on PATH.

Both fixtures are real outputs of one machine with two K200 boards (four devices), from
a public repository (see each .source.md): idle before a test run, and after it, with
processes. Expected numbers are literal, read by hand from the files. The drivers ≥ 5
layout is tests/unit/test_vendor_kunlun.py's.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sattui.vendors.backend import ParseError
from sattui.vendors.intel import KUNLUN_REASON, IntelBackend
from sattui.vendors.kunlun import KunlunBackend, parse_xpu_smi, xpu_smi_version
from sattui.vendors.xpu_smi import identify_xpu_smi
from tests.vendor_tools import assert_hung_tool_times_out, calls, install_tool, isolate_path, parser_fuzz_tests

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vendors" / "kunlun"
IDLE = FIX / "xpu_smi_4x-K200_drv4.33_idle.txt"
BUSY = FIX / "xpu_smi_4x-K200_drv4.33_test-procs.txt"
MiB = 1 << 20


def _backend(timeout_s: float = 10.0) -> KunlunBackend:
    return KunlunBackend(clock=time.monotonic, timeout_s=timeout_s)


@pytest.fixture(autouse=True)
def _only_fake_tools(tmp_path, monkeypatch):
    isolate_path(tmp_path, monkeypatch)
    monkeypatch.setattr("sattui.vendors.kunlun.KUNLUN_DIRS", ())


def test_k200_idle(tmp_path, monkeypatch):
    tool = install_tool(tmp_path, monkeypatch, "xpu_smi", stdout_file=IDLE)
    p = KunlunBackend.probe()
    assert (p.available, p.path, p.version) == (True, str(tool), "driver 4.33")  # "Driver Version: 4.33"
    be = _backend()
    cards = be.discover()
    # "|     0 | 0000:43:00.0 | K200  | … | 0 / 8064 MB |": two devices per board.
    assert [(c.card, c.vendor, c.name, c.mem_total) for c in cards] == [
        (i, "kunlunxin", "K200", 8064 * MiB) for i in range(4)]
    s = {x.card: x for x in be.sample()}
    # UseRate "0 %", Power(W) 38/38/37/37, Temp 37/37/38/36, Freq(MHz) 900, Memory "0 / 8064 MB".
    assert [(s[i].util, s[i].power_w, s[i].temp_c, s[i].sm_clock_mhz, s[i].mem_used) for i in range(4)] == [
        (0.0, 38.0, 37.0, 900.0, 0), (0.0, 38.0, 37.0, 900.0, 0),
        (0.0, 37.0, 38.0, 900.0, 0), (0.0, 37.0, 36.0, 900.0, 0)]
    assert all(s[i].power_limit_w is None for i in range(4))  # the 4.x table prints no cap
    assert all(s[i].procs == {} for i in range(4))  # an empty PROCESSES table: none, known
    # The probe and discovery read one answer each; the sample one more.
    assert calls(tool) == [[], [], []]


def test_k200_processes_under_the_devid_above(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "xpu_smi", stdout_file=BUSY)
    be = _backend()
    be.discover()
    s = {x.card: x for x in be.sample()}
    # UseRate "3 %", "3 %", "4 %", "4 %"; Memory "3 / 8064 MB", "1 / …", "3 / …", "1025 / 8064 MB".
    assert [s[i].util for i in range(4)] == [3.0, 3.0, 4.0, 4.0]
    assert [s[i].mem_used for i in range(4)] == [3 * MiB, 1 * MiB, 3 * MiB, 1025 * MiB]
    # The DevID is printed on each device's first process row only: 19, 20, 24, 25 rows.
    assert [len(s[i].procs) for i in range(4)] == [19, 20, 24, 25]
    # "| 3     | 89724 | 1       | 0 MB | 1024 MB | test_dma        |" (Memory, not L3)
    assert s[3].procs["89724"] == 1024 * MiB
    # "|       | 90026 | 2       | 0 MB |    1 MB | test_memcpy_pee |" under device 2, 0 MB under 0
    assert (s[2].procs["90026"], s[0].procs["90026"]) == (1 * MiB, 0)
    # Each device's rows add up to its Memory column (1 MB rows: 90005, 90012, 90019 on device 0).
    assert [sum(s[i].procs.values()) for i in range(4)] == [3 * MiB, 1 * MiB, 3 * MiB, 1025 * MiB]


def test_the_4x_layout_is_kunlunxins_for_both_backends(tmp_path, monkeypatch):
    for f in (IDLE, BUSY):
        assert identify_xpu_smi(f.read_text()) == "kunlun"
        assert xpu_smi_version(f.read_text()) == "driver 4.33"
    # Installed as xpu-smi, Intel's backend leaves it to the kunlun backend.
    install_tool(tmp_path, monkeypatch, "xpu-smi", stdout_file=IDLE)
    assert IntelBackend.probe().reason == KUNLUN_REASON
    assert KunlunBackend.probe().available


def test_a_first_process_row_without_devid_is_an_error():
    # No row above to belong to: a layout we do not know, not a guess.
    text = BUSY.read_text().replace("| 0     | 89865 |", "|       | 89865 |")
    with pytest.raises(ParseError, match="process DevID"):
        parse_xpu_smi(text)


def test_a_cut_device_row_names_the_driver(tmp_path, monkeypatch):
    lines = IDLE.read_text().splitlines(keepends=True)
    cut = "".join(lines[:8]) + lines[8][:60] + "\n"  # device 2's row ends mid-table
    install_tool(tmp_path, monkeypatch, "xpu_smi", stdout_text=cut)
    with pytest.raises(ParseError, match=r"^xpu-smi driver 4\.33: DEVICES table: "):
        _backend().discover()


def test_hung_tool(tmp_path, monkeypatch):
    assert_hung_tool_times_out(tmp_path, monkeypatch, "xpu_smi", _backend, IDLE)


(test_arbitrary_text, test_truncated_fixtures,
 test_fixtures_with_lines_dropped_or_doubled, test_fixtures_with_characters_replaced) = parser_fuzz_tests(
    parse_xpu_smi, [IDLE.read_text(), BUSY.read_text()], never_raise=(identify_xpu_smi, xpu_smi_version))
