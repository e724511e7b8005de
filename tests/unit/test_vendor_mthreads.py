"""The mthreads backend (``mthreads-gmi``) end to end through a fake tool on PATH.

Both fixtures are real outputs (see each .source.md): the newer wide layout (gmi 2.4.1,
8x S5000) and the older narrow one with two real process rows (gmi 2.0.0, S80).
Expected numbers are literal, read by hand from the files. The used-over-total test
edits a real fixture (DERIVED) to the real-world case DESIGN.md records.
"""

from __future__ import annotations

import time
from pathlib import Path

from sattui.vendors.backend import REGISTRY
from sattui.vendors.mthreads import MthreadsBackend, mthreads_gmi_version, parse_mthreads_gmi
from tests.vendor_tools import (
    assert_crash_is_tool_error,
    assert_hung_tool_times_out,
    assert_unreadable_output,
    calls,
    install_tool,
    parser_fuzz_tests,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vendors" / "moorethreads"
F_S5000 = FIX / "mthreads-gmi_8x-S5000_gmi2.4.1_drv5.1.0-server.txt"
F_S80 = FIX / "mthreads-gmi_1x-S80_gmi2.0.0_drv3.0.0_two-procs.txt"
ALL_FIXTURES = sorted(FIX.glob("*.txt"))
MiB = 1 << 20


def _backend(timeout_s: float = 10.0) -> MthreadsBackend:
    return MthreadsBackend(clock=time.monotonic, timeout_s=timeout_s)


def test_registered():
    assert REGISTRY["mthreads"] is MthreadsBackend


# Temperatures per GPU from the second rows ("     Physical      P0     |16x(16x)            |48C   YES").
S5000_TEMPS = [48.0, 48.0, 49.0, 48.0, 48.0, 50.0, 48.0, 49.0]
S5000_BUS = ["00000000:18:00.0", "00000000:3a:00.0", "00000000:4b:00.0", "00000000:5c:00.0",
             "00000000:9a:00.0", "00000000:ba:00.0", "00000000:ca:00.0", "00000000:da:00.0"]


def test_eight_s5000(tmp_path, monkeypatch):
    tool = install_tool(tmp_path, monkeypatch, "mthreads-gmi", stdout_file=F_S5000)
    be = _backend()
    cards = be.discover()
    # "0    MTT S5000            |00000000:18:00.0    |0%    0MiB(81920MiB)" … 8 rows.
    assert [(c.card, c.vendor, c.name) for c in cards] == [(i, "moorethreads", "MTT S5000") for i in range(8)]
    assert all(c.mem_total == 81920 * MiB and c.pcie_width_max == 16 for c in cards)  # "16x(16x)"
    s = {x.card: x for x in be.sample()}
    for i in range(8):
        assert (s[i].util, s[i].temp_c, s[i].mem_used, s[i].mem_total) == (0.0, S5000_TEMPS[i], 0, 81920 * MiB), i
        assert s[i].power_w is None  # this view prints no power: unknown, not 0
        assert s[i].pcie_width == 16
        assert s[i].procs == {}  # "   No running processes found"
    assert calls(tool) == [[], []]


def test_s80_with_two_processes(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "mthreads-gmi", stdout_file=F_S80)
    be = _backend()
    cards = be.discover()
    assert [(c.card, c.name, c.mem_total) for c in cards] == [(0, "MTT S80", 16384 * MiB)]
    s = be.sample()[0]
    # "0    MTT S80        |00000000:01:00.0    |0%    662MiB(16384MiB)", "|41C   YES"
    assert (s.util, s.temp_c, s.mem_used, s.mem_total) == (0.0, 41.0, 662 * MiB, 16384 * MiB)
    # "0    1123      /usr/lib/xorg/Xorg   134MiB", "0    1361      /usr/sbin/unity-greeter   1MiB"
    assert s.procs == {"1123": 134 * MiB, "1361": 1 * MiB}


def test_used_over_total_is_kept_as_read(tmp_path, monkeypatch):
    # DERIVED: GPU 3 of the real S5000 output made to report more used than total, as a
    # real S-series card did. Both numbers stay as printed; nothing clamps or fails.
    text = F_S5000.read_text().replace("|0%    0MiB(81920MiB)\n     Physical      P0     |16x(16x)            |48C",
                                       "|7%    0MiB(81920MiB)\n     Physical      P0     |16x(16x)            |48C", 1)
    text = text.replace("3    MTT S5000            |00000000:5c:00.0    |0%    0MiB(81920MiB)",
                        "3    MTT S5000            |00000000:5c:00.0    |0%    82500MiB(81920MiB)")
    install_tool(tmp_path, monkeypatch, "mthreads-gmi", stdout_text=text)
    be = _backend()
    be.discover()
    s = {x.card: x for x in be.sample()}
    assert (s[3].mem_used, s[3].mem_total) == (82500 * MiB, 81920 * MiB)
    assert s[0].util == 7.0
    for x in s.values():  # the only percentage we emit is the tool's own %GPU
        assert x.util is None or 0.0 <= x.util <= 100.0


def test_version():
    assert mthreads_gmi_version(F_S5000.read_text()) == "2.4.1"
    assert mthreads_gmi_version(F_S80.read_text()) == "2.0.0"


def test_probe(tmp_path, monkeypatch):
    tool = install_tool(tmp_path, monkeypatch, "mthreads-gmi", stdout_file=F_S5000)
    p = MthreadsBackend.probe()
    assert (p.available, p.version, p.path) == (True, "2.4.1", str(tool))
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    monkeypatch.setattr("sattui.vendors.cli_backend.find_tool", lambda name, *a: None)
    assert MthreadsBackend.probe().available is False


def test_hung_tool(tmp_path, monkeypatch):
    assert_hung_tool_times_out(tmp_path, monkeypatch, "mthreads-gmi", _backend, F_S5000)


def test_crashing_tool(tmp_path, monkeypatch):
    assert_crash_is_tool_error(tmp_path, monkeypatch, "mthreads-gmi", _backend,
                               exit_code=2, stderr_text="Failed to initialize MTML\n")


def test_garbage(tmp_path, monkeypatch):
    assert_unreadable_output(tmp_path, monkeypatch, "mthreads-gmi", _backend,
                             "libmtml.so: cannot open shared object file\n", "mthreads-gmi 2.5.0: no GPU table",
                             by_args={"--version": "mthreads-gmi version 2.5.0\n"})


def test_garbage_without_any_version(tmp_path, monkeypatch):
    assert_unreadable_output(tmp_path, monkeypatch, "mthreads-gmi", _backend, "???\n",
                             "mthreads-gmi (version unknown): ")


# -- properties -------------------------------------------------------------------------------

TEXTS = [f.read_text() for f in ALL_FIXTURES]


# gmi prints memory as "used(total)": parentheses, not "/", are its separators.
MTHREADS_REPLACEMENTS = ("", "|", "(", ")", "-", " ", "N/A", "9" * 30, "\n", "x", "%")

(test_arbitrary_text, test_truncated_fixtures,
 test_fixtures_with_lines_dropped_or_doubled, test_fixtures_with_characters_replaced) = parser_fuzz_tests(
    parse_mthreads_gmi, TEXTS, never_raise=(mthreads_gmi_version,), replacements=MTHREADS_REPLACEMENTS)
