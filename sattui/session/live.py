"""A trainer watched now: the engine in a background thread, the one advisor loop on its records."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable
from typing import Any

from sattui.advisor.loop import AdvisorLoop
from sattui.errors import SattuiError
from sattui.ledger.bins import JobLedger
from sattui.model import Event
from sattui.recording import RecordingWriter, make_header
from sattui.safefile import check_output, open_output
from sattui.sampler_status import SamplerStatus
from sattui.session.session import Session, SessionStatus
from sattui.timeline import DEFAULT_HISTORY_S, Timeline


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

    def ledger_bins(self, lo: int, hi: int) -> dict[int, JobLedger]:
        """The live advisor's settled bins (AdvisorLoop.bins: its long window); call it
        holding the lock."""
        bins = self.advising.bins
        return {b: j for b, j in bins.items() if lo <= b < hi}

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
        from sattui.vendors.backend import BackendError

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


