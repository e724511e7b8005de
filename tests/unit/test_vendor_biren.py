"""The biren backend (``brsmi``) — UNVERIFIED: no real brsmi output is public.

EVERY brsmi text in this file is SYNTHETIC, written for these tests in the
nvidia-smi-like shape the parser guesses; none is a capture. They check that the guess
reads such a table by header name, that anything else is a ParseError naming the tool
and its version, and that doctor is told "unverified".
"""

from __future__ import annotations

import time

from sattui.vendors.backend import REGISTRY
from sattui.vendors.biren import UNVERIFIED, BirenBackend, brsmi_version, parse_brsmi
from tests.vendor_tools import (
    assert_crash_is_tool_error,
    assert_hung_tool_times_out,
    assert_unreadable_output,
    install_tool,
    parser_fuzz_tests,
)

MiB = 1 << 20

# SYNTHETIC — not real brsmi output.
SYNTHETIC_TABLE = """\
Tue Mar  3 10:00:00 2026
+-----------------------------------------------------------------------------+
| BRSMI 1.4.0                   Driver Version: 1.4.0                         |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  BR104P              N/A  | 00000000:1B:00.0 N/A |                  N/A |
| N/A   45C   P0   120W / 300W  |   2048MiB / 32768MiB |     35%      Default |
+-------------------------------+----------------------+----------------------+
|   1  BR104P              N/A  | 00000000:3D:00.0 N/A |                  N/A |
| N/A   N/A   P0    N/A / 300W  |      0MiB / 32768MiB |     N/A      Default |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| Processes:                                                                  |
|  GPU        PID   Type   Process name                            GPU Memory |
|=============================================================================|
|    0       4242      C   python                                     2000MiB |
+-----------------------------------------------------------------------------+
"""

# SYNTHETIC — a simpler guess: one row per GPU, no process table.
SYNTHETIC_ONE_ROW = """\
+------------------------------------------------------------+
| brsmi v2.0.1                                               |
+-----+-----------+------+--------+-------------------+------+
| ID  | Name      | Temp | Power  | Memory-Usage      | Util |
+=====+===========+======+========+===================+======+
| 0   | BR100     | 51C  | 250W   | 100MiB / 65536MiB | 99%  |
+-----+-----------+------+--------+-------------------+------+
"""


def _backend(timeout_s: float = 10.0) -> BirenBackend:
    return BirenBackend(clock=time.monotonic, timeout_s=timeout_s)


def test_registered_unverified():
    assert REGISTRY["biren"] is BirenBackend
    assert BirenBackend.verified is False


def test_probe_says_unverified(tmp_path, monkeypatch):
    tool = install_tool(tmp_path, monkeypatch, "brsmi", stdout_text=SYNTHETIC_TABLE)
    p = BirenBackend.probe()
    assert (p.name, p.available, p.verified, p.path, p.version) == ("biren", True, False, str(tool), "1.4.0")
    assert p.reason == UNVERIFIED == "unverified: no real brsmi output seen"


def test_probe_missing_still_says_unverified(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    p = BirenBackend.probe()
    assert p.available is False and p.verified is False
    assert "brsmi not found" in (p.reason or "") and UNVERIFIED in (p.reason or "")


def test_synthetic_nvidia_smi_like_table(tmp_path, monkeypatch):
    install_tool(tmp_path, monkeypatch, "brsmi", stdout_text=SYNTHETIC_TABLE)
    be = _backend()
    cards = be.discover()
    assert [(c.card, c.vendor, c.name, c.mem_total) for c in cards] == [
        (0, "biren", "BR104P", 32768 * MiB), (1, "biren", "BR104P", 32768 * MiB)]
    s = {x.card: x for x in be.sample()}
    assert (s[0].util, s[0].temp_c, s[0].power_w, s[0].power_limit_w) == (35.0, 45.0, 120.0, 300.0)
    assert (s[0].mem_used, s[0].mem_total) == (2048 * MiB, 32768 * MiB)
    assert s[0].procs == {"4242": 2000 * MiB}
    # N/A stays unknown, never 0.
    assert (s[1].util, s[1].temp_c, s[1].power_w, s[1].power_limit_w) == (None, None, None, 300.0)
    assert s[1].procs == {}


def test_synthetic_one_row_table():
    r = parse_brsmi(SYNTHETIC_ONE_ROW)
    assert list(r) == [0]
    assert (r[0].name, r[0].util, r[0].temp_c, r[0].power_w, r[0].power_limit_w) == ("BR100", 99.0, 51.0, 250.0, None)
    assert (r[0].mem_used, r[0].mem_total) == (100 * MiB, 65536 * MiB)
    assert r[0].procs is None
    assert brsmi_version(SYNTHETIC_ONE_ROW) == "2.0.1"


def test_unknown_layout_names_tool_and_version(tmp_path, monkeypatch):
    # SYNTHETIC: a key/value dump, which the guess does not read.
    text = "brsmi version 3.1.0\nGPU 0: BR104P\n  Utilization: 12 %\n"
    assert_unreadable_output(tmp_path, monkeypatch, "brsmi", _backend, text,
                             "brsmi 3.1.0: no nvidia-smi-like GPU table")


def test_garbage_without_version(tmp_path, monkeypatch):
    assert_unreadable_output(tmp_path, monkeypatch, "brsmi", _backend, "???\n", "brsmi (version unknown): ")


def test_hung_tool(tmp_path, monkeypatch):
    assert_hung_tool_times_out(tmp_path, monkeypatch, "brsmi", _backend, SYNTHETIC_TABLE)


def test_crashing_tool(tmp_path, monkeypatch):
    assert_crash_is_tool_error(tmp_path, monkeypatch, "brsmi", _backend, exit_code=1, stderr_text="brsmi: no device\n")


# -- properties (on the synthetic tables and noise) ----------------------------------------------

TEXTS = [SYNTHETIC_TABLE, SYNTHETIC_ONE_ROW]


(test_arbitrary_text, test_truncated,
 test_lines_dropped_or_doubled, test_characters_replaced) = parser_fuzz_tests(
    parse_brsmi, TEXTS, never_raise=(brsmi_version,))
