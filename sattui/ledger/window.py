"""A read-only view of the Timeline over ``[t0, t1)``: what every rule reads.

Rules are pure functions of a :class:`Window`. The window computes its aggregates
lazily and once (per-card means, per-process CPU and state shares, main-thread activity
shares), so twenty rules over the same window pay for each figure once, and a rule that
is not reached costs nothing. The long window (periodic stalls, allocator sawtooth,
worker respawns) is another Window over a longer span; its stack samples are read in
one-second bins, which the Advisor caches between evaluations (:class:`StackBinner`)
so a 300 s window does not re-read 6000 spans every 5 s.
"""

from __future__ import annotations

import bisect
import functools
import math
import operator
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from sattui.model import CardSample, Event, ProcSample, StackSample
from sattui.timeline import Timeline

if TYPE_CHECKING:
    # Types only: the window reads the job's context (its cards, pid, stack rate) that the
    # advisor above builds; at run time nothing here imports the advisor (the layers of
    # pyproject.toml, which leave out imports for type checking).
    from sattui.advisor.context import AdvisorContext
    from sattui.ledger.bins import JobLedger

# docs/rules.md ("How rules are evaluated"), minimum evidence for the window's own rules: ≥ 10 s
# of card samples and ≥ 60 main-thread stack samples (at the sampling rate; spans count as
# dur × rate samples). The causes of lost time need no such floor: their intervals say when
# the ledger's bins are enough (sattui/advisor/intervals/sequential.py); this only keeps a card rule
# from reading three samples.
MIN_CARD_S = 10.0
MIN_STACK_SAMPLES = 60
# py-spy spans are at most a chunk long (2 s by default); look back this far for spans
# that began before a window and run into it.
SPAN_LOOKBACK_S = 10.0
_V = TypeVar("_V")
DEFAULT_STACK_RATE_HZ = 20.0

class cached_property(Generic[_V]):  # noqa: N801  (named as the functools one it replaces)
    """functools.cached_property without its lock (Python 3.11 takes an RLock on every
    first read: the advisor's windows make ~12,000 of those an hour of recording). A
    figure computed twice by two threads is the same figure, so no lock is needed."""

    def __init__(self, fn: Callable[[Any], _V]) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> cached_property[_V]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> _V: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> _V | cached_property[_V]:
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)  # the instance's dict wins next time
        return value


def pstdev(values: Sequence[float]) -> float:
    """Population standard deviation in floats (statistics.pstdev is exact, via
    Fractions, and 20× slower; the rules compare it with round thresholds)."""
    n = len(values)
    if n == 0:
        return 0.0
    m = sum(values) / n
    return math.sqrt(sum((v - m) ** 2 for v in values) / n)


def mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def quantile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank quantile; enough for "steadily above" checks."""
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


class CardStats:
    """One card's samples over the window and the figures rules share (each computed
    on first use: the long window's rules read only a few of them)."""

    def __init__(self, card: int, samples: list[CardSample], info: dict[str, Any]) -> None:
        self.card = card
        self.samples = samples
        self.info = info
        self.n = len(samples)

    @cached_property
    def dt(self) -> float:
        ts = [s.t for s in self.samples]
        # (float differences by a C-level map: twice as fast as a comprehension over zip)
        return (median(list(map(operator.sub, ts[1:], ts))) or 0.5) if len(ts) > 1 else 0.5

    @cached_property
    def span_s(self) -> float:
        return (self.samples[-1].t - self.samples[0].t + self.dt) if self.samples else 0.0

    @cached_property
    def utils(self) -> list[float]:
        return [s.util for s in self.samples if s.util is not None]

    @cached_property
    def util(self) -> float | None:
        return sum(self.utils) / len(self.utils) if self.utils else None

    @cached_property
    def sm(self) -> float | None:
        return mean([s.sm_active for s in self.samples])

    @cached_property
    def tensor(self) -> float | None:
        return mean([s.tensor_active for s in self.samples])

    @cached_property
    def dram(self) -> float | None:
        return mean([s.dram_active for s in self.samples])

    @cached_property
    def occupancy(self) -> float | None:
        return mean([s.sm_occupancy for s in self.samples])

    @cached_property
    def temp(self) -> float | None:
        return mean([s.temp_c for s in self.samples])

    @cached_property
    def mem_total(self) -> int | None:
        totals = [s.mem_total for s in self.samples if s.mem_total]
        return max(totals) if totals else self.info.get("mem_total")

    @cached_property
    def mems(self) -> list[int]:
        return [s.mem_used for s in self.samples if s.mem_used is not None]

    @cached_property
    def mem_used_max(self) -> int | None:
        return max(self.mems) if self.mems else None

    @cached_property
    def mem_used_min(self) -> int | None:
        return min(self.mems) if self.mems else None

    @cached_property
    def mem_swing(self) -> float | None:
        """(max − min) of memory used over the window, as a share of the card; None unknown."""
        hi, lo, total = self.mem_used_max, self.mem_used_min, self.mem_total
        return (hi - lo) / total if hi is not None and lo is not None and total else None

    @cached_property
    def mem_used_mean(self) -> float | None:
        return sum(self.mems) / len(self.mems) if self.mems else None

    @cached_property
    def power(self) -> float | None:
        return mean([s.power_w for s in self.samples])

    @cached_property
    def power_limit(self) -> float | None:
        return _last_set(self.samples, "power_limit_w") or self.info.get("power_limit_w")

    @cached_property
    def clock_max(self) -> float | None:
        return _last_set(self.samples, "sm_clock_max_mhz") or self.info.get("sm_clock_max_mhz")

    @cached_property
    def clock(self) -> float | None:
        return mean([s.sm_clock_mhz for s in self.samples])

    @cached_property
    def pids(self) -> set[str]:
        """Pids the card listed as using it (NVML's process list), over the window."""
        out: set[str] = set()
        last = None
        for s in self.samples:
            if s.procs and s.procs is not last:
                out.update(s.procs)
                last = s.procs
        return out

    def mem_frac(self, value: float | None) -> float | None:
        return value / self.mem_total if value is not None and self.mem_total else None

    @cached_property
    def in_use(self) -> bool:
        """Some job uses the card: any utilization, ≥ 5 % of its memory, or a listed process."""
        if self.util is not None and self.util >= 1.0:
            return True
        frac = self.mem_frac(self.mem_used_mean)
        return (frac is not None and frac >= 0.05) or bool(self.pids)

    @property
    def power_frac(self) -> float | None:
        return self.power / self.power_limit if self.power is not None and self.power_limit else None

    def link_max(self) -> tuple[int | None, int | None]:
        gmax, wmax = self.info.get("pcie_gen_max"), self.info.get("pcie_width_max")
        if not gmax:
            gens = [s.pcie_gen for s in self.samples if s.pcie_gen]
            gmax = max(gens) if gens else None
        if not wmax:
            widths = [s.pcie_width for s in self.samples if s.pcie_width]
            wmax = max(widths) if widths else None
        return gmax, wmax


class ProcStats:
    """One process of the trainer's tree over the window (aggregates on first use)."""

    def __init__(self, pid: int, samples: list[ProcSample]) -> None:
        last = samples[-1]
        self.pid = pid
        self.samples = samples
        self.ppid, self.role, self.rank, self.name, self.nspid = last.ppid, last.role, last.rank, last.name, last.nspid
        self.first_t, self.last_t = samples[0].t, last.t

    @cached_property
    def cpus(self) -> list[float]:
        return [s.cpu for s in self.samples if s.cpu is not None]

    @cached_property
    def cpu(self) -> float | None:
        return sum(self.cpus) / len(self.cpus) if self.cpus else None

    @cached_property
    def states(self) -> dict[str, int]:
        states: dict[str, int] = {}
        for s in self.samples:
            if s.state:
                states[s.state] = states.get(s.state, 0) + 1
        return states

    @cached_property
    def read_Bps(self) -> float | None:
        return mean(s.read_Bps for s in self.samples)

    @cached_property
    def write_Bps(self) -> float | None:
        return mean(s.write_Bps for s in self.samples)

    def state_share(self, letters: str) -> float:
        n = sum(self.states.values())
        return sum(c for s, c in self.states.items() if s in letters) / n if n else 0.0


class StackStats:
    """The main thread of one sampled process: seconds per activity, startup left out."""

    def __init__(self, pid: int, samples: list[StackSample]) -> None:
        self.pid = pid
        by: dict[str, float] = {}
        for s in samples:
            act = s.state or "other"
            by[act] = by.get(act, 0.0) + s.dur
        self._has_startup = "startup" in by
        startup = by.pop("startup", 0.0)
        self._all = samples
        self.by_state = by
        self.total_s = sum(by.values())
        self.startup_s = startup

    @cached_property
    def samples(self) -> list[StackSample]:
        if not self._has_startup:
            return self._all  # (nearly every window: no copy of its ~600 spans)
        return [s for s in self._all if s.state != "startup"]

    def share(self, *activities: str) -> float:
        if self.total_s <= 0:
            return 0.0
        return sum(self.by_state.get(a, 0.0) for a in activities) / self.total_s

    def shares(self) -> dict[str, float]:
        return {a: round(v / self.total_s, 4) for a, v in sorted(self.by_state.items(), key=lambda kv: -kv[1])} \
            if self.total_s > 0 else {}

    def pick(self, activities: Iterable[str], limit: int = 60) -> list[StackSample]:
        """Samples of these activities, thinned evenly to at most ``limit`` (evidence only)."""
        acts = set(activities)
        got = [s for s in self._all if (s.state or "other") in acts]
        if len(got) > limit:
            step = len(got) / limit
            got = [got[int(i * step)] for i in range(limit)]
        return got


def _bin_all(bins: dict[int, dict[str, float]], samples: Iterable[StackSample]) -> None:
    """Add each span's seconds to the one-second bins it covers, by activity (startup
    left out). One loop for all of them: a 1-hour recording has 72,000 spans."""
    floor, startup = math.floor, "startup"
    for s in samples:
        act = s.state or "other"
        dur = s.dur
        if act == startup or dur <= 0:
            continue
        t = s.t
        end = t + dur
        while t < end:
            b = floor(t)
            edge = b + 1.0
            seg = (end if end <= edge else edge) - t  # min(end, edge), without the call
            d = bins.get(b)
            if d is None:
                d = bins[b] = {}
            d[act] = d.get(act, 0.0) + seg
            t += seg


class StackBinner:
    """Caches one-second bins of main-thread seconds by activity, per sampled pid.

    Only settled bins are returned: those older than ``LAG_S`` before the evaluation
    time (py-spy chunks arrive a few seconds late, and a replayed file is only roughly
    ordered). The long-window rules look for episodes over minutes; seeing them ~6 s
    late costs nothing, and every sample is binned exactly once.
    """

    LAG_S = 6.0
    # py-spy's chunks arrive in order, each pid's as one stream: once a sample at t has
    # arrived, everything before it has. A bin settles one second after the newest sample
    # the Timeline holds for its pid (the sample's own bin may still grow), and at the
    # latest LAG_S after the evaluation time (a pid whose samples stopped coming).
    MIN_LAG_S = 1.0

    def __init__(self) -> None:
        self._bins: dict[int, dict[int, dict[str, float]]] = {}
        self._done: dict[int, float] = {}

    @classmethod
    def settled_t(cls, timeline: Timeline, pid: int, t1: float) -> float:
        """Up to when ``pid``'s stacks have all arrived, judged at ``t1``."""
        ring = timeline.series("stack", pid)
        newest = ring[-1].t if ring is not None and len(ring) else -math.inf
        return max(t1 - cls.LAG_S, min(t1 - cls.MIN_LAG_S, newest - cls.MIN_LAG_S))

    def bins(self, timeline: Timeline, pid: int, t0: float, t1: float) -> dict[int, dict[str, float]]:
        store = self._bins.setdefault(pid, {})
        settled = math.floor(self.settled_t(timeline, pid, t1))
        done = self._done.get(pid)
        # Spans are taken by their start; the first time, also those begun before the first
        # bin that run into it (a 1.6-s data wait from 9.4 s is most of bin 10), or the
        # first bin holds only what began in it while the card's idle time beside it is
        # split by the spans that cover it.
        since = math.floor(t0) - SPAN_LOOKBACK_S if done is None else done
        if done is None:
            done = math.floor(t0)
        if settled > done:
            _bin_all(store, timeline.window("stack", pid, since, settled))
            self._done[pid] = settled
        lo = math.floor(t0)
        if store and min(store) < lo:
            for b in [b for b in store if b < lo]:
                del store[b]
        return store


class Window:
    """The Timeline over ``[t0, t1)`` as rules see it (lazy, cached aggregates)."""

    def __init__(self, timeline: Timeline, ctx: AdvisorContext, t0: float, t1: float,
                 binner: StackBinner | None = None, like: Window | None = None) -> None:
        self.timeline = timeline
        self.ctx = ctx
        self.t0 = t0
        self.t1 = t1
        self.binner = binner
        # The long window takes the job's structure (its cards, ranks, whether stacks
        # come) from the short window ending at the same time: "the job as it is now",
        # and computed once.
        self.like = like
        self._stacks: dict[int, StackStats | None] = {}
        # The time ledger over this window (sattui/ledger/bins.py), set by the Advisor.
        self.ledger: JobLedger | None = None

    @property
    def length_s(self) -> float:
        return max(0.0, self.t1 - self.t0)

    # -- raw series ------------------------------------------------------------------

    @cached_property
    def cards(self) -> dict[int, CardStats]:
        got = self.timeline.window_all("card", self.t0, self.t1)
        return {c: CardStats(c, s, self.ctx.card_info(c)) for c, s in sorted(got.items()) if isinstance(c, int)}

    @cached_property
    def procs(self) -> dict[int, ProcStats]:
        got = self.timeline.window_all("proc", self.t0, self.t1)
        return {p: ProcStats(p, s) for p, s in got.items() if isinstance(p, int)}

    @cached_property
    def events(self) -> list[Event]:
        return self.timeline.window("event", 0, self.t0, self.t1)

    def stack(self, pid: int) -> StackStats | None:
        if pid not in self._stacks:
            # A span that began before the window but runs into it counts for the part
            # inside: dropping it whole made a fully sampled window look short of evidence.
            # One thread's spans follow each other, so only the first few (begun before t0)
            # and the last (running past t1) need cutting; the rest are taken as they are.
            t0, t1 = self.t0, self.t1
            spans = self.timeline.window("stack", pid, t0 - SPAN_LOOKBACK_S, t1)
            i0 = bisect_t(spans, t0)
            got = [replace(s, t=t0, dur=min(s.t + s.dur, t1) - t0) for s in spans[:i0] if s.t + s.dur > t0]
            j = len(spans)
            while j > i0 and spans[j - 1].t + spans[j - 1].dur > t1:
                j -= 1
            got += spans[i0:j]
            got += [replace(s, dur=t1 - s.t) for s in spans[j:] if t1 > s.t]
            self._stacks[pid] = StackStats(pid, got) if got else None
        return self._stacks[pid]

    def judged_stack(self, pid: int) -> StackStats:
        """The stacks of a pid in :attr:`judged_pids` (which have them by definition)."""
        st = self.stack(pid)
        if st is None:
            raise KeyError(f"pid {pid} has no stacks in this window")
        return st

    def stack_samples(self, pid: int, t0: float, t1: float) -> list[StackSample]:
        return self.timeline.window("stack", pid, max(t0, self.t0), min(t1, self.t1))

    def stack_bins(self, pid: int) -> dict[int, dict[str, float]]:
        if self.binner is not None:
            return self.binner.bins(self.timeline, pid, self.t0, self.t1)
        bins: dict[int, dict[str, float]] = {}
        # (whole bins, as the binner keeps them: spans begun before t0 count in its bin)
        lo = math.floor(self.t0)
        _bin_all(bins, self.timeline.window("stack", pid, lo - SPAN_LOOKBACK_S, self.t1))
        for b in [b for b in bins if b < lo]:
            del bins[b]
        return bins

    # -- the trainer's structure -----------------------------------------------------

    @cached_property
    def trainer_pids(self) -> list[int]:
        """The processes whose main thread is the training loop: the ranks of a
        torchrun job, else the trainer itself."""
        if self.like is not None:
            return self.like.trainer_pids
        ranks = sorted((p for p in self.procs.values() if p.role == "rank"),
                       key=lambda p: (p.rank is None, p.rank, p.pid))
        if ranks:
            return [p.pid for p in ranks]
        # A trainer found below a launcher (``bash train.sh``) is ``main``; the pid given
        # (the header's) is then the launcher's.
        mains = sorted(p.pid for p in self.procs.values() if p.role == "main")
        if mains:
            return mains
        if self.ctx.pid is not None:
            return [self.ctx.pid]
        return sorted(k for k in self.timeline.keys("stack") if isinstance(k, int))

    def rank_of(self, pid: int) -> int | None:
        p = self.procs.get(pid)
        return p.rank if p is not None and p.role == "rank" else None

    @cached_property
    def workers(self) -> list[ProcStats]:
        return [p for p in self.procs.values() if p.role == "worker"]

    @cached_property
    def workers_at_once(self) -> int:
        """The most DataLoader workers alive at one tick: a job that restarts its workers
        every epoch has dozens of worker pids over a window, two at a time."""
        per_tick = Counter([s.t for p in self.workers for s in p.samples])  # (a list counts faster)
        return max(per_tick.values(), default=0)

    def workers_for(self, pid: int) -> list[ProcStats]:
        if len(self.trainer_pids) <= 1:
            return list(self.workers)
        r = self.rank_of(pid)
        return [w for w in self.workers if w.ppid == pid or (r is not None and w.rank == r)]

    def has_pin(self, pid: int) -> bool:
        return any(p.role == "pin" and (p.ppid == pid or len(self.trainer_pids) <= 1) for p in self.procs.values())

    @cached_property
    def _aliases(self) -> set[str]:
        if self.like is not None:
            return self.like._aliases
        out: set[str] = set()
        if self.ctx.pid is not None:
            out.add(str(self.ctx.pid))
        out.update(str(p) for p in self.ctx.nspid or [])
        for p in self.procs.values():
            out.add(str(p.pid))
            if p.nspid is not None:
                out.add(str(p.nspid))
        return out

    def _aliases_of(self, pid: int) -> set[str]:
        out = {str(pid)}
        p = self.procs.get(pid)
        if p is not None and p.nspid is not None:
            out.add(str(p.nspid))
        if pid == self.ctx.pid:
            out.update(str(x) for x in self.ctx.nspid or [])
        return out

    @cached_property
    def procs_visible(self) -> bool:
        """Some card lists its processes (else which card the trainer uses is assumed)."""
        return any(c.pids for c in self.cards.values())

    @cached_property
    def job_cards(self) -> list[int]:
        """The cards the job runs on: those listing a trainer-tree pid; when no card lists
        processes, the cards in use; every card in a cards-only recording."""
        if self.like is not None:
            return [c for c in self.like.job_cards if c in self.cards]
        if not self.cards:
            return []
        if self.ctx.pid is None and not self.procs:
            return sorted(self.cards)
        if not self.procs_visible:
            # No card lists processes (a container may not see them): the trainer's cards
            # are assumed to be those in use; none in use means a CPU job.
            return sorted(c for c, cs in self.cards.items() if cs.in_use)
        return sorted(c for c, cs in self.cards.items() if cs.pids & self._aliases)

    @property
    def gpu_job(self) -> bool:
        """docs/rules.md ("How rules are evaluated"): a GPU job has the trainer on at least one card."""
        return bool(self.job_cards)

    def cards_of(self, pid: int) -> list[int]:
        """The job's cards this trainer process uses (all job cards for a single process)."""
        if len(self.trainer_pids) <= 1:
            return list(self.job_cards)
        al = self._aliases_of(pid)
        return [c for c in self.job_cards if self.cards[c].pids & al]

    def util_of(self, cards: Iterable[int]) -> float | None:
        return mean(self.cards[c].util for c in cards if c in self.cards)

    def sm_of(self, cards: Iterable[int]) -> float | None:
        return mean(self.cards[c].sm for c in cards if c in self.cards)

    @cached_property
    def job_util(self) -> float | None:
        return self.util_of(self.job_cards)

    def proc_alias_pids(self) -> set[str]:
        return set(self._aliases)

    # -- evidence sufficiency --------------------------------------------------------

    def card_ok(self, card: int) -> bool:
        cs = self.cards.get(card)
        if cs is None or cs.n < 2:
            return False
        need = 0.95 * MIN_CARD_S  # 5 %: sampling jitter
        # The samples alone cover it (the sample interval only adds): no median interval
        # to compute, which a 300-s window's 600 samples made a cost at every evaluation.
        return cs.samples[-1].t - cs.samples[0].t >= need or cs.span_s >= need

    @cached_property
    def cards_ok(self) -> bool:
        return any(self.card_ok(c) for c in self.job_cards)

    def stacks_ok(self, pid: int) -> bool:
        st = self.stack(pid)
        if st is None:
            return False
        rate = self.ctx.stack_rate_hz or DEFAULT_STACK_RATE_HZ
        # 60 samples, or MIN_CARD_S of sampled time when that is less (a low rate).
        return st.total_s >= 0.95 * min(MIN_STACK_SAMPLES / rate, MIN_CARD_S)

    @cached_property
    def has_stacks(self) -> bool | None:
        """False: stacks cannot come (permission, --no-stacks…); True: some arrived."""
        if self.like is not None:
            return self.like.has_stacks
        if self.ctx.has_stacks is False:
            return False
        if any(self.stack(p) is not None for p in self.trainer_pids):
            return True
        return self.ctx.has_stacks

    @cached_property
    def judged_pids(self) -> list[int]:
        """Trainer processes with enough main-thread samples for stack-based rules."""
        return [p for p in self.trainer_pids if self.stacks_ok(p)]


def bisect_t(samples: Sequence[Any], t: float) -> int:
    """Index of the first sample with ``.t >= t`` (samples sorted by t)."""
    return bisect.bisect_left(samples, t, key=_T)


_T = operator.attrgetter("t")  # a C key: the ledger bisects a few series per bin


def _last_set(samples: Sequence[Any], name: str) -> Any:
    """The newest non-zero, non-null value of a field (the newest sample has it, mostly)."""
    for s in reversed(samples):
        v = getattr(s, name)
        if v:
            return v
    return None


@functools.lru_cache(maxsize=64)
def link_bw_Bps(gen: int | None, width: int | None) -> float | None:
    """Per-direction PCIe bandwidth of a link: DCGM "985 MB/s per lane" for Gen3, doubling
    per generation from Gen3 (Gen1/2 use 8b/10b: 250/500 MB/s per lane)."""
    if not gen or not width:
        return None
    per_lane = {1: 0.25e9, 2: 0.5e9}.get(gen, 0.985e9 * 2 ** (gen - 3))
    return per_lane * width
