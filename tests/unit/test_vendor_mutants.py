"""Tests written to kill mutants that survived the mutation check of the vendor parsers
(scripts/mutation_check.sh; the survivors, killed here or equivalent, are listed in
docs/mutation-survivors.md).

Each test names the mutant it kills. Where a real capture reaches the code, it is used;
the rest are contract tests of one small function on hand-written input, marked so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sattui.vendors.ascend import AscendBackend
from sattui.vendors.backend import ParseError, Probe
from sattui.vendors.biren import UNVERIFIED as BIREN_NOTE
from sattui.vendors.biren import BirenBackend
from sattui.vendors.box_table import split_paren
from sattui.vendors.cambricon import CambriconBackend, parse_cnmon
from sattui.vendors.kunlun import KunlunBackend
from sattui.vendors.mthreads import MthreadsBackend
from sattui.vendors.reading import CardReading
from sattui.vendors.rocm import amd_value, parse_rocm_smi_json
from sattui.vendors.tool import in_dir_named
from sattui.vendors.values import (
    extract_json,
    is_index,
    layout_error,
    mem_pair,
    num,
    num_unit,
    one_line,
    parse_pct,
    pcie_gen_from_speed,
    temp_c,
    to_bytes,
    to_index,
    watts,
)
from tests.vendor_tools import install_tool

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vendors"
CNMON_2X = FIX / "cambricon" / "cnmon_2x-MLU370-X8_cnmon-v5.10.13_sriov-column-NA.txt"
NPU_BUSY16 = FIX / "ascend" / "npu-smi-info_16x-910B2C_npusmi24.1.rc2_busy-aicore100.txt"
MI100_JSON = FIX / "amd" / "rocm-smi-json_4x-mi100_rocm6.0.2.json"
MTHREADS_S5000 = FIX / "moorethreads" / "mthreads-gmi_8x-S5000_gmi2.4.1_drv5.1.0-server.txt"
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


def test_json_after_a_bracketed_banner_or_an_empty_one_is_still_read():
    # Kills extract_json's "continue" → "break" after a start that is no JSON, and
    # "isinstance(obj, (dict, list)) and obj" → "or obj" (an empty "[]" taken for the
    # answer). DERIVED: the real 4×MI100 rocm-smi --json capture behind a warning line
    # in brackets and an empty list, as rocm-smi forks print on stdout.
    text = MI100_JSON.read_text()
    plain = parse_rocm_smi_json(text)
    for banner in ("[WARNING] card0: GPU is in low-power state []\n", "[] ", "[ERROR: {bad} ]\n"):
        got = parse_rocm_smi_json(banner + text)
        assert sorted(got) == sorted(plain) == [0, 1, 2, 3]
        assert [r.util for r in got.values()] == [r.util for r in plain.values()]


@pytest.mark.parametrize(("text", "message"), [
    ("rocm-smi: no devices found", "rocm-smi JSON: no JSON object in it"),
    ('{"card0": {"GPU use (%)": ', "rocm-smi JSON: bad JSON (JSONDecodeError)"),
    ("[] {}", "rocm-smi JSON: empty JSON"),
    (None, "rocm-smi JSON: not text"),
])
def test_why_no_json_was_found_is_said(text, message):
    # Kills extract_json's error-message mutants (last_err → None / "XX…XX" / case
    # changes, type(e) → type(None), layout_error(...) → layout_error(None)): the reason
    # the user reads after "rocm-smi 6.0.2: --json:". Contract test.
    with pytest.raises(ParseError) as e:
        extract_json(text, "rocm-smi JSON")
    assert str(e.value) == message


def test_a_layout_error_is_one_line_of_at_most_200_characters():
    # Kills layout_error's cut at 200 → 201 characters. Contract test.
    e = layout_error("card 0\n  Memory-Usage: " + "x" * 300)
    assert str(e) == ("card 0 Memory-Usage: " + "x" * 300)[:200]


@pytest.mark.parametrize(("used", "total", "message"), [
    ("12 XB", "100 MiB", "card 0 Memory-Usage used: unknown size unit 'XB'"),
    ("12 MiB", "100 XB", "card 0 Memory-Usage total: unknown size unit 'XB'"),
])
def test_a_memory_pair_error_names_which_half(used, total, message):
    # Kills mem_pair's what=f"{what} used"/f"{what} total" → None or dropped (the error
    # then says "None: …" or "memory: …"). Contract test.
    with pytest.raises(ParseError) as e:
        mem_pair(used, total, "card 0 Memory-Usage")
    assert str(e.value) == message


@pytest.mark.parametrize(("fn", "value", "message"), [
    (temp_c, "40 F", "card 0 Temp: unexpected unit 'F'"),
    (watts, "65 kW", "card 0 Pwr:Usage: unexpected unit 'kW'"),
    (to_index, "GPU0", "card 0 Pwr:Usage: 'GPU0' is not a number"),
    (to_index, None, "card 0 Pwr:Usage: '' is not a number"),
])
def test_a_cell_error_names_the_cell(fn, value, message):
    # Kills temp_c's and watts' expect_unit(…, what) → (…, None), to_index's "value is
    # None or not is_index(value)" → "and" (a ValueError instead of the layout error) and
    # its one_line(value or '') → one_line(None) / (value and '') / 'XXXX'. Contract test.
    what = "card 0 Temp" if fn is temp_c else "card 0 Pwr:Usage"
    with pytest.raises(ParseError) as e:
        fn(value, what)
    assert str(e.value) == message


@pytest.mark.parametrize(("text", "celsius"), [("250 C", 250.0), ("-60C", -60.0), ("250.5 C", None),
                                               ("-60.5C", None), ("65535C", None)])
def test_temperature_bounds_are_inclusive(text, celsius):
    # Kills temp_c's "-60.0 <= x <= 250.0" → -61.0 / 251.0 / "<" at either end: the
    # readings a sensor can give are kept, sentinels beyond them are unknown. Contract test.
    assert temp_c(text, "card 0 Temp") == celsius


@pytest.mark.parametrize(("text", "message"), [
    ("-5 MiB", "process 4242 memory: negative size"),
    ("1e308 TiB", "process 4242 memory: size out of range"),
    ("lots", "process 4242 memory: 'lots' is not a number with a unit"),
    ("12 XB", "process 4242 memory: unknown size unit 'XB'"),
])
def test_a_size_error_names_the_size(text, message):
    # Kills to_bytes' num_unit(value, what) → (value, None) / (value) and scale_bytes(…,
    # what=what) → None / dropped, and scale_bytes' layout_error(...) → layout_error(None)
    # for a negative size, an unknown unit and an overflow. Contract test.
    with pytest.raises(ParseError) as e:
        to_bytes(text, "MiB", what="process 4242 memory")
    assert str(e.value) == message


def test_kib_and_mib_stay_binary_when_mb_is_decimal():
    # Kills scale_bytes' u.endswith("ib") → "XXibXX" / "IB": with binary=False only the
    # ambiguous "MB" is decimal; "MiB"/"KiB" are powers of 1024 whatever the caller says.
    # Contract test (no parser passes binary=False today; the docstring promises it).
    assert to_bytes("1 MB", binary=False) == 1_000_000
    assert to_bytes("1 MiB", binary=False) == 1 << 20
    assert to_bytes("3 KiB", binary=False) == 3 * 1024


@pytest.mark.parametrize(("value", "message"), [
    (True, "gpu 0 sclk: boolean where a number was expected"),
    (float("inf"), "gpu 0 sclk: not a finite number"),
    ("1e999 Mhz", "gpu 0 sclk: not a finite number"),
    ({"value": 1}, "gpu 0 sclk: dict where a number was expected"),
])
def test_a_number_with_a_unit_that_is_not_one_is_named_in_the_error(value, message):
    # Kills num_unit's layout_error(...) → layout_error(None) for a boolean and for a
    # type it does not read (and its type name → type(None)), and both _finite(x, what) →
    # _finite(x, None). Contract test: the values amd-smi's and rocm-smi's JSON can hand it.
    with pytest.raises(ParseError) as e:
        num_unit(value, "gpu 0 sclk")
    assert str(e.value) == message


@pytest.mark.parametrize(("text", "util"), [("110 %", 100.0), ("100.4%", 100.0), ("110.5 %", None), ("-1%", None)])
def test_a_percentage_a_little_over_100_is_clamped_and_more_is_unknown(text, util):
    # Kills clamp_pct's "x > 110" → ">= 110" / "> 111": up to 110 % is the tool's
    # rounding (clamped to 100), beyond it is no utilisation at all. Contract test.
    assert parse_pct(text, "card 0 Util") == util


@pytest.mark.parametrize(("value", "ok"), [(True, False), (False, False), (0, True), (95, True),
                                           (4_194_303, True), (10**9 - 1, True), (10**9, False), (-1, False)])
def test_an_index_is_a_non_negative_int_below_a_billion_and_not_a_bool(value, ok):
    # Kills is_index's "return False" for a bool → True (JSON "gpu": true would reach
    # int("True")), and its bound 10**9 → "<=" / 10*9 / 11**9 / 10**10: a device id of 95
    # or Linux's largest pid (4194303) is an index. Contract test.
    assert is_index(value) is ok


@pytest.mark.parametrize("text", ["49°C", "49\ufffdC", "49?C", "49 \ufffdC", "49C"])
def test_a_degree_sign_mangled_by_the_c_locale_is_still_celsius(text):
    # Kills num_unit's .replace("\ufffd", "") / .replace("?", "") edits ("XX\ufffdXX",
    # "XXXX", …): tools run in the C locale print "°C" as U+FFFD or "?" followed by "C";
    # the temperature must still be read. Contract test.
    assert temp_c(text, "card 0 Temp") == 49.0


def test_doctor_says_which_tool_failed_and_how(tmp_path, monkeypatch):
    # Kills CliBackend.probe's edits of the Probe doctor prints for a tool that fails (its
    # name, path, verified flag → None/dropped, the reason with a note forced by "or
    # True") and for a probe that raises (available → None/True, the reason → None or
    # type(None), fields dropped). DERIVED: mthreads-gmi exiting 1 with a driver message;
    # then a header_version that raises on the real S5000 listing.
    tool = install_tool(tmp_path, monkeypatch, "mthreads-gmi", exit_code=1, stderr_text="MTML: driver not loaded\n")
    p = MthreadsBackend.probe()
    assert p == Probe("mthreads", False, "mthreads-gmi exited 1: MTML: driver not loaded", None, str(tool), True)
    install_tool(tmp_path, monkeypatch, "mthreads-gmi", stdout_file=MTHREADS_S5000)

    def broken(text: str) -> str:
        raise ValueError("no version line")

    monkeypatch.setattr(MthreadsBackend, "header_version", staticmethod(broken))
    assert MthreadsBackend.probe() == Probe("mthreads", False, "probe failed: ValueError: no version line",
                                            verified=True)
    # An unverified backend's failure keeps its note and its flag (verified= dropped → True).
    install_tool(tmp_path, monkeypatch, "brsmi", exit_code=2, stderr_text="brsmi: no device\n")
    b = BirenBackend.probe()
    assert (b.available, b.reason, b.verified) == (False, f"brsmi exited 2: brsmi: no device; {BIREN_NOTE}", False)
    monkeypatch.setattr(BirenBackend, "header_version", staticmethod(broken))
    install_tool(tmp_path, monkeypatch, "brsmi", stdout_text="+---+\n")
    assert BirenBackend.probe().verified is False


_CNMON_ROW = "|  0%   32C        106 W/ 250 W |     0 MiB/ 23374 MiB |"
_CNMON_TOP = "| 0     /   MLU370-X8    v1.1.6 |         0000:39:00.0 | 0%                N/A |"


@pytest.mark.parametrize(("old", "new", "message"), [
    (_CNMON_ROW, _CNMON_ROW.replace("32C", "32F"), "card 0 Temp: unexpected unit 'F'"),
    (_CNMON_ROW, _CNMON_ROW.replace("106 W/", "106 X/"), "card 0 Pwr:Usage: unexpected unit 'X'"),
    (_CNMON_ROW, _CNMON_ROW.replace("250 W", "250 X"), "card 0 Pwr:Cap: unexpected unit 'X'"),
    (_CNMON_ROW, _CNMON_ROW.replace("  106 W/ 250 W", "   106 W 250 W"),
     "card 0 Pwr: '106 W 250 W' is not 'used / total'"),
    (_CNMON_ROW, _CNMON_ROW.replace("    0 MiB/", "      0 MiB"),
     "card 0 Memory-Usage: '0 MiB 23374 MiB' is not 'used / total'"),
    (_CNMON_ROW, _CNMON_ROW.replace("0 MiB/", "0 XB/"), "card 0 Memory-Usage used: unknown size unit 'XB'"),
    (_CNMON_TOP, _CNMON_TOP.replace("0%    ", "7Q    "), "card 0 Util: unexpected unit 'Q'"),
])
def test_a_box_table_cell_error_names_the_card_and_the_cell(old, new, message):
    # Kills reading_from_record's where → None and the cell names passed on as None or
    # dropped (util, temp, power, its used/cap halves, memory and its pair): the user reads
    # "cnmon v5.10.13: card 0 Temp: unexpected unit 'F'". DERIVED: the real 2-card cnmon
    # capture with one cell of card 0 mangled. (The bus column is read from it too.)
    text = CNMON_2X.read_text()
    assert text.count(old) == 1
    assert parse_cnmon(text)[0].bus == "0000:39:00.0"  # kills bus=layout.bus.cell(rec) → None / dropped
    with pytest.raises(ParseError) as e:
        parse_cnmon(text.replace(old, new))
    assert str(e.value) == message


def test_a_memory_cell_that_is_not_used_of_total_is_quoted():
    # Kills split_paren's layout_error(...) → layout_error(None) and one_line(value) →
    # one_line(None): mthreads-gmi's "used(total)" cell in any other shape. Contract test.
    with pytest.raises(ParseError) as e:
        split_paren("12 MiB / 80 GiB", "GPU 0 Mem")
    assert str(e.value) == "GPU 0 Mem: '12 MiB / 80 GiB' is not 'used(total)'"


def test_a_tool_directory_is_told_by_its_name_through_links(tmp_path):
    # Kills in_dir_named's edits: split(os.sep) → split(None), "parts +=" → "parts =" (the
    # link's target no longer counted), "or" → "and" between the "-"/"_" suffixes, and
    # the suffixes → "XX-XX" / "XX_XX": /opt/dtk-24.04/bin/rocm-smi is DTK's, not ROCm's.
    # Contract test on a built directory tree.
    real = tmp_path / "dtk-24.04" / "bin" / "rocm-smi"
    real.parent.mkdir(parents=True)
    real.write_text("")
    link = tmp_path / "rocm" / "bin" / "rocm-smi"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    assert in_dir_named(str(real), ("dtk",)) and in_dir_named(str(link), ("dtk",))
    assert in_dir_named(str(link), ("rocm",)) and not in_dir_named(str(real), ("rocm",))
    assert in_dir_named("/opt/dtk_23/bin/hy-smi", ("dtk",))
    assert not in_dir_named("/opt/dtkx/bin/hy-smi", ("dtk",))


def test_an_empty_answer_is_quoted_as_empty():
    # Kills first_line's default "" → None / "XXXX" / none (StopIteration): a tool that
    # printed nothing is reported as "output starts ''". Contract test.
    with pytest.raises(ParseError) as e:
        parse_cnmon("\n  \n")
    assert str(e.value).endswith("output starts ''")
