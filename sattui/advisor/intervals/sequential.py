"""How sure a share of time is, judged at every look: an anytime-valid interval.

The advisor looks every second at each cause's share of the job's time (the ledger's
one-second bins) and shows a finding once the share is surely over a severity threshold.
Two things make that harder than a textbook interval:

* **Samples are not independent.** A data wait lasts many stack samples, and often more
  than one bin. The bins' shares are the observations, and their lag-1 autocorrelation
  ρ shrinks the sample count to an effective one, ``n (1 − ρ) / (1 + ρ)`` (the AR(1)
  variance inflation; DESIGN.md "Deciding when to speak": runs, not samples), never more
  than the pieces of evidence seen: bins that hold a change of state, and runs of bins
  that hold one state throughout (a 4-s wait is one observation, not four).
* **Looking every second** and stopping at the first crossing inflates false alarms
  unless the bound holds at every look at once. The half-width is the asymptotic
  confidence sequence of Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas ("Time-uniform
  central limit theory and asymptotic confidence sequences", Ann. Statist. 2024, eq. 2.4):

      σ̂ · sqrt( 2 (n ρ² + 1) / (n² ρ²) · log( sqrt(n ρ² + 1) / α ) )

  with its tuning ρ chosen to be tightest at ``TIGHT_AT_N`` effective bins.

With few bins the spread of the bins is itself unknown (three bins of 0.9 say little), so
the variance is shrunk towards the worst case for a share m, bins that are all-or-nothing
(m (1 − m)), with the weight of ``PRIOR_BINS`` bins: the interval starts wide and narrows
as the data show how steady the share is.

**Periodic stalls** (a checkpoint every N steps) defeat the lag-1 model: a second in the
stall is followed by another, so ρ is high and the bins look like few observations, while
the share itself is as steady as the period (the correlations turn negative at longer
lags). A second interval reads the stream as cycles, the regenerative method of
simulation output analysis: each episode (a run of bins holding the state) starts a cycle
that ends where the next one starts; cycles are independent when the episodes recur as a
renewal process, and the share is the ratio ΣD / ΣC of the cycles' seconds in the state D
to their lengths C, with variance Σ(D − m C)² / (ΣC)² (the delta method). Each interval
is taken at its part of α (the bins' 0.015, the cycles' 0.005) and the two are
intersected: at every look, both hold but with probability 1 − α (Bonferroni), whichever
of them is the narrower.

Tested on simulated autocorrelated streams (tests/unit/test_sequential.py): at a true share
just under a threshold, the lower bound crosses it in at most 1 % of 10,000 two-minute
streams judged every second.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

ALPHA = 0.02            # two-sided: each side errs at most ~1 % over all looks …
# … shared by the bins' interval and the cycles' (Bonferroni): most to the bins', which
# decides nearly every cause; the cycles' is narrow where it applies at all
ALPHA_BINS = 0.015
ALPHA_CYCLES = ALPHA - ALPHA_BINS
TIGHT_AT_N = 8.0        # effective bins where the sequence is tightest
PRIOR_BINS = 1.0        # weight of the prior variance
PRIOR_VAR = 0.25        # a share's worst case: bins all-or-nothing at m = 0.5
MIN_BINS = 4            # fewer bins than this: no interval at all …
MIN_PIECES = 4          # … or fewer pieces of evidence (a long run is one)
MAX_RHO = 0.9
PRIOR_RHO = 0.5         # autocorrelation assumed until the bins show theirs …
PRIOR_RHO_BINS = 4.0    # … with this weight
MIN_CYCLES = 3          # complete cycles before the cycles' interval speaks …
PRIOR_CYCLE_VAR_S2 = 0.25  # one all-or-nothing second's variance, D − mC in s², …
PRIOR_CYCLES = 1.0      # … with the weight of one cycle
MAX_CYCLE_CV = 0.25     # … and only while their lengths and seconds held vary by less than this,
TRIMMED_CYCLE_CV = 0.15  # or the oldest left out, the others by less than this

def _rho2(alpha: float) -> float:
    log_term = -2.0 * math.log(alpha)
    return (log_term + math.log(log_term + 1.0)) / TIGHT_AT_N


def cs_factor(n_eff: float, alpha: float = ALPHA_BINS) -> float:
    """The half-width over σ̂ after ``n_eff`` effective observations, at level ``alpha``."""
    n = max(n_eff, 1.0)
    rho2 = _rho2(alpha)
    a = n * rho2 + 1.0
    return math.sqrt(2.0 * a / (n * n * rho2) * math.log(math.sqrt(a) / alpha))


@dataclass(frozen=True)
class ShareInterval:
    """A share of time (0–1) with its interval, and what it rests on."""

    share: float
    lo: float
    hi: float
    bins: int           # one-second bins observed
    seconds: float      # wall seconds they cover
    n_eff: float        # effective observations (autocorrelation accounted for)

    def around(self, share: float) -> tuple[float, float]:
        """The same half-widths around another point estimate of the share (a rule's
        impact computed its own way from the same bins)."""
        return max(0.0, share - (self.share - self.lo)), min(1.0, share + (self.hi - self.share))


class ShareStream:
    """Running sums of per-bin shares (oldest first): :meth:`interval` at any look costs
    the same however many bins came before. Bins may also leave from the old end
    (:meth:`drop_oldest`, a sliding window): the sums are exact either way."""

    __slots__ = ("n", "sw", "swx", "swxx", "sx", "sxx_lag", "pieces", "_xs", "cycles")

    def __init__(self) -> None:
        self.n = 0
        self.sw = self.swx = self.swxx = 0.0
        self.sx = 0.0         # unweighted Σx (for the lag-1 sum)
        self.sxx_lag = 0.0    # Σ x_i x_{i+1}
        self.pieces = 0       # mixed bins plus runs of pure ones (see _piece)
        self._xs: list[tuple[float, float]] = []
        self.cycles = CycleSums()

    def add(self, x: float, w: float) -> None:
        if w <= 0.0:
            return
        prev = self._xs[-1][0] if self._xs else None
        if prev is not None:
            self.sxx_lag += prev * x
        self.pieces += _piece(prev, x)
        self._xs.append((x, w))
        self.n += 1
        self.sw += w
        self.swx += w * x
        self.swxx += w * x * x
        self.sx += x
        self.cycles.add(x, w)

    def drop_oldest(self) -> None:
        self.cycles.drop_oldest()
        x, w = self._xs.pop(0)
        self.pieces -= _piece(None, x)
        if self._xs:
            nxt = self._xs[0][0]
            self.sxx_lag -= x * nxt
            # the new first bin starts a piece of its own now
            self.pieces += _piece(None, nxt) - _piece(x, nxt)
        self.n -= 1
        self.sw -= w
        self.swx -= w * x
        self.swxx -= w * x * x
        self.sx -= x

    def interval(self, alpha: float = ALPHA_BINS, cycles: bool = True) -> ShareInterval | None:
        """None with fewer than :data:`MIN_BINS` bins or :data:`MIN_PIECES` pieces.
        ``alpha``: the bins' interval's level; ``cycles``: intersect it with the cycles'
        (at :data:`ALPHA_CYCLES`; the two levels add up)."""
        n = self.n
        if n < MIN_BINS or self.pieces < MIN_PIECES or self.sw <= 0.0:
            return None
        m = min(1.0, max(0.0, self.swx / self.sw))
        mean_w = self.sw / n
        # Σw(x − m)² over the mean weight: the spread in bins of average length
        ss = max(0.0, self.swxx - 2.0 * m * self.swx + m * m * self.sw) / mean_w
        var = (ss + PRIOR_BINS * PRIOR_VAR) / (n + PRIOR_BINS)
        rho_seen = 0.0
        if ss > 1e-12:
            first, last = self._xs[0][0], self._xs[-1][0]
            lag = self.sxx_lag - m * (2.0 * self.sx - first - last) + (n - 1) * m * m
            rho_seen = min(MAX_RHO, max(0.0, lag / ss))
        # A few bins cannot show how long a state lasts: start from a correlated guess.
        rho = (n * rho_seen + PRIOR_RHO_BINS * PRIOR_RHO) / (n + PRIOR_RHO_BINS)
        # Nor can more observations be claimed than the pieces seen: four bins of one
        # unbroken wait are one wait, however long.
        n_eff = min(n * (1.0 - rho) / (1.0 + rho), float(self.pieces))
        hw = math.sqrt(var) * cs_factor(n_eff, alpha)
        lo, hi = m - hw, m + hw
        by_cycles = self.cycles.interval() if cycles else None
        if by_cycles is not None:
            c_lo, c_hi, k = by_cycles
            if max(lo, c_lo) <= min(hi, c_hi):
                # both hold at once but with probability 1 − α: the intersection does too
                lo, hi = max(lo, c_lo), min(hi, c_hi)
                n_eff = max(n_eff, float(k))
        lo, hi = max(0.0, min(lo, m)), min(1.0, max(hi, m))
        return ShareInterval(m, lo, hi, n, self.sw, n_eff)


class CycleSums:
    """The stream read as cycles (the module's docs): an episode is a run of bins that
    hold the state (over :data:`PURE`); a cycle runs from one episode's first bin to the
    next one's. Running sums over the complete cycles; the cycle still open is kept apart,
    and one that started before the oldest bin kept is dropped whole."""

    __slots__ = ("k", "sd", "sc", "sdd", "sdc", "scc", "_done", "_first", "_next",
                 "_open_at", "_open_d", "_open_c", "_held")

    def __init__(self) -> None:
        self.k = 0
        self.sd = self.sc = self.sdd = self.sdc = self.scc = 0.0
        self._done: list[tuple[int, float, float]] = []  # (first bin, D, C) oldest first
        self._first = 0         # index of the oldest bin kept
        self._next = 0          # index the next bin gets
        self._open_at: int | None = None
        self._open_d = self._open_c = 0.0
        self._held = False      # the last bin held the state

    def add(self, x: float, w: float) -> None:
        held = x > PURE
        # An episode opens a cycle only where the bin before it was seen not holding the
        # state: one already under way in the stream's first bin began before it (the
        # ledger window opened mid-checkpoint), and its tail is no cycle's episode (a
        # 0.13-s tail beside 1.2-s saves made the episodes look irregular, and the
        # cycles' interval was refused for a whole run).
        if held and not self._held and self._next > 0:
            if self._open_at is not None:
                self._close()
            self._open_at, self._open_d, self._open_c = self._next, 0.0, 0.0
        if self._open_at is not None:
            self._open_d += x * w
            self._open_c += w
        self._held = held
        self._next += 1

    def _close(self) -> None:
        assert self._open_at is not None
        d, c = self._open_d, self._open_c
        self._done.append((self._open_at, d, c))
        self.k += 1
        self.sd += d
        self.sc += c
        self.sdd += d * d
        self.sdc += d * c
        self.scc += c * c

    def drop_oldest(self) -> None:
        self._first += 1
        while self._done and self._done[0][0] < self._first:
            _at, d, c = self._done.pop(0)
            self.k -= 1
            self.sd -= d
            self.sc -= c
            self.sdd -= d * d
            self.sdc -= d * c
            self.scc -= c * c
        if self._open_at is not None and self._open_at < self._first:
            self._open_at = None  # it lost its start: the next episode opens a cycle

    def _regular(self) -> bool:
        """Whether the cycles' lengths and seconds held each vary by less than
        :data:`MAX_CYCLE_CV`: all of them, or, from :data:`MIN_CYCLES` + 1 on, all but the
        oldest by less than :data:`TRIMMED_CYCLE_CV` (a job's first checkpoint often
        takes longer: a cold page cache, the file created; one such save, 2.1 s beside
        steady 1.2-s ones, kept the cycles' interval from speaking for as long as it
        stayed in the ledger window). Only the oldest, and the rest held to a stricter
        bound: leaving out a cycle at the same bound let irregular waits pass as cycles
        more often (false alarms of exponential 1-s waits at a share just under a
        threshold 1.53 → 1.62 % over 10,000 streams)."""
        if _cv_ok(self.k, self.sc, self.scc) and _cv_ok(self.k, self.sd, self.sdd):
            return True
        if self.k <= MIN_CYCLES:
            return False
        _at, d, c = self._done[0]
        k = self.k - 1
        return (_cv_ok(k, self.sc - c, self.scc - c * c, TRIMMED_CYCLE_CV)
                and _cv_ok(k, self.sd - d, self.sdd - d * d, TRIMMED_CYCLE_CV))

    def interval(self) -> tuple[float, float, int] | None:
        """(lo, hi, cycles) of the share over the complete cycles, None with fewer than
        :data:`MIN_CYCLES` of them or while they are not regular."""
        k = self.k
        if k < MIN_CYCLES or self.sc <= 0.0:
            return None
        mean_c = self.sc / k
        if not self._regular():
            return None
        m = self.sd / self.sc
        ss = max(0.0, self.sdd - 2.0 * m * self.sdc + m * m * self.scc)
        var_z = (ss + PRIOR_CYCLES * PRIOR_CYCLE_VAR_S2) / (k + PRIOR_CYCLES)
        hw = math.sqrt(var_z) / mean_c * cs_factor(float(k), ALPHA_CYCLES)
        return m - hw, m + hw, k


def _cv_ok(k: int, total: float, squares: float, most: float = MAX_CYCLE_CV) -> bool:
    """The coefficient of variation of ``k`` values (their sum and sum of squares) is
    at most ``most``."""
    mean = total / k
    return math.sqrt(max(0.0, squares / k - mean * mean)) <= most * mean


PURE = 0.02  # a bin within this of 0 or 1 holds one state throughout


def _piece(prev: float | None, x: float) -> int:
    """1 when bin ``x`` starts a new piece of evidence: a bin holding a change of state
    (mixed), or a pure bin (all in the state, or none of it) that does not continue a run
    of the same pure kind."""
    if PURE < x < 1.0 - PURE:
        return 1
    if prev is None or PURE < prev < 1.0 - PURE:
        return 1
    return 0 if (prev >= 1.0 - PURE) == (x >= 1.0 - PURE) else 1


def share_interval(xs: Sequence[float], ws: Sequence[float]) -> ShareInterval | None:
    """The interval of a share from per-bin shares ``xs`` (0–1), oldest first, with the
    bins' wall seconds ``ws`` as weights; None with fewer than :data:`MIN_BINS` bins."""
    stream = ShareStream()
    for x, w in zip(xs, ws):
        stream.add(x, w)
    return stream.interval()
