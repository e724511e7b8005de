"""The kunlun backend (Kunlunxin ``xpu-smi``) end to end through a fake tool on PATH.

The Kunlunxin fixtures are real outputs (see each .source.md); the ``intel-*`` ones are
Intel XPU Manager's ``xpu-smi`` (copied from the shared intel fixtures): under the
same name they must make this backend say "unavailable", never parse. Expected numbers
are literal, read by hand from the files. No public capture shows a Kunlunxin process
row, so the process test is SYNTHETIC and says so.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sattui.vendors.backend import REGISTRY, BackendUnavailable, ToolError
from sattui.vendors.kunlun import KunlunBackend, identify_xpu_smi, parse_xpu_smi, xpu_smi_version
from tests.vendor_tools import (
    assert_crash_is_tool_error,
    assert_hung_tool_times_out,
    assert_unreadable_output,
    calls,
    install_tool,
    parser_fuzz_tests,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vendors" / "kunlun"
F_8X = FIX / "xpu_smi_8x-P800-OAM_drv5.0.21.26.txt"
F_4X = FIX / "xpu-smi_4x-P800-OAM_drv515.58_indented-no-procs.txt"
F_INTEL_JSON = FIX / "intel-xpu-smi-discovery-j_1x-0x020a.json"
F_INTEL_STATS = FIX / "intel-xpu-smi-stats-d0_blank-fields.txt"
KUNLUN_FIXTURES = [F_8X, F_4X]
MiB = 1 << 20


def _backend(timeout_s: float = 10.0) -> KunlunBackend:
    return KunlunBackend(clock=time.monotonic, timeout_s=timeout_s)


def _only(tmp_path, monkeypatch, name: str, **kw) -> Path:
    # PATH = just the fake tool's folder, so a real xpu-smi elsewhere cannot interfere.
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return install_tool(tmp_path, monkeypatch, name, **kw)


def test_registered():
    assert REGISTRY["kunlun"] is KunlunBackend
    assert KunlunBackend.min_interval_s >= 1.0


# (temp C, power W) per XPU from the 8-card fixture's second rows ("| N/A   37C  N/A     85W / 400W |").
EIGHT = {0: (37.0, 85.0), 1: (41.0, 86.0), 2: (34.0, 85.0), 3: (39.0, 88.0),
         4: (37.0, 86.0), 5: (42.0, 86.0), 6: (35.0, 86.0), 7: (42.0, 88.0)}
BUS = ["00000000:03:00.0", "00000000:05:00.0", "00000000:63:00.0", "00000000:65:00.0",
       "00000000:83:00.0", "00000000:85:00.0", "00000000:A3:00.0", "00000000:A5:00.0"]


def test_eight_p800(tmp_path, monkeypatch):
    tool = _only(tmp_path, monkeypatch, "xpu-smi", stdout_file=F_8X)
    be = _backend()
    cards = be.discover()
    # "|   0  P800 OAM           N/A   | 00000000:03:00.0 N/A |" … 8 of them.
    assert [(c.card, c.vendor, c.name) for c in cards] == [(i, "kunlunxin", "P800 OAM") for i in range(8)]
    # "0MiB / 98304MiB" and "/ 400W".
    assert all(c.mem_total == 98304 * MiB and c.power_limit_w == 400.0 for c in cards)
    s = {x.card: x for x in be.sample()}
    for i, (temp, pw) in EIGHT.items():
        assert (s[i].temp_c, s[i].power_w, s[i].power_limit_w, s[i].util) == (temp, pw, 400.0, 0.0), i
        # Memory-Usage "0MiB / 98304MiB" (not the third row's L3-Usage "0MiB / 96MiB").
        assert (s[i].mem_used, s[i].mem_total) == (0, 98304 * MiB), i
        assert s[i].procs == {}  # "No running processes found"
    assert be.probe().version == "driver 5.0.21.26"
    # Telling Kunlunxin from Intel ran the tool once; discovery parsed that answer.
    assert calls(tool) == [[], [], []]


def test_indented_capture_without_process_table(tmp_path, monkeypatch):
    _only(tmp_path, monkeypatch, "xpu-smi", stdout_file=F_4X)
    be = _backend()
    assert [c.card for c in be.discover()] == [0, 1, 2, 3]
    s = {x.card: x for x in be.sample()}
    # "| N/A   39C  N/A     91W / 400W |  31058MiB / 98304MiB |      0%      Default |"
    assert (s[0].temp_c, s[0].power_w, s[0].mem_used, s[0].mem_total) == (39.0, 91.0, 31058 * MiB, 98304 * MiB)
    # Cards 1-3: "38C 94W", "44C 93W", "44C 94W", "0MiB / 98304MiB".
    assert [(s[i].temp_c, s[i].power_w, s[i].mem_used) for i in (1, 2, 3)] == [
        (38.0, 94.0, 0), (44.0, 93.0, 0), (44.0, 94.0, 0)]
    assert all(s[i].procs is None for i in range(4))  # no process table: unknown


def test_underscore_name(tmp_path, monkeypatch):
    tool = _only(tmp_path, monkeypatch, "xpu_smi", stdout_file=F_8X)
    p = KunlunBackend.probe()
    assert (p.available, p.path) == (True, str(tool))
    assert len(_backend().discover()) == 8


# -- Intel's tool of the same name ------------------------------------------------------------


@pytest.mark.parametrize("fixture", [F_INTEL_JSON, F_INTEL_STATS], ids=["discovery-json", "stats-table"])
def test_intel_xpu_smi_is_not_ours(tmp_path, monkeypatch, fixture):
    _only(tmp_path, monkeypatch, "xpu-smi", stdout_file=fixture,
          by_args={"discovery -j": F_INTEL_JSON, "stats -d 0": F_INTEL_STATS})
    p = KunlunBackend.probe()
    assert p.available is False
    assert p.reason is not None and "xpu-smi on PATH is Intel's XPU Manager" in p.reason
    with pytest.raises(BackendUnavailable, match="xpu-smi on PATH is Intel's XPU Manager"):
        _backend().discover()


def test_intel_xpu_smi_next_to_kunlunxin_xpu_smi(tmp_path, monkeypatch):
    # Both installed: Intel's as xpu-smi, Kunlunxin's as xpu_smi. The backend uses the latter.
    _only(tmp_path, monkeypatch, "xpu-smi", stdout_file=F_INTEL_JSON)
    ours = install_tool(tmp_path, monkeypatch, "xpu_smi", stdout_file=F_8X)
    p = KunlunBackend.probe()
    assert (p.available, p.path) == (True, str(ours))
    assert len(_backend().discover()) == 8


def test_identify():
    assert identify_xpu_smi(F_8X.read_text()) == "kunlun"
    assert identify_xpu_smi(F_4X.read_text()) == "kunlun"
    assert identify_xpu_smi(F_INTEL_JSON.read_text()) == "intel"
    assert identify_xpu_smi(F_INTEL_STATS.read_text()) == "intel"
    assert identify_xpu_smi("hello") is None


# -- failures ---------------------------------------------------------------------------------


def test_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("sattui.vendors.kunlun.KUNLUN_DIRS", ())
    p = KunlunBackend.probe()
    assert p.available is False and "not found" in (p.reason or "")
    with pytest.raises(BackendUnavailable):
        _backend().discover()


def test_hung_tool(tmp_path, monkeypatch):
    assert_hung_tool_times_out(tmp_path, monkeypatch, "xpu-smi", _backend, F_8X)


def test_hung_after_discovery_is_a_tool_error(tmp_path, monkeypatch):
    _only(tmp_path, monkeypatch, "xpu-smi", stdout_file=F_8X)
    be = _backend(timeout_s=0.5)
    be.discover()
    install_tool(tmp_path, monkeypatch, "xpu-smi", stdout_file=F_8X, sleep_s=30)
    t0 = time.monotonic()
    with pytest.raises(ToolError, match="did not answer"):
        be.sample()
    assert time.monotonic() - t0 < 5


def test_crashing_after_discovery(tmp_path, monkeypatch):
    _only(tmp_path, monkeypatch, "xpu-smi", stdout_file=F_8X)
    be = _backend()
    be.discover()
    install_tool(tmp_path, monkeypatch, "xpu-smi", exit_code=255, stderr_text="xpu_smi: failed to open /dev/xpuctrl\n")
    with pytest.raises(ToolError, match="xpu-smi exited 255: xpu_smi: failed to open /dev/xpuctrl"):
        be.sample()


def test_crashing_at_discovery(tmp_path, monkeypatch):
    assert_crash_is_tool_error(tmp_path, monkeypatch, "xpu-smi", _backend,
                               exit_code=1, stderr_text="no XPU device found\n")
    assert "xpu-smi exited 1: no XPU device found" in (KunlunBackend.probe().reason or "")


def test_garbage(tmp_path, monkeypatch):
    assert_unreadable_output(tmp_path, monkeypatch, "xpu-smi", _backend, "Bus error\n",
                             "xpu-smi (version unknown): no XPU table")
    assert KunlunBackend.probe().available is False


def test_kunlun_header_with_an_unknown_table_names_the_driver(tmp_path, monkeypatch):
    text = ("+------+\n| XPU-SMI               Driver Version: 5.9.9.9    XPU-RT Version: 5.9.9   |\n"
            "| Something | Else |\n+------+\n")
    assert_unreadable_output(tmp_path, monkeypatch, "xpu-smi", _backend, text, "xpu-smi driver 5.9.9.9: no XPU table")


def test_derived_util_is_read_from_the_xpu_util_cell():
    # DERIVED (not a capture): no public Kunlunxin xpu-smi table of a busy XPU was found
    # (see docs/testing.md). The real 8-XPU output with XPU 5's "0%" made "64%" (same
    # width): the value must come from that XPU's cell, every other XPU stays 0.
    text = F_8X.read_text()
    row = "| N/A   42C  N/A     86W / 400W |      0MiB / 98304MiB |      0%      Default |"
    assert text.count(row) == 1  # XPU 5's second row
    r = parse_xpu_smi(text.replace(row, row.replace("|      0%      Default |", "|     64%      Default |")))
    assert [r[i].util for i in range(8)] == [0.0] * 5 + [64.0] + [0.0] * 2


def test_synthetic_process_rows():
    # SYNTHETIC (not a capture): the real 8-card output with two invented rows in its
    # real process table, in nvidia-smi's row layout that the header imitates.
    text = F_8X.read_text().replace(
        "|  No running processes found                                                 |",
        "|    0   N/A  N/A      4242      C   python                         1024MiB |\n"
        "|    3   N/A  N/A      4243      C   python -m torch.distributed   20000MiB |")
    r = parse_xpu_smi(text)
    assert r[0].procs == {"4242": 1024 * MiB}
    assert r[3].procs == {"4243": 20000 * MiB}
    assert r[1].procs == {}


def test_version():
    assert xpu_smi_version(F_8X.read_text()) == "driver 5.0.21.26"
    assert xpu_smi_version(F_4X.read_text()) == "driver 515.58"


# -- properties -------------------------------------------------------------------------------

TEXTS = [f.read_text() for f in KUNLUN_FIXTURES]


(test_arbitrary_text, test_truncated_fixtures,
 test_fixtures_with_lines_dropped_or_doubled, test_fixtures_with_characters_replaced) = parser_fuzz_tests(
    parse_xpu_smi, TEXTS, never_raise=(identify_xpu_smi,))
