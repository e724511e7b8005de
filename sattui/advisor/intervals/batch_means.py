"""Shares of time with a confidence interval, from the ledger's one-second bins.

A share measured over a run (the seconds a rank waits over the seconds it was watched) is
a ratio of sums over bins. Its bins are not independent trials: a rank that waits in one
second tends to wait in the next (a slow phase, a competing process that holds a core for
a while), so the spread of single bins understates the error, and the count of py-spy
samples understates it more. The interval here is from **non-overlapping batch means**
(Flegal & Jones 2010, "Batch means and spectral variance estimators in MCMC"): the bins,
in time order, are cut into ``K`` consecutive batches of ``m = ⌊√n⌋`` bins; each batch's
share is one observation, and batches that long are about independent whenever the
correlation dies out within a few of them. The estimate's variance is the linearised
variance of a ratio estimator over the batches (each weighed by its seconds), and the
interval is Student's t with ``K − 1`` degrees of freedom.

Two functions, both over bins given as ``(seconds, seconds in the state)`` in time order:

* :func:`share_interval` — one share (e.g. a rank's time waiting for other ranks);
* :func:`difference_interval` — the difference of two shares measured over the same bins
  (paired: each batch's difference is one observation, so what both sides share — a
  slow second on the whole host — cancels).

Each gives an :class:`Interval` (None where fewer than two bins carry seconds).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

Bin = tuple[float, float]  # (seconds watched, seconds in the state)

LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """An estimate with its two-sided confidence interval at ``level``."""

    estimate: float
    low: float
    high: float
    bins: int               # bins with seconds that went in
    batches: int            # K: the independent observations the interval rests on
    effective_bins: float | None  # bins' worth of independent data (None: no spread at all)
    level: float = LEVEL

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    def scaled(self, k: float) -> Interval:
        """The same interval for ``k`` times the quantity (k ≥ 0)."""
        return Interval(self.estimate * k, self.low * k, self.high * k, self.bins, self.batches,
                        self.effective_bins, self.level)


def _t_within(t: float, df: int) -> float:
    """P(|T| ≤ t) for Student's t with integer ``df`` (Abramowitz & Stegun 26.7.3–4)."""
    th = math.atan(t / math.sqrt(df))
    c2 = math.cos(th) ** 2
    if df % 2:
        if df == 1:
            return 2.0 * th / math.pi
        term = total = 1.0
        for k in range(3, df - 1, 2):  # 1 + 2/3 c² + 2·4/(3·5) c⁴ + …
            term *= (k - 1) / k * c2
            total += term
        return 2.0 / math.pi * (th + math.sin(th) * math.cos(th) * total)
    term = total = 1.0
    for k in range(2, df - 1, 2):  # 1 + 1/2 c² + 1·3/(2·4) c⁴ + …
        term *= (k - 1) / k * c2
        total += term
    return math.sin(th) * total


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile: exact for 1 and 2 degrees of freedom; Cornish–Fisher
    (Abramowitz & Stegun 26.7.5) above, refined on the exact distribution for an integer
    ``df`` below 200; the normal quantile from 200 on."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), not {p}")
    if df <= 1.0:
        return math.tan(math.pi * (p - 0.5))
    if df <= 2.0:
        return (2.0 * p - 1.0) / math.sqrt(2.0 * p * (1.0 - p))
    z = NormalDist().inv_cdf(p)
    if df >= 200.0:
        return z
    z2 = z * z
    g1 = (z2 + 1.0) * z / 4.0
    g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0
    g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0
    g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0
    t = z + g1 / df + g2 / df ** 2 + g3 / df ** 3 + g4 / df ** 4
    if df != int(df):
        return t
    # (bisection around the expansion, which is a few thousandths off at 3 degrees)
    want = abs(2.0 * p - 1.0)
    lo, hi = abs(t) * 0.9, abs(t) * 1.1
    for _ in range(60):
        mid = (lo + hi) / 2.0
        if _t_within(mid, int(df)) < want:
            lo = mid
        else:
            hi = mid
    return math.copysign((lo + hi) / 2.0, t)


def _batches(n: int) -> list[tuple[int, int]]:
    """``[start, end)`` of the K = n // m batches of m = ⌊√n⌋ bins (the remainder joins the last)."""
    m = max(1, math.isqrt(n))
    k = n // m
    return [(i * m, (i + 1) * m if i < k - 1 else n) for i in range(k)]


def _ratio_parts(bins: Sequence[Bin], cuts: list[tuple[int, int]]) -> tuple[float, list[float], list[float]]:
    """The share over all bins, and per batch its seconds and its residual (state seconds
    minus share × seconds): the linearised ratio estimator's terms."""
    wall = sum(b[0] for b in bins)
    share = sum(b[1] for b in bins) / wall
    ws, res = [], []
    for a, z in cuts:
        w = sum(b[0] for b in bins[a:z])
        x = sum(b[1] for b in bins[a:z])
        ws.append(w)
        res.append(x - share * w)
    return share, ws, res


def _interval(estimate: float, residuals: list[float], n_bins: int, iid_var: float, level: float) -> Interval:
    k = len(residuals)
    var = sum(e * e for e in residuals) / (k * (k - 1))
    se = math.sqrt(var)
    half = t_quantile(0.5 + level / 2.0, k - 1) * se
    # (no spread at all, up to rounding: a scripted ledger's identical bins)
    eff = min(float(n_bins), n_bins * iid_var / var) if var > 1e-15 else None
    return Interval(estimate, estimate - half, estimate + half, n_bins, k, eff, level)


def _iid_var(values: list[float], weights: list[float]) -> float:
    """The variance of the weighted mean if every bin were an independent trial."""
    tot = sum(weights)
    mean = sum(v * w for v, w in zip(values, weights, strict=True)) / tot
    n = len(values)
    s = sum((w / tot * n) ** 2 * (v - mean) ** 2 for v, w in zip(values, weights, strict=True))
    return s / (n * (n - 1))


def share_interval(bins: Sequence[Bin], level: float = LEVEL) -> Interval | None:
    """The share of time in a state over ``bins`` (``(seconds, seconds in the state)`` per
    bin, in time order), with its batch-means interval. Bins without seconds are left out;
    None with fewer than two left."""
    got = [b for b in bins if b[0] > 0]
    n = len(got)
    if n < 2:
        return None
    cuts = _batches(n)
    share, ws, res = _ratio_parts(got, cuts)
    mean_w = sum(ws) / len(ws)
    iid = _iid_var([b[1] / b[0] for b in got], [b[0] for b in got])
    return _interval(share, [e / mean_w for e in res], n, iid, level)


def difference_interval(a: Sequence[Bin], b: Sequence[Bin], level: float = LEVEL) -> Interval | None:
    """``share(a) − share(b)`` over the same bins (``a[i]`` and ``b[i]`` the same second),
    with its paired batch-means interval. Bins where either side has no seconds are left
    out; None with fewer than two left."""
    if len(a) != len(b):
        raise ValueError(f"paired bins: {len(a)} against {len(b)}")
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x[0] > 0 and y[0] > 0]
    n = len(pairs)
    if n < 2:
        return None
    cuts = _batches(n)
    sa, wa, ra = _ratio_parts([p[0] for p in pairs], cuts)
    sb, wb, rb = _ratio_parts([p[1] for p in pairs], cuts)
    ma, mb = sum(wa) / len(wa), sum(wb) / len(wb)
    res = [x / ma - y / mb for x, y in zip(ra, rb, strict=True)]
    iid = _iid_var([p[0][1] / p[0][0] - p[1][1] / p[1][0] for p in pairs], [1.0] * n)
    return _interval(sa - sb, res, n, iid, level)
