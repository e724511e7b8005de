import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sattui.timeline import DEFAULT_HISTORY_S, Clock, Ring, Timeline


def test_ring_window_is_half_open_and_ordered():
    r = Ring(10)
    for i in range(5):
        r.append(float(i), i)
    assert r.window(1.0, 3.0) == [1, 2]
    assert r.window(-5, 100) == [0, 1, 2, 3, 4]
    assert r.window(3.5, 3.6) == []


def test_ring_overwrites_oldest_when_full():
    r = Ring(4)
    for i in range(10):
        r.append(float(i), i)
    assert len(r) == 4
    assert list(r) == [6, 7, 8, 9]
    assert r.first_t() == 6.0 and r.last_t() == 9.0
    assert r.window(0, 7.5) == [6, 7]
    assert r[-1] == 9 and r[0] == 6


def test_ring_out_of_order_sample_is_placed_by_time():
    r = Ring(5)
    for t in (1.0, 2.0, 4.0):
        r.append(t, t)
    r.append(3.0, 3.0)
    assert list(r) == [1.0, 2.0, 3.0, 4.0]
    r.append(5.0, 5.0)
    r.append(0.5, 0.5)  # older than everything in a full ring: dropped as the oldest
    assert list(r) == [1.0, 2.0, 3.0, 4.0, 5.0]


@settings(max_examples=300, deadline=None)
@given(cap=st.integers(1, 12), times=st.lists(st.integers(0, 30), max_size=60))
def test_ring_matches_a_sorted_list_model_under_any_arrival_order(cap, times):
    # Model: every sample ever appended, sorted stably by time, minus whatever a full
    # ring had to evict -- the oldest at each moment.
    r = Ring(cap)
    model: list[tuple[float, int]] = []
    for seq, t in enumerate(times):
        r.append(float(t), seq)
        i = len(model)
        while i and model[i - 1][0] > t:
            i -= 1
        model.insert(i, (float(t), seq))
        if len(model) > cap:
            model.pop(0)
    assert list(r) == [seq for _, seq in model]
    assert [r.time_at(i) for i in range(len(r))] == [t for t, _ in model]
    if model:
        lo, hi = model[0][0], model[-1][0]
        assert r.window(lo, hi + 1) == [seq for _, seq in model]
    # Any window, over a ring that has wrapped or not: the search runs over two runs.
    for a in range(-1, 32, 3):
        for b in range(a, 33, 4):
            assert r.window(a, b) == [seq for t, seq in model if a <= t < b], (a, b)
            assert r.window(a + 0.5, b + 0.5) == [seq for t, seq in model if a + 0.5 <= t < b + 0.5]


class _CountingList(list):
    writes = 0

    def __setitem__(self, i, v):
        type(self).writes += 1
        super().__setitem__(i, v)


def test_late_samples_cost_their_distance_from_the_end_not_the_ring_size():
    # A 1 h stack ring (90 000 samples) fed by chunks that overlap by a sample: the old
    # insert rebuilt the whole ring per late sample (a 3 MB recording took minutes).
    # Counted in slot writes, not seconds, so the check holds on any machine.
    r = Ring(90_000)
    for i in range(90_000):
        r.append(i * 0.05, i)
    r._items = _CountingList(r._items)
    _CountingList.writes = 0
    for k in range(2_000):
        t = 4500.0 + k * 0.05
        r.append(t + 0.05, ("on time", k))
        r.append(t + 0.025, ("late", k))  # late by one sample
    assert len(r) == 90_000
    assert r[-1] == ("on time", 1999) and r[-2] == ("late", 1999)
    # one write per on-time sample, two per late one (shift the newest, place the late)
    assert _CountingList.writes == 2_000 * 3


def test_timeline_default_keeps_an_hour_at_default_rates():
    tl = Timeline()
    assert tl.history_s >= 3600 == DEFAULT_HISTORY_S
    # 20 Hz stacks for an hour fit; memory stays bounded beyond that.
    assert tl.capacity_for("stack") >= 20 * 3600
    assert tl.capacity_for("proc") >= 3600


def test_timeline_memory_is_bounded_by_history():
    tl = Timeline(history_s=10, rates_hz={"proc": 1.0})
    cap = tl.capacity_for("proc")
    for i in range(cap * 5):
        tl.add("proc", 42, float(i), i)
    assert len(tl.series("proc", 42)) == cap
    assert tl.sample_count() == cap
    assert tl.last("proc", 42) == cap * 5 - 1


def test_timeline_windows_across_series_and_stale_drop():
    tl = Timeline(history_s=60)
    for t in range(10):
        tl.add("proc", 1, float(t), ("a", t))
    tl.add("proc", 2, 1.0, ("b", 1))
    assert tl.window("proc", 1, 2, 4) == [("a", 2), ("a", 3)]
    assert set(tl.window_all("proc", 0, 2)) == {1, 2}
    assert set(tl.window_all("proc", 5, 10)) == {1}
    assert tl.window("proc", 99, 0, 10) == []
    assert tl.drop_stale("proc", older_than_t=5.0) == 1
    assert tl.keys("proc") == [1]
    assert tl.latest_t == 9.0


def test_clock_is_relative_and_monotonic():
    ticks = iter([100.0, 100.5, 101.25])
    c = Clock(now=lambda: next(ticks))
    assert c() == 0.5
    assert c() == 1.25


def test_bad_sizes_rejected():
    with pytest.raises(ValueError):
        Ring(0)
    with pytest.raises(ValueError):
        Timeline(history_s=0)


@settings(max_examples=300, deadline=None)
@given(cap=st.integers(1, 12), before=st.lists(st.integers(0, 30), max_size=20),
       batches=st.lists(st.lists(st.integers(0, 30), max_size=15), max_size=4))
def test_ring_extend_is_append_one_by_one(cap, before, batches):
    # extend copies an in-order run by slices and hands anything else to append; either
    # way the ring ends as appending each sample in turn would leave it, wrapped or not.
    fast, slow = Ring(cap), Ring(cap)
    for seq, t in enumerate(before):
        fast.append(float(t), seq)
        slow.append(float(t), seq)
    for b, batch in enumerate(batches):
        times = [float(t) for t in sorted(batch)] if b % 2 == 0 else [float(t) for t in batch]
        items = [(b, i) for i in range(len(times))]
        fast.extend(times, items)
        for t, item in zip(times, items):
            slow.append(t, item)
        assert list(fast) == list(slow)
        assert [fast.time_at(i) for i in range(len(fast))] == [slow.time_at(i) for i in range(len(slow))]
        assert (fast._start, fast._len) == (slow._start, slow._len)


def test_timeline_add_many_is_add_per_item_latest_t_too():
    class S:
        def __init__(self, t):
            self.t = t

    nan = float("nan")
    for times in ([1.0, 2.0, 3.0], [3.0, 1.0, 2.0], [nan, 5.0, 4.0], [2.0, nan]):
        many, one = Timeline(history_s=10.0), Timeline(history_s=10.0)
        many.latest_t = one.latest_t = 2.5
        items = [S(t) for t in times]
        many.add_many("stack", 1, items)
        for s in items:
            one.add("stack", 1, s.t, s)
        assert list(many.series("stack", 1)) == list(one.series("stack", 1))
        assert many.latest_t == one.latest_t  # a NaN time (json.loads reads one) never becomes latest


def test_latest_is_the_newest_time_before_t1_whole_and_nothing_older():
    r: Ring[str] = Ring(4)
    assert r.latest(10.0) == []
    for t, x in ((1.0, "a"), (2.0, "b1"), (2.0, "b2"), (3.0, "c"), (4.0, "d")):  # wraps: "a" evicted
        r.append(t, x)
    assert r.latest(5.0) == ["d"]
    assert r.latest(4.0) == ["c"]  # t1 excluded, as in window()
    assert r.latest(3.0) == ["b1", "b2"]  # one evaluation's findings share their time
    assert r.latest(2.0) == []  # only what the ring still holds


def _ring_with_history(capacity: int, n: int, seed: int) -> Ring:
    """A ring that wrapped, with late (out-of-order) samples among its appends."""
    import random

    rng = random.Random(seed)
    ring: Ring = Ring(capacity)
    t = 0.0
    for i in range(n):
        t += rng.choice((0.0, 0.25, 0.5, 1.0))
        late = rng.random() < 0.1
        ring.append(t - 2.0 if late else t, ("s", i))
    return ring


@pytest.mark.parametrize("seed", range(4))
def test_a_timeline_copy_answers_as_the_timeline_did_when_copied(seed):
    """Every query of a TimelineCopy gives what the Timeline gave at the copy, inside the
    copied span from the copy, outside it from the ring (counted as a miss), whatever the
    Timeline got after."""
    import math
    import threading

    from sattui.timeline import Timeline, TimelineCopy

    tl = Timeline(history_s=60.0)  # 75 samples: they reach back past the copy's start
    ring = _ring_with_history(tl.capacity_for("proc"), 200, seed)
    tl._series[("proc", 1)] = ring
    tl._series[("finding", 0)] = _ring_with_history(16, 30, seed + 10)
    last = ring.last_t()
    lo, hi = last - 12.0, last - 3.0
    assert ring.first_t() < lo and len(ring) == ring.capacity  # wrapped, and older than the copy
    lock = threading.RLock()
    copy = TimelineCopy(tl, lo, hi, lock=lock, skip=("finding",))
    queries = [(a, b) for a in (-math.inf, lo - 1, lo, lo + 0.25, hi - 1, hi) for b in (lo + 1, hi - 0.5, hi, math.inf)]
    want = {q: tl.window("proc", 1, *q) for q in queries}
    want_latest = {t: ring.latest(t) for t in (hi - 0.1, hi, math.inf)}
    ends = (ring[0], ring[-1], ring.first_t(), ring.last_t(), len(ring))
    got_findings = tl.series("finding", 0).latest(math.inf)
    s = copy.series("proc", 1)
    assert s is not None
    inside = [q for q in queries if q[0] >= lo and q[1] <= hi]
    for q in inside:
        assert s.window(*q) == want[q], q
    for t in (hi - 0.1, hi):
        assert s.latest(t) == want_latest[t], t
    assert (s[0], s[-1], s.first_t(), s.last_t(), len(s)) == ends
    assert copy.misses == 0
    # Outside the copy: the ring itself, under the lock, each read counted.
    outside = [q for q in queries if q not in inside]
    for q in outside:
        assert s.window(*q) == want[q], q
    assert s.latest(math.inf) == want_latest[math.inf]
    assert copy.series("finding", 0).latest(math.inf) == got_findings
    assert copy.misses == len(outside) + 2
    # Samples appended after the copy change nothing inside it.
    for k in range(50):
        ring.append(last + 1 + k, ("new", k))
    for q in inside:
        assert s.window(*q) == want[q], q
    assert s[-1] == ends[1] and len(s) == ends[4]


@pytest.mark.parametrize("seed", range(6))
def test_a_copy_brought_up_to_date_equals_a_fresh_one(seed):
    """Copies taken one after another, each from the one before (previous=): each holds
    exactly what a fresh copy of its span would, through in-order appends, late samples,
    a py-spy-like chunk (extend), evictions of a full ring, and a window that moves on or
    back; and the cheap path (only the new samples copied) is the one mostly taken."""
    import math
    import random

    from sattui.timeline import Timeline, TimelineCopy

    rng = random.Random(seed)
    tl = Timeline(history_s=40.0)  # 50 proc samples, 800 stack spans: both rings wrap
    t = chunk_end = 0.0
    prev = None
    extended = fresh = 0
    for _step in range(300):
        for _ in range(rng.randint(0, 4)):
            t += rng.choice((0.0, 0.3, 0.5))
            late = rng.random() < 0.01
            tl.add("proc", 1, t - 5.0 if late else t, ("p", t))
        if rng.random() < 0.3:  # a chunk of spans up to now (at times one arriving late)
            first = t - 2.0 if rng.random() < 0.02 else chunk_end
            n = rng.randint(1, 40)
            tl.add_many("stack", 2, [_Span(first + (t - first) * i / n) for i in range(n)])
            chunk_end = max(chunk_end, t)
        # Mostly following now, at times paused back or zoomed out.
        end = t - (0.0 if rng.random() < 0.9 else rng.choice((3.0, 30.0)))
        window = 10.0 if rng.random() < 0.95 else 60.0
        lo, hi = end - window, end + 5.0
        before = {k: s._items for k, s in prev._series.items()} if prev is not None else {}
        copy = TimelineCopy(tl, lo, hi, whole=("event",), previous=prev)
        for key, s in copy._series.items():
            ring = tl.series(*key)
            assert (s._times, s._items) == ring.copy_window(lo, hi), (key, _step)
            assert s.window(lo, hi) == ring.window(lo, hi)
            if key in before and s._items is before[key]:
                extended += 1
            else:
                fresh += 1
        assert copy.misses == 0
        prev = copy
    assert extended > 2 * fresh, (extended, fresh)
    # The copy taken over reads the ring from then on, as it is now.
    old = TimelineCopy(tl, t - 10, t + 1)
    TimelineCopy(tl, t - 10, t + 1, previous=old)
    assert old.series("proc", 1).window(-math.inf, math.inf) == tl.window("proc", 1, -math.inf, math.inf)
    assert old.misses == 1


class _Span:
    __slots__ = ("t",)

    def __init__(self, t: float) -> None:
        self.t = t

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Span) and other.t == self.t

    __hash__ = None  # type: ignore[assignment]
