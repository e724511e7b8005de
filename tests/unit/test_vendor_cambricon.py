"""The cambricon backend (``cnmon``) end to end through a fake tool on PATH, and the
shared box-table reader that lives in the same module.

The .txt fixtures under tests/fixtures/vendors/cambricon are real ``cnmon`` outputs of
both table generations (see each .source.md); expected numbers are literal, read by
hand from the files. No public capture shows a cnmon process row, so the one process
test is SYNTHETIC and says so.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sattui.vendors.backend import REGISTRY, ParseError
from sattui.vendors.box_table import is_rule, map_cell, read_table, split_pair, split_paren
from sattui.vendors.cambricon import CambriconBackend, cnmon_version, parse_cnmon
from tests.vendor_tools import (
    assert_crash_is_tool_error,
    assert_hung_tool_times_out,
    assert_unreadable_output,
    calls,
    install_tool,
    parser_fuzz_tests,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vendors" / "cambricon"
F_V5_13 = FIX / "cnmon_2x-MLU370-X8_cnmon-v5.10.13_sriov-column-NA.txt"
F_V5_10 = FIX / "cnmon_2x-MLU370-X4_cnmon-v5.10.10_exclusive-misaligned.txt"
F_V4 = FIX / "cnmon_3x-MLU370-X4_cnmon-v4.20.11_inited-driver-vmemory.txt"
ALL_FIXTURES = sorted(FIX.glob("*.txt"))
MiB = 1 << 20


def _backend(timeout_s: float = 10.0) -> CambriconBackend:
    return CambriconBackend(clock=time.monotonic, timeout_s=timeout_s)


def test_registered():
    assert REGISTRY["cambricon"] is CambriconBackend
    assert CambriconBackend.min_interval_s >= 1.0


def test_v5_10_13_two_mlu370_x8(tmp_path, monkeypatch):
    tool = install_tool(tmp_path, monkeypatch, "cnmon", stdout_file=F_V5_13)
    be = _backend()
    cards = be.discover()
    # "| 0     /   MLU370-X8    v1.1.6 |  0000:39:00.0 | 0%   N/A |" and card 1 "0000:3D:00.0".
    assert [(c.card, c.vendor, c.name) for c in cards] == [(0, "cambricon", "MLU370-X8"), (1, "cambricon", "MLU370-X8")]
    # "106 W/ 250 W" → the cap; "0 MiB/ 23374 MiB" → the size.
    assert all(c.power_limit_w == 250.0 and c.mem_total == 23374 * MiB for c in cards)
    s = {x.card: x for x in be.sample()}
    # Card 0: "|  0%   32C        106 W/ 250 W |     0 MiB/ 23374 MiB |"
    assert (s[0].util, s[0].temp_c, s[0].power_w, s[0].power_limit_w) == (0.0, 32.0, 106.0, 250.0)
    assert (s[0].mem_used, s[0].mem_total) == (0, 23374 * MiB)
    # Card 1: "|  0%   39C        106 W/ 250 W |     0 MiB/ 23374 MiB |"
    assert (s[1].util, s[1].temp_c, s[1].power_w) == (0.0, 39.0, 106.0)
    assert (s[1].mem_used, s[1].mem_total) == (0, 23374 * MiB)
    # "No running processes found": known empty.
    assert s[0].procs == {} and s[1].procs == {}
    assert calls(tool) == [[], []]  # no arguments, once per discover and sample


def test_v5_10_10_misaligned_ecc_column(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "cnmon", stdout_file=F_V5_10)
    be = _backend()
    assert [c.name for c in be.discover()] == ["MLU370-X4", "MLU370-X4"]
    s = {x.card: x for x in be.sample()}
    # Both cards: "|  0%   41C         27 W/ 150 W |     0 MiB/ 23308 MiB |"; card 1's
    # first row has "0%               N/A  |" one column off — still util 0.
    for i in (0, 1):
        assert (s[i].util, s[i].temp_c, s[i].power_w, s[i].power_limit_w) == (0.0, 41.0, 27.0, 150.0)
        assert (s[i].mem_used, s[i].mem_total) == (0, 23308 * MiB)
        assert s[i].procs == {}


def test_v4_older_generation(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "cnmon", stdout_file=F_V4)
    be = _backend()
    assert [c.card for c in be.discover()] == [0, 1, 2]
    s = {x.card: x for x in be.sample()}
    # Temps "32C", "33C", "30C"; power "30 W/ 150 W", "25 W/ 150 W", "26 W/ 150 W";
    # Memory-Usage "0 MiB/ 23308 MiB" (vMemory-Usage "10240 MiB/1048576 MiB" is not the card's memory).
    assert [s[i].temp_c for i in range(3)] == [32.0, 33.0, 30.0]
    assert [s[i].power_w for i in range(3)] == [30.0, 25.0, 26.0]
    assert all(s[i].power_limit_w == 150.0 for i in range(3))
    assert all((s[i].mem_used, s[i].mem_total) == (0, 23308 * MiB) for i in range(3))
    assert all(s[i].util == 0.0 and s[i].procs == {} for i in range(3))


def test_versions():
    assert cnmon_version(F_V5_13.read_text()) == "5.10.13"
    assert cnmon_version(F_V5_10.read_text()) == "5.10.10"
    assert cnmon_version(F_V4.read_text()) == "4.20.11"


def test_derived_util_is_read_from_the_util_cell():
    # DERIVED (not a capture): no public cnmon output of a busy card was found (see
    # docs/testing.md). The real v5.10.13 output with card 1's Util cell "0%" made
    # "87%": the value must come from that cell, card 0's stays 0.
    text = F_V5_13.read_text()
    row = "|         0000:3D:00.0 | 0%                N/A |"
    assert text.count(row) == 1
    r = parse_cnmon(text.replace(row, "|         0000:3D:00.0 | 87%               N/A |"))
    assert (r[0].util, r[1].util) == (0.0, 87.0)
    # The older generation's Util column ("| On          v4.20.11 | 0%          N/A       |").
    old = F_V4.read_text()
    row4 = "| 2     /   MLU370-X4    v1.1.6 | On          v4.20.11 | 0%          N/A       |"
    assert old.count(row4) == 1
    r4 = parse_cnmon(old.replace(row4, row4.replace("| 0%          N/A", "| 100%        N/A")))
    assert [r4[i].util for i in range(3)] == [0.0, 0.0, 100.0]


def test_synthetic_process_rows_and_na_fields():
    # SYNTHETIC (not a capture): the real v5.10.13 fixture with card 1's power and
    # temperature made "N/A" and two invented process rows under the real header.
    text = F_V5_13.read_text()
    text = text.replace("|  0%   39C        106 W/ 250 W |", "|  0%   N/A        N/A / 250 W |")
    text = text.replace(
        "|  No running processes found                                                  |",
        "|  0     /   4242    python train.py                                 1024 MiB |\n"
        "|  1     /   4243    python train.py --rank 1                          12 GiB |")
    r = parse_cnmon(text)
    assert r[1].temp_c is None and r[1].power_w is None and r[1].power_limit_w == 250.0
    assert r[0].procs == {"4242": 1024 * MiB}
    assert r[1].procs == {"4243": 12 * 1024 * MiB}


def test_probe(tmp_path, monkeypatch):
    tool = install_tool(tmp_path, monkeypatch, "cnmon", stdout_file=F_V5_13)
    p = CambriconBackend.probe()
    assert (p.available, p.version, p.path, p.verified) == (True, "5.10.13", str(tool), True)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    p = CambriconBackend.probe()
    assert p.available is False and "cnmon not found" in (p.reason or "")


def test_hung_tool(tmp_path, monkeypatch):
    assert_hung_tool_times_out(tmp_path, monkeypatch, "cnmon", _backend, F_V5_13)


def test_crashing_tool(tmp_path, monkeypatch):
    assert_crash_is_tool_error(tmp_path, monkeypatch, "cnmon", _backend,
                               exit_code=1, stderr_text="Error: Failed to init cndev\n")


def test_garbage(tmp_path, monkeypatch):
    assert_unreadable_output(tmp_path, monkeypatch, "cnmon", _backend, "cnmon: command output changed\n",
                             "cnmon (version unknown): no card table")


def test_garbage_version_from_the_tool(tmp_path, monkeypatch):
    assert_unreadable_output(tmp_path, monkeypatch, "cnmon", _backend, "something else entirely\n",
                             "cnmon 6.5.26: ", by_args={"version": "CNMON version: v6.5.26\n"})


def test_truncated_output(tmp_path, monkeypatch):
    # DERIVED: the real output cut after card 1's first row.
    text = F_V5_13.read_text()
    cut = text.index("|  0%   39C")
    install_tool(tmp_path, monkeypatch, "cnmon", stdout_text=text[:cut])
    with pytest.raises(ParseError, match=r"^cnmon 5\.10\.13: .*(cut|ends inside)"):
        _backend().discover()


# -- the shared reader -------------------------------------------------------------------


def test_map_cell_by_order_and_by_position():
    assert map_cell(" Fan  Temp  Perf  Pwr:Usage/Cap", " N/A   37C  N/A     85W / 400W ") == {
        "fan": "N/A", "temp": "37C", "perf": "N/A", "pwr:usage/cap": "85W / 400W"}
    # Two labels, one run of words: split by where they stand.
    assert map_cell(" Bus-Id        Disp.A ", " 00000000:03:00.0 N/A ") == {
        "bus-id": "00000000:03:00.0", "disp.a": "N/A"}
    # A right-aligned value under a three-word label.
    assert map_cell(" Volatile Uncorr. ECC ", "                    0 ") == {"volatile uncorr. ecc": "0"}
    # Padding inside a used/total pair varies with the digits.
    assert map_cell(" AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        ",
                    " 0           0    / 0          20701/ 65536         ") == {
        "aicore(%)": "0", "memory-usage(mb)": "0    / 0", "hbm-usage(mb)": "20701/ 65536"}


def test_pairs():
    assert split_pair("106 W/ 250 W", "x") == ("106 W", "250 W")
    assert split_pair("N/A / 400W", "x") == ("N/A", "400W")
    assert split_pair("N/A", "x") == (None, None)
    assert split_paren("0MiB(81920MiB)", "x") == ("0MiB", "81920MiB")
    with pytest.raises(ParseError):
        split_pair("no slash here", "x")


def test_rules():
    assert is_rule("+-------------------------------+----------------------+")
    assert is_rule("|===============================+======================|")
    assert is_rule("---------------------------------------------------------------------")
    assert not is_rule("|  -   |  -  |")
    assert not is_rule("| 0     /   MLU370-X8    v1.1.6 |")


# -- properties -------------------------------------------------------------------------------

TEXTS = [f.read_text() for f in ALL_FIXTURES]


(test_arbitrary_text, test_truncated_fixtures,
 test_fixtures_with_lines_dropped_or_doubled, test_fixtures_with_characters_replaced) = parser_fuzz_tests(
    parse_cnmon, TEXTS, never_raise=(cnmon_version,))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(alphabet=" |+-=/%ABCNmiW0123456789.:\t", max_size=60), max_size=20))
def test_read_table_on_table_like_noise(lines):
    try:
        t = read_table(lines, 0, lambda labels: bool(labels))
    except ParseError:
        return
    assert t is None or isinstance(t.records, list)
