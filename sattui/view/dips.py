"""A card's recent utilization dips, each with its cause from the time ledger (no Textual here).

A **dip** is a run of a card's utilization samples under :data:`DIP_UTIL` (50 %: the
advisor's "poor" anchor, and where the charts' bands turn red) lasting at least
:data:`DIP_MIN_S` (0.5 s: Nsight Systems' ``gpu_gaps`` default). Each sample stands for
the time since the previous one (as the ledger and the charts read it), so a dip runs
from the sample before its first low one to its last low one; a gap in the samples
ends a dip (no data is not low).

Its **cause** is the largest piece of the time ledger's ``by_cause`` for that card over
exactly that stretch (``ledger.build`` over a small Window around it,
sattui/advisor/ledger.py), told in words with the evidence of the same moments: the
workers' CPU for a data wait, the phase of a periodic stall, the rank the others wait
for. A dip whose stacks may not all have arrived yet (live, the last
:data:`SETTLE_S` seconds) is listed without a cause until they have.

Cost: finding dips is one pass over the card's samples; a dip's cause is a ledger over a
few seconds (≈ 0.5 ms) computed once and kept (bench: ``ledger.build`` over a whole
5-minute window costs ≈ 0.2 s of CPU, too much to redo at every redraw).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sattui.advisor import causes, ledger
from sattui.advisor.causes import UNKNOWN, WORKER_BUSY
from sattui.advisor.context import AdvisorContext
from sattui.advisor.ledger import PHASES, Dip, JobLedger
from sattui.advisor.window import SPAN_LOOKBACK_S, StackBinner, Window, bisect_t
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
    if cause == "periodic_stall":
        phases = {k: v for k, v in cl.by_state_s.items() if k in PHASES}
        phase = max(phases.items(), key=lambda kv: kv[1])[0] if phases else "periodic stall"
        return cause, state, str(phase)
    if cause == "straggler":
        mine = job.ranks.get(cl.pid) if cl.pid is not None else None
        others = [r for p, r in job.ranks.items() if p != cl.pid and r.wall_s > 0]
        if others:
            slow = min(others, key=_lost_share)
            if mine is None or _lost_share(slow) < _lost_share(mine):
                who = f"rank {slow.rank}" if slow.rank is not None else f"pid {slow.pid}"
                return cause, state, f"waiting for {who}"
        return cause, state, "waiting for another rank"
    return cause, state, causes.words(cause)


def explain(w: Window, card: int, t0: float, t1: float, util_min: float) -> Dip:
    """A dip with its cause: the ledger over exactly ``[t0, t1)``."""
    job = ledger.build(w, t0, t1)
    cause, state, words = cause_of(job, card, w, t0, t1)
    return Dip(card, t0, t1, util_min, cause, state, words)


def advisor_context(data: ViewData) -> AdvisorContext:
    """The advisor's view of the session (its header, the events so far), kept per redraw."""
    events = data.events
    return data.cache.get(("dips-ctx", id(data.session)), len(events),
                          lambda: AdvisorContext.from_header(data.header, events))


def recent_dips(data: ViewData, card: int, span_s: float = DIP_SPAN_S, limit: int = MAX_DIPS) -> list[Dip]:
    """The card's dips in the ``span_s`` seconds up to the view's end, newest first. A dip
    still within :data:`SETTLE_S` of now (live) has cause :data:`PENDING`."""
    t_end = data.t_end
    t0 = t_end - span_s

    def stretches() -> list[tuple[float, float, float]]:
        samples = data.window("card", card, t0)
        return low_stretches(samples)
    # Refound whenever the view moves: one pass over a few hundred samples.
    found = data.cache.get(("dips", card, id(data.session), span_s), t_end, stretches)
    settled = t_end - SETTLE_S if data.live else math.inf
    ctx = advisor_context(data)
    out: list[Dip] = []
    for a, b, low in reversed(found[-limit:]):
        if b > settled:
            out.append(Dip(card, a, b, low, PENDING, None, PENDING_WORDS))
            continue

        def compute(a: float = a, b: float = b, low: float = low) -> Dip:
            return explain(Window(data.timeline, ctx, a - PAD_S, b + PAD_S), card, a, b, low)
        # A settled dip's cause never changes: kept under its own key.
        out.append(data.cache.get(("dip", id(data.session), card, a, b), None, compute))
    return out
