"""The sampling engine: the one place where sampling happens.

:class:`Engine` is the one place where sampling happens: it ticks the trainer's process
tree once per interval, runs py-spy (:class:`StackSampler`, its own thread) and the card
poller (:class:`CardPoller`, its own thread), and hands every batch of records, in time
order, to its sinks. Sinks take records exactly as they are written to a recording, so
a live screen (``sattui.session.LiveSession``: a ``Feed`` sink, maybe a file sink too)
and ``sattui record`` (a ``RecordingWriter`` sink) see the same data, and a replayed
recording looks like the live session that made it.

The tick loop (:meth:`Engine.run`) runs in whichever thread calls it: the caller's for
``sattui record``, a background thread for a live session. py-spy chunks, card samples
and sampler events reach it through queues, so a slow py-spy or vendor tool never delays
the process samples.
"""

from __future__ import annotations

import os
import queue
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from sattui.cards import DEFAULT_CARD_INTERVAL_S, CardPoller
from sattui.errors import SattuiError
from sattui.frames import read_source_line
from sattui.host import usable_cpus
from sattui.host_sampler import HostSampler
from sattui.model import CardInfo, CardSample, Event, StackChunk, WorkerStack
from sattui.recording import make_header, stacks_to_record
from sattui.sampler_status import NO_STACK_EVENTS
from sattui.timeline import Clock
from sattui.trainer.classifier import classify
from sattui.trainer.procs import ProcessTree
from sattui.trainer.stacks import DEFAULT_RATE_HZ, StackSampler
from sattui.trainer.worker_stacks import WorkerStackSampler, dump_main_stack
from sattui.vendors.backend import Backend

DEFAULT_INTERVAL_S = 1.0


def classify_chunk(chunk: StackChunk, cuda: bool = False) -> None:
    """Give every main-thread sample of a chunk its state (other threads stay None).

    A sample with no frames is a read py-spy could not complete (nonblocking reads tear
    now and then): its state is unknown, so it stays None and counts in no share.
    """
    for s in chunk.samples:
        if s.is_main and s.frames:
            s.state = classify(s.frames, source_line=read_source_line, cuda=cuda)


Sink = Callable[[list[dict[str, Any]]], None]


class Engine:
    """Samples one trainer (``pid``, None: cards only) and the cards into sinks.

    Life cycle: ``open()`` (finds the tree and the backend, builds ``header``; raises
    ``SattuiError`` on bad input), ``add_sink()``, ``start()`` (threads), ``run()`` (the
    tick loop, until a stop, the duration, or the trainer's exit), ``shutdown()``
    (threads stopped, last records delivered), ``stop_child()``.

    ``child`` is the Popen of a trainer sattui started itself (``-- CMD``): its exit
    code is kept, and ``stop_child`` stops it (and what it left) if sampling ends first.
    """

    def __init__(self, pid: int | None, *, interval_s: float = DEFAULT_INTERVAL_S,
                 rate_hz: float = DEFAULT_RATE_HZ, stacks: bool = True, backend: str = "auto",
                 card_interval_s: float = DEFAULT_CARD_INTERVAL_S,
                 child: subprocess.Popen[bytes] | None = None,
                 log: Callable[[str], None] | None = None, clock: Clock | None = None) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.rate_hz = rate_hz
        self.stacks = stacks
        self.backend_name = backend
        self.card_interval_s = card_interval_s
        self.child = child
        self.log = log or (lambda msg: None)
        self.clock = clock or Clock()
        self.sinks: list[Sink] = []
        self.header: dict[str, Any] = {}
        self.tree: ProcessTree | None = None
        self.info: dict[str, Any] = {}
        self.backend: Backend | None = None
        self.cards: list[CardInfo] = []
        self.skipped: list[str] = []
        self.poller: CardPoller | None = None
        self.samplers: dict[int, StackSampler] = {}
        self.host: HostSampler | None = None
        self.worker_sampler: WorkerStackSampler | None = None
        self.trainer_exited = False
        self.exit_code: int | None = None
        self._stop = threading.Event()
        # set by a stop and when the trainer's process ends: the loop ticks at once then,
        # so a recording ends with its trainer, not up to a tick later
        self._wake = threading.Event()
        self._exit_watch: threading.Thread | None = None
        self._watch_pipe: tuple[int, int] | None = None  # made by start(), closed by shutdown()
        self._stop_reason: str | None = None
        self._chunks: queue.Queue[StackChunk] = queue.Queue()
        self._events: queue.Queue[Event] = queue.Queue()
        self._card_samples: queue.Queue[list[CardSample]] = queue.Queue()
        self._worker_stacks: queue.Queue[WorkerStack] = queue.Queue()
        self._pending: list[dict[str, Any]] = []
        self._shut = False

    # -- setup

    def open(self) -> dict[str, Any]:
        from sattui.vendors.backend import open_backend

        # with stacks sampled, the tree may look once at a spawned child's stack to tell an
        # mp.spawn rank from a DataLoader worker (sattui/trainer/procs.py)
        probe = dump_main_stack if self.stacks else None
        self.tree = ProcessTree(self.pid, self.clock, stack_probe=probe) if self.pid is not None else None
        if self.tree is not None:
            self.pid = self.tree.pid
        self.info = self.tree.info() if self.tree is not None else {}
        self.host = HostSampler(self.tree.pid, self.clock) if self.tree is not None else None
        backend, cards, skipped = open_backend(self.backend_name, self.clock)
        if self.tree is None and backend is None:
            why = "; ".join(skipped) if skipped else "no backend chosen"
            raise SattuiError(f"no accelerator found to record ({why})")
        self.backend, self.cards, self.skipped = backend, cards, skipped
        info = self.info
        self.header = make_header(pid=self.pid, cmdline=info.get("cmdline"),
                                  backend=backend.name if backend else None,
                                  cards=[c.to_record() for c in cards],
                                  env=info.get("env") or {}, nspid=info.get("nspid"),
                                  launcher=info.get("launcher"), interval_s=self.interval_s,
                                  stack_rate_hz=self.rate_hz if self.stacks and self.tree else None,
                                  cpu_usable=usable_cpus(), labels=self._job_identity())
        if self.tree is not None and self.tree.finder is not None:
            self.log(self.tree.looking_message())
        # `.item()`/`.to()` lines are host-device syncs and copies only when the job has a
        # real accelerator; on a CPU job (or the demo's simulated card) they are plain compute.
        self._on_accelerator = backend is not None and not any(c.simulated for c in cards)
        # Said once, before any sample: delivered by the first batch.
        if backend is not None and skipped:
            self._pending.append(Event(self.clock(), "backends_skipped",
                                       f"using {backend.name}; passed over: " + "; ".join(skipped),
                                       {"skipped": skipped}).to_record())
        if backend is None and skipped:
            self._pending.append(Event(self.clock(), "no_accelerator",
                                       "no accelerator found: " + "; ".join(skipped),
                                       {"skipped": skipped}).to_record())
        return self.header

    def _job_identity(self) -> dict[str, Any]:
        """The trainer's Slurm job, pod and torchrun run (sattui/trainer/identity.py); all
        empty when recording cards only."""
        if self.tree is None or self.pid is None:
            from sattui.job import JobIdentity

            return JobIdentity().to_record()
        from sattui.trainer.identity import read_identity

        env = self.info.get("env")
        return read_identity(self.pid, env if isinstance(env, dict) else None).to_record()

    def add_sink(self, sink: Sink) -> None:
        self.sinks.append(sink)

    def close_backend(self) -> None:
        """Undo ``open()`` when what comes after it fails (the output cannot be created)."""
        if self.backend is not None:
            self.backend.close()
            self.backend = None

    def start(self) -> None:
        if self.backend is not None:
            self.poller = CardPoller(self.backend, self.clock, self._card_samples.put, self._events.put,
                                     interval_s=self.card_interval_s)
            self.poller.start()
        if self.tree is not None:
            self._watch_pipe = os.pipe()
            self._exit_watch = threading.Thread(target=self._watch_exit, args=(self.tree.pid, self._watch_pipe[0]),
                                                name="sattui-exit-watch", daemon=True)
            self._exit_watch.start()
            self._start_samplers()
            if self.stacks:
                self.worker_sampler = WorkerStackSampler(self.clock, self._worker_stacks.put, self._events.put)
                if not self.worker_sampler.start():
                    self.worker_sampler = None  # no py-spy: the trainer's sampler says so

    # -- the loop

    def request_stop(self, why: str = "signal") -> None:
        self._stop_reason = why
        self._stop.set()
        self._wake.set()

    def _watch_exit(self, pid: int, stop_fd: int) -> None:
        """Wake the loop when ``pid`` ends (a pidfd turns readable then). Without pidfds
        (Linux < 5.3) or once the pid is gone, the ticks alone find it, as before.
        :meth:`shutdown` ends the watch through the pipe's other end."""
        try:
            fd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            return
        try:
            ready = select.select([fd, stop_fd], [], [])[0]
            if fd in ready:
                self._wake.set()
        finally:
            os.close(fd)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def tick(self) -> bool:
        """One tick: the tree, new samplers, queued chunks/cards/events out to the sinks.

        Returns True once the trainer has exited (the ``trainer_exited`` event is out).
        """
        tree = self.tree
        out = self._pending
        self._pending = []
        if tree is not None and not self.trainer_exited:
            procs, events = tree.sample()
            # Events first: a pid reused within one tick gives proc_exited (the old process)
            # and proc_started (the stranger) before the stranger's first proc record, so
            # a reader can tell the two apart. trainer_exited is written below, with the
            # exit code when there is one.
            out.extend(e.to_record() for e in events if e.type != "trainer_exited")
            for e in events:
                if e.type == "trainer_found":
                    self.log(e.message)
            out.extend(p.to_record() for p in procs)
            if self.host is not None:
                out.append(self.host.sample().to_record())
            if self.worker_sampler is not None:
                self.worker_sampler.set_workers(p.pid for p in procs if p.role == "worker")
            self._start_samplers()
        self._drain(out)
        if tree is not None and not self.trainer_exited and (
                not tree.main_alive() or (self.child is not None and self.child.poll() is not None)):
            self.trainer_exited = True
            self.exit_code = self._child_exit_code()
            msg = "trainer exited" + (f" with code {self.exit_code}" if self.exit_code is not None else "")
            self.emit([Event(self.clock(), "trainer_exited", msg,
                             {"pid": self.pid, "exit_code": self.exit_code}).to_record()])
            self.log(msg)
        return self.trainer_exited

    def run(self, duration_s: float | None = None, stop_on_exit: bool = True,
            on_tick: Callable[[], None] | None = None) -> str:
        """Tick every ``interval_s`` until stopped; returns why it ended.

        ``stop_on_exit=False`` keeps ticking after the trainer exited (a live screen keeps
        showing the cards and keeps the last data); ``on_tick`` runs after every tick.
        """
        next_tick = time.monotonic()
        deadline = None if duration_s is None else next_tick + duration_s
        while not self._stop.is_set():
            exited = self.tick()
            if on_tick is not None:
                on_tick()
            if exited and stop_on_exit:
                return "trainer_exited"
            next_tick += self.interval_s
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return "duration"
            wait = next_tick - now
            if deadline is not None:
                wait = min(wait, deadline - now)
            if wait < 0:  # we fell behind (a slow tick): do not try to catch up in a burst
                next_tick = now
                wait = 0
            if self._wake.wait(wait) and not self._stop.is_set():
                self._wake.clear()  # the trainer ended: tick now (once: a live screen goes on)
        return self._stop_reason or "signal"

    def shutdown(self, ended_by: str, end_event: str | None = "recording_ended") -> None:
        """Stop py-spy and the poller, release the backend, deliver what is left."""
        if self._shut:
            return
        self._shut = True
        if self._watch_pipe is not None:
            os.write(self._watch_pipe[1], b"x")
            if self._exit_watch is not None:
                self._exit_watch.join(5.0)
            for fd in self._watch_pipe:
                os.close(fd)
            self._watch_pipe = None
        for s in self.samplers.values():
            s.stop()
        if self.worker_sampler is not None:
            self.worker_sampler.stop()
        if self.poller is not None:
            self.poller.stop()
        self.close_backend()
        out = self._pending
        self._pending = []
        self._drain(out)
        if end_event is not None:
            self.emit([Event(self.clock(), end_event, f"recording ended: {ended_by}",
                             {"ended_by": ended_by}).to_record()])

    def post_event(self, type_: str, message: str, data: dict[str, Any] | None = None) -> None:
        """An event from another thread (the notifier's): out with the next tick's records,
        so the sinks are only ever called from the sampling thread."""
        self._events.put(Event(self.clock(), type_, message, data or {}))

    def emit(self, records: list[dict[str, Any]]) -> None:
        for sink in self.sinks:
            sink(records)

    def _drain(self, out: list[dict[str, Any]]) -> None:
        while True:
            try:
                ev = self._events.get_nowait()
            except queue.Empty:
                break
            out.append(ev.to_record())
            if ev.type in NO_STACK_EVENTS:
                self.log(ev.message)
        while True:
            try:
                out.extend(c.to_record() for c in self._card_samples.get_nowait())
            except queue.Empty:
                break
        while True:
            try:
                chunk = self._chunks.get_nowait()
            except queue.Empty:
                break
            classify_chunk(chunk, cuda=getattr(self, "_on_accelerator", False))
            out.append(stacks_to_record(chunk))
        while True:
            try:
                out.append(self._worker_stacks.get_nowait().to_record())
            except queue.Empty:
                break
        if out:
            out.sort(key=lambda r: r["t"])
            self.emit(out)

    # -- py-spy

    def _start_sampler(self, pid: int) -> None:
        if not self.stacks or pid in self.samplers:
            return
        sampler = StackSampler(pid, self.clock, on_chunk=self._chunks.put, on_event=self._events.put,
                               rate_hz=self.rate_hz)
        self.samplers[pid] = sampler
        sampler.start()

    def _start_samplers(self) -> None:
        tree = self.tree
        assert tree is not None
        # The trainer itself, or, under a launcher (a shell, torchrun, accelerate …), the
        # trainers found below it: the launcher only waits on them.
        pids = tree.trainer_pids()
        for pid in pids:
            self._start_sampler(pid)
        for pid in [p for p in self.samplers if p not in pids and tree.role(p) == "other"]:
            # it started the ranks and only waits for them (mp.spawn's parent): its idle
            # main thread is no training loop
            self.samplers.pop(pid).stop()

    def main_sampler(self) -> StackSampler | None:
        """The sampler of the trainer (or of its lowest rank, or of the trainer found
        below a launcher; a trainer found later replaces one that exited)."""
        if self.pid is not None and self.pid in self.samplers:
            return self.samplers[self.pid]
        if self.tree is not None:
            for pid in self.tree.trainer_pids():
                if pid in self.samplers:
                    return self.samplers[pid]
        return next(reversed(self.samplers.values()), None)

    # -- the child we started

    def _child_exit_code(self) -> int | None:
        if self.child is None:
            return None
        try:
            return self.child.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return None

    def stop_child(self) -> int | None:
        """Sampling ended first: stop the trainer sattui started (it is ours)."""
        child = self.child
        if child is None:
            return None
        if child.poll() is not None:
            return child.returncode
        try:
            family = psutil.Process(child.pid).children(recursive=True)
        except psutil.Error:
            family = []
        try:
            for sig, wait in ((signal.SIGINT, 5.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
                try:
                    child.send_signal(sig)
                    return child.wait(timeout=wait)
                except subprocess.TimeoutExpired:
                    continue
                except ProcessLookupError:
                    return child.poll()
            raise SattuiError(f"could not stop the trainer (pid {child.pid})")
        finally:
            # Workers killed mid-start (or a forkserver) can outlive a trainer: sattui started
            # this job, so it leaves none of it behind. psutil checks pid reuse for us.
            for p in family:
                try:
                    p.kill()
                except psutil.Error:
                    pass
