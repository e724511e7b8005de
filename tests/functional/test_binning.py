"""The TUI's plain-Python parts: binning, glyphs, formats, the axis (no Textual needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sattui.states import State
from sattui.view import fmt
from sattui.view.binning import Axis, BinCache, bin_bits, bin_letters, bin_states, bin_values, typical_hold
from sattui.view.lines import (
    BLOCKS,
    axis_line,
    bar,
    chart,
    columns_for,
    decode_clock_reasons,
    legend,
    spark,
    state_cells,
)


def test_axis_edges_are_whole_buckets_so_the_picture_does_not_shimmer():
    a = Axis.make(100.2, 60.0, 60)
    assert a.bw == pytest.approx(1.0)
    assert a.t1 == pytest.approx(101.0) and a.t0 == pytest.approx(41.0)
    assert Axis.make(100.9, 60.0, 60) == a  # same buckets until a bucket is complete


def test_min_keeps_a_dip_that_max_or_mean_would_hide():
    # 10 samples per bucket; one short dip to 5 % in the second bucket.
    times = [i * 0.1 for i in range(1, 41)]
    vals = [100.0] * 40
    vals[14] = 5.0
    mins, means, maxs = bin_values(times, vals, Axis(0.0, 4.0, 4), hold=0.25)
    assert mins[1] == 5.0 and maxs[1] == 100.0
    assert means[1] > 80  # the mean would hide it; that is why the util strip draws the min
    assert mins[0] == mins[2] == 100.0


def test_none_is_no_data_never_zero_and_gaps_stay_gaps():
    times = [1.0, 2.0, 3.0, 8.0, 9.0]
    mins, _, _ = bin_values(times, [50.0, None, 50.0, 0.0, 0.0], Axis(0.0, 10.0, 10), hold=2.5)
    assert mins[0] == 50.0 and mins[2] == 50.0
    assert mins[1] is None                     # the source said nothing for [1, 2): no data, not 0
    assert mins[3] is None and mins[4] is None  # the 3 s → 8 s gap is longer than hold: a gap
    assert mins[7] == 0.0 and mins[8] == 0.0    # a real zero is a value


def test_a_sample_stands_for_the_time_since_the_previous_one():
    # Utilization sampled at 1 s, 2 s, 3 s: the 2 s reading describes [1, 2).
    mins, _, _ = bin_values([1.0, 2.0, 3.0], [90.0, 10.0, 90.0], Axis(0.0, 4.0, 4), hold=2.5)
    assert mins[1] == 10.0 and mins[2] == 90.0


def test_typical_hold_follows_the_sampling_interval():
    assert typical_hold([0.5 * i for i in range(20)]) == pytest.approx(1.25)
    assert typical_hold([1.0]) == 2.0


def test_states_show_a_wait_that_fills_a_quarter_of_a_bucket():
    ax = Axis(0.0, 2.0, 2)
    spans = [(0.0, 0.7, "forward"), (0.7, 0.3, "data_wait"), (1.0, 0.9, "backward"), (1.9, 0.1, "data_wait")]
    assert bin_states(spans, ax) == ["data_wait", "backward"]
    assert bin_states([], ax) == [None, None]


def test_kernel_letters_and_clock_bits():
    ax = Axis(0.0, 4.0, 4)
    assert bin_letters([1.0, 2.0, 3.0, 4.0], ["R", "D", "S", "S"], ax, hold=2.5) == ["R", "D", "S", "S"]
    assert bin_letters([1.0, 1.5, 2.0], ["R", "D", "R"], Axis(0.0, 2.0, 1), hold=1.25) == ["D"]  # D wins at 1/4
    bits = bin_bits([1.0, 2.0, 3.0], [0, 0x4 | 0x1, None], ax, hold=2.5)
    assert set(bits) == {0x1, 0x4} and bits[0x4] == [False, True, False, False]
    assert decode_clock_reasons(0x44) == ["SwPowerCap", "HwThermalSlowdown"]
    assert decode_clock_reasons(0x1 | 0x1000) == ["GpuIdle", "0x1000"]
    assert decode_clock_reasons(None) == []


def test_glyphs():
    runs = spark([None, 0.0, 50.0, 100.0], 100.0, "good")
    text = "".join(t for t, _ in runs)
    assert text == " " + BLOCKS[0] + BLOCKS[4] + BLOCKS[7]
    rows = chart([100.0, 0.0, None], 100.0, 2, "good")
    assert ["".join(t for t, _ in r) for r in rows] == ["█  ", "█▁ "]
    cells = state_cells(["data_wait", None, "forward"])
    assert "".join(t for t, _ in cells) == State("data_wait").glyph + " " + State("forward").glyph
    assert len({s.glyph for s in State}) == len(State)  # readable without colour
    assert "".join(t for t, _ in bar(0.5, 10)) == "█████░░░░░"
    assert bar(None, 6) == (("n/a   ", "nodata"),)
    leg = "".join(t for t, _ in legend({"data_wait": 0.6, "forward": 0.4}, 80))
    assert leg.startswith("W data_wait 60%")


def test_columns_and_axis_labels():
    c80, c160 = columns_for(80), columns_for(160)
    assert c80.label + c80.body + c80.value + 2 == 80 and c160.label + c160.body + c160.value + 2 == 160
    ax = Axis.make(90.0, 60.0, c80.body)
    line = axis_line(ax, c80, 90.0, live=True)
    body = "".join(t for t, _ in line.body)
    assert len(body) == c80.body and body.rstrip().endswith("now") and "-30s" in body
    replay = "".join(t for t, _ in axis_line(ax, c80, 90.0, live=False).body)
    assert replay.rstrip().endswith("1:30") and "1:00" in replay


def test_formats():
    assert fmt.pct_text(None) == "n/a" and fmt.pct_text(0.0) == "0%"
    assert fmt.size(62 * 2 ** 30) == "62.0G" and fmt.size(None) == "n/a"
    assert fmt.rate(2.0e7) == "20M/s" and fmt.rate(0) == "0B/s"
    assert fmt.duration(133) == "2m13s" and fmt.clock(90) == "1:30" and fmt.window(3600) == "1h"
    assert fmt.short_card_name("NVIDIA H200") == "H200"


def test_bin_cache_reuses_until_the_signature_changes():
    cache = BinCache()
    calls = []
    assert cache.get("k", 1, lambda: calls.append(1) or "a") == "a"
    assert cache.get("k", 1, lambda: calls.append(1) or "b") == "a"
    assert cache.get("k", 2, lambda: calls.append(1) or "c") == "c"
    assert len(calls) == 2


def test_headless_parts_do_not_import_textual():
    mods = ["sattui.view.binning", "sattui.view.fmt", "sattui.view.lines", "sattui.view.data",
            "sattui.view.stacktable", "sattui.session"]
    code = ("import sys\n"
            f"for m in {mods!r}: __import__(m)\n"
            "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] == 'textual')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_seconds_per_bucket_is_each_spans_overlap_with_each_bucket():
    # The one-bucket shortcut gives exactly the sums of the plain overlap of every span
    # with every bucket, spans before, across and after the axis, one-sample spans included.
    import math
    import random

    from sattui.view.binning import seconds_per_bucket

    def plain(spans, axis):
        acc = [None] * axis.n
        for t, dur, st in spans:
            if st is None:
                continue
            a, b = t, t + max(dur, 1e-3)
            for k in range(max(0, math.floor((a - axis.t0) / axis.bw)),
                           min(axis.n - 1, math.ceil((b - axis.t0) / axis.bw) - 1) + 1):
                ov = min(b, axis.t0 + (k + 1) * axis.bw) - max(a, axis.t0 + k * axis.bw)
                if ov > 0:
                    d = acc[k] = acc[k] or {}
                    d[st] = d.get(st, 0.0) + ov
        return acc

    rnd = random.Random(1)
    for _ in range(1000):
        n, bw = rnd.randint(1, 150), rnd.choice([0.1, 0.37, 1.4, 35.97])
        t0 = rnd.uniform(-50, 3000)
        axis = Axis(t0, t0 + n * bw, n)
        spans, t = [], t0 - rnd.uniform(0, 20)
        for _ in range(rnd.randint(0, 300)):
            d = rnd.choice([0.0, 0.0005, 0.05, 0.3, 1.2, bw, 3 * bw])
            spans.append((t, d, rnd.choice(["data_wait", "forward", None])))
            t += rnd.choice([d, d + 0.01, 0.0])
        assert seconds_per_bucket(spans, axis) == plain(spans, axis)


def test_a_scrolling_state_strip_from_settled_buckets_is_the_strip_binned_afresh():
    # Issue 25: a strip over a 1-h window redraws its newest buckets, not every span of the
    # hour. As spans arrive (in time order, as py-spy's chunks bring them) and the view
    # scrolls or is scrubbed back, the strip and the window's seconds per state are those
    # of binning all the window's spans again.
    import random

    import pytest

    from sattui.view.binning import BinCache, bin_states, state_seconds, states_settled

    rnd = random.Random(7)
    for case in range(16):
        spans, t = [], 0.013  # off the buckets' edges: a span starting on one is a matter of rounding
        while t < 250:
            d = rnd.choice([0.0, 0.05, 0.05, 0.3, 1.2, 4.0, 9.0])
            spans.append((t, d, rnd.choice(["data_wait", "forward", "backward", "startup", None])))
            t += d if rnd.random() < 0.9 else d + rnd.uniform(0.0, 3.0)  # a gap now and then
        window_s, n = rnd.choice([(60.0, 40), (120.0, 77), (300.0, 150)])
        cache = BinCache()
        ends = [rnd.uniform(5, 250) for _ in range(6)] if case % 4 == 0 else []  # a replay scrubbed about
        ends += [10.0 + 0.7 * i for i in range(340)]  # live: the view follows the newest samples
        for t_end in ends:
            seen = [(a, max(min(d, t_end - a), 0.0), st) for a, d, st in spans if a <= t_end]
            axis = Axis.make(t_end, window_s, n)
            newest = seen[-1][0] if seen else None
            states, secs = states_settled(lambda t, seen=seen: [s for s in seen if s[0] + s[1] > t - 1e-9], newest,
                                          axis, cache.settled(("states", 1, axis.bw)))
            assert states == bin_states(seen, axis), (case, t_end)
            want = state_seconds(seen, axis.t0, t_end + 1e-6)
            assert secs.keys() == want.keys() and all(secs[k] == pytest.approx(v, abs=1e-6) for k, v in want.items())
