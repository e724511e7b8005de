"""Headless recording: the trainer's process tree and py-spy stacks into a JSONL file.

One thread (the caller's) ticks the process tree once per interval and writes; py-spy
runs in the sampler's own thread and hands chunks over through a queue, so a slow
py-spy never delays the process samples.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil

from sattui.cards import DEFAULT_CARD_INTERVAL_S, CardPoller
from sattui.errors import SattuiError
from sattui.model import CardSample, Event, StackChunk
from sattui.record import RecordingWriter, make_header, stacks_to_record
from sattui.timeline import Clock
from sattui.trainer.procs import ProcessTree
from sattui.trainer.stacks import DEFAULT_RATE_HZ, StackSampler
from sattui.trainer.states import classify, read_source_line

DEFAULT_INTERVAL_S = 1.0


def classify_chunk(chunk: StackChunk, cuda: bool = False) -> None:
    """Give every main-thread sample of a chunk its state (other threads stay None)."""
    for s in chunk.samples:
        if s.is_main:
            s.activity = classify(s.frames, source_line=read_source_line, cuda=cuda)


@dataclass
class RecordOptions:
    out_path: str
    duration_s: float | None = None
    interval_s: float = DEFAULT_INTERVAL_S
    rate_hz: float = DEFAULT_RATE_HZ
    stacks: bool = True
    backend: str = "auto"
    card_interval_s: float = DEFAULT_CARD_INTERVAL_S


@dataclass
class RecordResult:
    duration_s: float
    records: int
    trainer_exit_code: int | None = None
    ended_by: str = "duration"
    notes: list[str] = field(default_factory=list)


class Recorder:
    """Records one trainer (``pid``) and the cards until the duration ends, the trainer
    exits, or a signal comes. With ``pid=None`` it records cards only.

    ``child`` is the Popen of a trainer sattui started itself (``record -- CMD``): its
    exit code is recorded, and it is stopped if the recording ends first.
    """

    def __init__(self, pid: int | None, opts: RecordOptions, child: subprocess.Popen[bytes] | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.pid = pid
        self.opts = opts
        self.child = child
        self.log = log or (lambda msg: None)
        self.clock = Clock()
        self._stop = threading.Event()
        self._ended_by = "duration"
        self._chunks: queue.Queue[StackChunk] = queue.Queue()
        self._events: queue.Queue[Event] = queue.Queue()
        self._card_samples: queue.Queue[list[CardSample]] = queue.Queue()
        self._samplers: dict[int, StackSampler] = {}

    def request_stop(self, why: str = "signal") -> None:
        self._ended_by = why
        self._stop.set()

    def _start_sampler(self, pid: int) -> None:
        if not self.opts.stacks or pid in self._samplers:
            return
        sampler = StackSampler(pid, self.clock, on_chunk=self._chunks.put, on_event=self._events.put,
                               rate_hz=self.opts.rate_hz)
        self._samplers[pid] = sampler
        sampler.start()

    def _drain(self, writer: RecordingWriter) -> None:
        out: list[dict[str, Any]] = []
        while True:
            try:
                ev = self._events.get_nowait()
            except queue.Empty:
                break
            out.append(ev.to_record())
            if ev.type in ("permission_denied", "not_python", "sampler_missing"):
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
            classify_chunk(chunk)
            out.append(stacks_to_record(chunk))
        if out:
            out.sort(key=lambda r: r["t"])
            writer.write_many(out)

    def run(self) -> RecordResult:
        from sattui.vendors.base import open_backend

        tree = ProcessTree(self.pid, self.clock) if self.pid is not None else None
        info = tree.info() if tree is not None else {}
        backend, cards, skipped = open_backend(self.opts.backend, self.clock)
        if tree is None and backend is None:
            why = "; ".join(skipped) if skipped else "no backend chosen"
            raise SattuiError(f"no accelerator found to record ({why})")
        header = make_header(pid=self.pid, cmdline=info.get("cmdline"), backend=backend.name if backend else None,
                             cards=[c.to_record() for c in cards],
                             env=info.get("env") or {}, nspid=info.get("nspid"),
                             launcher=info.get("launcher"), interval_s=self.opts.interval_s,
                             stack_rate_hz=self.opts.rate_hz if self.opts.stacks and tree else None)
        try:
            writer = RecordingWriter(self.opts.out_path, header)
        except BaseException:
            if backend is not None:
                backend.close()
            raise
        if backend is not None and skipped:
            writer.write(Event(self.clock(), "backends_skipped",
                               f"using {backend.name}; passed over: " + "; ".join(skipped),
                               {"skipped": skipped}).to_record())
        if backend is None and skipped:
            writer.write(Event(self.clock(), "no_accelerator", "no accelerator found: " + "; ".join(skipped),
                               {"skipped": skipped}).to_record())
        poller = None
        if backend is not None:
            poller = CardPoller(backend, self.clock, self._card_samples.put, self._events.put,
                                interval_s=self.opts.card_interval_s)
            poller.start()
        exit_code: int | None = None
        try:
            if tree is not None:
                self._start_samplers(tree, info)
            next_tick = time.monotonic()
            deadline = None if self.opts.duration_s is None else next_tick + self.opts.duration_s
            while not self._stop.is_set():
                if tree is not None:
                    procs, events = tree.sample()
                    # The recorder writes trainer_exited itself, with the exit code when it has one.
                    recs = [p.to_record() for p in procs] + [e.to_record() for e in events
                                                             if e.type != "trainer_exited"]
                    if recs:
                        writer.write_many(recs)
                    self._start_samplers(tree, info)
                self._drain(writer)
                if tree is not None and (not tree.main_alive()
                                         or (self.child is not None and self.child.poll() is not None)):
                    self._ended_by = "trainer_exited"
                    exit_code = self._child_exit_code()
                    msg = "trainer exited" + (f" with code {exit_code}" if exit_code is not None else "")
                    writer.write(Event(self.clock(), "trainer_exited", msg,
                                       {"pid": self.pid, "exit_code": exit_code}).to_record())
                    self.log(msg)
                    break
                next_tick += self.opts.interval_s
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    self._ended_by = "duration"
                    break
                wait = next_tick - now
                if deadline is not None:
                    wait = min(wait, deadline - now)
                if wait < 0:  # we fell behind (a slow tick): do not try to catch up in a burst
                    next_tick = now
                    wait = 0
                self._stop.wait(wait)
        finally:
            for s in self._samplers.values():
                s.stop()
            if poller is not None:
                poller.stop()
            if backend is not None:
                backend.close()
            try:
                self._drain(writer)
                writer.write(Event(self.clock(), "recording_ended", f"recording ended: {self._ended_by}",
                                   {"ended_by": self._ended_by}).to_record())
            finally:
                writer.close()
            if self.child is not None and exit_code is None:
                exit_code = self._stop_child()
        return RecordResult(duration_s=self.clock(), records=writer.records_written,
                            trainer_exit_code=exit_code, ended_by=self._ended_by)

    def _start_samplers(self, tree: ProcessTree, info: dict[str, Any]) -> None:
        if info.get("launcher"):
            # A torchrun launcher only waits on its ranks: sample the ranks instead.
            for rpid in tree.rank_pids().values():
                self._start_sampler(rpid)
        elif self.pid is not None:
            self._start_sampler(self.pid)

    def _child_exit_code(self) -> int | None:
        if self.child is None:
            return None
        try:
            return self.child.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return None

    def _stop_child(self) -> int | None:
        """The recording ended first: stop the trainer sattui started (it is ours)."""
        child = self.child
        assert child is not None
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
