"""Ring buffers per series on one monotonic clock, with window queries.

Every source appends samples carrying ``t`` (seconds since the session started, from
one ``time.monotonic()`` origin). Widgets and rules read windows ``[t0, t1)``;
nothing else keeps its own history. Memory is bounded: each series holds at most
``capacity`` samples, sized from the history length and the series' rate.
"""

from __future__ import annotations

import bisect
import math
import operator
import time
from collections.abc import Callable, Collection, Hashable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Generic, TypeVar

T = TypeVar("T")

DEFAULT_HISTORY_S = 3600.0
# Default rates per series kind (samples per second), used to size the rings.
DEFAULT_RATES_HZ = {"proc": 1.0, "card": 2.0, "stack": 20.0, "event": 1.0, "host": 1.0, "worker_stack": 0.2}


class Clock:
    """The session's one clock: seconds since ``start``, monotonic."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self.origin = now()

    def __call__(self) -> float:
        return self._now() - self.origin


class Ring(Generic[T]):
    """A fixed-capacity ring of samples ordered by time.

    Appends are expected in non-decreasing ``t``; an out-of-order sample is placed by
    insertion after any samples of the same time (py-spy chunks and card polls can
    arrive late), which keeps queries right; one older than everything in a full ring
    is dropped, as it would be the next one evicted.
    """

    __slots__ = ("capacity", "_items", "_times", "_start", "_len", "added", "reordered")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self._items: list[Any] = [None] * capacity
        self._times: list[float] = [0.0] * capacity
        self._start = 0
        self._len = 0
        # Samples stored so far, and how many of them went in out of order: a copy taken
        # earlier (SeriesCopy) is brought up to date from the newest ``added - then`` alone
        # while ``reordered`` has not moved. ``added - len`` is how many were evicted.
        self.added = 0
        self.reordered = 0

    def __len__(self) -> int:
        return self._len

    def _phys(self, i: int) -> int:
        return (self._start + i) % self.capacity

    def time_at(self, i: int) -> float:
        return self._times[self._phys(i)]

    def __getitem__(self, i: int) -> T:
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(i)
        return self._items[self._phys(i)]

    def append(self, t: float, item: T) -> None:
        n, cap = self._len, self.capacity
        if n and t < self._times[(self._start + n - 1) % cap]:
            self._insert_sorted(t, item)
            return
        # Store before publishing (length/start moved last), so a reader on another thread
        # never sees a slot that is counted but not yet filled.
        if n < cap:
            p = (self._start + n) % cap
            self._items[p] = item
            self._times[p] = t
            self._len = n + 1
        else:  # full: overwrite the oldest
            p = self._start
            self._items[p] = item
            self._times[p] = t
            self._start = (p + 1) % cap
        self.added += 1

    def extend(self, times: Sequence[float], items: Sequence[T]) -> None:
        """:meth:`append` of each ``(times[i], items[i])`` in turn. A run already in order
        after the newest sample (a py-spy chunk's ~40 main-thread spans) is copied in by
        two slices at most: one Python call per sample was 0.02 s of a 1-hour report's
        0.06 s of stack feeding. Anything else goes through :meth:`append` one by one."""
        k, n, cap, start = len(items), self._len, self.capacity, self._start
        if k == 0:
            return
        # The same test append makes for each sample: is it older than the one before?
        if (k > cap or (n and times[0] < self._times[(start + n - 1) % cap])
                or any(map(operator.lt, times[1:], times))):
            for t, item in zip(times, items):
                self.append(t, item)
            return
        p = (start + n) % cap
        end = p + k
        if end <= cap:
            self._items[p:end] = items
            self._times[p:end] = times
        else:
            head = cap - p
            self._items[p:] = items[:head]
            self._times[p:] = times[:head]
            self._items[:end - cap] = items[head:]
            self._times[:end - cap] = times[head:]
        # Published after the stores, as append does; a full ring's oldest slots were
        # overwritten first, as append overwrites them one at a time.
        if n + k <= cap:
            self._len = n + k
        else:
            self._start = (start + n + k - cap) % cap
            self._len = cap
        self.added += k

    def _insert_sorted(self, t: float, item: T) -> None:
        # Out-of-order samples land near the newest end (overlapping py-spy chunks, a
        # late card poll), so shift only the samples after the insertion point: O(k) for
        # k newer samples, not a rebuild of the whole ring per sample.
        pos = self._bisect_right(t)
        if self._len == self.capacity:
            if pos == 0:
                return  # older than everything kept: it would be the one evicted
            self._start = (self._start + 1) % self.capacity  # evict the oldest
            self._len -= 1
            pos -= 1
        items, times = self._items, self._times
        for i in range(self._len, pos, -1):
            dst, src = self._phys(i), self._phys(i - 1)
            items[dst] = items[src]
            times[dst] = times[src]
        p = self._phys(pos)
        items[p] = item
        times[p] = t
        self._len += 1
        self.added += 1
        self.reordered += 1

    def __iter__(self) -> Iterator[T]:
        for i in range(self._len):
            yield self._items[self._phys(i)]

    def _bisect_left(self, t: float) -> int:
        return self._bisect(t, bisect.bisect_left)

    def _bisect_right(self, t: float) -> int:
        return self._bisect(t, bisect.bisect_right)

    def _bisect(self, t: float, how: Callable[..., int]) -> int:
        # The ring in memory is two sorted runs, [start, capacity) then [0, start): search
        # the run ``t`` falls in with the C bisect (the advisor asks ~50,000 times an hour).
        n, start, cap, times = self._len, self._start, self.capacity, self._times
        if n == 0:
            return 0
        end = start + n
        if end <= cap:
            return how(times, t, start, end) - start
        # Past the whole first run only if ``how`` lands at its end; the second run's
        # samples are all at or after the first run's.
        i = how(times, t, start, cap)
        if i < cap:
            return i - start
        return (cap - start) + how(times, t, 0, end - cap)

    def window(self, t0: float, t1: float) -> list[T]:
        """Samples with ``t0 <= t < t1``, oldest first."""
        a, b = self._bisect_left(t0), self._bisect_left(t1)
        if a >= b:
            return []
        # Slices, not a per-item index: the advisor reads 300 s windows every 5 s.
        pa = (self._start + a) % self.capacity
        end = pa + (b - a)
        if end <= self.capacity:
            return self._items[pa:end]
        return self._items[pa:] + self._items[:end - self.capacity]

    def copy_window(self, t0: float, t1: float) -> tuple[list[float], list[T]]:
        """``(times, samples)`` with ``t0 <= t < t1``, oldest first: :meth:`window` with the times."""
        a, b = self._bisect_left(t0), self._bisect_left(t1)
        return self._copy_range(a, b) if a < b else ([], [])

    def copy_last(self, k: int) -> tuple[list[float], list[T]]:
        """``(times, samples)`` of the newest ``k`` samples (``k <= len``), oldest first."""
        n = self._len
        return self._copy_range(n - k, n) if k > 0 else ([], [])

    def _copy_range(self, a: int, b: int) -> tuple[list[float], list[T]]:
        pa = (self._start + a) % self.capacity
        end = pa + (b - a)
        if end <= self.capacity:
            return self._times[pa:end], self._items[pa:end]
        wrap = end - self.capacity
        return self._times[pa:] + self._times[:wrap], self._items[pa:] + self._items[:wrap]

    def latest(self, t1: float) -> list[T]:
        """The samples at the newest time before ``t1`` (all of them, when several share
        it), oldest first: what is current at ``t1``, without copying the history."""
        b = self._bisect_left(t1)
        if b == 0:
            return []
        t_last = self.time_at(b - 1)
        return self.window(t_last, math.nextafter(t_last, math.inf))

    def first_t(self) -> float | None:
        return self.time_at(0) if self._len else None

    def last_t(self) -> float | None:
        return self.time_at(self._len - 1) if self._len else None


class _SeriesReads:
    """The reads a Timeline and its copy answer alike, over ``_series`` ((kind, key) ->
    a ring or a ring's copy: anything with ``window``, ``len`` and indexing)."""

    _series: dict[tuple[str, Hashable], Any]

    def keys(self, kind: str) -> list[Hashable]:
        return [k for (kd, k) in self._series if kd == kind]

    def window(self, kind: str, key: Hashable, t0: float, t1: float) -> list[Any]:
        ring = self._series.get((kind, key))
        return ring.window(t0, t1) if ring is not None else []

    def window_all(self, kind: str, t0: float, t1: float) -> dict[Hashable, list[Any]]:
        """Every series of a kind over ``[t0, t1)``; series with nothing there are left out."""
        out = {}
        for (kd, key), ring in self._series.items():
            if kd == kind:
                w = ring.window(t0, t1)
                if w:
                    out[key] = w
        return out

    def last(self, kind: str, key: Hashable) -> Any | None:
        ring = self._series.get((kind, key))
        return ring[-1] if ring is not None and len(ring) else None


class Timeline(_SeriesReads):
    """All series of one session, keyed by ``(kind, key)``.

    ``history_s`` bounds memory: a series of rate ``r`` holds ``history_s * r * 1.25``
    samples at most (the margin absorbs bursts), so the default keeps at least one
    hour at the default rates.
    """

    def __init__(self, history_s: float = DEFAULT_HISTORY_S, rates_hz: dict[str, float] | None = None) -> None:
        if history_s <= 0:
            raise ValueError("history_s must be > 0")
        self.history_s = history_s
        self.rates_hz = dict(DEFAULT_RATES_HZ)
        if rates_hz:
            self.rates_hz.update(rates_hz)
        self._series: dict[tuple[str, Hashable], Ring[Any]] = {}
        self.latest_t: float = 0.0

    def capacity_for(self, kind: str) -> int:
        rate = self.rates_hz.get(kind, 1.0)
        return max(16, math.ceil(self.history_s * rate * 1.25))

    def add(self, kind: str, key: Hashable, t: float, item: Any) -> None:
        ring = self._series.get((kind, key))
        if ring is None:
            ring = self._series[(kind, key)] = Ring(self.capacity_for(kind))
        ring.append(t, item)
        if t > self.latest_t:
            self.latest_t = t

    def add_many(self, kind: str, key: Hashable, items: list[Any]) -> None:
        """:meth:`add` for each of ``items`` (each with a ``t``) of one series: a py-spy
        chunk's spans, looked up once."""
        if not items:
            return
        ring = self._series.get((kind, key))
        if ring is None:
            ring = self._series[(kind, key)] = Ring(self.capacity_for(kind))
        times = [item.t for item in items]
        ring.extend(times, items)
        # max's own test, item > kept, in order from latest_t: what add does per item.
        self.latest_t = max(self.latest_t, *times)

    def series(self, kind: str, key: Hashable) -> Ring[Any] | None:
        return self._series.get((kind, key))

    def sample_count(self) -> int:
        return sum(len(r) for r in self._series.values())

    def drop_stale(self, kind: str, older_than_t: float) -> int:
        """Forget whole series whose newest sample is older than ``older_than_t``.

        Worker pids change every epoch without persistent workers; without this the
        number of series (not their length) would grow for ever.
        """
        dead = [k for k, r in self._series.items() if k[0] == kind and (r.last_t() or 0.0) < older_than_t]
        for k in dead:
            del self._series[k]
        return len(dead)




class SeriesCopy(Generic[T]):
    """One ring's samples in ``[t_lo, t_hi)``, copied, with the whole ring's length, ends and
    their times (a view asks a process's first and newest sample, wherever they are).

    Answers :class:`Ring`'s queries from the copy where the copy holds all the ring held
    there; any other query reads the ring itself, under the lock (``TimelineCopy.misses``
    counts those, so a test can show a screen's reads stay inside the copy)."""

    __slots__ = ("_times", "_items", "_lo", "_hi", "_len", "_first", "_last", "_first_t", "_last_t",
                 "_ring", "_owner", "_added", "_reordered", "_evicted")

    def __init__(self, ring: Ring[T], t_lo: float, t_hi: float, owner: TimelineCopy,
                 previous: SeriesCopy[T] | None = None) -> None:
        n = self._len = len(ring)
        if previous is None or not self._extend(previous, ring, t_lo, t_hi):
            self._times, self._items = ring.copy_window(t_lo, t_hi)
        self._first: T | None = ring[0] if n else None
        self._last: T | None = ring[-1] if n else None
        self._first_t, self._last_t = ring.first_t(), ring.last_t()
        # Where the ring holds nothing beyond a bound, the copy is the whole ring on that side.
        self._lo = -math.inf if n == 0 or ring.time_at(0) >= t_lo else t_lo
        self._hi = math.inf if n == 0 or ring.time_at(n - 1) < t_hi else t_hi
        self._ring = ring
        self._owner = owner
        self._added, self._reordered, self._evicted = ring.added, ring.reordered, ring.added - n

    def _extend(self, prev: SeriesCopy[T], ring: Ring[T], t_lo: float, t_hi: float) -> bool:
        """Take over the previous copy of the same ring and add only what came since:
        possible while every sample since went in at the end, the previous copy ran to
        the ring's end and started no later than this one starts, and nothing it held at
        or after ``t_lo`` was evicted. Its lists are moved here; the previous copy reads
        the ring from then on (each read a miss). False: copy afresh."""
        k = ring.added - prev._added
        if (prev._ring is not ring or ring.reordered != prev._reordered or prev._hi != math.inf
                or t_lo < prev._lo or k > len(ring)):
            return False
        if ring.added - len(ring) != prev._evicted and not ring.time_at(0) < t_lo:
            return False  # evicted samples may have been at or after t_lo
        times, items = prev._times, prev._items
        new_t, new_i = ring.copy_last(k)
        times += new_t
        items += new_i
        a, b = bisect.bisect_left(times, t_lo), bisect.bisect_left(times, t_hi)
        del times[b:], items[b:]
        del times[:a], items[:a]
        self._times, self._items = times, items
        prev._times, prev._items = [], []
        prev._lo, prev._hi = math.inf, -math.inf  # every read of it now goes to the ring
        return True

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: int) -> T:
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(i)
        if i == 0:
            return self._first  # type: ignore[return-value]
        if i == self._len - 1:
            return self._last  # type: ignore[return-value]
        return self._owner.read_live(lambda: self._ring[i])

    def __iter__(self) -> Iterator[T]:
        return iter(self._owner.read_live(lambda: list(self._ring)))

    def first_t(self) -> float | None:
        return self._first_t

    def last_t(self) -> float | None:
        return self._last_t

    def window(self, t0: float, t1: float) -> list[T]:
        """Samples with ``t0 <= t < t1``, oldest first (as :meth:`Ring.window`)."""
        if t0 < self._lo or t1 > self._hi:
            return self._owner.read_live(lambda: self._ring.window(t0, t1))
        a, b = bisect.bisect_left(self._times, t0), bisect.bisect_left(self._times, t1)
        return self._items[a:b] if a < b else []

    def latest(self, t1: float) -> list[T]:
        """The samples at the newest time before ``t1`` (as :meth:`Ring.latest`)."""
        b = bisect.bisect_left(self._times, t1)
        if t1 > self._hi or (b == 0 and self._lo > -math.inf):
            return self._owner.read_live(lambda: self._ring.latest(t1))
        if b == 0:
            return []
        t_last = self._times[b - 1]
        return self.window(t_last, math.nextafter(t_last, math.inf))


class TimelineCopy(_SeriesReads):
    """What a reader on another thread needs of a :class:`Timeline`, copied at once: every
    series' samples in ``[t_lo, t_hi)`` (the kinds in ``whole``: all up to ``t_hi``; in
    ``skip``: none, every query of them reads the live ring). Made under the lock the
    writers hold; read without it. With ``previous`` (the copy the same reader took
    last), each series adds the samples stored since rather than copying its span again;
    ``previous`` is used up by it.

    The UI draws from one of these per redraw, so the sampler thread waits only for the
    copy, never for the binning and drawing (sattui/app.py)."""

    def __init__(self, timeline: Timeline, t_lo: float, t_hi: float,
                 lock: AbstractContextManager[Any] | None = None, skip: Collection[str] = (),
                 whole: Collection[str] = (), previous: TimelineCopy | None = None) -> None:
        self.t_lo, self.t_hi = t_lo, t_hi
        self.latest_t = timeline.latest_t
        self.misses = 0  # queries the copy could not answer (each read the live ring, locked)
        self._lock: AbstractContextManager[Any] = lock if lock is not None else nullcontext()
        before = previous._series if previous is not None else {}
        self._series: dict[tuple[str, Hashable], SeriesCopy[Any]] = {}
        for (kind, key), ring in timeline._series.items():
            lo, hi = (math.inf, math.inf) if kind in skip else (-math.inf, t_hi) if kind in whole else (t_lo, t_hi)
            self._series[(kind, key)] = SeriesCopy(ring, lo, hi, self, before.get((kind, key)))

    def read_live(self, read: Callable[[], T]) -> T:
        self.misses += 1
        with self._lock:
            return read()

    def series(self, kind: str, key: Hashable) -> SeriesCopy[Any] | None:
        return self._series.get((kind, key))
