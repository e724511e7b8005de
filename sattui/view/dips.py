"""A card's recent utilization dips, each with its cause from the time ledger (no Textual here).

A **dip** is a run of a card's utilization samples under :data:`DIP_UTIL` (50 %: the
advisor's "poor" anchor, and where the charts' bands turn red) lasting at least
:data:`DIP_MIN_S` (0.5 s: Nsight Systems' ``gpu_gaps`` default). Each sample stands for
the time since the previous one (as the ledger and the charts read it), so a dip runs
from the sample before its first low one to its last low one; a gap in the samples
ends a dip (no data is not low).

Its **cause** is the largest piece of the time ledger's ``by_cause`` for that card over
the ledger's one-second bins that the dip touches (sattui/ledger/bins.py), told in
words with the evidence of the same moments: the workers' CPU for a data wait, the phase
of a periodic stall, the rank the others wait for. The bins are the ones the session's
advisor computed (:meth:`Session.ledger_bins`: the live advisor's, or those of a replay
it judged); where it has none (a replay that holds its findings, a stretch before its
window) the view computes the missing bins itself, once each for the whole list, and
keeps them: a settled bin never changes. A dip whose stacks may not all have arrived yet
(live, the last :data:`SETTLE_S` seconds, to the end of its last bin) is listed without a
cause until they have.

Cost (bench/dips.py): finding dips is one pass over the card's samples; the causes are
sums of a few bins each, computed once per dip and kept; a redraw computes at most the
bins that came since the last one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from sattui.advisor.context import AdvisorContext
from sattui.ledger import bins as ledger
from sattui.ledger import causes
from sattui.ledger.bins import BIN_S, PHASES, Dip, JobLedger
from sattui.ledger.causes import PERIODIC_STALL, STRAGGLER, UNKNOWN, WORKER_BUSY
from sattui.ledger.window import SPAN_LOOKBACK_S, StackBinner, Window, bisect_t
from sattui.model import CardSample
from sattui.states import State

if TYPE_CHECKING:
    from sattui.view.data import ViewData

DIP_UTIL = 50.0
DIP_MIN_S = 0.5
DIP_SPAN_S = 300.0   # the list covers the five minutes up to the view's end, whatever the zoom
MAX_DIPS = 40
PAD_S = 2.0          # the ledger's Window reaches this far around a dip (process ticks land late)
SETTLE_S = StackBinner.LAG_S  # py-spy chunks arrive this late: a newer dip has no cause yet
PENDING = "pending"

PENDING_WORDS = "… (stacks not in yet)"


def low_stretches(samples: Sequence[CardSample], threshold: float = DIP_UTIL, min_s: float = DIP_MIN_S,
                  hold: float | None = None) -> list[tuple[float, float, float]]:
    """``(t0, t1, util_min)`` for each run of samples under ``threshold`` lasting ``min_s``
    or more, oldest first. A sample covers the time since the previous one, at most
    ``hold`` seconds (default 2.5 × the median interval): a longer gap ends the run, and
    the sample after it stands for one typical interval."""
    times = [s.t for s in samples]
    if hold is None:
        dts = sorted(b - a for a, b in zip(times, times[1:]) if b > a)
        hold = 2.5 * dts[len(dts) // 2] if dts else 2.5
    first_span = hold / 2.5
    out: list[tuple[float, float, float]] = []
    start: float | None = None
    end = low = 0.0
    prev_t: float | None = None
    for s in samples:
        broken = prev_t is not None and s.t - prev_t > hold
        # After a gap (or at the start) a sample stands for one typical interval.
        a = s.t - first_span if prev_t is None or broken else prev_t
        prev_t = s.t
        if start is not None and (broken or s.util is None or s.util >= threshold):
            if end - start >= min_s - 1e-9:
                out.append((start, end, low))
            start = None
        if s.util is None or s.util >= threshold:
            continue
        if start is None:
            start, low = a, s.util
        end = s.t
        low = min(low, s.util)
    if start is not None and end - start >= min_s - 1e-9:
        out.append((start, end, low))
    return out


def _lost_share(r: ledger.RankLedger) -> float:
    return r.lost_s / r.wall_s if r.wall_s > 0 else 0.0


def _workers_cpu(w: Window, pid: int | None, t0: float, t1: float) -> tuple[int, float | None]:
    """How many workers the rank had over ``[t0, t1)`` and their mean CPU there (cores),
    from the process ticks that describe that stretch (a tick's CPU is since the last)."""
    if pid is None:
        return 0, None
    workers = w.workers_for(pid)
    cpus: list[float] = []
    for p in workers:
        samples = p.samples
        i = bisect_t(samples, t0)
        per = [s.cpu for s in samples[i:] if s.t <= t1 + 1.0 and s.cpu is not None]
        if per:
            cpus.append(sum(per) / len(per))
    return len(workers), (sum(cpus) / len(cpus) if cpus else None)


def _starting(w: Window, pid: int, t0: float, t1: float) -> bool:
    """The main thread spent most of ``[t0, t1)`` starting up."""
    secs = 0.0
    for sp in w.timeline.window("stack", pid, t0 - SPAN_LOOKBACK_S, t1):
        if sp.state == State.STARTUP:
            secs += max(0.0, min(sp.t + sp.dur, t1) - max(sp.t, t0))
    return secs >= 0.5 * (t1 - t0)


def _workers_phrase(n: int, cpu: float | None) -> str:
    who = "the worker" if n == 1 else "both workers" if n == 2 else f"{n} workers"
    if cpu is None:
        return f"data wait, {who} busy computing"
    return f"data wait, {who} at {cpu * 100:.0f}% CPU"


def cause_of(job: JobLedger, card: int, w: Window, t0: float, t1: float) -> tuple[str, str | None, str]:
    """``(cause, state, words)`` of a card's not-busy time over ``[t0, t1)`` from the ledger
    of that stretch: the largest ``by_cause`` piece, the rank's largest state there."""
    cl = job.cards.get(card)
    if cl is None or not cl.by_cause_s:
        why = causes.words(UNKNOWN) if not job.ranks else "unknown (not the trainer's card)"
        return UNKNOWN, None, why
    cause = max(cl.by_cause_s.items(), key=lambda kv: kv[1])[0]
    state = max(cl.by_state_s.items(), key=lambda kv: kv[1])[0] if cl.by_state_s else None
    if cause == UNKNOWN and cl.pid is not None and _starting(w, cl.pid, t0, t1):
        # The ledger leaves start-up out (imports, before the first step): say so.
        return cause, State.STARTUP.value, "start-up (imports, before the first step)"
    if cause == WORKER_BUSY:
        n, cpu = _workers_cpu(w, cl.pid, t0, t1)
        return cause, state, _workers_phrase(n, cpu)
    if cause == PERIODIC_STALL:
        # the phase the ledger kept for it, else the table's words
        phases = {k: v for k, v in cl.by_state_s.items() if k in PHASES}
        phase = max(phases.items(), key=lambda kv: kv[1])[0] if phases else causes.words(cause)
        return cause, state, str(phase)
    if cause == STRAGGLER:
        mine = job.ranks.get(cl.pid) if cl.pid is not None else None
        others = [r for p, r in job.ranks.items() if p != cl.pid and r.wall_s > 0]
        if others:
            slow = min(others, key=_lost_share)
            if mine is None or _lost_share(slow) < _lost_share(mine):
                who = f"rank {slow.rank}" if slow.rank is not None else f"pid {slow.pid}"
                return cause, state, f"waiting for {who}"
    return cause, state, causes.words(cause)


def bin_span(t0: float, t1: float) -> range:
    """The ledger's bins a stretch ``[t0, t1)`` touches."""
    return range(math.floor(t0 / BIN_S), math.ceil(t1 / BIN_S))


def compute_bins(w: Window, bins: range) -> dict[int, JobLedger]:
    """The ledger's bins ``bins`` from the Timeline, for a stretch no advisor computed
    (``w`` reaches :data:`PAD_S` around them: process ticks land late)."""
    return ledger.build_bins(w, bins.start * BIN_S, bins.stop * BIN_S)


def explain(w: Window, card: int, t0: float, t1: float, util_min: float,
            bins: Mapping[int, JobLedger] | None = None) -> Dip:
    """A dip with its cause: the ledger's bins over ``[t0, t1)`` (``bins``, else computed
    from ``w``), summed; ``w`` gives the evidence the words name."""
    span = bin_span(t0, t1)
    got = bins if bins is not None else compute_bins(w, span)
    job = ledger.total((got[b] for b in span if b in got), gpu_job=w.gpu_job, steps=False)
    cause, state, words = cause_of(job, card, w, t0, t1)
    return Dip(card, t0, t1, util_min, cause, state, words)


def advisor_context(data: ViewData) -> AdvisorContext:
    """The advisor's view of the session (its header, the events so far), kept per redraw."""
    events = data.events
    return data.cache.get(("dips-ctx", id(data.session)), len(events),
                          lambda: AdvisorContext.from_header(data.header, events))


def ledger_bins(data: ViewData, span: range, ctx: AdvisorContext) -> dict[int, JobLedger]:
    """The ledger's bins ``span`` (settled ones only): the session's advisor's where it
    has them, the others computed here, each run of missing bins in one pass, and kept
    for the next redraws (only those still in ``span``: the view moves on)."""
    kept: dict[int, JobLedger] = data.cache.get(("ledger-bins", id(data.session)), None, dict)
    for b in [b for b in kept if b not in span]:
        del kept[b]
    kept.update(data.ledger_bins(span.start, span.stop))
    b = span.start
    while b < span.stop:
        if b in kept:
            b += 1
            continue
        z = b
        while z < span.stop and z not in kept:
            z += 1
        run = range(b, z)
        w = Window(data.timeline, ctx, run.start * BIN_S - PAD_S, run.stop * BIN_S + PAD_S)
        kept.update(compute_bins(w, run))
        for k in run:  # a bin with nothing in it is computed too: not asked for again
            kept.setdefault(k, _EMPTY)
        b = z
    return kept


def recent_dips(data: ViewData, card: int, span_s: float = DIP_SPAN_S, limit: int = MAX_DIPS) -> list[Dip]:
    """The card's dips in the ``span_s`` seconds up to the view's end, newest first. A dip
    whose last bin ends within :data:`SETTLE_S` of now (live) has cause :data:`PENDING`."""
    t_end = data.t_end
    t0 = t_end - span_s

    def stretches() -> list[tuple[float, float, float]]:
        samples = data.window("card", card, t0)
        return low_stretches(samples)
    # Refound whenever the view moves: one pass over a few hundred samples.
    found = data.cache.get(("dips", card, id(data.session), span_s), t_end, stretches)
    settled = t_end - SETTLE_S if data.live else math.inf
    shown = list(reversed(found[-limit:]))
    ready = [(a, b, low) for a, b, low in shown if bin_span(a, b).stop * BIN_S <= settled]
    out: list[Dip] = []
    # Every settled dip's bins, read (or computed) once for the whole list, when a dip
    # not seen before needs them.
    span = range(min((bin_span(a, b).start for a, b, _ in ready), default=0),
                 max((bin_span(a, b).stop for a, b, _ in ready), default=0))
    bins: dict[int, JobLedger] | None = None
    for a, b, low in shown:
        if bin_span(a, b).stop * BIN_S > settled:
            out.append(Dip(card, a, b, low, PENDING, None, PENDING_WORDS))
            continue

        def compute(a: float = a, b: float = b, low: float = low) -> Dip:
            nonlocal bins
            ctx = advisor_context(data)
            if bins is None:
                bins = ledger_bins(data, span, ctx)
            return explain(Window(data.timeline, ctx, a - PAD_S, b + PAD_S), card, a, b, low, bins)
        # A settled dip's cause never changes: kept under its own key.
        out.append(data.cache.get(("dip", id(data.session), card, a, b), None, compute))
    return out


_EMPTY = JobLedger()
