"""Where the time went: a ledger per rank and per card, from evidence at the same moments.

Every second of each rank's main thread is in exactly one state (the classifier says
which, sattui/trainer/classifier.py); every second of each card is busy or not. The
ledger accounts for each of those seconds, one-second bin by bin:

* a rank's seconds in a state that is not its own training work are **lost**, and each
  lost second is given a **cause** from what the rest of the tree did in that same bin:

  - ``data_wait``: the rank's DataLoader workers in that bin decide. A worker running
    on a CPU is CPU-bound (``too_few_workers`` when cores are free, else
    ``worker_cpu_bound``); one in ``D`` or reading is I/O-bound (``worker_io_bound``); one
    runnable but waiting for a CPU (run delay from ``/proc/PID/schedstat``, or the
    cgroup throttled) is ``cpu_contention``. A new worker generation (every epoch without
    ``persistent_workers``) is starting from its birth until the first batch is seen to
    reach the main thread (its stacks leaving the wait) or one of its workers is seen in
    its fetch loop; the rank's wait in that stretch, less what a batch usually takes to
    show up, is ``worker_respawn`` (by timing, whatever the workers do meanwhile: imports,
    a ``worker_init_fn``, a sleep), and so is a wait with no live worker at all where the
    rank had some (see :class:`~sattui.ledger.restarts.Start`). Workers asleep while the main
    thread waits for a batch are waiting on their data source (``worker_io_bound``,
    latency) — unless their own stacks say they sit idle, waiting for their next index:
    the batch was ready, and the loop's wait is its own (receiving the batch:
    ``input_bound``; or, with the main thread runnable but off the CPU,
    ``cpu_contention``). Without any worker figures the wait stays ``input_bound`` (cause
    not narrowed down) — never a guess from a missing signal;
  - ``data_inline`` is ``main_process_loading``; ``checkpoint``, ``eval``, ``logging``
    are a ``periodic_stall`` (the phase is kept); ``collective`` in a multi-rank job, and
    ``backward`` with the main thread's own CPU low in a CPU job (DDP's gradient
    all-reduce waits inside ``backward()``), are waiting for another rank
    (``straggler``); ``sync``/``h2d_copy`` are ``host_sync_stall``; ``idle`` is
    ``idle`` (no rule names it: the rank sleeps or waits on something unknown);
  - the main thread's own run delay turns that share of its compute seconds into
    ``cpu_contention`` (the step was slowed by other processes on its cores).

* a card's not-busy seconds (``1 − util/100`` of each bin) are split by the state of the
  rank using that card in that bin (``by_state``), and by the same causes: states that
  give the card no work (data waits, checkpoint, logging, idle) take them first, the rest
  in proportion; idle while the rank computes is ``host_overhead_bound`` (launch or host
  overhead); no stacks is ``unknown``.

A job's figure for a cause is the share of the job's wall time it took: over the job's
cards in a GPU job (a cause on one card of eight counts an eighth), over its ranks in a
CPU job. Those shares compare across causes, and the verdict is the largest.
"""

from __future__ import annotations

import bisect
import math
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sattui.ledger import steps as step_seen
from sattui.ledger.causes import (
    COMM_BOUND,
    CPU_CONTENTION,
    HOST_OVERHEAD,
    HOST_SYNC_STALL,
    IDLE,
    INPUT_BOUND,
    MAIN_PROCESS_LOADING,
    PERIODIC_STALL,
    STRAGGLER,
    UNKNOWN,
    WORKER_BUSY,
    WORKER_IO,
    WORKER_RESPAWN,
)
from sattui.ledger.restarts import MAX_START_S, RHYTHM_LOOKBACK_S, Start, find_starts, generations
from sattui.ledger.window import SPAN_LOOKBACK_S, Window, bisect_t
from sattui.model import ProcSample
from sattui.states import State

BIN_S = 1.0
LOOP_STATES = ("idle", "fetch_wait", "fetch_compute")  # a worker's stack in its fetch loop
# The main thread waiting this share of a bin for a CPU is contended.
CONTENDED_RUN_DELAY = 0.25
WORKER_READING_BPS = 1e6
# Workers using less than this much of their time (CPU, run queue, I/O) are asleep.
MOSTLY_ASLEEP = 0.15
# The main thread's own CPU below this in a bin of ``backward`` means it waits (CPU job).
WAITING_MAIN_CORES = 0.3
# A worker's stack (a py-spy dump every ~5 s) says what it did this close to a bin.
WORKER_LOOK_S = 6.0
# A run's ledger keeps at most this many per-bin waits per rank (an hour's bins, two by
# two: 2048 of 2 s); a window's (≤ 300 s) never reaches it.
WAIT_BINS_MAX = 2048

# A ledger built afresh (not by the LedgerBook, whose StepTracker carries each rank's
# chain from one stretch to the next) finds steps in the spans from this long before a
# stretch of bins, so the step that ends in its first bin has its start
# (sattui/ledger/steps.py): first the short look, and the long one only when a step seen
# in the stretch began before the short one reaches.
STEP_LOOKBACK_S = 15.0
STEP_LOOKBACK_SHORT_S = 3.0

COMPUTE = (State.FORWARD, State.BACKWARD, State.OPTIMIZER, State.COMPILE, State.OTHER)
PHASES = (State.CHECKPOINT, State.EVAL, State.LOGGING)
# States in which the rank gives its card no work: a card idle beside them is idle for
# them. Not sync, h2d_copy or collective (the rank waits for the card or the link, which
# are busy), nor eval (it runs the model on the card).
STARVING = (State.DATA_WAIT, State.DATA_INLINE, State.CHECKPOINT, State.LOGGING, State.IDLE)
# The states as module names: an Enum member read as ``State.X`` is a class-attribute
# look-up through the Enum's metaclass, ~15x a global's (the per-bin loops below make
# ~100,000 of them an hour); the same members, so every comparison is unchanged.
_DATA_WAIT, _DATA_INLINE, _STARTUP, _OTHER = State.DATA_WAIT, State.DATA_INLINE, State.STARTUP, State.OTHER
_BACKWARD, _COLLECTIVE, _IDLE = State.BACKWARD, State.COLLECTIVE, State.IDLE
_SYNC_STATES = frozenset((State.SYNC, State.H2D_COPY))
_PHASES = frozenset(PHASES)
_COMPUTE = frozenset(COMPUTE)

# Causes of lost time: one table, sattui/ledger/causes.py.
NOT_LOST = "compute"


def _add(d: dict[str, float], k: str, v: float) -> None:
    if v > 0:
        d[k] = d.get(k, 0.0) + v


def _merge_counts(into: dict[int, int], other: dict[int, int], sign: int = 1) -> None:
    """Add the counts of ``other`` into ``into`` (``sign=-1``: take them out; zeros go)."""
    for k, n in other.items():
        left = into.get(k, 0) + sign * n
        if left > 0:
            into[k] = left
        else:
            into.pop(k, None)


def _merge(into: dict[str, float], other: dict[str, float], sign: float = 1.0) -> None:
    """Add ``other`` into ``into`` (``sign=-1``: take it out again; what is left at ~0 goes)."""
    if sign > 0:
        for k, v in other.items():
            if v > 0:
                into[k] = into.get(k, 0.0) + v
        return
    for k, v in other.items():
        left = into.get(k, 0.0) - v
        if left > 1e-9:
            into[k] = left
        else:
            into.pop(k, None)


@dataclass
class RankLedger:
    """One rank's main thread: its seconds by state, and the lost ones by cause."""

    pid: int
    rank: int | None
    wall_s: float = 0.0                      # sampled seconds, startup left out
    states_s: dict[str, float] = field(default_factory=dict)
    causes_s: dict[str, float] = field(default_factory=dict)
    # cause -> what it was made of: the phases of a periodic stall, worker classes …
    detail: dict[str, dict[str, float]] = field(default_factory=dict)
    # Steps seen from outside (sattui/ledger/steps.py): how many began, and a histogram
    # of their lengths (bucket -> count).
    steps: int = 0
    step_hist: dict[int, int] = field(default_factory=dict)
    # each phase's sightings (the data wait, the step's compute, …): histograms of lengths
    phases_seen: dict[str, dict[int, int]] = field(default_factory=dict)
    # Per bin of a multi-rank job, in time order by key: (seconds, seconds waiting for
    # another rank), keyed by the bin's index — or, once a whole run's ledger holds more
    # than WAIT_BINS_MAX of them, by the first bin of ``wait_bin_width`` merged ones. The
    # straggler rule's interval (sattui/advisor/intervals/batch_means.py) is built from them.
    wait_bins: dict[int, tuple[float, float]] = field(default_factory=dict)
    wait_bin_width: int = 1

    @property
    def lost_s(self) -> float:
        return sum(self.causes_s.values())

    @property
    def starving_s(self) -> float:
        """Seconds in states that give the rank's card no work (STARVING)."""
        # (the additions of sum() written out, in the same order: every bin's card reads it)
        got = self.states_s.get
        total: float = 0
        for st in STARVING:
            total += got(st, 0.0)
        return total

    def share(self, cause: str) -> float:
        return self.causes_s.get(cause, 0.0) / self.wall_s if self.wall_s > 0 else 0.0

    def state_shares(self) -> dict[str, float]:
        return {k: v / self.wall_s for k, v in self.states_s.items()} if self.wall_s > 0 else {}

    def merge(self, o: RankLedger, sign: float = 1.0, steps: bool = True) -> None:
        """Add ``o``'s seconds (``sign=-1``: take them out); ``steps=False`` leaves the
        steps and their histograms out (a window's running sum: no rule reads them there,
        and they are half of what a bin holds)."""
        self.wall_s += sign * o.wall_s
        if steps and o.steps:
            self.steps += int(sign) * o.steps
        if o.wait_bins:
            self._merge_wait_bins(o, sign)
        if sign > 0:
            # Adding (the common case: each bin into the run's total and into the window's
            # running sum) with the loops written out.
            hist = self.step_hist
            seen = self.phases_seen
            for bucket, n in (o.step_hist if steps else _NO_COUNTS).items():
                hist[bucket] = hist.get(bucket, 0) + n
            for ph, h in (o.phases_seen if steps else _NO_PHASES).items():
                if not h:
                    continue  # (an empty histogram is no phase: the subtracting path drops those)
                counts = seen.get(ph)
                if counts is None:
                    counts = seen[ph] = {}
                for bucket, n in h.items():
                    counts[bucket] = counts.get(bucket, 0) + n
            for into, other in ((self.states_s, o.states_s), (self.causes_s, o.causes_s)):
                for k, v in other.items():
                    if v > 0:
                        into[k] = into.get(k, 0.0) + v
            detail = self.detail
            for c, d in o.detail.items():
                sums = detail.get(c)
                if sums is None:
                    sums = detail[c] = {}
                for k, v in d.items():
                    if v > 0:
                        sums[k] = sums.get(k, 0.0) + v
            return
        if steps and o.step_hist:
            _merge_counts(self.step_hist, o.step_hist, int(sign))
        for ph, h in (o.phases_seen if steps else _NO_PHASES).items():
            mine = self.phases_seen.setdefault(ph, {})
            _merge_counts(mine, h, int(sign))
            if not mine:
                del self.phases_seen[ph]
        if o.states_s:
            _merge(self.states_s, o.states_s, sign)
        if o.causes_s:
            _merge(self.causes_s, o.causes_s, sign)
        for c, d in o.detail.items():
            _merge(self.detail.setdefault(c, {}), d, sign)

    def _merge_wait_bins(self, o: RankLedger, sign: float) -> None:
        """Add ``o``'s per-bin waits (``sign=-1``: take them out: a window's running sum,
        whose bins are never coarsened); a run's ledger coarsens them (two neighbours into
        one) whenever it holds more than :data:`WAIT_BINS_MAX`, so memory stays bounded."""
        if o.wait_bin_width > self.wait_bin_width:
            self._coarsen(o.wait_bin_width)
        width = self.wait_bin_width
        into = self.wait_bins
        for b, (wall, wait) in o.wait_bins.items():
            k = b - b % width
            w0, x0 = into.get(k, (0.0, 0.0))
            w1, x1 = w0 + sign * wall, x0 + sign * wait
            if w1 > 1e-9:
                into[k] = (w1, x1 if x1 > 0.0 else 0.0)
            else:
                into.pop(k, None)
        if sign > 0 and len(into) > WAIT_BINS_MAX:
            self._coarsen(width * 2)

    def _coarsen(self, width: int) -> None:
        merged: dict[int, tuple[float, float]] = {}
        for b, (wall, wait) in self.wait_bins.items():
            k = b - b % width
            w0, x0 = merged.get(k, (0.0, 0.0))
            merged[k] = (w0 + wall, x0 + wait)
        self.wait_bins = merged
        self.wait_bin_width = width

    def wait_series(self) -> list[tuple[int, tuple[float, float]]]:
        """The per-bin waits in time order: ``(key, (seconds, waiting seconds))``."""
        return sorted(self.wait_bins.items())


@dataclass
class Dip:
    """A stretch of a card's not-busy time, with the cause the ledger gives it."""

    card: int
    t0: float
    t1: float
    util_min: float
    cause: str
    state: str | None
    detail: str = ""

    @property
    def length_s(self) -> float:
        return self.t1 - self.t0


@dataclass
class CardLedger:
    card: int
    pid: int | None = None                   # the trainer process using it
    rank: int | None = None
    wall_s: float = 0.0                      # seconds covered by utilization samples
    idle_s: float = 0.0
    by_state_s: dict[str, float] = field(default_factory=dict)
    by_cause_s: dict[str, float] = field(default_factory=dict)
    # Per second: the card's idle share (its rank's state known) beyond the rank's share
    # of time in STARVING states, as sums weighted by the card's seconds (Σw, Σw·x,
    # Σw·x²): how much that gap swings from second to second (rules_ledger's
    # ``_gap_error``), which a sampler starved of CPU makes far wider than its rate says.
    gap_w: float = 0.0
    gap_wx: float = 0.0
    gap_wxx: float = 0.0

    def merge(self, o: CardLedger, sign: float = 1.0) -> None:
        self.wall_s += sign * o.wall_s
        self.idle_s += sign * o.idle_s
        self.gap_w += sign * o.gap_w
        self.gap_wx += sign * o.gap_wx
        self.gap_wxx += sign * o.gap_wxx
        self.pid = o.pid if o.pid is not None else self.pid
        self.rank = o.rank if o.rank is not None else self.rank
        if sign > 0:
            # Adding (each bin into the run's total and the window's running sum: 7,200 an
            # hour): _merge's adding loop written out, as RankLedger.merge does.
            for into, other in ((self.by_state_s, o.by_state_s), (self.by_cause_s, o.by_cause_s)):
                for k, v in other.items():
                    if v > 0:
                        into[k] = into.get(k, 0.0) + v
            return
        _merge(self.by_state_s, o.by_state_s, sign)
        _merge(self.by_cause_s, o.by_cause_s, sign)

    @property
    def known_idle_s(self) -> float:
        """Not-busy seconds with the rank's state known (no-stacks time left out)."""
        return self.idle_s - self.by_cause_s.get(UNKNOWN, 0.0)

    @property
    def idle_share(self) -> float | None:
        return self.idle_s / self.wall_s if self.wall_s > 0 else None


@dataclass
class JobLedger:
    ranks: dict[int, RankLedger] = field(default_factory=dict)
    cards: dict[int, CardLedger] = field(default_factory=dict)
    gpu_job: bool = False
    # A settled bin's bin_weight_shares, once read (settled_weight_shares)
    _settled_shares: tuple[float, dict[str, float]] | None = field(default=None, init=False, repr=False,
                                                                    compare=False)

    def merge(self, o: JobLedger, sign: float = 1.0, steps: bool = True) -> None:
        """Add another ledger's seconds (``sign=-1``: take them out: a window moving on;
        ``steps=False``: the ranks' steps left out, RankLedger.merge)."""
        self.gpu_job = self.gpu_job or o.gpu_job
        for pid, r in o.ranks.items():
            mine = self.ranks.get(pid)
            if mine is None:
                mine = self.ranks[pid] = RankLedger(r.pid, r.rank)
            mine.merge(r, sign, steps)
        for c, cl in o.cards.items():
            card = self.cards.get(c)
            if card is None:
                card = self.cards[c] = CardLedger(c)
            card.merge(cl, sign)

    def cause_shares(self) -> dict[str, float]:
        """Each cause's share of the job's wall time: over the job's cards when the job
        runs on cards (their not-busy time), else over its ranks (their lost time)."""
        out: dict[str, float] = {}
        if self.gpu_job and any(c.wall_s > 0 for c in self.cards.values()):
            wall = sum(c.wall_s for c in self.cards.values())
            for c in self.cards.values():
                for k, v in c.by_cause_s.items():
                    out[k] = out.get(k, 0.0) + v / wall
            return out
        ranks = [r for r in self.ranks.values() if r.wall_s > 0]
        for r in ranks:
            for k, v in r.causes_s.items():
                out[k] = out.get(k, 0.0) + v / r.wall_s / len(ranks)
        return out

    def bin_weight_shares(self) -> tuple[float, dict[str, float]]:
        """For a one-second bin: the seconds it covers (the mean over the cards, or the
        ranks, that :meth:`cause_shares` reads) and each cause's share of them, on
        :meth:`cause_shares`'s scale (the observations of sattui/advisor/intervals/sequential.py)."""
        if self.gpu_job and any(c.wall_s > 0 for c in self.cards.values()):
            walls = [c.wall_s for c in self.cards.values() if c.wall_s > 0]
        else:
            walls = [r.wall_s for r in self.ranks.values() if r.wall_s > 0]
        if not walls:
            return 0.0, {}
        return sum(walls) / len(walls), self.cause_shares()

    def settled_weight_shares(self) -> tuple[float, dict[str, float]]:
        """:meth:`bin_weight_shares` of a settled bin (the LedgerBook's, which never changes
        once computed), worked out once: the ledger window's intervals read each bin as it
        settles and the run's total as it closes (7,200 reads an hour, half of them
        again). Not for a ledger still being added to (a window's running sum, a run's
        total). The dict is shared: read it, do not change it."""
        got = self._settled_shares
        if got is None:
            got = self._settled_shares = self.bin_weight_shares()
        return got

    def lost_share(self) -> float:
        return sum(v for k, v in self.cause_shares().items())


# -- one window ------------------------------------------------------------------------


def _sample_for_bin(samples: Sequence[ProcSample], b: int, interval: float) -> ProcSample | None:
    """The process sample that describes bin ``[b, b+1)``: its figures are deltas over
    the interval before its ``t``, so the first one at or after the bin's middle."""
    i = bisect_t(samples, b + 0.5 * BIN_S)
    if i < len(samples) and samples[i].t <= b + BIN_S + interval:
        return samples[i]
    return None


def _last_alive(samples: Sequence[ProcSample], b: int, interval: float) -> ProcSample | None:
    """A worker's last sample, when the tick after it (which would describe bin ``b``) no
    longer saw the worker: it exited somewhere in between, so for the bin it is the best
    word there is. Without it, the bin before each epoch's restart read as "no live
    worker" (a restart) while the old workers still served the epoch's last batches."""
    if not samples:
        return None
    last = samples[-1]
    mid = b + 0.5 * BIN_S
    return last if mid - interval <= last.t < mid else None


@dataclass
class _WorkerView:
    """One worker in one bin: how its second went (shares summing to 1)."""

    pid: int
    parts: dict[str, float]   # cpu, contended, io, waiting
    cpu: float | None


def classify_worker(s: ProcSample) -> dict[str, float]:
    """How one worker's bin went, from its own figures only: on a CPU (its CPU share),
    runnable but waiting for one (its run delay), and the rest blocked on I/O (state D, or
    reading ≥ 1 MB/s) or asleep. Whether it was still starting is not its figures' to say
    (a sleeping ``worker_init_fn`` looks like a worker waiting on its data): the timing of
    its generation says that (:class:`~sattui.ledger.restarts.Start`)."""
    # (min/max written out as comparisons, with their results, NaN included: 20,000
    # workers' bins an hour)
    cpu = s.cpu or 0.0
    cpu = cpu if cpu > 0.0 else 0.0
    cpu = cpu if cpu < 1.0 else 1.0
    rd = s.run_delay or 0.0
    rd = rd if rd > 0.0 else 0.0
    room = 1.0 - cpu
    rd = rd if rd < room else room
    rest = 1.0 - cpu - rd
    reading = s.state == "D" or (s.read_Bps is not None and s.read_Bps >= WORKER_READING_BPS)
    return {"cpu": cpu, "contended": rd, "io" if reading else "waiting": rest}


class _RankInputs:
    """What the ledger reads about one rank over a window (computed once)."""

    def __init__(self, w: Window, pid: int, interval: float, bins: dict[int, dict[str, float]],
                 t0: float, t1: float) -> None:
        self.pid = pid
        self.rank = w.rank_of(pid)
        self.bins = bins
        self.interval = interval
        # The bins of [t0, t1) only; their figures come from the tick after each: read a
        # little past.
        lo, hi = t0 - 2 * interval, t1 + 2 * interval
        self.main_samples: list[ProcSample] = w.timeline.window("proc", pid, lo, hi)
        self.workers: dict[int, list[ProcSample]] = {
            p.pid: w.timeline.window("proc", p.pid, lo, hi) for p in w.workers_for(pid)}
        # The workers' own stacks (worker_stack records), for what /proc cannot tell.
        self.looks: list[Any] = sorted(
            (ws for wpid in self.workers
             for ws in w.timeline.window("worker_stack", wpid, lo - WORKER_LOOK_S, hi + WORKER_LOOK_S)),
            key=lambda ws: ws.t)
        # each worker's first stack in its fetch loop: from then on it has started
        in_loop_from: dict[int, float] = {}
        for ws in self.looks:
            if ws.state in LOOP_STATES and ws.pid not in in_loop_from:
                in_loop_from[ws.pid] = ws.t
        self.first_seen: dict[int, float] = {}
        for wpid, samples in self.workers.items():
            self.first_seen[wpid] = _born(w, wpid, samples)
        # Every worker generation the Timeline still holds (not only this window's), so a
        # restart is told from the first start however long the epochs are.
        single = len(w.trainer_pids) <= 1
        births = dict(self.first_seen)
        for key in w.timeline.keys("proc"):
            ring = w.timeline.series("proc", key)
            if ring is None or not len(ring) or key in births:
                continue
            last = ring[-1]
            mine = single or last.ppid == pid or (self.rank is not None and last.rank == self.rank)
            if last.role == "worker" and mine:
                births[last.pid] = _born(w, last.pid, ())
        self.starts = sorted(births.values())
        # The generations' starts that reach this stretch (born before its end, after the
        # longest start before it), by timing against the main thread's own spans.
        self.restarts: list[Start] = []
        if any(t0 - MAX_START_S <= born < t1 for born, _pids in generations(births)[1:]):
            spans = w.timeline.window("stack", pid, t0 - MAX_START_S - RHYTHM_LOOKBACK_S, t1 + MAX_START_S)
            known_to = spans[-1].t + spans[-1].dur if spans else t1
            self.restarts = [s for s in find_starts(births, spans, in_loop_from, known_to)
                             if s.counted_to > t0 or (s.ended is not None and s.ended >= t0)]

    def starting_s(self, b: int) -> float:
        """Seconds of bin ``b`` inside a generation's counted start."""
        a, z = b * BIN_S, (b + 1) * BIN_S
        return sum(max(0.0, min(z, s.counted_to) - max(a, s.born)) for s in self.restarts)

    def restarts_ending_in(self, b: int) -> list[Start]:
        """The starts seen to end in bin ``b`` (each counted once, in its last bin)."""
        a, z = b * BIN_S, (b + 1) * BIN_S
        return [s for s in self.restarts if s.ended is not None and a <= s.ended < z]

    def workers_in(self, b: int, main: ProcSample | None) -> list[_WorkerView] | None:
        """The rank's workers in bin ``b`` (``main``: the main process's sample for it), or
        None when no tick describes the bin (the figures are not known, which is not the
        same as "no worker")."""
        if main is None and self.main_samples:
            # No tick describes the bin (the recording's last second). A tick of the main
            # process after every worker's last sample, and before this bin, no longer saw
            # them: they are gone (the loader shut them down at the run's end), which the
            # caller reads as no live worker, not as figures unknown.
            last_main = self.main_samples[-1].t
            last_worker = max((ss[-1].t for ss in self.workers.values() if ss), default=None)
            if last_worker is not None and last_worker < last_main <= b * BIN_S + BIN_S and last_worker < b * BIN_S:
                return []
            return None
        out = []
        for wpid, samples in self.workers.items():
            s = _sample_for_bin(samples, b, self.interval) or _last_alive(samples, b, self.interval)
            if s is None:
                continue
            out.append(_WorkerView(wpid, classify_worker(s), s.cpu))
        return out

    def workers_to_come(self, b: int) -> bool | None:
        """For a bin with no live worker: True when workers of this rank ran before it and a
        new one starts after it (the rank waits for a new generation: a restart); False
        otherwise (the loader starting its first workers, or shutting them down at the
        end); None when the rank never had workers."""
        if not self.workers:
            return None
        before = bool(self.starts) and self.starts[0] < b * BIN_S
        return before and any(first >= (b + 1) * BIN_S for first in self.first_seen.values())

    def workers_idle(self, b: int) -> bool | None:
        """Whether the workers' stacks near bin ``b`` mostly show them idle, waiting for
        their next index (None: no stack near it)."""
        mid = (b + 0.5) * BIN_S
        i = bisect_t(self.looks, mid - WORKER_LOOK_S)
        idle = busy = 0
        while i < len(self.looks) and self.looks[i].t <= mid + WORKER_LOOK_S:
            st = self.looks[i].state
            idle += st == "idle"
            busy += st in ("fetch_wait", "fetch_compute")
            i += 1
        return None if idle + busy == 0 else idle > busy

    def main_in(self, b: int) -> ProcSample | None:
        return _sample_for_bin(self.main_samples, b, self.interval)


def _born(w: Window, pid: int, samples: Sequence[ProcSample]) -> float:
    """When a process started: its first sample's ``started_t`` (a process born while
    sattui watched), else the time of the first sample the Timeline holds (``samples``:
    the window's, where the Timeline has none)."""
    ring = w.timeline.series("proc", pid)
    first = ring[0] if ring is not None and len(ring) else samples[0] if samples else None
    if first is None:
        return math.inf  # no sample at all: never seen alive
    return first.started_t if first.started_t is not None else first.t


def _data_causes(workers: list[_WorkerView] | None, to_come: bool | None,
                 free_cores: float | None, workers_idle: bool | None = None,
                 main: ProcSample | None = None) -> dict[str, float]:
    """How a bin's data wait splits over causes (weights summing to 1; none at all for
    the loader shutting its workers down at the end of the run)."""
    if workers is None:
        return {INPUT_BOUND: 1.0}  # no figures for this bin: the cause is not narrowed
    if not workers:
        if to_come is None:
            return {INPUT_BOUND: 1.0}
        return {WORKER_RESPAWN: 1.0} if to_come else {}
    kinds: dict[str, float] = {}
    for wv in workers:
        for k, v in wv.parts.items():
            kinds[k] = kinds.get(k, 0.0) + v
    # What the workers did while the loop waited, asleep time left out: the busy part is
    # the bottleneck. Workers that are (nearly) all asleep are waiting on their source.
    active = {k: v for k, v in kinds.items() if k != "waiting" and v > 0}
    if sum(active.values()) < MOSTLY_ASLEEP * len(workers):
        if workers_idle:
            # Their stacks: waiting for the next index, the batch handed over already. The
            # wait is the loop's own: a woken main thread that waits for a CPU, or the
            # hand-over itself (receiving the batch from the worker's queue).
            delay = main.run_delay if main is not None else None
            if delay is not None and delay >= CONTENDED_RUN_DELAY:
                return {CPU_CONTENTION: 1.0}
            return {INPUT_BOUND: 1.0}
        # Every worker asleep while the main thread waits for a batch: they wait on
        # their data source (a remote read, a lock, a sleep in the Dataset).
        return {WORKER_IO: 1.0}
    n = sum(active.values())
    out: dict[str, float] = {}
    for k, v in active.items():
        cause = _WORKER_CAUSE[k]
        out[cause] = out.get(cause, 0.0) + v / n
    return out


# What a worker's part of a bin says about the data wait beside it.
_WORKER_CAUSE = {"cpu": WORKER_BUSY, "io": WORKER_IO, "contended": CPU_CONTENTION}


def _tree_cores(w: Window, lo: float, hi: float, interval: float) -> Callable[[int], float]:
    """CPU the whole trainer tree used in a bin of ``[lo, hi)`` (cores), from the tick that
    describes it (which may fall just after the stretch): each process's samples are
    looked up once per stretch, not once per bin."""
    series = [w.timeline.window("proc", p.pid, lo, hi + BIN_S + interval + 1e-6)
              for p in w.procs.values() if p.role != "pin"]  # a pin thread is counted in its process

    def at(b: int) -> float:
        total = 0.0
        for samples in series:
            s = _sample_for_bin(samples, b, interval)
            if s is not None and s.cpu is not None:
                total += s.cpu
        return total
    return at


def state_causes(state: str, main: ProcSample | None, workers: list[_WorkerView] | None, to_come: bool | None,
                 free_cores: float | None, multi_rank: bool, gpu_job: bool,
                 workers_idle: bool | None = None) -> dict[str, float]:
    """What share of a second in ``state`` is lost, to which cause (the rest is the
    rank's own work)."""
    if state == _DATA_WAIT:
        return _data_causes(workers, to_come, free_cores, workers_idle, main)
    if state == _DATA_INLINE:
        return {MAIN_PROCESS_LOADING: 1.0}
    if state in _PHASES:
        return {PERIODIC_STALL: 1.0}
    if state == _COLLECTIVE:
        return {STRAGGLER if multi_rank else COMM_BOUND: 1.0}
    if state in _SYNC_STATES:
        return {HOST_SYNC_STALL: 1.0}
    if state == _IDLE:
        return {IDLE: 1.0}
    main_cpu = main.cpu_main if main is not None else None
    run_delay = main.run_delay if main is not None else None
    if (state == _BACKWARD and multi_rank and not gpu_job and main_cpu is not None
            and main_cpu < WAITING_MAIN_CORES):
        # DDP's all-reduce waits inside backward(): the thread is there but not computing.
        return {STRAGGLER: 1.0 - main_cpu}
    if state in _COMPUTE and run_delay is not None and run_delay >= CONTENDED_RUN_DELAY:
        return {CPU_CONTENTION: min(1.0, run_delay)}
    return {}


# What each cause's detail is keyed by: the state it was lost in, or a finer word.
def rank_bin_causes(states: dict[str, float], main: ProcSample | None, workers: list[_WorkerView] | None,
                    to_come: bool | None, free_cores: float | None, multi_rank: bool, gpu_job: bool,
                    workers_idle: bool | None = None, starting_s: float = 0.0,
                    ) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Lost seconds by cause for one rank in one bin, what each was made of, and each
    state's split over causes (fractions, for the cards' idle time). ``starting_s``: the
    bin's seconds inside a worker generation's counted start: that much of its data wait
    is the restart's (``worker_respawn``), the rest split as the workers' figures say."""
    causes: dict[str, float] = {}
    detail: dict[str, dict[str, float]] = {}
    split: dict[str, dict[str, float]] = {}
    for st, secs in states.items():
        if secs <= 0 or st == _STARTUP:
            continue
        frac = state_causes(st, main, workers, to_come, free_cores, multi_rank, gpu_job, workers_idle)
        if st == _DATA_WAIT and starting_s > 0:
            restart = starting_s / secs if starting_s < secs else 1.0
            frac = {k: v * (1.0 - restart) for k, v in frac.items() if k != WORKER_RESPAWN} | {
                WORKER_RESPAWN: restart + (1.0 - restart) * frac.get(WORKER_RESPAWN, 0.0)}
        split[st] = frac
        for cause, f in frac.items():
            lost = secs * f
            _add(causes, cause, lost)
            if cause == WORKER_BUSY and free_cores is not None:
                _add(detail.setdefault(cause, {}), "free_core_s", lost * max(0.0, free_cores))
                _add(detail.setdefault(cause, {}), "known_s", lost)
            if cause == PERIODIC_STALL or st == _DATA_WAIT:
                _add(detail.setdefault(cause, {}), st, lost)
            elif cause == STRAGGLER and st == _BACKWARD:
                _add(detail.setdefault(cause, {}), "backward_waiting", lost)
            elif cause == CPU_CONTENTION:
                _add(detail.setdefault(cause, {}), "main_thread", lost)
    return causes, detail, split


def card_piece_causes(idle_s: float, states: dict[str, float],
                      split: dict[str, dict[str, float]] | None,
                      wall_s: float | None = None, by_state: dict[str, float] | None = None,
                      by_cause: dict[str, float] | None = None) -> tuple[dict[str, float], dict[str, float]]:
    """A card's not-busy seconds over one stretch (``wall_s`` long; by default as long as
    ``states`` cover), by the state of its rank over that same stretch and by cause
    (added into ``by_state`` and ``by_cause`` where given: a card's 7,200 stretches an
    hour go straight into its bins' sums).

    Inside one stretch the card's utilization is an average and the rank's states a few
    py-spy sightings, so which not-busy second fell on which state is not known. A rank in
    a state that gives its card no work (``STARVING``) accounts for an idle card, so those
    seconds take the idle time first, each by its own causes; the rest is split over the
    other states in proportion, and what falls on the rank's own work is host overhead.
    Splitting all of it in proportion would call host overhead every idle second that fell
    beside a compute sighting, though with steps shorter than the sampling period nearly
    every stretch has both (a starved loader's waits, the demo's, read as ~10 % host
    overhead where there was none)."""
    if by_state is None:
        by_state = {}
    if by_cause is None:
        by_cause = {}
    # (one pass for both sums, the adds written out: a card's 7,200 stretches an hour)
    total = starving = 0.0
    for st, secs in states.items():
        total += secs
        if st in _STARVING:
            starving += secs
    if total <= 0 or split is None:
        _add(by_state, UNKNOWN, idle_s)
        _add(by_cause, UNKNOWN, idle_s)
        return by_state, by_cause
    wall = total if wall_s is None else wall_s
    # the card seconds the starving states cover, at most the idle ones
    covered = wall * starving / total
    explained = covered if covered < idle_s else idle_s  # min(idle_s, covered)
    rest = idle_s - explained
    rest = rest if rest > 0.0 else 0.0
    others = total - starving
    for st, secs in states.items():
        if st in _STARVING:
            part = explained * secs / starving if starving > 0 else 0.0
        else:
            part = rest * secs / others if others > 0 else 0.0
        if part <= 0:
            continue  # nothing to add: every figure below is a share of it
        by_state[st] = by_state.get(st, 0.0) + part
        causes = split.get(st)
        if causes is None:
            # the rank's bin has no seconds in this state: no evidence of what they were
            by_cause[UNKNOWN] = by_cause.get(UNKNOWN, 0.0) + part
            continue
        lost = 0.0
        for cause, f in causes.items():
            v = part * f
            if v > 0:
                by_cause[cause] = by_cause.get(cause, 0.0) + v
            lost += f
        v = part * (1.0 - lost) if lost < 1.0 else 0.0
        if v > 0:
            # Not busy while the rank works is host overhead; while it waits but loses no
            # time of its own (the loader shutting its workers down at the end) the card
            # has no work either.
            own = IDLE if st in _STARVING else HOST_OVERHEAD
            by_cause[own] = by_cause.get(own, 0.0) + v
    return by_state, by_cause


_STARVING = frozenset(STARVING)
_NO_COUNTS: dict[int, int] = {}
_NO_PHASES: dict[str, dict[int, int]] = {}


class _SpanCursor:
    """Seconds per state of one thread's spans inside successive stretches ``[a, z)``
    (asked in time order, as a card's samples come): a forward-moving index, so each
    stretch costs the spans it overlaps, not a search back over the lookback."""

    def __init__(self, spans: Sequence[Any], lo: float = -math.inf) -> None:
        # Only what a stretch reads, in flat lists (a card's 7,200 stretches an hour each
        # read a few spans): start, end and state (None for startup, which is not counted).
        starts = [s.t for s in spans]
        durs = [s.dur for s in spans]
        self.longest = max(durs, default=0.0)
        # Only the spans from the first that can reach ``lo`` are kept (the look-back is for
        # the longest span there may be: most of the spans before ``lo`` end before it).
        i0 = bisect.bisect_left(starts, lo - self.longest)
        self.starts = starts[i0:]
        # (float sums by a C-level map; attributes by comprehension, which 3.11 makes faster
        # than operator.attrgetter)
        self.ends = list(map(operator.add, self.starts, durs[i0:]))
        startup, other = _STARTUP, _OTHER
        self.states_of = [None if s.state == startup else (s.state or other) for s in spans[i0:]]
        self.i = 0

    def states(self, a: float, z: float) -> dict[str, float]:
        starts, ends, states_of = self.starts, self.ends, self.states_of
        # Spans start in order; none that starts before a − longest can reach a.
        i = self.i = bisect.bisect_left(starts, a - self.longest, lo=self.i)
        n = len(starts)
        out: dict[str, float] = {}
        while i < n:
            lo = starts[i]
            if lo >= z:
                break
            hi = ends[i]
            st = states_of[i]
            i += 1
            if lo < a:
                lo = a
            if hi > z:
                hi = z
            if hi > lo and st is not None:
                out[st] = out.get(st, 0.0) + (hi - lo)
        return out


def build_bins(w: Window, lo: float, hi: float, structure: Window | None = None,
               bins_from: Window | None = None,
               steps_for: Callable[[int, float, float], dict[int, step_seen.Bin]] | None = None,
               ) -> dict[int, JobLedger]:
    """One small ledger per one-second bin of ``[lo, hi)``.

    ``structure`` says who is who (the ranks, their workers, the job's cards: the short
    window ending now, by default ``w``); ``bins_from`` gives the main threads' binned
    states (the long window's cached bins, by default ``w``'s own); ``steps_for(pid, lo,
    hi)`` the steps seen in ``[lo, hi)`` by bin (by default found afresh in the spans
    before and in it)."""
    sw = structure or w
    src = bins_from or w
    interval = _proc_interval(sw)
    gpu = sw.gpu_job
    pids = [p for p in sw.trainer_pids if p in sw.procs or sw.timeline.series("stack", p) is not None]
    inputs = {pid: _RankInputs(sw, pid, interval, src.stack_bins(pid), lo, hi) for pid in pids}
    # One rank per node of a multi-node job is still one rank of many: its wait inside
    # backward() is for the others (WORLD_SIZE of the ranks' environment says so).
    multi = len(pids) > 1 or _world_size(sw) > 1
    cpus = sw.ctx.cpu_count if sw.ctx.cpu_count_known else None
    out: dict[int, JobLedger] = {}

    def job_at(b: int) -> JobLedger:
        got = out.get(b)
        if got is None:
            got = out[b] = JobLedger(gpu_job=gpu)
        return got

    first_bin, last_bin = math.floor(lo / BIN_S), math.ceil(hi / BIN_S)
    rank_bins: dict[int, dict[int, dict[str, dict[str, float]]]] = {}
    steps = {pid: (steps_for or (lambda p, a, z: _steps_by_bin(sw, p, a, z)))(pid, lo, hi) for pid in inputs}
    hosts = w.timeline.window("host", 0, lo - 2 * interval, hi + 2 * interval)
    tree_cores = _tree_cores(sw, lo, hi, interval)
    for b in range(first_bin, last_bin):
        # the free cores and the clock only matter to a data wait (its workers computing)
        free: float | None = None
        free_known = False
        for pid, ri in inputs.items():
            counted = _clip_bin(ri.bins.get(b), b, lo, hi)
            if not counted:
                continue
            main = ri.main_in(b)
            if _DATA_WAIT in counted:
                if not free_known:
                    free, free_known = (None if cpus is None else cpus - tree_cores(b)), True
                causes, detail, split = rank_bin_causes(counted, main, ri.workers_in(b, main), ri.workers_to_come(b),
                                                        free, multi, gpu, ri.workers_idle(b), ri.starting_s(b))
            else:  # the workers' figures only split a data wait
                causes, detail, split = rank_bin_causes(counted, main, None, None, None, multi, gpu)
            for rs in ri.restarts_ending_in(b):
                # each restart once, in the bin its start is seen to end: the evidence's
                # start time per epoch
                det = detail.setdefault(WORKER_RESPAWN, {})
                det["restarts"] = det.get("restarts", 0.0) + 1.0
                det["start_s"] = det.get("start_s", 0.0) + (rs.seen_s or 0.0)
            busy = causes.get(WORKER_BUSY, 0.0)
            clock = _clock_ratio(_sample_for_bin(hosts, b, interval)) if busy > 0 else None
            if clock is not None:
                # the CPUs' clock while the workers computed (cpu_frequency_low reads it)
                _add(detail.setdefault(WORKER_BUSY, {}), "clock_known_s", busy)
                _add(detail.setdefault(WORKER_BUSY, {}), "clock_ratio_s", busy * clock)
            found = steps[pid].get(b)
            n_steps, hist, seen = (0, {}, {}) if found is None else found
            wall = sum(counted.values())
            waits = {b: (wall, causes.get(STRAGGLER, 0.0))} if multi else {}
            job_at(b).ranks[pid] = RankLedger(pid, ri.rank, wall, counted, causes, detail, n_steps, hist, seen, waits)
            rank_bins.setdefault(pid, {})[b] = split
    for c in sw.job_cards:
        cs = w.cards.get(c)
        if cs is None or not cs.in_use:
            continue  # a card nobody uses is idle, not starved
        user = _card_pid(sw, c, pids)
        rank = sw.rank_of(user) if user is not None else None
        cursor = _SpanCursor(w.timeline.window("stack", user, lo - SPAN_LOOKBACK_S, hi) if user is not None else [],
                             lo)
        # the samples of [lo, hi) and the one before (its time is where the first one starts)
        first = max(0, bisect_t(cs.samples, lo) - 1)
        last = bisect_t(cs.samples, hi + 1.0)
        user_bins = rank_bins.get(user, {}) if user is not None else {}
        for b, a, z, util in _card_pieces(cs.samples[first:last], lo, hi):
            dt = z - a
            idle = 1.0 - util / 100.0
            idle = (idle if idle > 0.0 else 0.0) * dt
            states = cursor.states(a, z)
            got = user_bins.get(b)
            cl = job_at(b).cards.get(c)
            if cl is None:
                cl = job_at(b).cards[c] = CardLedger(c, user, rank)
            cl.wall_s += dt
            cl.idle_s += idle
            card_piece_causes(idle, states, got, dt, cl.by_state_s, cl.by_cause_s)
    for job in out.values():
        for cl in job.cards.values():
            r = job.ranks.get(cl.pid) if cl.pid is not None else None
            if r is None or r.wall_s <= 0 or cl.wall_s <= 0:
                continue
            x = cl.known_idle_s / cl.wall_s - r.starving_s / r.wall_s
            cl.gap_w += cl.wall_s
            cl.gap_wx += cl.wall_s * x
            cl.gap_wxx += cl.wall_s * x * x
    return out


def build(w: Window, t0: float | None = None, t1: float | None = None) -> JobLedger:
    """The ledger of window ``w`` over ``[t0, t1)`` (the whole window by default)."""
    lo = w.t0 if t0 is None else max(t0, w.t0)
    hi = w.t1 if t1 is None else min(t1, w.t1)
    return total(build_bins(w, lo, hi).values(), gpu_job=w.gpu_job)


def total(bins: Iterable[JobLedger], gpu_job: bool = False, steps: bool = True) -> JobLedger:
    job = JobLedger(gpu_job=gpu_job)
    for j in bins:
        job.merge(j, steps=steps)
    return job


class LedgerBook:
    """The ledger kept between evaluations: each one-second bin is computed once, when
    its stacks have all arrived (the long window's settled bins), and summed over any
    window after. Bins that leave the long window go to ``on_close`` (the report's
    whole-run total) and are forgotten, so memory stays bounded."""

    def __init__(self, on_close: Callable[[int, JobLedger], None] | None = None) -> None:
        self._bins: dict[int, JobLedger] = {}
        self._done: int | None = None  # bins below this are computed
        self.on_close = on_close
        # The last window asked for, kept as a running sum: the next one (the window moved
        # on by a few seconds) adds the new bins and takes out the old, instead of summing
        # two minutes of bins every evaluation.
        self._win: JobLedger | None = None
        self._win_lo = self._win_hi = 0
        # Each rank's steps, found as its spans settle (sattui/ledger/steps.py).
        self._steps: dict[int, step_seen.StepTracker] = {}

    def update(self, w: Window, wl: Window, settled_t: float) -> None:
        """Compute the bins up to ``settled_t`` not done yet (``w``: the short window
        now, for who is who; ``wl``: the long window, for its binned stacks)."""
        hi = math.floor(settled_t / BIN_S)
        lo = self._done if self._done is not None else math.floor(wl.t0 / BIN_S)
        if hi > lo:
            def steps_for(pid: int, a: float, z: float) -> dict[int, step_seen.Bin]:
                tracker = self._steps.get(pid)
                if tracker is None:
                    tracker = self._steps[pid] = step_seen.StepTracker()
                return tracker.feed(wl.timeline.window("stack", pid, a, z), a, z, BIN_S)

            self._bins.update(build_bins(wl, lo * BIN_S, hi * BIN_S, structure=w, bins_from=wl, steps_for=steps_for))
            self._done = hi
        self.close_before(math.floor(wl.t0 / BIN_S))

    def close_before(self, b0: int) -> None:
        for b in sorted(k for k in self._bins if k < b0):
            j = self._bins.pop(b)
            if self.on_close is not None:
                self.on_close(b, j)

    def close_all(self) -> None:
        self.close_before(10 ** 12)

    def settled(self, from_bin: int | None = None) -> list[tuple[int, JobLedger]]:
        """The computed bins from ``from_bin`` on, oldest first (what an exporter adds to
        its counters after each evaluation, sattui/metrics/node.py)."""
        return sorted(((b, j) for b, j in self._bins.items() if from_bin is None or b >= from_bin),
                      key=lambda kv: kv[0])

    def bin(self, b: int) -> JobLedger | None:
        """Bin ``b``'s ledger while the book keeps it (None: not computed, or closed)."""
        return self._bins.get(b)

    def window(self, t0: float, t1: float, gpu_job: bool = False) -> JobLedger:
        """The ledger over ``[t0, t1)``, without the ranks' steps (no rule reads them from
        a window; each rank's steps are in the bins, :meth:`settled`, and the run's total).
        The object returned is the book's running sum: read it before the next call. Only
        whole bins before ``t1`` count (the book computes a bin once its second is over)."""
        lo, hi = math.floor(t0 / BIN_S), math.floor(t1 / BIN_S)
        win = self._win
        movable = (win is not None and lo >= self._win_lo and hi >= self._win_hi
                   and all(b in self._bins for b in range(self._win_lo, min(lo, self._win_hi))))
        if win is None or not movable:
            win = total((j for b, j in self._bins.items() if lo <= b < hi), gpu_job=gpu_job, steps=False)
        else:
            for b in range(self._win_hi, hi):
                if b in self._bins and b >= lo:
                    win.merge(self._bins[b], steps=False)
            for b in range(self._win_lo, min(lo, self._win_hi)):
                win.merge(self._bins[b], -1.0, steps=False)
        win.gpu_job = gpu_job
        self._win, self._win_lo, self._win_hi = win, lo, hi
        return win


def _steps_by_bin(w: Window, pid: int, lo: float, hi: float) -> dict[int, step_seen.Bin]:
    got = step_seen.by_bin(w.timeline.window("stack", pid, lo - STEP_LOOKBACK_SHORT_S, hi), lo, hi, BIN_S)
    if any(n > sum(hist.values()) for n, hist, _ in got.values()):
        # a step whose start the short look did not reach (or one after a hole: no harm)
        got = step_seen.by_bin(w.timeline.window("stack", pid, lo - STEP_LOOKBACK_S, hi), lo, hi, BIN_S)
    return got


def _clip_bin(states: dict[str, float] | None, b: int, lo: float, hi: float) -> dict[str, float]:
    """A bin's seconds by state, startup left out, scaled to the part of it in ``[lo, hi)``
    (a new dict: the ledger keeps it)."""
    if not states:
        return {}
    a, z = max(b * BIN_S, lo), min((b + 1) * BIN_S, hi)
    if z <= a:
        return {}
    frac = (z - a) / BIN_S
    startup = _STARTUP
    if frac >= 1.0:
        return {k: v for k, v in states.items() if k != startup}
    return {k: v * frac for k, v in states.items() if k != startup}


def _clock_ratio(h: Any) -> float | None:
    """The trainer's CPUs' clock against their maximum in one host sample (0–1), if known."""
    cur = getattr(h, "freq_mhz", None)
    top = getattr(h, "freq_max_mhz", None)
    if cur is None or not top:
        return None
    return min(1.0, cur / top)


def _world_size(w: Window) -> int:
    try:
        return int(w.ctx.env.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def _proc_interval(w: Window) -> float:
    for p in w.procs.values():
        ts = [s.t for s in p.samples[-5:]]
        if len(ts) >= 2:
            return max(0.2, (ts[-1] - ts[0]) / (len(ts) - 1))
    return 1.0


def _card_pid(w: Window, card: int, pids: Sequence[int]) -> int | None:
    """The trainer process using a card: the one the card lists, else the only one."""
    for pid in pids:
        if card in w.cards_of(pid) and (len(pids) == 1 or w.procs_visible):
            return pid
    return pids[0] if len(pids) == 1 else None


def _card_pieces(samples: Sequence[Any], lo: float, hi: float) -> Iterable[tuple[int, float, float, float]]:
    """``(bin, start, end, util)`` for each stretch a utilization sample stands for (the
    time since the previous sample; a card's sub-second samples keep their resolution),
    cut at bin edges."""
    prev_t: float | None = None
    for s in samples:
        if s.util is None:
            prev_t = s.t
            continue
        start = s.t - 0.5 if prev_t is None else prev_t
        start = lo if lo > start else start  # max(start, lo), min(s.t, hi)
        end = hi if hi < s.t else s.t
        prev_t = s.t
        while end > start:
            b = math.floor(start / BIN_S)
            edge = (b + 1) * BIN_S
            cut = edge if edge < end else end  # min(end, edge)
            yield b, start, cut, float(s.util)
            start = cut
