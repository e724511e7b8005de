"""Training steps seen from outside, in a rank's main-thread spans.

A step begins where the loop gets its batch: each return from the DataLoader's
``__next__`` into the step is a main-thread transition out of ``data_wait`` or
``data_inline`` into one of the step's own states (forward, backward, …). Where the wait
was too short for the sampler to catch, a step shows as a second ``forward`` after the
first one of the current step (a ``forward`` → ``backward`` → ``forward`` cycle with no
wait sampled between): that is a step boundary too. Nothing else is: a phase such as
``eval`` or ``checkpoint`` between two steps neither begins nor ends one.

The time between two boundaries is one step's length. Lengths are kept in a histogram
of 5 % wide logarithmic buckets, so a run's spread costs a few hundred integers
however long it runs; p50 and p90 are read from it.

Seeing a boundary needs its two sides sampled: the wait and the step's first state, or
a forward pass and what came before it. A phase shorter than the sampling period is
caught only now and then, and the steps around a missed one merge into one long "step".
Whether a phase is always caught is told from the samples themselves: each time it is
seen, it lasts a whole number of sampling periods, and a phase caught only now and then
is seen for a single one. So when nine sightings in ten of a phase (kept in a histogram
of lengths) last at least :data:`MIN_PHASE_PERIODS` periods, the phase is longer than a
period nearly every time, and then it is never missed. The figures are given when, for
one of the two ways of seeing a boundary, both of its phases pass that, and the median
step spans at least :data:`MIN_PERIODS` periods; else they are ``None`` with the reason.
(The shortest tenth, not the mean nor the median: the short waits that are missed are
also the ones seen for a single period, and one long wait per epoch, a worker restart,
must not make them look seen; a trainer with short steps and one long wait per epoch
was given 1.9 steps/s for its true 16.7 with the median.)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sattui.states import State

DATA = frozenset({State.DATA_WAIT, State.DATA_INLINE})
STEP = frozenset({State.FORWARD, State.BACKWARD, State.OPTIMIZER, State.COMPILE, State.OTHER, State.SYNC,
                  State.H2D_COPY, State.COLLECTIVE})
# A hole this long in a thread's spans (py-spy restarting, a torn read) breaks the chain:
# no step is timed across it.
GAP_S = 0.5
# The median step must span this many sampling periods for its boundaries to be seen.
MIN_PERIODS = 3.0
# A phase whose sightings last this many periods, nine in ten of them, is caught every
# time (one caught only now and then is seen for a single period).
MIN_PHASE_PERIODS = 2.0
# Which of its sightings a phase's length is read at (the shortest tenth).
PHASE_Q = 0.1
# Histogram buckets are 5 % wide: a length of exactly two periods may land just under.
_BUCKET_SLACK = 0.95
# The phases whose sightings are counted (see figures()).
PHASES = ("data", "step", "forward", "rest")
# Histogram buckets: lengths within 5 % of each other share one.
_RATIO = 1.05
_LOG = math.log(_RATIO)


def _phases(st: str | None) -> tuple[str, ...]:
    if st in DATA:
        return ("data",)
    if st == State.FORWARD:
        return ("step", "forward")
    if st in STEP:
        return ("step", "rest")
    return ()


def sightings(spans: Iterable[Any]) -> list[tuple[float, str, float]]:
    """``(end, phase, length)`` for each time a phase (:data:`PHASES`: the data wait, the
    step's own states together, its forward pass, the rest of the step) was seen in a
    thread's spans, from its first span to its last; one still open at the end is left
    out (it ends in what comes next)."""
    return [(t, ph, length) for kind, t, ph, length in StepTracker().events(spans)
            if kind == SEEN and ph is not None and length is not None]


def boundaries(spans: Iterable[Any]) -> list[tuple[float, float | None]]:
    """``(t, length of the step that ends there)`` for each step boundary in a thread's
    spans (sorted by ``t``); the length is None where the previous boundary is not known
    (the first one, or one after a gap)."""
    return [(t, length) for kind, t, _, length in StepTracker().events(spans) if kind == STEP_BEGINS]


def bucket(length_s: float) -> int:
    got = _BUCKETS.get(length_s)
    if got is None:
        if len(_BUCKETS) > 4096:
            _BUCKETS.clear()
        got = _BUCKETS[length_s] = round(math.log(max(length_s, 1e-6)) / _LOG)
    return got


# Lengths repeat (whole sampling periods, mostly): a log each time was a tenth of `report`.
_BUCKETS: dict[float, int] = {}


def quantile(hist: dict[int, int], q: float) -> float | None:
    """The ``q`` quantile of the step lengths in a histogram (nearest rank)."""
    n = sum(hist.values())
    if n == 0:
        return None
    rank = max(1, math.ceil(q * n))
    seen = 0
    for k in sorted(hist):
        seen += hist[k]
        if seen >= rank:
            return _RATIO ** k
    return None


def phase_lengths(seen: dict[str, dict[int, int]]) -> dict[str, float | None]:
    """Each phase's sighting length at :data:`PHASE_Q` (None where it was never seen)."""
    return {ph: quantile(seen.get(ph, {}), PHASE_Q) for ph in PHASES}


_PHASE_WORDS = {"data": "the data wait", "step": "the step's compute", "forward": "the forward pass",
                "rest": "the rest"}


def _phase_words(lengths: dict[str, float | None]) -> str:
    """``the data wait 35 ms, …`` for the phases seen; those never seen said as such (a
    loop that never waits for data has no data wait to measure)."""
    seen = [f"{_PHASE_WORDS[ph]} {v * 1000:.0f} ms" for ph, v in lengths.items() if v is not None]
    unseen = [_PHASE_WORDS[ph] for ph, v in lengths.items() if v is None]
    text = ", ".join(seen) if seen else "no phase"
    return text + (f" ({', '.join(unseen)}: never seen)" if unseen else "")


def figures(steps: int, hist: dict[int, int], wall_s: float, rate_hz: float | None,
            seen: dict[str, dict[int, int]] | None = None) -> dict[str, Any]:
    """``steps_per_s``, ``step_s_p50``, ``step_s_p90`` of one rank, or None each with
    ``steps_null_reason`` when the sampling cannot resolve its steps (``seen``: the
    histograms of the phases' sightings, phase -> bucket -> count)."""
    nulls: dict[str, Any] = {"steps_per_s": None, "step_s_p50": None, "step_s_p90": None}
    p50 = quantile(hist, 0.5)
    if p50 is None or wall_s <= 0:
        return {**nulls, "steps_null_reason": "no step seen: no return from the DataLoader into the step, and no "
                                              "repeated forward pass, was sampled"}
    if rate_hz:
        period = 1.0 / rate_hz
        if seen is not None:
            ln = phase_lengths(seen)

            def caught(*phs: str) -> bool:
                return all((ln[ph] or 0.0) >= MIN_PHASE_PERIODS * period * _BUCKET_SLACK for ph in phs)

            if not (caught("data", "step") or caught("forward", "rest")):
                return {**nulls, "steps_null_reason": (
                    f"steps too short to see at {rate_hz:g} Hz: one sighting in ten of each phase lasts at most "
                    f"{_phase_words(ln)}, against a sampling period of {period * 1000:.0f} ms: some steps are "
                    f"not seen")}
        if p50 < MIN_PERIODS * period:
            return {**nulls, "steps_null_reason": f"steps too short to see: the median step seen, {p50:.3f} s, "
                                                  f"is under {MIN_PERIODS:.0f} sampling periods "
                                                  f"({MIN_PERIODS * period:.3f} s at {rate_hz:g} Hz)"}
    p90 = quantile(hist, 0.9)
    return {"steps_per_s": round(steps / wall_s, 3), "step_s_p50": round(p50, 4),
            "step_s_p90": round(p90, 4) if p90 is not None else None}


Bin = tuple[int, dict[int, int], dict[str, dict[int, int]]]


def by_bin(spans: Sequence[Any], lo: float, hi: float, bin_s: float) -> dict[int, Bin]:
    """The boundaries and sightings in ``[lo, hi)`` by bin: ``{bin: (steps, histogram of
    their lengths, {phase: histogram of its sightings' lengths})}`` (a sighting counts in
    the bin it ends in). ``spans`` should start well before ``lo`` so the chain is in step
    by then; what they show before ``lo`` is left out."""
    return _tally(((kind, t, ph, length) for kind, t, ph, length in StepTracker().events(spans) if lo <= t < hi),
                  bin_s, None, None)


def over(spans: Sequence[Any], lo: float, hi: float) -> Bin:
    """The steps begun in ``[lo, hi)``, the histogram of their lengths and each phase's
    sightings ended there (a screen's window: :func:`figures` reads them); ``spans``
    should start well before ``lo``, as for :func:`by_bin`."""
    return merged(by_bin(spans, lo, hi, max(hi - lo, 1e-6)).values())


def merged(parts: Iterable[Bin]) -> Bin:
    """Several stretches' counts as one."""
    steps = 0
    hist: dict[int, int] = {}
    seen: dict[str, dict[int, int]] = {}
    for n, h, phases in parts:
        steps += n
        for k, c in h.items():
            hist[k] = hist.get(k, 0) + c
        for ph, ph_hist in phases.items():
            mine = seen.setdefault(ph, {})
            for k, c in ph_hist.items():
                mine[k] = mine.get(k, 0) + c
    return steps, hist, seen


def short_words(fig: dict[str, Any]) -> str:
    """:func:`figures` in a few words for a screen: ``1.92 steps/s, p50 0.520 s, p90
    0.610 s``, or the start of the reason there are none (``steps too short to see at
    20 Hz``)."""
    if fig.get("steps_per_s") is None:
        return str(fig.get("steps_null_reason") or "no step seen").split(":")[0]
    p90 = fig.get("step_s_p90")
    return (f"{fig['steps_per_s']:.2f} steps/s, p50 {fig['step_s_p50']:.3f} s"
            + (f", p90 {p90:.3f} s" if p90 is not None else ""))


def _tally(events: Iterable[Event], bin_s: float, first_b: int | None, last_b: int | None) -> dict[int, Bin]:
    """Events counted by the bin their ``t`` falls in (clamped to ``[first_b, last_b]``
    where given). Counts are kept in lists while they grow: a new tuple per event was a
    tenth of ``report``."""
    counts: dict[int, list[Any]] = {}
    floor, get_bucket = math.floor, _BUCKETS.get
    for kind, t, ph, length in events:
        b = floor(t / bin_s)
        if first_b is not None and b < first_b:
            b = first_b
        elif last_b is not None and b > last_b:
            b = last_b
        got = counts.get(b)
        if got is None:
            got = counts[b] = [0, {}, {}]
        if kind == STEP_BEGINS:
            got[0] += 1
            if length is None:
                continue
            hist = got[1]
        elif ph is not None and length is not None:
            hist = got[2].get(ph)
            if hist is None:
                hist = got[2][ph] = {}
        else:
            continue
        k = get_bucket(length)
        if k is None:
            k = bucket(length)
        hist[k] = hist.get(k, 0) + 1
    return {b: (n, hist, seen) for b, (n, hist, seen) in counts.items()}


# What StepTracker.events yields: a step begins at t (length: of the step that ends there),
# or a phase was seen, ending at t (length: how long it was seen).
STEP_BEGINS, SEEN = "step", "seen"
Event = tuple[str, float, str | None, float | None]


class StepTracker:
    """The steps and phase sightings of one thread's spans, fed in time order — all at
    once, or a stretch at a time as the ledger's bins settle: the chain (the last
    boundary, the phases still open) carries over from one call to the next, so each span
    is read once and a step of any length has its start. The one home of the rules in
    this module's docstring; :func:`boundaries`, :func:`sightings` and :func:`by_bin` read
    it."""

    def __init__(self) -> None:
        self.prev: str | None = None
        self.prev_end: float | None = None
        self.last: float | None = None
        self.seen_forward = False
        self.open: dict[str, list[float]] = {}  # phase -> [start, end]

    def events(self, spans: Iterable[Any]) -> Iterator[Event]:
        """``(STEP_BEGINS, t, None, length or None)`` at each step boundary and ``(SEEN,
        end, phase, length)`` at each phase's end, in the order the spans show them."""
        # The chain in locals for the loop (a span at a time, 72,000 an hour at 20 Hz).
        open_, prev, prev_end, last, seen_forward = self.open, self.prev, self.prev_end, self.last, self.seen_forward
        phases_of, data, step, forward = _PHASES_OF, DATA, STEP, State.FORWARD
        now: tuple[str, ...] = ()
        try:
            for s in spans:
                st = s.state
                if st is None:
                    continue  # a torn sample: its state is unknown, it neither begins nor ends a step
                t = s.t
                end = t + s.dur
                if prev_end is not None and t - prev_end > GAP_S:
                    # not known to have ended where the hole began: no step across it
                    prev, last, seen_forward = None, None, False
                    open_.clear()
                if prev_end is None or end > prev_end:
                    prev_end = end
                # sightings: the phases open are those of the span before, unless a gap closed them
                before, now = now, phases_of.get(st, ())
                if now is not before or len(open_) != len(now):
                    for ph in [ph for ph in open_ if ph not in now]:
                        a, z = open_.pop(ph)
                        yield SEEN, z, ph, z - a
                    for ph in now:
                        run = open_.get(ph)
                        if run is None:
                            open_[ph] = [t, end]
                        else:
                            run[1] = end
                else:
                    for ph in now:  # the same phases go on (all open): only their ends move
                        open_[ph][1] = end
                # boundaries
                if st == prev:
                    continue
                boundary = False
                if prev in data and st in step:
                    boundary = True
                    seen_forward = st == forward
                elif st == forward:
                    boundary = seen_forward  # a second forward: the wait between was too short to sample
                    seen_forward = True
                if boundary:
                    yield STEP_BEGINS, t, None, (t - last if last is not None else None)
                    last = t
                prev = st
        finally:
            self.prev, self.prev_end, self.last, self.seen_forward = prev, prev_end, last, seen_forward

    def feed(self, spans: Iterable[Any], lo: float, hi: float, bin_s: float) -> dict[int, Bin]:
        """What :func:`by_bin` gives for ``[lo, hi)``, from the spans that start there.
        A sighting that ends in a stretch already given (its phase closed only now) counts
        in this stretch's first bin."""
        first_b = math.floor(lo / bin_s)
        last_b = max(first_b, math.ceil(hi / bin_s) - 1)
        return _tally(self.events(spans), bin_s, first_b, last_b)


_PHASES_OF = {st: _phases(st) for st in State}
