"""The Backend ABC, its errors, the registry, auto-detection.

A backend reads the cards of one vendor and normalises them to ``CardInfo`` /
``CardSample`` (``sattui.model``): units in the names, percentages 0–100, bytes,
watts, and ``None`` wherever the source gives nothing — never a made-up 0.

Every backend module in this package registers its class (``@register``); the names
``--backend`` accepts and the order ``auto`` tries them in come from those classes
(``auto_rank``), so adding a backend is adding a module (docs/vendors.md).
"""

from __future__ import annotations

import importlib
import pkgutil
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from sattui.errors import SattuiError
from sattui.model import CardInfo, CardSample, Event


class BackendError(SattuiError):
    """A backend cannot give cards; the message is one line naming the cause."""


class BackendUnavailable(BackendError):
    """The backend cannot run here: library or tool missing, no permission, no cards."""


class ToolError(BackendError):
    """The vendor tool failed this time: it hung, crashed or exited non-zero."""


class ParseError(BackendError):
    """The tool printed something no known layout matches. Names the tool and its version."""


@dataclass
class Probe:
    """What ``doctor`` says of a backend, cheaply found (no card sampled)."""

    name: str
    available: bool
    reason: str | None = None  # why not, or a note ("unverified: no public output seen")
    version: str | None = None
    path: str | None = None
    verified: bool = True


class Backend(ABC):
    """One vendor's cards. ``discover`` once, ``sample`` per tick, ``close`` at the end.

    ``sample`` returns one ``CardSample`` per card it could read. A field the tool did
    not give is ``None``. A failure of the whole tool raises ``ToolError`` or
    ``ParseError``; the caller marks the cards stale and logs an event. Events a
    backend notices itself (a card lost) go to ``self.events``; the caller drains them
    with ``take_events``.
    """

    name: ClassVar[str]
    vendor: ClassVar[str]
    verified: ClassVar[bool] = True
    # The least time between two samples: a tool that takes ~0.5 s a call (npu-smi)
    # is not run at 10 Hz. A backend may set its own once it knows which tool it reads.
    min_interval_s: float = 0.5
    # Where ``--backend auto`` tries this backend: lower first; None: only when named.
    auto_rank: ClassVar[int | None] = None

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.events: list[Event] = []

    @classmethod
    @abstractmethod
    def probe(cls) -> Probe:
        """Is this backend usable here, and why not? Must be cheap and never raise."""

    @abstractmethod
    def discover(self) -> list[CardInfo]:
        """The cards, once. Raises ``BackendUnavailable`` / ``ToolError`` / ``ParseError``."""

    @abstractmethod
    def sample(self) -> list[CardSample]:
        """One sample per readable card at ``self.clock()``."""

    def close(self) -> None:
        """Release what the backend holds (a library handle, a child process)."""

    def take_events(self) -> list[Event]:
        ev, self.events = self.events, []
        return ev


REGISTRY: dict[str, type[Backend]] = {}
# Names ``--backend`` takes that are no backend class.
AUTO = "auto"
NONE = "none"


def register(cls: type[Backend]) -> type[Backend]:
    REGISTRY[cls.name] = cls
    return cls


_loaded = False


def load_all() -> None:
    """Import every module of this package, so every backend has registered itself."""
    global _loaded
    if _loaded:
        return
    package = __name__.rpartition(".")[0]
    for mod in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{package}.{mod.name}")
    _loaded = True


def auto_order() -> tuple[str, ...]:
    """The backends ``auto`` tries, in order: NVML first, then vendor tools, then Linux DRM."""
    load_all()
    ranked = [(cls.auto_rank, name) for name, cls in REGISTRY.items() if cls.auto_rank is not None]
    return tuple(name for _, name in sorted(ranked))


def backend_names() -> tuple[str, ...]:
    """Every name ``--backend`` takes: auto, the auto order, the backends only named (sim), none."""
    auto = auto_order()
    named_only = sorted(n for n in REGISTRY if n not in auto)
    return (AUTO, *auto, *named_only, NONE)


def probe_all() -> list[Probe]:
    out = []
    for name in auto_order():
        cls = REGISTRY[name]
        try:
            out.append(cls.probe())
        except Exception as e:  # a probe must never take doctor down
            out.append(Probe(name, False, f"probe failed: {type(e).__name__}: {e}"))
    return out


def open_backend(name: str, clock: Callable[[], float] = time.monotonic
                 ) -> tuple[Backend | None, list[CardInfo], list[str]]:
    """The backend to use and its cards, plus why others were passed over (``auto``).

    ``none`` gives no backend. A forced backend that cannot start raises its error.
    """
    if name == NONE:
        return None, [], []
    load_all()
    if name != AUTO:
        cls = REGISTRY.get(name)
        if cls is None:
            raise BackendError(f"unknown backend {name!r}; one of: {', '.join(backend_names())}")
        backend = cls(clock)
        try:
            cards = backend.discover()
        except BaseException:
            backend.close()
            raise
        return backend, cards, []
    skipped = []
    for n in auto_order():
        cls = REGISTRY[n]
        p = cls.probe()
        if not p.available:
            skipped.append(f"{n}: {p.reason}")
            continue
        backend = cls(clock)
        try:
            cards = backend.discover()
        except BackendError as e:
            backend.close()
            skipped.append(f"{n}: {e}")
            continue
        if cards:
            return backend, cards, skipped
        backend.close()
        skipped.append(f"{n}: no cards found")
    return None, [], skipped
