"""Time-axis binning for every strip on screen (no Textual here).

All strips of a screen share one :class:`Axis`: the same window ``[t0, t1)`` cut into
the same ``n`` buckets, so column ``k`` of the card's utilization and column ``k`` of the
main thread's state strip are the same seconds, drawn one above the other.

The axis' right edge is rounded up to a whole bucket, so between two redraws the buckets
stay put and the picture scrolls one whole column at a time instead of shimmering as
bucket edges slide over the samples (and an unchanged window can reuse last frame's
bins: see :class:`BinCache`).

A sample stands for the time since the previous sample: a utilization reading is the
busy share over the sampler's last period, ``cpu`` and ``read_Bps`` are "since the
previous sample" (docs/format.md), and a gauge (memory, temperature) is as good either
way. A sample covers at most ``hold`` seconds back: a longer gap is drawn as no data,
never as zero.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

# Main-thread states that mean "the accelerator is probably waiting on the host". A
# bucket shows one of these if it covers at least WAIT_SHOW of the bucket's sampled
# time, even if a compute state covers more: the strip exists to make waits visible,
# the same reason the utilization strip draws a bucket's minimum.
WAIT_STATES = ("data_wait", "data_inline", "sync", "h2d_copy", "collective")
WAIT_SHOW = 0.25


@dataclass(frozen=True, slots=True)
class Axis:
    """``n`` buckets of equal width over ``[t0, t1)``."""

    t0: float
    t1: float
    n: int

    @classmethod
    def make(cls, t_end: float, window_s: float, n: int) -> Axis:
        n = max(1, n)
        bw = window_s / n
        t1 = math.ceil(t_end / bw - 1e-9) * bw
        return cls(t1 - window_s, t1, n)

    @property
    def bw(self) -> float:
        return (self.t1 - self.t0) / self.n

    def col(self, t: float) -> int:
        return math.floor((t - self.t0) / self.bw)


# The hold is rounded to this grid: a real sampler's intervals jitter by a few 0.1 ms, and a
# hold that changed with every redraw would defeat the settled buckets (bin_values_settled).
HOLD_GRID_S = 0.125


def typical_hold(times: Sequence[float], default: float = 2.0) -> float:
    """How long one sample may stand for: 2.5 × the median interval of the last samples,
    to the nearest :data:`HOLD_GRID_S`.

    2.5× so that a poll that slipped by one interval still joins up; a card that stopped
    reporting for longer shows a gap.
    """
    m = len(times)
    if m < 2:
        return default
    tail = times[max(0, m - 33):]
    dts = sorted(b - a for a, b in zip(tail, tail[1:]) if b > a)
    if not dts:
        return default
    return max(HOLD_GRID_S, round(2.5 * dts[len(dts) // 2] / HOLD_GRID_S) * HOLD_GRID_S)


def _cover(times: Sequence[float], i: int, hold: float) -> tuple[float, float]:
    """The span sample ``i`` stands for: back to the previous sample, at most ``hold``."""
    b = times[i]
    a = times[i - 1] if i else b - hold / 2.5
    return max(a, b - hold), b


def _covered_buckets(span: tuple[float, float], t0: float, bw: float, n: int) -> tuple[int, int]:
    """The first and last bucket a sample's span touches (at least its own bucket)."""
    a, b = span
    ia = max(0, math.floor((a - t0) / bw))
    return ia, min(n - 1, max(math.ceil((b - t0) / bw) - 1, ia))


def first_index_for(times: Sequence[float], axis: Axis, k_from: int) -> int:
    """The first sample :func:`bin_values` reads for buckets ``k_from`` on: the last one
    before the bucket's edge (its span ends there; the next one's begins there)."""
    return max(0, bisect.bisect_left(times, axis.t0 + k_from * axis.bw) - 1) if k_from > 0 else 0


def bin_values(times: Sequence[float], values: Sequence[float | None], axis: Axis,
               hold: float, k_from: int = 0,
               k_to: int | None = None) -> tuple[list[float | None], list[float | None], list[float | None]]:
    """Per bucket the (min, mean, max) of the samples that cover a fair part of it.

    The mean is the plain mean of those samples (not time-weighted: the samples are
    evenly spaced, and a short sample touching a bucket edge still counts once).
    ``k_from``/``k_to``: only buckets ``[k_from, k_to)`` are filled (the others stay
    empty), each exactly as the whole pass fills it; ``values`` is read only from
    :func:`first_index_for` on.
    """
    n = axis.n
    mins: list[float | None] = [None] * n
    maxs: list[float | None] = [None] * n
    sums = [0.0] * n
    cnt = [0] * n
    t0, bw = axis.t0, axis.bw
    inv = 1.0 / bw
    m = len(times)
    floor, ceil = math.floor, math.ceil
    first_span = hold / 2.5  # the first sample has no predecessor: one typical interval
    top = n if k_to is None else min(n, k_to)
    stop_t = t0 + top * bw  # a span that begins at or after this reaches no bucket asked for
    for i in range(first_index_for(times, axis, k_from), m):
        v = values[i]
        b = times[i]
        a = times[i - 1] if i else b - first_span
        if top < n and a >= stop_t:
            break
        if b - a > hold:
            a = b - hold
        if v is None:
            continue
        ia = floor((a - t0) * inv)
        ib = ceil((b - t0) * inv) - 1
        if ib < ia:
            ib = ia
        if ib < 0 or ia >= n:
            continue
        if ia < 0:
            ia = 0
        if ib >= n:
            ib = n - 1
        span = b - a
        # the buckets asked for; whether the sample spans more than one is read on the
        # whole pass's indices, so a part pass decides the edge rule as the whole one does
        lo = ia if ia >= k_from else k_from
        hi = ib if ib < top else top - 1
        for k in range(lo, hi + 1):
            if ia != ib:
                # A sample only grazing a bucket (less than WAIT_SHOW of it, and less than
                # half of the sample) does not count there: the state strip uses the same
                # quarter-bucket rule, so a dip and its wait land in the same column.
                ov = min(b, t0 + (k + 1) * bw) - max(a, t0 + k * bw)
                if ov < WAIT_SHOW * bw and ov < 0.5 * span:
                    continue
            mk = mins[k]
            if mk is None:
                mins[k] = maxs[k] = v
            else:
                if v < mk:
                    mins[k] = v
                if v > maxs[k]:  # type: ignore[operator]
                    maxs[k] = v
            sums[k] += v
            cnt[k] += 1
    means = [sums[k] / cnt[k] if cnt[k] else None for k in range(n)]
    return mins, means, maxs


def bin_states(spans: Sequence[tuple[float, float, str | None]], axis: Axis) -> list[str | None]:
    """One state per bucket from ``(t, dur, state)`` spans (:func:`shown_state`).
    ``None``: nothing sampled there."""
    return [shown_state(d) for d in seconds_per_bucket(spans, axis)]


def shown_state(d: dict[str, float] | None) -> str | None:
    """The state a bucket shows from its seconds per state: the one holding the most
    time, except that a wait state (``WAIT_STATES``) holding ``WAIT_SHOW`` of the bucket
    wins."""
    if not d:
        return None
    total = sum(d.values())
    wait = max(((d.get(w, 0.0), w) for w in WAIT_STATES), default=(0.0, ""))
    if wait[0] > 0 and wait[0] >= WAIT_SHOW * total:
        return wait[1]
    return max(d.items(), key=lambda kv: kv[1])[0]


def seconds_per_bucket(spans: Sequence[tuple[float, float, str | None]], axis: Axis, min_dur: float = 1e-3,
                       ) -> list[dict[str, float] | None]:
    """Seconds per state in each bucket: each span's overlap with it. A span shorter than
    ``min_dur`` (one sample: duration 0) counts as that long, so that it still shows; 0
    gives the exact seconds."""
    n, t0, bw = axis.n, axis.t0, axis.bw
    acc: list[dict[str, float] | None] = [None] * n
    floor, ceil = math.floor, math.ceil
    for t, dur, st in spans:
        if st is None:
            continue
        a, b = t, t + (dur if dur > min_dur else min_dur)
        ia = floor((a - t0) / bw)
        ib = ceil((b - t0) / bw) - 1
        if ia == ib and 0 <= ia < n:
            # Most spans lie in one bucket (an hour's window: 72,000 spans a rank at 20 Hz,
            # in 36-s buckets): the same sums as the loop below, without it.
            lo = t0 + ia * bw
            hi = t0 + (ia + 1) * bw
            ov = (b if b < hi else hi) - (a if a > lo else lo)
            if ov > 0:
                d = acc[ia]
                if d is None:
                    d = acc[ia] = {}
                d[st] = d.get(st, 0.0) + ov
            continue
        ia = ia if ia > 0 else 0
        ib = ib if ib < n - 1 else n - 1
        for k in range(ia, ib + 1):
            lo = max(a, t0 + k * bw)
            hi = min(b, t0 + (k + 1) * bw)
            ov = hi - lo
            if ov <= 0:
                continue
            d = acc[k]
            if d is None:
                d = acc[k] = {}
            d[st] = d.get(st, 0.0) + ov
    return acc


def state_seconds(spans: Sequence[tuple[float, float, str | None]], t0: float, t1: float) -> dict[str, float]:
    """Seconds per state inside ``[t0, t1)``."""
    out: dict[str, float] = {}
    for t, dur, st in spans:
        if st is None:
            continue
        ov = min(t + dur, t1) - max(t, t0)
        if ov > 0:
            out[st] = out.get(st, 0.0) + ov
    return out


def bin_letters(times: Sequence[float], letters: Sequence[str | None], axis: Axis, hold: float,
                urgent: str = "DZ") -> list[str | None]:
    """Kernel state letters per bucket: the most frequent, unless an ``urgent`` one
    (D disk wait, Z zombie) makes up a quarter of the bucket's samples."""
    n, t0, bw = axis.n, axis.t0, axis.bw
    acc: list[dict[str, int] | None] = [None] * n
    m = len(times)
    for i in range(m):
        s = letters[i]
        if not s:
            continue
        ia, ib = _covered_buckets(_cover(times, i, hold), t0, bw, n)
        for k in range(ia, ib + 1):
            d = acc[k]
            if d is None:
                d = acc[k] = {}
            d[s] = d.get(s, 0) + 1
    out: list[str | None] = []
    for d in acc:
        if not d:
            out.append(None)
            continue
        total = sum(d.values())
        hot = [(c, s) for s, c in d.items() if s in urgent and c * 4 >= total]
        out.append(max(hot)[1] if hot else max(d.items(), key=lambda kv: kv[1])[0])
    return out


def bin_bits(times: Sequence[float], masks: Sequence[int | None], axis: Axis, hold: float) -> dict[int, list[bool]]:
    """For every bit set somewhere in the window: per bucket, was it set in any sample."""
    n, t0, bw = axis.n, axis.t0, axis.bw
    out: dict[int, list[bool]] = {}
    m = len(times)
    for i in range(m):
        mask = masks[i]
        if not mask:
            continue
        ia, ib = _covered_buckets(_cover(times, i, hold), t0, bw, n)
        if ia > ib:
            continue
        bit = 1
        while bit <= mask:
            if mask & bit:
                row = out.get(bit)
                if row is None:
                    row = out[bit] = [False] * n
                for k in range(ia, ib + 1):
                    row[k] = True
            bit <<= 1
    return out


class BinCache:
    """Remembers last redraw's bins per series, so an unchanged window costs nothing.

    The key names the series and the axis; ``sig`` says whether the series changed
    (its length and newest time). A paused view, or a live view between two samples,
    redraws from here.
    """

    def __init__(self) -> None:
        self._d: dict[Hashable, tuple[Hashable, Any]] = {}
        self._settled: dict[Hashable, dict[int, Any]] = {}

    def get(self, key: Hashable, sig: Hashable, compute: Callable[[], Any]) -> Any:
        hit = self._d.get(key)
        if hit is not None and hit[0] == sig:
            return hit[1]
        val = compute()
        self._d[key] = (sig, val)
        if len(self._d) > 512:  # processes come and go: forget the oldest half
            for k in list(self._d)[:256]:
                del self._d[k]
        return val

    def settled(self, key: Hashable) -> dict[int, Any]:
        """The settled buckets of one series at one bucket width (and hold), kept across
        redraws (:func:`bin_values_settled`, :func:`states_settled`)."""
        got = self._settled.get(key)
        if got is None:
            got = self._settled[key] = {}
            if len(self._settled) > 512:
                for k in list(self._settled)[:256]:
                    del self._settled[k]
        return got


def bin_values_settled(times: Sequence[float], values: Callable[[int, int], list[float | None]], axis: Axis,
                       hold: float, memo: dict[int, tuple[float | None, float | None, float | None]]
                       ) -> tuple[list[float | None], list[float | None], list[float | None]]:
    """:func:`bin_values` of the whole axis, each bucket that ended before the newest
    sample taken from ``memo`` when an earlier redraw computed it: the axis' edges are
    whole multiples of its width (:meth:`Axis.make`), so a bucket comes back at the same
    place as the view scrolls, and samples come in time order, so nothing later reaches
    back into it. ``values(i, j)``: the values of samples ``[i, j)`` (only those read are
    built). ``memo`` is one series' at this width and hold (:meth:`BinCache.settled`);
    bucket 0 is always computed (the first sample's span depends on where the window's
    samples start).
    """
    n, bw, t0 = axis.n, axis.bw, axis.t0
    m = len(times)
    base = round(t0 / bw)
    last_t = times[-1] if m else -math.inf
    # a bucket is taken from the memo only if it also ended before this window's newest
    # sample: the sample whose span crosses its end is then in both (a view scrolled back
    # in a replay holds fewer samples than the redraw that stored it)
    k_from = 1
    while k_from < n and base + k_from in memo and t0 + (k_from + 1) * bw <= last_t:
        k_from += 1
    if k_from == 1:
        mins, means, maxs = bin_values(times, values(0, m), axis, hold)
    else:
        i0 = first_index_for(times, axis, k_from)
        mins, means, maxs = bin_values(times, [None] * i0 + values(i0, m), axis, hold, k_from=k_from)
        # bucket 0: the samples up to the first that ends past it
        j = min(m, bisect.bisect_left(times, t0 + bw) + 1)
        h_mins, h_means, h_maxs = bin_values(times[:j], values(0, j), axis, hold, k_to=1)
        mins[0], means[0], maxs[0] = h_mins[0], h_means[0], h_maxs[0]
        for k in range(1, k_from):
            mins[k], means[k], maxs[k] = memo[base + k]
    for k in range(max(1, k_from), n):
        if t0 + (k + 1) * bw > last_t:
            break
        memo[base + k] = (mins[k], means[k], maxs[k])
    for old in [x for x in memo if x < base]:
        del memo[old]
    return mins, means, maxs


# A bucket's seconds per state as shown (one-sample spans count a little) and exact.
StateBucket = tuple[dict[str, float] | None, dict[str, float] | None]


def states_settled(spans_from: Callable[[float], Sequence[tuple[float, float, str | None]]], newest_t: float | None,
                   axis: Axis, memo: dict[int, StateBucket]) -> tuple[list[str | None], dict[str, float]]:
    """:func:`bin_states` of the window and its seconds per state (:func:`state_seconds`
    over ``[t0, t1)``), each bucket that ended before the newest span's start
    (``newest_t``) taken from ``memo`` when an earlier redraw computed it. Spans come in
    time order, so none that arrives later reaches back into such a bucket, and a span's
    share of a bucket does not depend on the window (the axis' edges are whole multiples
    of its width): a 1-h strip redraws its newest buckets, not 72,000 spans a rank.
    ``spans_from(t)``: the spans that end after ``t`` (only those are read); ``memo``: one
    series' at this width (:meth:`BinCache.settled`)."""
    n, bw, t0 = axis.n, axis.bw, axis.t0
    base = round(t0 / bw)
    settled_to = -1 if newest_t is None else min(n, math.floor((newest_t - t0) / bw + 1e-9))  # buckets [0, this)
    k_from = 0
    while k_from < settled_to and base + k_from in memo:
        k_from += 1
    shown: list[dict[str, float] | None] = [None] * n
    exact: list[dict[str, float] | None] = [None] * n
    if k_from < n:
        spans = spans_from(t0 + k_from * bw - 1e-3)  # a one-sample span just before still shows a little
        shown = seconds_per_bucket(spans, axis)
        exact = seconds_per_bucket(spans, axis, min_dur=0.0)
    states: list[str | None] = []
    total: dict[str, float] = {}
    for k in range(n):
        if k < k_from:
            sh, ex = memo[base + k]
        else:
            sh, ex = shown[k], exact[k]
            if k < settled_to:
                memo[base + k] = (sh, ex)
        states.append(shown_state(sh))
        if ex:
            for st, v in ex.items():
                total[st] = total.get(st, 0.0) + v
    for old in [x for x in memo if x < base]:
        del memo[old]
    return states, total
