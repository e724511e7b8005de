"""Sessions: what the full-screen monitor watches, live or replayed (never imports Textual).

A :class:`Session` owns a :class:`Timeline` (filled through a :class:`Feed`), the
recording header, and a status line's worth of facts (:class:`SessionStatus`). The UI
reads windows ``[t0, t1)`` of the timeline with ``now()`` as the right edge of its time
axis, and never samples anything itself.

* :class:`LiveSession` runs the same :class:`sattui.engine.Engine` as ``sattui record``
  in a background thread: process tree, py-spy chunks and card samples go into the Feed
  (and into a recording when ``record_path`` is given), and ``on_update()`` is called
  after every batch, from that thread (the UI posts itself a message from it).
* :class:`ReplaySession` loads a whole recording and moves a cursor through it.

Threads: the sampling thread appends to the timeline while the UI thread reads it. Hold
``session.lock`` while reading windows: it is held for every batch appended, so a reader
never sees a half-appended ring.
"""

from __future__ import annotations

import math
import os
import subprocess
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sattui import sampler_status
from sattui.advisor.loop import ADVISOR_PERIOD_S, AdvisorLoop, advisor_records, make_advisor
from sattui.errors import RecordingError, SattuiError
from sattui.feed import Feed
from sattui.findings import Finding
from sattui.model import Event, ProcSample
from sattui.recording import RecordingReader, RecordingWriter, make_header
from sattui.safefile import check_output, open_output
from sattui.sampler_status import SamplerStatus
from sattui.timeline import DEFAULT_HISTORY_S, Timeline

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


def _after(t: float) -> float:
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
        """The findings of the newest advisor evaluation up to ``now()``; [] if none."""
        with self.lock:
            ring = self.timeline.series("finding", 0)
            if ring is None or not len(ring):
                return []
            found: list[Finding] = ring.window(-math.inf, _after(self.now()))
        if not found:
            return []
        t_last = found[-1].t
        return [f for f in found if f.t == t_last]

    def processes(self, t0: float, t1: float) -> dict[int, list[ProcSample]]:
        with self.lock:
            return {k: v for k, v in self.timeline.window_all("proc", t0, t1).items() if isinstance(k, int)}

    def events(self, t0: float = -math.inf, t1: float | None = None) -> list[Event]:
        """Events in ``[t0, t1]`` (``t1`` defaults to ``now()``)."""
        with self.lock:
            return self.timeline.window("event", 0, t0, _after(self.now() if t1 is None else t1))


# --------------------------------------------------------------------------- live


class LiveSession(Session):
    """Watches a trainer (``pid``, or ``command`` started here) and the cards, now.

    Bad input found cheaply (no such pid, an output that cannot be written, an empty
    command) raises ``SattuiError`` from the constructor or ``start()``; what takes time
    (the process tree settling, card discovery) happens in the sampling thread, and its
    failures end up in ``status()``, never in the caller's thread.
    """

    def __init__(self, pid: int | None = None, command: list[str] | None = None, backend: str = "auto",
                 interval_s: float = 1.0, rate_hz: float | None = None, record_path: str | None = None,
                 on_update: Callable[[], None] | None = None, *, trainer_log: str | None = None,
                 stacks: bool = True, card_interval_s: float | None = None,
                 history_s: float = DEFAULT_HISTORY_S, force: bool = False, metrics: Any = None,
                 make_notifier: Callable[[dict[str, Any], Any], Any] | None = None) -> None:
        from sattui.cards import DEFAULT_CARD_INTERVAL_S
        from sattui.engine import Engine
        from sattui.trainer.procs import resolve_pid
        from sattui.trainer.stacks import DEFAULT_RATE_HZ

        if pid is not None and command:
            raise SattuiError("give a pid or a command to start, not both")
        if command is not None and not command:
            raise SattuiError("no command to start after --")
        if pid is not None:
            pid = resolve_pid(pid)
        # Outputs are checked before anything starts; ``force`` (--force) lets them replace
        # an existing file (sattui/safefile.py).
        self.force = force
        if record_path is not None:
            check_output(record_path, force)
        if trainer_log is not None and command:
            check_output(trainer_log, force)
        super().__init__(Timeline(history_s), make_header(pid=pid, cmdline=command, backend=None, cards=[]),
                         live=True)
        self.pid = pid
        self.command = list(command) if command else None
        self.backend_name = backend
        self.interval_s = interval_s
        self.rate_hz = rate_hz or DEFAULT_RATE_HZ
        self.record_path = record_path
        self.on_update = on_update
        # Where a started command's output goes: a full screen must not be written over.
        self.trainer_log = trainer_log
        # --metrics: a sattui.metrics.node.NodeMetrics fed from this session's records and ledger.
        self.metrics = metrics
        # --webhook / --on-finding: (header, engine) -> sattui.notify.Notifier, made once the
        # header is known; it is handed each evaluation's findings.
        self.make_notifier = make_notifier
        self.notifier: Any = None
        self.engine = Engine(pid, interval_s=interval_s, rate_hz=self.rate_hz, stacks=stacks, backend=backend,
                             card_interval_s=card_interval_s or DEFAULT_CARD_INTERVAL_S)
        self.child: subprocess.Popen[bytes] | None = None
        self.writer: RecordingWriter | None = None
        self.ended_by: str | None = None
        self.error: str | None = None  # why sampling could not run at all
        self._backend_error: str | None = None
        self._child_exit: int | None = None
        self._thread: threading.Thread | None = None
        self._log_file: Any = None
        # the one advisor loop (sattui/advisor/loop.py): this session's Timeline, fed under
        # its lock; findings emitted as records (the recording, this view, the exporter)
        self.advising = AdvisorLoop(self.timeline, lock=self.lock, feed=self.feed, publish=self._emit_findings,
                                    node=metrics, on_failure=self._advisor_failing)

    # -- Session

    def now(self) -> float:
        return self.engine.clock()

    def start(self) -> None:
        """Start the trainer (``command``) and the sampling thread; returns at once."""
        if self._thread is not None:
            return
        if self.command:
            self.child = self._spawn(self.command)
            self.pid = self.engine.pid = self.child.pid
            self.engine.child = self.child
        self._thread = threading.Thread(target=self._main, name="sattui-session", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """End sampling, stop a trainer started here, close the recording. Idempotent."""
        self.engine.request_stop("stopped")
        th = self._thread
        if th is not None:
            th.join(timeout)
        elif self.child is not None:  # never started the thread, but the child runs
            self._child_exit = self.engine.stop_child()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def status(self) -> SessionStatus:
        eng = self.engine
        has_trainer = self.pid is not None or bool(self.command)
        sampler: SamplerStatus | None = None
        msg: str | None = None
        rate: float | None = None
        if has_trainer:
            s = eng.main_sampler()
            if s is not None:
                sampler, msg = s.status, s.status_message
                rate = s.rate_hz if s.status == SamplerStatus.SAMPLING else None
            elif not eng.stacks:
                sampler, msg = SamplerStatus.STOPPED, "stacks are not sampled (--no-stacks)"
            elif self.error is not None or eng.trainer_exited:
                sampler, msg = SamplerStatus.STOPPED, self.error
            else:
                sampler = SamplerStatus.STARTING
                tree = eng.tree
                if tree is not None and tree.finder is not None and not tree.finder.found:
                    msg = tree.looking_message()
                    if "not a Python process" in msg:
                        sampler = SamplerStatus.NOT_PYTHON
        alive: bool | None = None
        if has_trainer:
            # The tree notices an exit only once a tick; our own child's exit shows at once.
            alive = not eng.trainer_exited and self.error is None
            if self.child is not None and self.child.poll() is not None:
                alive = False
        exit_code = eng.exit_code if eng.exit_code is not None else self._child_exit
        backend = eng.backend.name if eng.backend is not None else self.header.get("backend")
        bmsg: str | None = None
        if eng.poller is not None and eng.poller.failing:
            bmsg = f"{backend}: {eng.poller.failing}; cards are stale"
        elif self._backend_error is not None:
            bmsg = self._backend_error
        elif backend is None and eng.skipped:
            bmsg = "no accelerator found: " + "; ".join(eng.skipped)
        elif backend is None and self.backend_name == "none":
            bmsg = "no card backend (--backend none)"
        if self.error is not None and bmsg is None and not has_trainer:
            bmsg = self.error
        return SessionStatus(sampler=sampler, sampler_message=msg, sampler_rate_hz=rate, trainer_alive=alive,
                             trainer_exit_code=exit_code, backend=backend, backend_message=bmsg,
                             recording_path=self.record_path)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- the sampling thread

    def _spawn(self, command: list[str]) -> subprocess.Popen[bytes]:
        out: Any = None
        if self.trainer_log is not None:
            self._log_file = os.fdopen(open_output(self.trainer_log, self.force), "wb")
            out = self._log_file
        try:
            return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT if out else None,
                                    stdin=subprocess.DEVNULL if out else None)
        except OSError as e:
            raise SattuiError(f"cannot start {command[0]}: {e.strerror or e}") from None

    def _open(self) -> bool:
        from sattui.vendors.base import BackendError

        eng = self.engine
        try:
            header = eng.open()
        except BackendError as e:
            if eng.pid is None:
                raise
            # A forced backend that cannot start: watch the trainer anyway and say why.
            self._backend_error = f"{eng.backend_name}: {e}"
            eng.backend_name = "none"
            header = eng.open()
        with self.lock:
            self.header = header
        if self.record_path is not None:
            self.writer = RecordingWriter(self.record_path, header, force=self.force)
            eng.add_sink(self.writer.write_many)
        self.advising.set_header(header)
        eng.add_sink(self.advising.sink)
        if self.metrics is not None:
            self.metrics.set_header(header)
            eng.add_sink(self.metrics.sink)
        if self.make_notifier is not None:
            self.notifier = self.make_notifier(header, eng)
            self.notifier.start()
        return True

    def _main(self) -> None:
        eng = self.engine
        ended_by = "stopped"
        try:
            try:
                self._open()
            except SattuiError as e:
                self.error = str(e)
                self._notify()
                return
            eng.start()
            self._notify()
            ended_by = eng.run(stop_on_exit=False, on_tick=self._on_tick)
        except Exception as e:  # a bug here must leave a message, not a dead screen
            self.error = f"sampling stopped: {type(e).__name__}: {e}"
            ended_by = "error"
        finally:
            self.ended_by = ended_by
            try:
                if self.notifier is not None:
                    self.notifier.close()  # before the engine's last records: its events go in the file
                eng.shutdown(ended_by, end_event="recording_ended" if self.writer is not None else None)
            except Exception as e:
                self.error = self.error or f"sampling stopped: {type(e).__name__}: {e}"
            finally:
                if self.writer is not None:
                    try:
                        self.writer.close()
                    except SattuiError as e:
                        self.error = self.error or str(e)
                if self.child is not None and not eng.trainer_exited:
                    try:
                        self._child_exit = eng.stop_child()
                    except SattuiError as e:
                        self.error = self.error or str(e)
                self._notify()

    def _on_tick(self) -> None:
        self.advising.on_tick(self.now())
        self._notify()

    def _emit_findings(self, records: list[dict[str, Any]]) -> None:
        if records:
            self.engine.emit(records)
        if self.notifier is not None:
            self.notifier.observe(records)

    def _advisor_failing(self, t: float, message: str) -> None:
        self.engine.emit([Event(t, "advisor_failing", message).to_record()])

    def _notify(self) -> None:
        cb = self.on_update
        if cb is not None:
            try:
                cb()
            except Exception:
                pass  # the UI's callback failing must not stop sampling


# --------------------------------------------------------------------------- replay

class ReplaySession(Session):
    """A whole recording in memory, with a cursor (``now()``) the UI moves.

    The cursor starts at the end (the whole recording in view, as reviewing a finished
    run wants); ``toggle_play()`` at the end starts again from the beginning.

    A recording made by a live session holds the findings it showed. One made headless
    (``sattui record``) holds none: the advisor then judges it here, every
    ``ADVISOR_PERIOD_S`` over the loaded timeline, as ``sattui report`` does, so the
    replay shows the verdicts a live screen would have (``findings_computed``);
    ``judge=False`` leaves such a recording without findings (a snapshot test that must
    not change whenever a rule does).
    """

    def __init__(self, path: str, *, judge: bool = True) -> None:
        reader = RecordingReader(path)
        try:
            records = list(reader.records())
        except RecordingError:
            reader.close()
            raise
        self.path = path
        self.warnings = list(reader.warnings)
        duration = 0.0
        per_series: dict[tuple[str, Any], int] = {}
        self._stack_times: list[float] = []
        for r in records:
            t = float(r["t"])
            kind = r["kind"]
            end = float(r.get("t_end") or t) if kind == "stacks" else t
            duration = max(duration, t, end)
            if kind == "stacks":
                key: tuple[str, Any] = ("stack", r.get("pid"))
                per_series[key] = per_series.get(key, 0) + len(r.get("samples") or [])
                self._stack_times.append(t)
            else:
                k = {"card": r.get("card"), "proc": r.get("pid"), "worker_stack": r.get("pid")}.get(kind, 0)
                per_series[(kind, k)] = per_series.get((kind, k), 0) + 1
        history = max(duration, 1.0)
        # Rates from the recording itself, so every series fits whole in its ring.
        rates: dict[str, float] = {}
        for (kind, _k), n in per_series.items():
            rates[kind] = max(rates.get(kind, 0.0), n / history)
        super().__init__(Timeline(history, rates), reader.header, live=False)
        for r in records:
            self.feed.add_record(r)
        self._stack_times.sort()
        self._duration = duration
        self.cursor = duration
        self._playing = False
        self.findings_computed = False
        if judge and ("finding", 0) not in per_series:
            self._judge()

    def _judge(self) -> None:
        from sattui.advisor.judge import every_s_for

        advisor = make_advisor(self.header)

        # As `sattui report` judges it: a long recording less often (docs/rules.md), so an
        # hour opens in a third of the time.
        step = every_s_for(self._duration, ADVISOR_PERIOD_S)
        t = step
        while t <= self._duration + 1e-9:
            # All records are loaded, so no lag is needed: every stack of [t-30, t) is here.
            for rec in advisor_records(advisor, self.timeline, t):
                self.feed.add_record(rec)
            t += step
        self.findings_computed = True

    # -- Session

    def now(self) -> float:
        return self.cursor

    @property
    def playing(self) -> bool:
        return self._playing

    @property
    def duration(self) -> float:
        return self._duration

    def start(self) -> None:
        """Nothing runs in a replay; the UI moves the cursor."""

    def stop(self) -> None:
        self._playing = False

    def seek(self, t: float) -> None:
        self.cursor = min(max(0.0, float(t)), self._duration)

    def step(self, dt: float) -> None:
        self.seek(self.cursor + dt)

    def toggle_play(self) -> None:
        if not self._playing and self.cursor >= self._duration:
            self.cursor = 0.0
        self._playing = not self._playing

    def tick(self, dt: float) -> None:
        """Advance the cursor by ``dt`` while playing (the UI calls this from a timer)."""
        if not self._playing:
            return
        self.seek(self.cursor + dt)
        if self.cursor >= self._duration:
            self._playing = False

    def status(self) -> SessionStatus:
        h = self.header
        t_hi = _after(self.cursor)
        events = self.timeline.window("event", 0, -math.inf, t_hi)
        has_trainer = h.get("pid") is not None
        sampler: SamplerStatus | None = None
        smsg: str | None = None
        rate: float | None = None
        alive: bool | None = None
        exit_code: int | None = None
        if has_trainer:
            rate = h.get("stack_rate_hz")
            if "stack_rate_hz" in h and rate is None:
                sampler, smsg = SamplerStatus.STOPPED, "stacks were not sampled (--no-stacks)"
            else:
                import bisect

                sampler = SamplerStatus.SAMPLING if bisect.bisect_right(self._stack_times, self.cursor) \
                    else SamplerStatus.STARTING
            alive = True
        backend = h.get("backend")
        bmsg: str | None = None
        for ev in events:
            st = sampler_status.from_event(ev.type)
            if st is not None and has_trainer:
                sampler, smsg = st, ev.message
            elif ev.type == "sampler_rate" and isinstance(ev.data.get("rate_hz"), (int, float)):
                rate = float(ev.data["rate_hz"])
            elif ev.type == "trainer_exited":
                alive = False
                code = ev.data.get("exit_code")
                exit_code = code if isinstance(code, int) else None
            elif ev.type == "no_accelerator":
                bmsg = ev.message
            elif ev.type == "backend_failing":
                bmsg = ev.message
            elif ev.type == "backend_recovered":
                bmsg = None
            elif ev.type == "recording_ended" and sampler in (SamplerStatus.SAMPLING, SamplerStatus.STARTING):
                sampler = SamplerStatus.STOPPED
        if sampler != SamplerStatus.SAMPLING:
            rate = None
        if backend is None and bmsg is None:
            bmsg = "no card backend in this recording"
        return SessionStatus(sampler=sampler, sampler_message=smsg, sampler_rate_hz=rate, trainer_alive=alive,
                             trainer_exit_code=exit_code, backend=backend, backend_message=bmsg,
                             recording_path=self.path)


__all__ = ["LiveSession", "ReplaySession", "Session", "SessionStatus"]
