"""bin_values_settled (sattui/view/binning.py): the buckets a scrolling view takes from
earlier redraws are the ones a whole pass computes, bucket for bucket."""

from __future__ import annotations

import bisect
import random

from sattui.view.binning import Axis, BinCache, bin_values, bin_values_settled, typical_hold


def _series(rng: random.Random, n: int, dt: float) -> tuple[list[float], list[float | None]]:
    times, values, t = [], [], 0.0
    for _ in range(n):
        # jittered ticks, now and then a gap longer than the hold, a sample on a bucket edge
        t += dt * rng.choice((1.0, 1.0, 1.0, 0.9, 1.1, 4.0)) if rng.random() > 0.02 else dt
        on_edge = float(round(t)) if rng.random() < 0.1 else round(t, 3)
        times.append(max(on_edge, times[-1]) if times else on_edge)  # in time order, as recorded
        values.append(None if rng.random() < 0.03 else rng.uniform(0, 100))
    return times, values


def test_a_scrolling_view_gets_the_whole_pass_bucket_for_bucket():
    rng = random.Random(7)
    checked = reused = 0
    for trial in range(8):
        times, values = _series(rng, 800, rng.choice((0.5, 1.0, 2.0)))
        window_s, cols = rng.choice(((600.0, 80), (3600.0, 108), (60.0, 40), (900.0, 150)))
        cache = BinCache()
        # the view follows the newest sample (live or playing), now and then scrolled back
        end = times[200]
        while end < times[-1]:
            m = bisect.bisect_right(times, end)
            axis = Axis.make(end, window_s, cols)
            lo = bisect.bisect_left(times, axis.t0 - 5.0, 0, m)
            t_w, v_w = times[lo:m], values[lo:m]
            hold = typical_hold(t_w)
            memo = cache.settled(("card", 0, "util", round(axis.bw, 9), hold))
            before = len(memo)
            got = bin_values_settled(t_w, lambda i, j, v=v_w: list(v[i:j]), axis, hold, memo)
            assert got == bin_values(t_w, v_w, axis, hold), (trial, end, axis)
            checked += 1
            reused += before > 0
            end += rng.choice((0.5, 3.0, 7.0, axis.bw, -2 * axis.bw))
    assert checked > 300 and reused > checked // 2, (checked, reused)


def test_part_passes_fill_only_their_buckets_as_the_whole_pass_does():
    rng = random.Random(3)
    times, values = _series(rng, 500, 1.0)
    axis = Axis.make(times[-1], 300.0, 60)
    whole = bin_values(times, values, axis, 2.5)
    head = bin_values(times, values, axis, 2.5, k_to=1)
    tail = bin_values(times, values, axis, 2.5, k_from=20)
    for k in range(60):
        want = (whole[0][k], whole[1][k], whole[2][k])
        assert (head[0][k], head[1][k], head[2][k]) == (want if k == 0 else (None, None, None))
        assert (tail[0][k], tail[1][k], tail[2][k]) == (want if k >= 20 else (None, None, None))


def test_a_real_samplers_jitter_keeps_one_hold():
    # Ticks 1 s apart give or take half a millisecond (the fixtures' holds read 2.4997 …
    # 2.5001 unrounded): one hold, so the settled buckets of earlier redraws stay usable.
    rng = random.Random(5)
    times = [i + rng.uniform(-0.0005, 0.0005) for i in range(200)]
    assert {typical_hold(times[:k]) for k in range(10, 200)} == {2.5}
    cards = [0.5 * i + rng.uniform(-0.0003, 0.0003) for i in range(200)]
    assert {typical_hold(cards[:k]) for k in range(10, 200)} == {1.25}
