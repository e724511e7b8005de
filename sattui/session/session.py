"""The session every screen reads: a Timeline, the header, a status line's worth of facts."""

from __future__ import annotations

import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sattui.feed import Feed
from sattui.findings import Finding
from sattui.ledger.bins import JobLedger
from sattui.model import Event, ProcSample
from sattui.sampler_status import SamplerStatus
from sattui.timeline import Timeline

# Worker pids change every epoch without persistent workers; their series are dropped
# STALE_PROC_S after their last sample (sattui/advisor/loop.py), so the number of series
# stays bounded.


@dataclass
class SessionStatus:
    sampler: SamplerStatus | None  # None when there is no trainer
    sampler_message: str | None  # one line, e.g. the ptrace fix
    sampler_rate_hz: float | None
    trainer_alive: bool | None  # None: no trainer
    trainer_exit_code: int | None
    backend: str | None  # card backend name, None if none
    backend_message: str | None  # why no cards / the tool failing
    recording_path: str | None

    def __post_init__(self) -> None:
        if self.sampler is not None:
            self.sampler = SamplerStatus(self.sampler)


def after(t: float) -> float:
    """The smallest time above ``t``: windows are ``[t0, t1)`` and "up to now" includes now."""
    return math.nextafter(t, math.inf)


class Session(ABC):
    """What the monitor watches. ``live`` sessions sample now; the others replay a
    recording and take the replay controls (``playing``, ``duration``, ``toggle_play``,
    ``step``, ``tick``), which a live session answers with "not playing" and ignores."""

    timeline: Timeline
    feed: Feed
    header: dict[str, Any]
    live: bool
    lock: threading.RLock
    # Called from the sampling thread after each batch (a live session only).
    on_update: Callable[[], None] | None = None

    def __init__(self, timeline: Timeline, header: dict[str, Any], live: bool) -> None:
        self.timeline = timeline
        self.feed = Feed(timeline)
        self.header = header
        self.live = live
        self.lock = threading.RLock()

    @property
    def simulated(self) -> bool:
        """True when any card is simulated (the screen must say SIMULATED)."""
        return any(bool(c.get("simulated")) for c in self.header.get("cards") or [])

    @abstractmethod
    def now(self) -> float:
        """The right edge of the time axis: the session clock live, the cursor in a replay."""

    @abstractmethod
    def status(self) -> SessionStatus: ...

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    # -- replay controls (a live session has none)

    @property
    def playing(self) -> bool:
        """A replay's cursor is moving by itself."""
        return False

    @property
    def duration(self) -> float | None:
        """A recording's length in seconds; None live."""
        return None

    def toggle_play(self) -> None:
        """Start or stop a replay's cursor."""

    def step(self, dt: float) -> None:
        """Move a replay's cursor by ``dt`` seconds."""

    def tick(self, dt: float) -> None:
        """Advance a playing replay's cursor by ``dt`` (the UI calls this from a timer)."""

    def findings(self) -> list[Finding]:
        """The findings of the newest advisor evaluation up to ``now()``; [] if none. Only
        that evaluation's are copied (a redraw asks every time; the history grows by one
        evaluation a second)."""
        with self.lock:
            ring = self.timeline.series("finding", 0)
            if ring is None or not len(ring):
                return []
            return list(ring.latest(after(self.now())))

    def ledger_bins(self, lo: int, hi: int) -> dict[int, JobLedger]:
        """The time ledger's settled one-second bins ``[lo, hi)`` that this session's
        advisor computed and keeps (sattui/ledger/bins.py); {} where none runs. A
        settled bin never changes: a view may keep what it gets."""
        return {}

    def processes(self, t0: float, t1: float) -> dict[int, list[ProcSample]]:
        with self.lock:
            return {k: v for k, v in self.timeline.window_all("proc", t0, t1).items() if isinstance(k, int)}

    def events(self, t0: float = -math.inf, t1: float | None = None) -> list[Event]:
        """Events in ``[t0, t1]`` (``t1`` defaults to ``now()``)."""
        with self.lock:
            return self.timeline.window("event", 0, t0, after(self.now() if t1 is None else t1))


