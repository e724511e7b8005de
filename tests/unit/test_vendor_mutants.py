"""Tests written to kill mutants that survived the mutation check of the vendor parsers
(scripts/mutation_check.sh; each survivor is quoted in docs/testing.md).

Each test names the mutant it kills. Where a real capture reaches the code, it is used;
the rest are contract tests of one small function on hand-written input, marked so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sattui.vendors.ascend import AscendBackend
from sattui.vendors.base import ParseError
from sattui.vendors.box_table import split_paren
from sattui.vendors.cambricon import CambriconBackend, parse_cnmon
from sattui.vendors.kunlun import KunlunBackend
from sattui.vendors.reading import CardReading
from sattui.vendors.rocm import amd_value
from sattui.vendors.values import num, one_line, pcie_gen_from_speed
from tests.vendor_tools import install_tool

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vendors"
CNMON_2X = FIX / "cambricon" / "cnmon_2x-MLU370-X8_cnmon-v5.10.13_sriov-column-NA.txt"
NPU_BUSY16 = FIX / "ascend" / "npu-smi-info_16x-910B2C_npusmi24.1.rc2_busy-aicore100.txt"
KUNLUN_8X = FIX / "kunlun" / "xpu_smi_8x-P800-OAM_drv5.0.21.26.txt"
MiB = 1 << 20


def test_a_pid_listed_twice_on_one_card_sums():
    # Kills add_proc's "procs[key] + mem" → "None" / "procs[key] - mem". SYNTHETIC rows
    # (no public cnmon process row exists) under the real v5.10.13 process header: one
    # process holding two contexts on card 0, as nvidia-smi-like tools list it.
    text = CNMON_2X.read_text().replace(
        "|  No running processes found                                                  |",
        "|  0     /   4242    python train.py                                 1024 MiB |\n"
        "|  0     /   4242    python train.py                                  512 MiB |")
    r = parse_cnmon(text)
    assert r[0].procs == {"4242": 1536 * MiB}
    assert r[1].procs == {}


def test_samples_carry_the_backends_clock_and_a_card_that_vanishes_is_lost_once(tmp_path, monkeypatch):
    # Kills TableToolBackend.sample's "t = self.clock()" → "t = None" and the presence
    # update's "i in self.cards" → "i not in self.cards". DERIVED: the real 2-card cnmon
    # output, then the same output with card 1's box taken out.
    two = CNMON_2X.read_text()
    card1 = ("| 1     /   MLU370-X8    v1.1.6 |         0000:3D:00.0 | 0%                N/A |\n"
             "|  0%   39C        106 W/ 250 W |     0 MiB/ 23374 MiB | N/A           Default |\n"
             "+-------------------------------+----------------------+-----------------------+\n")
    assert two.count(card1) == 1
    install_tool(tmp_path, monkeypatch, "cnmon", stdout_file=CNMON_2X)
    be = CambriconBackend(clock=lambda: 7.25, timeout_s=10.0)
    be.discover()
    assert [(s.card, s.t) for s in be.sample()] == [(0, 7.25), (1, 7.25)]
    assert be.take_events() == []
    install_tool(tmp_path, monkeypatch, "cnmon", stdout_text=two.replace(card1, ""))
    assert [s.card for s in be.sample()] == [0]
    events = be.take_events()
    assert [(e.type, e.data["card"]) for e in events] == [("card_lost", 1)]


def test_merge_missing_fills_only_what_is_missing():
    # Kills CardReading.merge_missing's "self is None and other is not None" → "or": a
    # second source (npu-smi -t usages) must not overwrite what the overview gave.
    # Contract test on hand-written readings.
    mine = CardReading(index=0, util=50.0, mem_total=None, temp_c=40.0)
    mine.merge_missing(CardReading(index=0, util=10.0, mem_total=64 * MiB, temp_c=None))
    assert (mine.util, mine.mem_total, mine.temp_c) == (50.0, 64 * MiB, 40.0)


def test_split_paren_of_na_is_unknown():
    # Kills split_paren's "value is None or is_na(value)" → "and": mthreads-gmi prints
    # "N/A" where it has no "used(total)" memory figure.
    assert split_paren("N/A", "Mem") == (None, None)
    assert split_paren(None, "Mem") == (None, None)


def test_amd_value_without_a_unit_has_none():
    # Kills amd_value's 'obj.get("unit", "")' default → None/"XXXX": amd-smi's {"value": N}
    # objects may carry no "unit" key. Contract test.
    assert amd_value({"value": 5}, "x") == (5.0, "")
    assert amd_value({"value": 5, "unit": 7}, "x") == (5.0, "")


@pytest.mark.parametrize(("gts", "gen"), [(2.5, 1), (5.0, 2), (8.0, 3), (16.0, 4), (32.0, 5), (64.0, 6),
                                          (128.0, 7), (12.0, None), (None, None)])
def test_pcie_generation_from_the_lane_rate(gts, gen):
    # Kills the edits of pcie_gen_from_speed's table (gen 1 → 2, 2.5 → 3.5 GT/s, …): the
    # PCIe per-lane rates are 2.5, 5, 8, 16, 32, 64 and 128 GT/s for generations 1 to 7.
    assert pcie_gen_from_speed(gts) == gen



def test_ascend_samples_carry_the_backends_clock(tmp_path, monkeypatch):
    # Kills AscendBackend.sample's "t = self.clock()" → "t = None" (and the same with the
    # argument of to_sample): the busy 16-NPU capture, sampled at 3.5 on the backend's clock.
    install_tool(tmp_path, monkeypatch, "npu-smi", by_args={"info": NPU_BUSY16})
    be = AscendBackend(clock=lambda: 3.5, timeout_s=10.0)
    be.discover()
    samples = be.sample()
    assert len(samples) == 16 and {s.t for s in samples} == {3.5}


@pytest.mark.parametrize("other", ["crashes", "prints something else", "hangs"])
def test_kunlunxin_tool_is_found_as_xpu_smi_after_a_bad_xpu_dash_smi(tmp_path, monkeypatch, other):
    # Kills locate_kunlun's "continue" → "break" after a candidate that failed or could not
    # be told apart, and "kind == 'kunlun'" → "kind != 'kunlun'": a broken or foreign
    # `xpu-smi` first on PATH must not hide Kunlunxin's `xpu_smi` (the real 8-XPU capture).
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr("sattui.vendors.kunlun.KUNLUN_DIRS", ())
    behaviour = {"crashes": dict(exit_code=1, stderr_text="xpu-smi: cannot open device\n"),
                 "prints something else": dict(stdout_text="usage: xpu-smi [options]\n"),
                 "hangs": dict(stdout_file=KUNLUN_8X, sleep_s=30)}[other]
    install_tool(tmp_path, monkeypatch, "xpu-smi", **behaviour)
    ours = install_tool(tmp_path, monkeypatch, "xpu_smi", stdout_file=KUNLUN_8X)
    be = KunlunBackend(timeout_s=3.0)
    assert [c.card for c in be.discover()] == list(range(8))
    assert be.tool is not None and be.tool.path == str(ours)


# -- survivors of the December 2026 run on the shared helpers (docs/mutation-survivors.md) --

@pytest.mark.parametrize(("value", "message"), [
    (True, "card 0 Aicore Freq: boolean where a number was expected"),
    (float("inf"), "card 0 Aicore Freq: not a finite number"),
    ("1e999", "card 0 Aicore Freq: not a finite number"),
    (" 1800 MHz ", "card 0 Aicore Freq: '1800 MHz' is not a number"),
    ([1800], "card 0 Aicore Freq: list where a number was expected"),
])
def test_a_number_that_is_not_one_is_named_in_the_error(value, message):
    # Kills num's error-message mutants: layout_error(...) → layout_error(None) (the user
    # reads "npu-smi 24.1.rc2 [...]: None"), one_line(s) → one_line(None), the type name
    # of None, and _finite(x, what) → _finite(x, None) ("None: not a finite number").
    # Contract test: the values JSON tools (amd-smi, xpu-smi) and npu-smi's key/value
    # views can hand it.
    with pytest.raises(ParseError) as e:
        num(value, "card 0 Aicore Freq")
    assert str(e.value) == message


@pytest.mark.parametrize(("text", "shown"), [
    ("a  b\tc", "'a b c'"),
    ("x" * 60, repr("x" * 60)),
    ("x" * 61, repr("x" * 60 + "…")),
    ("y" * 80, repr("y" * 60 + "…")),
])
def test_a_snippet_in_an_error_is_one_line_of_at_most_60_characters(text, shown):
    # Kills one_line's limit 60 → 61, " ".join → "XX XX".join, the "…" → "XX…XX" and
    # "len(s) > limit" → ">=" / "and False": the snippet of tool output that every parse
    # error quotes. Contract test.
    assert one_line(text) == shown


@pytest.mark.parametrize("gts", [4.0, 6.5, 7.0, 10.0, 1.5])
def test_a_lane_rate_between_generations_is_no_generation(gts):
    # Kills pcie_gen_from_speed's tolerance 0.3 → 1.3 GT/s: 7 GT/s is not gen 3 (8 GT/s)
    # nor 4 GT/s gen 2; a rate no generation runs at gives no generation. Contract test.
    assert pcie_gen_from_speed(gts) is None
