"""A live Session frozen in time, for the degraded states a replay cannot show.

Replays in these tests use the real ``sattui.session.ReplaySession``. ``FrozenLive`` is a
real ``Session`` subclass (so ``findings()``, ``processes()`` and the lock are the real
ones) whose clock the test sets and whose ``status()`` the test writes: no accelerator,
no ptrace permission, trainer exited, a card lost, the vendor tool failing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sattui.recording import RecordingReader
from sattui.session import Session, SessionStatus
from sattui.timeline import Timeline


def status(**kw: Any) -> SessionStatus:
    base: dict[str, Any] = dict(sampler="sampling", sampler_message=None, sampler_rate_hz=20.0, trainer_alive=True,
                                trainer_exit_code=None, backend="sim", backend_message=None, recording_path=None)
    base.update(kw)
    return SessionStatus(**base)


class FrozenLive(Session):
    """Records of a recording up to ``t`` (plus ``extra``), seen live at ``t``."""

    def __init__(self, path: str, t: float, st: SessionStatus | None = None, extra: Iterable[dict[str, Any]] = (),
                 header: dict[str, Any] | None = None) -> None:
        reader = RecordingReader(path)
        records = [r for r in reader.records() if float(r.get("t_end", r["t"])) <= t]
        records += list(extra)
        records.sort(key=lambda r: float(r["t"]))
        super().__init__(Timeline(), header if header is not None else reader.header, live=True)
        for r in records:
            self.feed.add_record(r)
        self.t = t
        self.st = st or status()
        self.on_update = None
        self.started = self.stopped = 0

    def now(self) -> float:
        return self.t

    def status(self) -> SessionStatus:
        return self.st

    def start(self) -> None:
        self.started += 1

    def stop(self) -> None:
        self.stopped += 1
