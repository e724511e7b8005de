"""The ascend backend, end to end through a fake ``npu-smi`` on PATH.

Every fixture under tests/fixtures/vendors/ascend is real ``npu-smi`` output (see its
.source.md). Expected numbers are written out literally, read by hand from the files;
the comment by each says where. A few tests edit a real fixture (marked DERIVED) to
reach a code path no capture shows (a "-" AICore, a missing process table).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sattui.vendors.ascend import (
    AscendBackend,
    npu_smi_version,
    parse_common,
    parse_npu_smi_info,
    parse_proc_mem,
    parse_usages,
)
from sattui.vendors.backend import REGISTRY, BackendError, ParseError, ToolError
from tests.vendor_tools import calls, install_tool

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vendors" / "ascend"
F_910B2C = FIX / "npu-smi-info_2x-910B2C_npusmi23.0.2.1_one-process.txt"
F_8CARD = FIX / "npu-smi_910B3-8card_v25.5.1_info-overview.txt"
F_COMMON = FIX / "npu-smi_910B3-8card_v25.5.1_t-common_i-0.txt"
F_USAGES = FIX / "npu-smi_910B3-8card_v25.5.1_t-usages_i-0.txt"
F_PROCMEM = FIX / "npu-smi_910B3-8card_v25.5.1_t-proc-mem_i-0.txt"
F_310B4 = FIX / "npu-smi-info_1x-310B4_npusmi23.0.0_no-hbm.txt"
F_A3 = FIX / "npu-smi-info_2x2-Ascend910_npusmi25.2.0_two-chip-phy-id.txt"
F_310P3 = FIX / "npu-smi-info_2x2-310P3_npusmi24.1.0.1_two-chip-device.txt"
F_CONTAINER = FIX / "npu-smi-info_1x-910B3_npusmi25.2.3_container-npu3-misaligned.txt"
ALL_FIXTURES = sorted(FIX.glob("*.txt"))
MiB = 1 << 20


def _backend(timeout_s: float = 10.0) -> AscendBackend:
    # A generous timeout: the fake tool is a Python script, slow to start on a busy CI box.
    return AscendBackend(clock=time.monotonic, timeout_s=timeout_s)


def _by_card(samples):
    return {s.card: s for s in samples}


def test_registered_with_a_slow_tool_interval():
    assert REGISTRY["ascend"] is AscendBackend
    # npu-smi takes ~0.5 s a call: sampled at most every 2 s.
    assert AscendBackend.min_interval_s >= 2.0


# -- real outputs, end to end ----------------------------------------------------------


def test_910b2c_one_process(tmp_path, monkeypatch):
    tool = install_tool(tmp_path, monkeypatch, "npu-smi", by_args={"info": F_910B2C})
    be = _backend()
    cards = be.discover()
    assert [(c.card, c.vendor, c.name) for c in cards] == [(0, "huawei", "910B2C"), (1, "huawei", "910B2C")]
    # "20701/ 65536" HBM-Usage(MB): the memory of a 910B is its HBM.
    assert cards[0].mem_total == 65536 * MiB
    s = _by_card(be.sample())
    # Row "| 0     910B2C | OK | 88.6        51 ..." and "| 0 | 0000:5A:00.0 | 0  0 / 0  20701/ 65536 |"
    assert s[0].power_w == 88.6 and s[0].temp_c == 51.0 and s[0].util == 0.0
    assert s[0].mem_used == 20701 * MiB and s[0].mem_total == 65536 * MiB
    # Process row "| 0  0 | 124528 | python3.8 | 17400 |" → MB → bytes.
    assert s[0].procs == {"124528": 17400 * MiB}
    # NPU 1: "99.6  50", "20687/ 65536"; no process row at all → none (the table exists).
    assert s[1].power_w == 99.6 and s[1].temp_c == 50.0
    assert s[1].mem_used == 20687 * MiB and s[1].mem_total == 65536 * MiB
    assert s[1].procs == {}
    # Real subprocess path, argument lists: the overview, one -t common at discovery, the overview.
    argv = calls(tool)
    assert argv[0] == ["info"] and argv[1] == ["info", "-t", "common", "-i", "0"] and argv[-1] == ["info"]
    assert len(argv) == 3


# (power W, temp C, HBM used MB, pid, process MB, bus) per NPU, from the 8-card overview rows.
EIGHT_CARDS = {
    0: (99.4, 34.0, 59189, "3233241", 55844, "0000:C1:00.0"),
    1: (91.1, 32.0, 59184, "3233701", 55840, "0000:C2:00.0"),
    2: (86.9, 33.0, 59186, "3234962", 55842, "0000:81:00.0"),
    3: (93.2, 35.0, 59186, "3235553", 55842, "0000:82:00.0"),
    4: (88.7, 37.0, 59932, "3232170", 56588, "0000:01:00.0"),
    5: (91.5, 37.0, 59944, "3231929", 56600, "0000:02:00.0"),
    6: (94.9, 37.0, 59021, "2895155", 55671, "0000:41:00.0"),
    7: (90.1, 39.0, 19319, "1886762", 15975, "0000:42:00.0"),
}


def test_910b3_eight_cards_with_common(tmp_path, monkeypatch):
    tool = install_tool(tmp_path, monkeypatch, "npu-smi", by_args={
        "info": F_8CARD, "info -t common -i 0": F_COMMON,
        "info -t usages -i 0": F_USAGES, "info -t proc-mem -i 0": F_PROCMEM})
    be = _backend()
    cards = be.discover()
    assert [c.card for c in cards] == list(range(8))
    assert all(c.name == "910B3" and c.mem_total == 65536 * MiB for c in cards)
    # -t common -i 0: "Aicore Freq(MHZ) : 1800"; the other seven are the same model.
    assert all(c.sm_clock_max_mhz == 1800.0 for c in cards)
    s = _by_card(be.sample())
    assert sorted(s) == list(range(8))
    for i, (pw, temp, hbm, pid, pmem, _bus) in EIGHT_CARDS.items():
        assert (s[i].power_w, s[i].temp_c, s[i].util) == (pw, temp, 0.0), i
        assert (s[i].mem_used, s[i].mem_total) == (hbm * MiB, 65536 * MiB), i
        assert s[i].procs == {pid: pmem * MiB}, i
        assert s[i].sm_clock_max_mhz == 1800.0
        assert s[i].sm_clock_mhz is None  # the overview has no current clock
    # The overview is complete: no per-NPU usages/proc-mem calls while sampling.
    assert [a for a in calls(tool) if "usages" in a or "proc-mem" in a] == []
    assert be.take_events() == []


F_BUSY16 = FIX / "npu-smi-info_16x-910B2C_npusmi24.1.rc2_busy-aicore100.txt"
# (AICore %, power W, temp C, HBM used MB) per NPU, from the busy capture's two rows per NPU:
# "| 0     910B2C | OK | 450.6       78 ..." and "| 0 | 0000:75:01.0  | 100  0 / 0  54735/ 65536 |".
BUSY16 = {
    0: (100.0, 450.6, 78.0, 54735), 1: (100.0, 449.7, 77.0, 54712), 2: (0.0, 91.7, 47.0, 54715),
    3: (0.0, 96.1, 49.0, 54712), 4: (100.0, 450.1, 75.0, 54711), 5: (0.0, 97.4, 48.0, 54712),
    6: (100.0, 449.8, 75.0, 54713), 7: (100.0, 450.2, 78.0, 54711), 8: (0.0, 96.5, 47.0, 54715),
    9: (100.0, 450.1, 78.0, 54712), 10: (0.0, 137.4, 49.0, 54710), 11: (0.0, 109.4, 49.0, 54709),
    12: (0.0, 104.6, 48.0, 54711), 13: (100.0, 450.3, 77.0, 54710), 14: (0.0, 109.6, 45.0, 54710),
    15: (0.0, 116.9, 54.0, 54710),
}


def test_910b2c_sixteen_busy_cards(tmp_path, monkeypatch):
    # A real BUSY capture (vllm-ascend issue 4013): seven NPUs at AICore 100 %, nine at 0 %.
    tool = install_tool(tmp_path, monkeypatch, "npu-smi", by_args={"info": F_BUSY16})
    be = _backend()
    assert [c.card for c in be.discover()] == list(range(16))
    s = _by_card(be.sample())
    assert sorted(s) == list(range(16))
    for i, (util, pw, temp, hbm) in BUSY16.items():
        assert (s[i].util, s[i].power_w, s[i].temp_c) == (util, pw, temp), i
        assert (s[i].mem_used, s[i].mem_total) == (hbm * MiB, 65536 * MiB), i
        # "| 0       0 | 265997 | python3 | 51358 |", one such row for every NPU.
        assert s[i].procs == {"265997": 51358 * MiB}, i
    # AICore came from the overview: no per-NPU usages call to fill it in.
    assert [a for a in calls(tool) if "usages" in a] == []


def test_usages_fills_a_missing_aicore(tmp_path, monkeypatch):
    # DERIVED: NPU 0's AICore(%) "0" replaced by "-" (a value the chip does not report).
    text = F_8CARD.read_text()
    row = "| 0                         | 0000:C1:00.0  | 0           0    / 0"
    assert row in text
    text = text.replace(row, row.replace("| 0           0", "| -           0", 1))
    tool = install_tool(tmp_path, monkeypatch, "npu-smi",
                        by_args={"info": text, "info -t usages -i 0": F_USAGES, "info -t common -i 0": F_COMMON})
    be = _backend()
    be.discover()
    assert parse_npu_smi_info(text)[0].util is None
    s = _by_card(be.sample())
    # -t usages -i 0: "Aicore Usage Rate(%) : 0" — known 0, not unknown.
    assert s[0].util == 0.0
    assert s[0].mem_used == 59189 * MiB  # the overview's HBM stays
    assert ["info", "-t", "usages", "-i", "0"] in calls(tool)
    assert not any(a[:3] == ["info", "-t", "usages"] and a[-1] != "0" for a in calls(tool))


def test_proc_mem_when_the_overview_has_no_process_table(tmp_path, monkeypatch):
    # DERIVED: the 8-card overview cut just before its process table.
    lines = F_8CARD.read_text().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if "Process id" in ln) - 1
    text = "".join(lines[:cut])
    tool = install_tool(tmp_path, monkeypatch, "npu-smi",
                        by_args={"info": text, "info -t proc-mem -i 0": F_PROCMEM})
    be = _backend()
    be.discover()
    s = _by_card(be.sample())
    # -t proc-mem -i 0: "Process id:3233241 Process name:VLLMWorker_TP     Process memory(MB):55844"
    assert s[0].procs == {"3233241": 55844 * MiB}
    # NPUs 1..7: the fake answers their proc-mem with the overview (no "NPU ID"): unknown,
    # said once each, never a made-up empty list.
    assert all(s[i].procs is None for i in range(1, 8))
    ev = [e for e in be.take_events() if "proc-mem" in e.message]
    assert len(ev) == 7 and all(e.type == "backend_degraded" for e in ev)
    assert ev[0].message.startswith("ascend: npu-smi 25.5.1 [info -t proc-mem -i 1]: no 'NPU ID : N' line")
    s = _by_card(be.sample())
    assert s[0].procs == {"3233241": 55844 * MiB}
    assert be.take_events() == []  # said once, not every tick
    # An NPU whose proc-mem did not parse is not asked again; NPU 0 is, every tick.
    argv = calls(tool)
    assert argv.count(["info", "-t", "proc-mem", "-i", "7"]) == 1
    assert argv.count(["info", "-t", "proc-mem", "-i", "0"]) == 2


def test_hung_detail_call_keeps_the_overview(tmp_path, monkeypatch):
    # DERIVED overview (NPU 0's AICore "-") and a private fake npu-smi that answers
    # "info" at once but hangs on "-t usages" (install_tool sleeps on every call).
    text = F_8CARD.read_text().replace(
        "| 0                         | 0000:C1:00.0  | 0           0    / 0",
        "| 0                         | 0000:C1:00.0  | -           0    / 0", 1)
    (tmp_path / "overview.txt").write_text(text)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "npu-smi"
    fake.write_text(
        f"#!{sys.executable}\nimport sys, time\n"
        f"if sys.argv[1:] == ['info']:\n    sys.stdout.write(open({str(tmp_path / 'overview.txt')!r}).read())\n"
        "else:\n    time.sleep(30)\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))
    be = _backend(timeout_s=0.5)
    be.discover()  # its -t common hangs too: the rating stays unknown, discovery stands
    t0 = time.monotonic()
    s = _by_card(be.sample())
    assert time.monotonic() - t0 < 5
    assert s[0].util is None and s[0].power_w == 99.4  # what the overview said stays
    assert s[1].util == 0.0
    assert any("per-NPU detail skipped" in e.message for e in be.take_events())


def test_310b4_no_hbm(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "npu-smi", by_args={"info": F_310B4})
    be = _backend()
    cards = be.discover()
    # "| 0       0     | NA |" — Device column 0; Bus-Id "NA" is not a bus id.
    assert [(c.card, c.name) for c in cards] == [(0, "310B4")]
    s = be.sample()[0]
    # "| 0.0          65   15    / 15 |" and "| 0            3628 / 15609 |" (Memory-Usage, no HBM column).
    assert (s.power_w, s.temp_c, s.util) == (0.0, 65.0, 0.0)
    assert (s.mem_used, s.mem_total) == (3628 * MiB, 15609 * MiB)
    assert s.procs is None  # no process table and no proc-mem answer: unknown


def test_two_chip_phy_id_layout(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "npu-smi", by_args={"info": F_A3})
    be = _backend()
    cards = be.discover()
    # "Chip  Phy-ID": NPU 0 chips 0/1 → Phy-ID 0/1, NPU 1 chips 0/1 → Phy-ID 2/3.
    assert [c.card for c in cards] == [0, 1, 2, 3]
    s = _by_card(be.sample())
    # Power "162.8", "-", "167.1", "-": the board's power sits on its first chip only.
    assert [s[i].power_w for i in range(4)] == [162.8, None, 167.1, None]
    assert [s[i].temp_c for i in range(4)] == [37.0, 37.0, 38.0, 38.0]
    # HBM "3133 / 65536", "2876 / 65536", "3116 / 65536", "10568/ 65536".
    assert [s[i].mem_used for i in range(4)] == [3133 * MiB, 2876 * MiB, 3116 * MiB, 10568 * MiB]
    assert all(s[i].mem_total == 65536 * MiB for i in range(4))
    # "No running processes found in NPU 0"; "| 1       1 | 990711 | python | 7746 |" → NPU 1 chip 1 = Phy-ID 3.
    assert [s[i].procs for i in range(3)] == [{}, {}, {}]
    assert s[3].procs == {"990711": 7746 * MiB}


def test_310p3_two_chips_per_card(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "npu-smi", by_args={"info": F_310P3})
    be = _backend()
    cards = be.discover()
    # "Chip    Device": NPU 1 → devices 0, 1; NPU 2 → devices 2, 3.
    assert [(c.card, c.name) for c in cards] == [(0, "310P3"), (1, "310P3"), (2, "310P3"), (3, "310P3")]
    s = _by_card(be.sample())
    assert all(s[i].power_w is None for i in range(4))  # Power(W) "NA"
    assert [s[i].temp_c for i in range(4)] == [62.0, 62.0, 61.0, 61.0]
    # Memory-Usage "16302/ 44280", "15543/ 43693", "35563/ 44280", "35204/ 43693".
    assert [(s[i].mem_used, s[i].mem_total) for i in range(4)] == [
        (16302 * MiB, 44280 * MiB), (15543 * MiB, 43693 * MiB),
        (35563 * MiB, 44280 * MiB), (35204 * MiB, 43693 * MiB)]
    # Process rows "1 0 | 3277562 | 14513", "1 1 | 3277565 | 14513", "2 0 | 3034986 | 34207", "2 1 | 3034989 | 33740".
    assert [s[i].procs for i in range(4)] == [
        {"3277562": 14513 * MiB}, {"3277565": 14513 * MiB}, {"3034986": 34207 * MiB}, {"3034989": 33740 * MiB}]


def test_container_with_only_npu3_and_a_misaligned_row(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "npu-smi", by_args={"info": F_CONTAINER})
    be = _backend()
    cards = be.discover()
    assert [(c.card, c.name) for c in cards] == [(3, "910B3")]  # the NPU id (one chip per NPU)
    s = be.sample()[0]
    # "| 3  910B3  | OK | 92.8  36 ..." (one column off) and "3198 / 65536".
    assert (s.card, s.power_w, s.temp_c, s.util) == (3, 92.8, 36.0, 0.0)
    assert (s.mem_used, s.mem_total) == (3198 * MiB, 65536 * MiB)
    assert s.procs == {}  # "No running processes found in NPU 3"


# -- the per-NPU views as pure parsers -----------------------------------------------------


def test_parse_common():
    c = parse_common(F_COMMON.read_text())
    assert list(c) == [0]
    r = c[0]
    # "Aicore Usage Rate(%) : 0", "Aicore Freq(MHZ) : 1800", "Aicore curFreq(MHZ) : 800",
    # "Temperature(C) : 33" (the chip's; the MCU's 31 comes after), "NPU Real-time Power(W) : 99.7".
    assert (r.util, r.sm_clock_max_mhz, r.sm_clock_mhz, r.temp_c, r.power_w) == (0.0, 1800.0, 800.0, 33.0, 99.7)


def test_parse_usages():
    u = parse_usages(F_USAGES.read_text())
    # "HBM Capacity(MB) : 65536", "Aicore Usage Rate(%) : 0", "HBM Usage Rate(%) : 90".
    assert list(u) == [0]
    assert (u[0].util, u[0].mem_total, u[0].mem_used) == (0.0, 65536 * MiB, None)
    assert u[0].extra["hbm_usage_pct"] == 90.0


def test_parse_proc_mem():
    # "Process id:3233241 Process name:VLLMWorker_TP     Process memory(MB):55844", then "Chip ID : 0".
    assert parse_proc_mem(F_PROCMEM.read_text()) == {0: {"3233241": 55844 * MiB}}


def test_proc_mem_refuses_other_views():
    # A usages/common answer also has "Chip ID : 0": it must not read as "no processes".
    for f in (F_COMMON, F_USAGES):
        with pytest.raises(ParseError):
            parse_proc_mem(f.read_text())


def test_header_version():
    assert npu_smi_version(F_910B2C.read_text()) == "23.0.2.1"
    assert npu_smi_version(F_8CARD.read_text()) == "25.5.1"
    assert npu_smi_version(F_310P3.read_text()) == "24.1.0.1"


# -- probe, failures -------------------------------------------------------------------------


def test_probe_found(tmp_path, monkeypatch):
    tool = install_tool(tmp_path, monkeypatch, "npu-smi", by_args={"info": F_8CARD})
    p = AscendBackend.probe()
    assert (p.name, p.available, p.version, p.path) == ("ascend", True, "25.5.1", str(tool))


def test_probe_missing_tool(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    p = AscendBackend.probe()
    assert p.available is False and "npu-smi not found" in (p.reason or "")


def test_probe_never_raises_on_a_hung_tool(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "npu-smi", stdout_file=F_8CARD, sleep_s=30)
    monkeypatch.setattr(AscendBackend, "default_timeout_s", 0.5)
    t0 = time.monotonic()
    p = AscendBackend.probe()
    assert time.monotonic() - t0 < 5
    assert p.available is False and "did not answer" in (p.reason or "")


def test_hung_tool_is_a_tool_error_within_the_timeout(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "npu-smi", stdout_file=F_8CARD, sleep_s=30)
    be = _backend(timeout_s=0.5)
    t0 = time.monotonic()
    with pytest.raises(ToolError, match="did not answer within 0.5 s"):
        be.discover()
    assert time.monotonic() - t0 < 5


def test_tool_that_hangs_after_discovery(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "npu-smi", by_args={"info": F_910B2C})
    be = _backend(timeout_s=1.0)
    be.discover()
    install_tool(tmp_path, monkeypatch, "npu-smi", stdout_file=F_910B2C, sleep_s=30)
    t0 = time.monotonic()
    with pytest.raises(ToolError):
        be.sample()
    assert time.monotonic() - t0 < 6


def test_crashing_tool(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "npu-smi", exit_code=3,
                 stderr_text="dcmi module initialize failed. ret is -8005\n")
    with pytest.raises(ToolError, match=r"npu-smi exited 3: dcmi module initialize failed"):
        _backend().discover()


def test_garbage_names_tool_and_unknown_version(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "npu-smi", stdout_text="Segmentation fault\nno table here\n")
    with pytest.raises(ParseError) as ei:
        _backend().discover()
    msg = str(ei.value)
    assert msg.startswith("npu-smi (version unknown) [info]: no NPU table") and "\n" not in msg


def test_garbage_names_the_version_npu_smi_reports(tmp_path, monkeypatch):
    tool = install_tool(tmp_path, monkeypatch, "npu-smi",
                        by_args={"info": "Segmentation fault\n", "-v": "npu-smi version: 23.0.6\n"})
    with pytest.raises(ParseError, match=r"^npu-smi 23\.0\.6 \[info\]: "):
        _backend().discover()
    assert ["-v"] in calls(tool)


def test_unknown_layout_under_a_known_header_names_that_version(tmp_path, monkeypatch):
    text = ("+------+\n| npu-smi 26.0.0                 Version: 26.0.0            |\n"
            "| Card | Something New |\n+------+\n| 0 | 1 |\n")
    install_tool(tmp_path, monkeypatch, "npu-smi", by_args={"info": text})
    with pytest.raises(ParseError, match=r"^npu-smi 26\.0\.0 \[info\]: no NPU table"):
        _backend().discover()


def test_truncated_output_is_a_parse_error(tmp_path, monkeypatch):
    # DERIVED: the 910B2C output cut in the middle of NPU 1's second row.
    text = F_910B2C.read_text()
    cut = text.index("| 0                         | 0000:19:00.0") + 30
    install_tool(tmp_path, monkeypatch, "npu-smi", by_args={"info": text[:cut]})
    with pytest.raises(ParseError, match="npu-smi 23.0.2.1"):
        _backend().discover()


# -- properties: any text → readings or ParseError, nothing else -----------------------------

PARSERS = (parse_npu_smi_info, parse_usages, parse_common, parse_proc_mem)
TEXTS = [f.read_text() for f in ALL_FIXTURES]


def _only_parse_errors(fn, text: str) -> None:
    npu_smi_version(text)  # a regex over the header: never raises
    try:
        out = fn(text)
    except ParseError:
        return
    assert isinstance(out, dict)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=400), st.sampled_from(PARSERS))
def test_arbitrary_text(text, fn):
    _only_parse_errors(fn, text)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(TEXTS), st.floats(0, 1), st.sampled_from(PARSERS))
def test_truncated_fixtures(text, frac, fn):
    _only_parse_errors(fn, text[: int(len(text) * frac)])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(TEXTS), st.data(), st.sampled_from(PARSERS))
def test_fixtures_with_lines_dropped_or_doubled(text, data, fn):
    lines = text.splitlines(keepends=True)
    drop = data.draw(st.sets(st.integers(0, max(0, len(lines) - 1)), max_size=6))
    dup = data.draw(st.sets(st.integers(0, max(0, len(lines) - 1)), max_size=3))
    out = []
    for i, ln in enumerate(lines):
        if i in drop:
            continue
        out.append(ln)
        if i in dup:
            out.append(ln)
    _only_parse_errors(fn, "".join(out))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(TEXTS), st.data(), st.sampled_from(PARSERS))
def test_fixtures_with_characters_replaced(text, data, fn):
    pos = data.draw(st.lists(st.integers(0, max(0, len(text) - 1)), max_size=8))
    repl = data.draw(st.sampled_from(["", "|", "/", "-", " ", "N/A", "9" * 30, "\n", "x"]))
    chars = list(text)
    for p in pos:
        chars[p] = repl
    _only_parse_errors(fn, "".join(chars))


def test_parse_errors_are_backend_errors():
    # The poller catches BackendError; a ParseError must be one.
    assert issubclass(ParseError, BackendError)
