"""A change of phase: when the newest seconds say the job does something else now.

The advisor judges each cause's share over a two-minute window of one-second bins
(sequential.py). That is right for a steady job, and slow after a change: when a healthy
job starts waiting for data, the healthy minute before the change stays in the window and
keeps the share's interval wide (the bins before and after differ, which the lag-1 model
reads as few observations) for most of the window's length.

So at each look the newest :data:`RECENT_BINS` bins are set against the window's bins
before them, cause by cause: a phase changed when their shares differ by at least
:data:`MIN_SHIFT` and by :data:`Z_CHANGE` standard deviations of an 8-bin mean as the bins
before vary — their overlapping batch means, which carry the bins' autocorrelation at
every lag (a job whose waits come in runs of seconds has 8-bin means that vary a lot, and
needs a larger shift). A run of whole seconds with no change in it (an evaluation pass, or
a pause) is one piece of evidence however long: it is called a change only once it has
lasted twice :data:`RECENT_BINS`, since its first seconds look the same as a pass's.
A cause that was absent from every bin before (none over 10 %) and now holds at least a
quarter of the newest bins, present in 6 of them as a change of state within the second
(not whole seconds), came with the new phase: a healthy job that starts waiting half its
time has no spread before to measure the shift against, and needs no more.
The change point is then placed where the split of the newest bins differs the most (the
CUSUM maximum), and the advisor's window starts there.

A cut costs a steady job its evidence, not its findings (they hold by their own
hysteresis), so the test is strict. On simulated streams (tests/unit/test_change.py) judged
every second for 5 minutes, steady jobs are cut in at most 1.3 % of streams (30 % or 50 % of
the time in waits of 0.3–3 s, periodic stalls; 300 streams each); a healthy job that
starts waiting 90 % of its time is cut ~7 s after the change, one that starts waiting 50 %
in 0.3-s waits ~6 s (in 1-s waits ~8 s, one in ten not within 40 s), and one that stops
waiting after 16 s (its newest bins are one unbroken run).
Exponential waits of 5 s on average (a run of 16 s is then no rarity) are cut in a third
of 5-minute streams: such a job has no steady share over 16 s.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sattui.advisor.intervals.sequential import PURE, ShareStream, _piece

RECENT_BINS = 8       # the newest bins judged as the new phase
MIN_BEFORE_BINS = 12  # bins before them, at least: a phase to change from
MIN_SHIFT = 0.25      # the least difference of share called a change
Z_CHANGE = 5.0        # standard deviations of a shift called a change
PRIOR_VAR = 0.12      # an r-bin mean's variance until the bins before show theirs …
PRIOR_BLOCKS = 0.5    # … with the weight of half a block
MIN_PIECES = 4        # fewer pieces in the newest bins: one run (see find_change)
MIN_SHARE = 0.05      # a cause under this share on both sides is not looked at
QUIET = 0.10          # a bin under this share: the cause is absent from it …
MIN_MIXED = 6         # … and one that appears must be in this many of the newest bins, mixed


@dataclass(frozen=True)
class PhaseChange:
    """Where the new phase starts (an index into the rows given), the cause whose share
    moved the most, and its share before and after that point."""

    at: int
    cause: str
    before: float
    after: float


def _stream(rows: Sequence[tuple[float, Mapping[str, float]]], cause: str) -> ShareStream:
    s = ShareStream()
    for w, shares in rows:
        s.add(shares.get(cause, 0.0), w)
    return s


def _mean(s: ShareStream) -> float:
    return s.swx / s.sw if s.sw > 0.0 else 0.0


def _pieces(xs: Sequence[float]) -> int:
    out, prev = 0, None
    for x in xs:
        out += _piece(prev, x)
        prev = x
    return out


def find_change(rows: Sequence[tuple[float, Mapping[str, float]]],
                passes: frozenset[str] = frozenset()) -> PhaseChange | None:
    """A change of phase in ``rows`` (each bin's weight in seconds and its causes' shares,
    oldest first), or None. ``passes``: causes that come in passes of whole seconds (an
    evaluation): one appearing is not a new phase by itself, even where several ranks'
    passes out of step make the job's bins mixed."""
    n = len(rows)
    if n < MIN_BEFORE_BINS + RECENT_BINS:
        return None
    causes = {c for _w, shares in rows[-2 * RECENT_BINS:] for c in shares}
    causes |= {c for _w, shares in rows[:-RECENT_BINS] for c in shares}
    best: tuple[float, str] | None = None
    ws = [w for w, _shares in rows]  # (the same for every cause)
    for cause in causes:
        xs = [shares.get(cause, 0.0) for _w, shares in rows]
        r = RECENT_BINS
        if cause not in passes and _appears(xs, r):
            best = (math.inf, cause) if best is None or best[0] < math.inf else best
            continue
        if _pieces(xs[-r:]) < MIN_PIECES:
            # one unbroken run (of the state, or of its absence): as much a pass as a phase
            # until it has lasted twice as long
            r = 2 * RECENT_BINS
            if n < MIN_BEFORE_BINS + r or _pieces(xs[-r:]) > 1:
                continue
        z = _shift_z(xs, ws, r)
        if z is None:
            continue
        z_score, _shift = z
        if z_score >= Z_CHANGE and (best is None or z_score > best[0]):
            best = (z_score, cause)
    if best is None:
        return None
    cause = best[1]
    at = _split(rows, cause)
    before = _mean(_stream(rows[:at], cause))
    after = _mean(_stream(rows[at:], cause))
    return PhaseChange(at, cause, before, after)


def _appears(xs: Sequence[float], r: int) -> bool:
    """A cause absent from every bin before the newest ``r`` (none over :data:`QUIET`)
    that holds a share of at least :data:`MIN_SHIFT` in them, in at least
    :data:`MIN_MIXED` bins that hold a change of state: it came with the new phase. (Bins
    of whole seconds, a pass, are kept out: a pass also appears out of nothing.)"""
    recent = xs[-r:]
    if sum(recent) < MIN_SHIFT * r or any(x > QUIET for x in xs[:-r]):
        return False
    return sum(1 for x in recent if PURE < x < 1.0 - PURE) >= MIN_MIXED


def _shift_z(xs: Sequence[float], ws: Sequence[float], r: int) -> tuple[float, float] | None:
    """How far the newest ``r`` bins' share lies from the share before them, in standard
    deviations of an ``r``-bin mean as the bins before them vary (their overlapping batch
    means, shrunk towards :data:`PRIOR_VAR` with the weight of :data:`PRIOR_BLOCKS`);
    None when the shift is under :data:`MIN_SHIFT`."""
    n = len(xs)
    nb = n - r
    sw_b = sum(ws[:nb])
    sw_r = sum(ws[nb:])
    if sw_b <= 0.0 or sw_r <= 0.0:
        return None
    # (the products summed in order by C-level map: the same floats as a generator's, for
    # every cause at every evaluation)
    m_b = sum(map(operator.mul, xs[:nb], ws[:nb])) / sw_b
    m_r = sum(map(operator.mul, xs[nb:], ws[nb:])) / sw_r
    shift = abs(m_r - m_b)
    if shift < MIN_SHIFT or max(m_r, m_b) < MIN_SHARE:
        return None
    # overlapping r-bin means of the bins before (unweighted: bins are ~1 s each)
    acc = sum(xs[:r])
    ss = (acc / r - m_b) ** 2
    blocks = 1
    for j in range(r, nb):
        acc += xs[j] - xs[j - r]
        ss += (acc / r - m_b) ** 2
        blocks += 1
    k = nb / r  # independent blocks' worth
    var = (k * ss / blocks + PRIOR_BLOCKS * PRIOR_VAR) / (k + PRIOR_BLOCKS)
    var *= 1.0 + r / nb
    return shift / math.sqrt(var) if var > 0.0 else math.inf, shift


def _split(rows: Sequence[tuple[float, Mapping[str, float]]], cause: str) -> int:
    """The index in the newest bins (from 2 × :data:`RECENT_BINS` back) where the share of
    ``cause`` before and after differ the most, weighed by the seconds on each side."""
    n = len(rows)
    xs = [(shares.get(cause, 0.0), w) for w, shares in rows]
    total_w = sum(w for _x, w in xs)
    total_xw = sum(x * w for x, w in xs)
    lo = max(1, n - 2 * RECENT_BINS)
    head_w = sum(w for _x, w in xs[:lo])
    head_xw = sum(x * w for x, w in xs[:lo])
    best_at, best_stat = n - RECENT_BINS, -1.0
    for at in range(lo, n - 1):
        tail_w, tail_xw = total_w - head_w, total_xw - head_xw
        if head_w > 0.0 and tail_w > 0.0:
            stat = abs(tail_xw / tail_w - head_xw / head_w) * math.sqrt(head_w * tail_w / total_w)
            if stat > best_stat:
                best_at, best_stat = at, stat
        x, w = xs[at]
        head_w += w
        head_xw += x * w
    return best_at
