"""Steps seen from outside (sattui/ledger/steps.py) on hand-made main-thread spans, and
through the ledger to the report's ``trainer.ranks[]`` figures."""

from __future__ import annotations

import math

import pytest

from sattui.ledger import bins as ledger
from sattui.ledger import steps as st
from sattui.model import StackSample
from sattui.report import add_ledger
from tests.unit.test_advisor_kit import FRAMES, PID, TL, ctx


def spans(seq: list[tuple[str | None, float]], t0: float = 0.0) -> list[StackSample]:
    out, t = [], t0
    for state, dur in seq:
        out.append(StackSample(round(t, 6), dur, PID, PID, "MainThread", True,
                               FRAMES.get(state or "other", FRAMES["other"]), state=state))
        t += dur
    return out


def cycle(n: int, wait: float, fwd: float, bwd: float, opt: float) -> list[tuple[str | None, float]]:
    seq: list[tuple[str | None, float]] = []
    for _ in range(n):
        if wait:
            seq.append(("data_wait", wait))
        seq += [("forward", fwd), ("backward", bwd), ("optimizer", opt)]
    return seq


def test_a_return_from_the_loader_into_the_step_marks_a_step():
    b = st.boundaries(spans(cycle(5, 0.1, 0.1, 0.2, 0.1)))
    assert len(b) == 5
    assert b[0][1] is None and all(abs(length - 0.5) < 1e-9 for _, length in b[1:])


def test_a_second_forward_marks_a_step_whose_wait_was_not_sampled():
    # waits too short to sample: forward → backward → optimizer → forward … still steps
    b = st.boundaries(spans(cycle(6, 0.0, 0.1, 0.2, 0.1)))
    assert len(b) == 5 and all(abs(length - 0.4) < 1e-9 for _, length in b[1:])
    # zero_grad ("other") between the wait and the forward is one boundary, not two
    seq = []
    for _ in range(4):
        seq += [("data_wait", 0.1), ("other", 0.05), ("forward", 0.1), ("backward", 0.2)]
    b = st.boundaries(spans(seq))
    assert len(b) == 4 and all(abs(length - 0.45) < 1e-9 for _, length in b[1:])


def test_phases_between_steps_and_torn_samples_neither_begin_nor_end_one():
    seq = cycle(2, 0.1, 0.1, 0.2, 0.1) + [("eval", 1.0), (None, 0.05)] + cycle(2, 0.1, 0.1, 0.2, 0.1)
    b = st.boundaries(spans(seq))
    assert len(b) == 4
    assert abs(b[2][1] - 1.55) < 1e-9  # the step that held the evaluation pass is that long


def test_sightings_are_whole_runs_of_a_phase():
    got = st.sightings(spans(cycle(3, 0.1, 0.1, 0.2, 0.1)))
    data = [x for x in got if x[1] == "data"]
    step = [x for x in got if x[1] == "step"]
    assert len(data) == 3 and all(abs(length - 0.1) < 1e-9 for _, _, length in data)
    # the last step's compute is still open at the end: it ends in what comes next
    assert len(step) == 2 and all(abs(length - 0.4) < 1e-9 for _, _, length in step)
    assert len([x for x in got if x[1] == "forward"]) == 3


def test_no_step_is_timed_across_a_sampling_gap():
    a = spans(cycle(3, 0.1, 0.1, 0.2, 0.1))
    later = spans(cycle(3, 0.1, 0.1, 0.2, 0.1), t0=a[-1].t + a[-1].dur + 2.0)
    b = st.boundaries(a + later)
    assert len(b) == 6 and b[3][1] is None


def test_histogram_quantiles_within_five_percent():
    hist: dict[int, int] = {}
    lengths = [0.1 * (1 + i / 100) for i in range(100)]
    for x in lengths:
        k = st.bucket(x)
        hist[k] = hist.get(k, 0) + 1
    assert st.quantile(hist, 0.5) == pytest.approx(0.15, rel=0.05)
    assert st.quantile(hist, 0.9) == pytest.approx(0.19, rel=0.05)
    assert st.quantile({}, 0.5) is None


def test_too_short_to_see_is_null_with_a_reason():
    # steps long enough: figures
    f = st.figures(100, {st.bucket(0.5): 100}, 50.0, 20.0,
                   {"data": {st.bucket(0.1): 100}, "step": {st.bucket(0.4): 100}, "forward": {st.bucket(0.1): 100},
                    "rest": {st.bucket(0.3): 100}})
    assert f["steps_per_s"] == 2.0 and f["step_s_p50"] == pytest.approx(0.5, rel=0.05)
    # the median step under 3 sampling periods
    f = st.figures(100, {st.bucket(0.12): 100}, 12.0, 20.0)
    assert f["steps_per_s"] is None and f["step_s_p50"] is None and "3 sampling periods" in f["steps_null_reason"]
    # the step's compute seen for one sampling period at a time, the forward too: some
    # steps were missed; a few long waits (worker restarts) do not make the short ones seen
    f = st.figures(20, {st.bucket(0.5): 20}, 12.0, 20.0,
                   {"data": {st.bucket(0.05): 15, st.bucket(3.0): 5}, "step": {st.bucket(0.05): 20},
                    "forward": {st.bucket(0.05): 10}, "rest": {st.bucket(0.05): 12}})
    assert f["steps_per_s"] is None and "too short to see at 20 Hz" in f["steps_null_reason"]
    f = st.figures(0, {}, 12.0, 20.0)
    assert f["steps_per_s"] is None and "no step seen" in f["steps_null_reason"]


def test_a_phase_seen_long_most_times_but_short_now_and_then_is_not_always_caught():
    # A trainer with 30 ms steps and a long wait at each epoch's worker restart: the
    # waits seen are mostly the long ones (the short ones fall between samples), and
    # the steps around a missed wait merge. Median sightings of 150 ms would pass; the
    # short tenth (one period) says some waits were missed: no figure, not a wrong one.
    seen = {"data": {st.bucket(0.05): 6, st.bucket(0.15): 14}, "step": {st.bucket(0.3): 20},
            "forward": {st.bucket(0.05): 10, st.bucket(0.15): 10}, "rest": {st.bucket(0.15): 20}}
    f = st.figures(20, {st.bucket(0.3): 20}, 12.0, 20.0, seen)
    # (51 ms: the bucket of 5 % around 50 ms)
    assert f["steps_per_s"] is None
    assert "one sighting in ten of each phase lasts at most the data wait 51 ms, the step's compute" in \
        f["steps_null_reason"]
    # a phase never seen is said so, not given a figure (a loop that never waits for data)
    del seen["data"]
    f = st.figures(20, {st.bucket(0.3): 20}, 12.0, 20.0, seen)
    assert f["steps_per_s"] is None and "(the data wait: never seen)" in f["steps_null_reason"]
    assert "n/a" not in f["steps_null_reason"]
    # the same with every sighting at least two periods long: the figures are given
    seen["data"] = {st.bucket(0.1): 6, st.bucket(0.15): 14}
    seen["forward"] = {st.bucket(0.1): 10, st.bucket(0.15): 10}
    f = st.figures(20, {st.bucket(0.3): 20}, 12.0, 20.0, seen)
    assert f["steps_per_s"] == pytest.approx(20 / 12.0, rel=0.01)


def test_the_ledger_counts_steps_per_bin_and_the_report_gives_them_per_rank():
    # 0.5 s steps (0.1 wait, 0.4 compute): two a second, each bin holding its boundaries
    k = TL().main()
    k.stacks({"data_wait": 0.2, "forward": 0.2, "backward": 0.4, "optimizer": 0.2}, step=0.5)
    w = k.window(ctx())
    job = ledger.build(w)
    r = job.ranks[PID]
    assert r.steps == pytest.approx(60, abs=1)  # 30 s × 2 steps/s
    assert sum(r.step_hist.values()) == pytest.approx(r.steps, abs=1)
    # bin by bin, as the LedgerBook computes them, gives the same totals
    bins = ledger.build_bins(w, 10.0, 40.0)
    assert sum(j.ranks[PID].steps for j in bins.values() if PID in j.ranks) == r.steps
    rep = {"trainer": {"sampler": {"rate_hz": 20.0}}, "cards": []}
    add_ledger(rep, job)
    got = rep["trainer"]["ranks"][0]
    assert got["steps_per_s"] == pytest.approx(2.0, rel=0.05)
    assert got["step_s_p50"] == pytest.approx(0.5, rel=0.05) and got["step_s_p90"] == pytest.approx(0.5, rel=0.05)
    assert "steps_null_reason" not in got
    # the same loop sampled at 2 Hz: too short to see
    rep = {"trainer": {"sampler": {"rate_hz": 2.0}}, "cards": []}
    add_ledger(rep, job)
    assert rep["trainer"]["ranks"][0]["steps_per_s"] is None
    assert rep["trainer"]["ranks"][0]["steps_null_reason"]


def _counts(bins: dict) -> tuple[int, dict, dict]:
    n, hist, seen = 0, {}, {}
    for b_n, b_hist, b_seen in bins.values():
        n += b_n
        for k, c in b_hist.items():
            hist[k] = hist.get(k, 0) + c
        for ph, h in b_seen.items():
            for k, c in h.items():
                seen.setdefault(ph, {})[k] = seen.setdefault(ph, {}).get(k, 0) + c
    return n, hist, seen


def test_the_tracker_fed_stretch_by_stretch_finds_what_one_pass_finds():
    # The LedgerBook feeds each rank's spans as its bins settle: 5 s at a time here, with
    # steps of 0.55 s and an evaluation pass, a torn sample and a sampling gap between.
    seq = cycle(20, 0.1, 0.15, 0.2, 0.1) + [("eval", 1.3), (None, 0.05)] + cycle(20, 0.1, 0.15, 0.2, 0.1)
    a = spans(seq, t0=0.02)
    later = spans(cycle(15, 0.05, 0.15, 0.2, 0.1), t0=a[-1].t + a[-1].dur + 2.0)
    allspans = a + later
    hi = math.ceil(allspans[-1].t + allspans[-1].dur) + 1.0
    whole = st.by_bin(allspans, 0.0, hi, 1.0)
    tracker = st.StepTracker()
    fed: dict = {}
    for lo in range(0, int(hi), 5):
        part = [s for s in allspans if lo <= s.t < lo + 5]
        fed.update(tracker.feed(part, float(lo), float(lo + 5), 1.0))
    n, hist, seen = _counts(fed)
    n1, hist1, seen1 = _counts(whole)
    assert n == n1 == 55 and hist == hist1
    # a phase that closes only in the next stretch is still counted (one pass over all
    # the spans counts it too)
    assert seen == seen1


def test_the_tracker_times_a_step_longer_than_any_look_back():
    # one 40 s checkpoint inside a step: the step's length is known, not dropped
    seq = cycle(3, 0.1, 0.1, 0.2, 0.1) + [("checkpoint", 40.0)] + cycle(3, 0.1, 0.1, 0.2, 0.1)
    allspans = spans(seq)
    tracker = st.StepTracker()
    fed: dict = {}
    for lo in range(0, 50, 5):
        fed.update(tracker.feed([s for s in allspans if lo <= s.t < lo + 5], float(lo), float(lo + 5), 1.0))
    n, hist, _ = _counts(fed)
    assert n == 6
    longest = st._RATIO ** max(hist)
    assert longest == pytest.approx(40.5, rel=0.05)


def test_over_a_screens_window_counts_the_steps_begun_in_it():
    # 20 steps of 0.5 s from t=0; a window [3.0, 8.0) holds the 10 that begin in it, each
    # 0.5 s long, and the figures give 10 / 5 s = 2 steps/s; the spans before the window
    # only put the chain in step.
    a = spans(cycle(20, 0.1, 0.1, 0.2, 0.1))
    n, hist, seen = st.over(a, 3.0, 8.0)
    assert n == 10 and sum(hist.values()) == 10
    assert abs(st.quantile(hist, 0.5) - 0.5) <= 0.5 * 0.05
    fig = st.figures(n, hist, 5.0, 20.0, seen)
    assert fig["steps_per_s"] == 2.0 and abs(fig["step_s_p50"] - 0.5) <= 0.025
    assert st.short_words(fig).startswith("2.00 steps/s, p50 0.5")
    # the same spans at 4 Hz: a 0.1-s wait is under a sampling period
    slow = st.figures(n, hist, 5.0, 4.0, seen)
    assert slow["steps_per_s"] is None and st.short_words(slow) == "steps too short to see at 4 Hz"
    assert st.short_words(st.figures(0, {}, 5.0, 20.0, {})) == "no step seen"


def test_a_long_windows_steps_counted_in_kept_blocks_are_what_one_pass_counts():
    # A screen's window of half an hour: its settled blocks are counted once and kept,
    # and the sum is what one pass over the window counts (steps, lengths, sightings), at
    # any window start and end, holes and unknown states included.
    import random
    from types import SimpleNamespace

    from sattui.timeline import Timeline
    from sattui.view import lines
    from sattui.view.binning import BinCache

    rnd = random.Random(11)
    seq: list[tuple[str | None, float]] = []
    for _ in range(9000):
        seq.append((rnd.choice(["data_wait", "forward", "backward", "optimizer", "other", None]),
                    rnd.choice([0.05, 0.1, 0.3, 0.6, 1.5])))
    tl = Timeline(history_s=10_000)
    t = 0.0
    for s in spans(seq):
        t = s.t + (2.0 if rnd.random() < 0.01 else 0.0)  # now and then a hole
        tl.add("stack", PID, t, StackSample(t, s.dur, PID, PID, "MainThread", True, s.frames, state=s.state))
    cache = BinCache()
    for t_end, length in ((1700.0, 1500.0), (1713.3, 900.0), (1300.7, 1200.5), (1713.3, 900.0), (400.0, 100.0)):
        data = SimpleNamespace(t_end=t_end, timeline=tl, cache=cache,
                               window=lambda kind, key, t0, t_end=t_end: tl.window(kind, key, t0, t_end + 1e-6))
        lo = t_end - length
        want = st.over(tl.window("stack", PID, lo - lines.STEP_LOOK_S, t_end + 1e-6), lo, t_end + 1e-6)
        assert lines._steps_over(data, PID, lo, t_end + 1e-6) == want
        assert want[0] > 20
    blocks = cache.get(("step-blocks", PID), None, dict)
    assert len(blocks) >= 10  # kept, not counted afresh


def test_a_launcher_sampled_before_its_ranks_were_seen_is_no_rank_row():
    """mp.spawn's parent is the trainer until its ranks are seen: a second of its join()
    is in the run's ledger, but the run's end knows it as a launcher (role other)."""
    from sattui.ledger.bins import JobLedger, RankLedger
    job = JobLedger()
    job.ranks[10] = RankLedger(10, None, 1.0, {"idle": 1.0}, {"idle": 1.0})
    job.ranks[11] = RankLedger(11, 0, 20.0, {"backward": 20.0})
    job.ranks[12] = RankLedger(12, 1, 20.0, {"backward": 20.0})
    procs = [{"pid": 10, "role": "other"}, {"pid": 11, "role": "rank"}, {"pid": 12, "role": "rank"}]
    rep = {"trainer": {"sampler": {"rate_hz": 20.0}}, "cards": [], "processes": procs}
    add_ledger(rep, job)
    assert [(r["rank"], r["pid"]) for r in rep["trainer"]["ranks"]] == [(0, 11), (1, 12)]
    # with no rank seen at all, what was sampled is all there is: kept
    del job.ranks[11], job.ranks[12]
    add_ledger(rep, job)
    assert [r["pid"] for r in rep["trainer"]["ranks"]] == [10]
    # a pid seen in a trainer's role at some point (a row of each role) keeps its row
    job.ranks[11] = RankLedger(11, 0, 20.0, {"backward": 20.0})
    rep["processes"] = procs + [{"pid": 10, "role": "main"}]
    add_ledger(rep, job)
    assert [r["pid"] for r in rep["trainer"]["ranks"]] == [11, 10]
    del job.ranks[11]
    # a trainer below a launcher (role main) keeps its row
    job.ranks[13] = RankLedger(13, None, 5.0, {"forward": 5.0})
    rep["processes"] = [{"pid": 10, "role": "other"}, {"pid": 13, "role": "main"}]
    add_ledger(rep, job)
    assert [r["pid"] for r in rep["trainer"]["ranks"]] == [13]
