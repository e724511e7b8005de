"""``sattui record``: the sampling engine (sattui/engine.py) writing a recording until the
duration ends, the trainer exits, or a signal comes."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sattui.cards import DEFAULT_CARD_INTERVAL_S
from sattui.engine import DEFAULT_INTERVAL_S, Engine
from sattui.recording import RecordingWriter
from sattui.trainer.stacks import DEFAULT_RATE_HZ


@dataclass
class RecordOptions:
    out_path: str
    duration_s: float | None = None
    interval_s: float = DEFAULT_INTERVAL_S
    rate_hz: float = DEFAULT_RATE_HZ
    stacks: bool = True
    backend: str = "auto"
    card_interval_s: float = DEFAULT_CARD_INTERVAL_S
    force: bool = False  # replace an existing out_path (--force)
    # --metrics: a sattui.metrics.node.NodeMetrics to feed (its server runs elsewhere).
    metrics: Any = None
    # --webhook / --on-finding: a function (header, engine) -> sattui.notify.Notifier.
    make_notifier: Any = None


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
        self.engine = Engine(pid, interval_s=opts.interval_s, rate_hz=opts.rate_hz, stacks=opts.stacks,
                             backend=opts.backend, card_interval_s=opts.card_interval_s, child=child,
                             log=self.log)
        self.clock = self.engine.clock

    def request_stop(self, why: str = "signal") -> None:
        self.engine.request_stop(why)

    def run(self) -> RecordResult:
        engine = self.engine
        header = engine.open()
        try:
            writer = RecordingWriter(self.opts.out_path, header, force=self.opts.force)
        except BaseException:
            engine.close_backend()
            raise
        engine.add_sink(writer.write_many)
        on_tick = None
        notifier = self.opts.make_notifier(header, engine) if self.opts.make_notifier is not None else None
        if self.opts.metrics is not None or notifier is not None:
            from sattui.metrics.advised import AdvisedMetrics

            if self.opts.metrics is not None:
                self.opts.metrics.set_header(header)
                engine.add_sink(self.opts.metrics.sink)
            advised = AdvisedMetrics(self.opts.metrics, header, self.clock,
                                     on_findings=notifier.observe if notifier is not None else None)
            engine.add_sink(advised.sink)
            on_tick = advised.on_tick
        ended_by = "signal"
        exit_code: int | None = None
        try:
            if notifier is not None:
                notifier.start()
            engine.start()
            ended_by = engine.run(self.opts.duration_s, on_tick=on_tick)
        finally:
            try:
                try:
                    if notifier is not None:
                        notifier.close()  # before the engine's last records: its events go in the file
                    engine.shutdown(ended_by)
                finally:
                    writer.close()
            finally:
                # Even when the file fails (disk full): a trainer sattui started is not left behind.
                exit_code = engine.exit_code if engine.exit_code is not None else engine.stop_child()
        return RecordResult(duration_s=self.clock(), records=writer.records_written,
                            trainer_exit_code=exit_code, ended_by=ended_by)
