"""``Presence``: cards that stop (or start again) answering, as events.

A card missing from one sample is stale (no sample), not zero; the user should still
hear once that it went away, and once that it came back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sattui.model import Event


class Presence:
    """Which known cards the backend's last answer left out, told once each way."""

    def __init__(self, backend_name: str, clock: Callable[[], float]) -> None:
        self.backend_name = backend_name
        self.clock = clock
        self.known: set[int] = set()
        self.lost: set[int] = set()

    def set_known(self, cards: Iterable[int]) -> None:
        self.known = set(cards)
        self.lost = set()

    def update(self, seen: Iterable[int]) -> list[Event]:
        seen = set(seen)
        out: list[Event] = []
        for c in sorted(self.known - seen - self.lost):
            self.lost.add(c)
            out.append(Event(self.clock(), "card_lost", f"{self.backend_name}: card {c} no longer reported",
                             {"card": c, "backend": self.backend_name}))
        for c in sorted(self.lost & seen):
            self.lost.discard(c)
            out.append(Event(self.clock(), "card_recovered", f"{self.backend_name}: card {c} reported again",
                             {"card": c, "backend": self.backend_name}))
        return out
