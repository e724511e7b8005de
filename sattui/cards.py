"""Polls a card backend in its own thread, so a slow or hung vendor tool delays nothing else.

Each poll's samples go to ``on_samples``; a tool failure goes to ``on_event`` once per
change of state (failing / recovered), not once per poll, and the cards simply have no
new samples meanwhile (stale), never made-up values.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sattui.model import CardSample, Event
from sattui.vendors.backend import Backend, BackendError

DEFAULT_CARD_INTERVAL_S = 0.5


class CardPoller:
    def __init__(self, backend: Backend, clock: Callable[[], float],
                 on_samples: Callable[[list[CardSample]], None], on_event: Callable[[Event], None],
                 interval_s: float = DEFAULT_CARD_INTERVAL_S) -> None:
        self.backend = backend
        self.clock = clock
        self.on_samples = on_samples
        self.on_event = on_event
        self.interval_s = max(interval_s, backend.min_interval_s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failing: str | None = None
        self.polls = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="sattui-cards", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def poll_once(self) -> None:
        try:
            samples = self.backend.sample()
        except BackendError as e:
            msg = str(e)
            if self.failing != msg:
                self.on_event(Event(self.clock(), "backend_failing",
                                    f"{self.backend.name}: {msg}; cards are stale", {"backend": self.backend.name}))
            self.failing = msg
            samples = []
        except Exception as e:  # a parser bug must not kill the poller: say it, keep going
            msg = f"{type(e).__name__}: {e}"
            if self.failing != msg:
                self.on_event(Event(self.clock(), "backend_failing", f"{self.backend.name}: internal error {msg}",
                                    {"backend": self.backend.name}))
            self.failing = msg
            samples = []
        else:
            if self.failing is not None:
                self.on_event(Event(self.clock(), "backend_recovered", f"{self.backend.name}: reading cards again",
                                    {"backend": self.backend.name}))
                self.failing = None
        for ev in self.backend.take_events():
            self.on_event(ev)
        self.polls += 1
        if samples:
            self.on_samples(samples)

    def _loop(self) -> None:
        while not self._stop.is_set():
            t0 = self.clock()
            self.poll_once()
            self._stop.wait(max(0.0, self.interval_s - (self.clock() - t0)))
