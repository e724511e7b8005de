"""``CliBackend``: the base of every backend that reads a vendor command-line tool.

What all of them share: one ``Tool`` (found once, run by argument list with a timeout),
the cards found at discovery, and the ``Presence`` events of cards that stop answering.

The simplest backends are a table layout and nothing else: they name their tool
(``tools``), the listing's arguments (``list_args``), a ``parse`` of the listing into
readings and a ``header_version``; discovery and every sample run that one listing.
Backends whose tool has several views (rocm, hygon, intel, ascend) override
``discover``/``sample`` and end them with ``_remember_cards``/``_samples_of``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from sattui.model import CardInfo, CardSample
from sattui.vendors.backend import Backend, BackendError, BackendUnavailable, ParseError, Probe
from sattui.vendors.presence import Presence
from sattui.vendors.reading import CardReading
from sattui.vendors.tool import DEFAULT_TOOL_TIMEOUT_S, Tool, find_tool, run_tool


class CliBackend(Backend):
    """A backend over one vendor tool. See the module docstring for what to override."""

    tools: ClassVar[tuple[str, ...]] = ()  # the tool's names, in the order they are looked for
    list_args: ClassVar[tuple[str, ...]] = ()  # the listing that discovery and samples read
    version_args: ClassVar[tuple[str, ...]] = ("--version",)
    probe_note: ClassVar[str | None] = None  # said by doctor whether or not the tool is found
    default_timeout_s: ClassVar[float] = DEFAULT_TOOL_TIMEOUT_S

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, timeout_s: float | None = None) -> None:
        super().__init__(clock)
        self.timeout_s = self.default_timeout_s if timeout_s is None else timeout_s
        self.tool: Tool | None = None
        self.mode: str | None = None  # which of the tool's views discovery chose, where it has several
        self.cards: dict[int, CardInfo] = {}
        self._presence = Presence(self.name, clock)

    @property
    def version(self) -> str | None:
        return self.tool.version() if self.tool else None

    # -- the table layout: what a listing-only backend provides ------------------------------

    @staticmethod
    def parse(text: str) -> dict[int, CardReading]:
        raise NotImplementedError

    @staticmethod
    def header_version(text: str) -> str | None:
        return None

    @classmethod
    def locate(cls) -> str | None:
        for t in cls.tools:
            p = find_tool(t)
            if p:
                return p
        return None

    @classmethod
    def probe(cls) -> Probe:
        def why(reason: str) -> str:
            return f"{reason}; {cls.probe_note}" if cls.probe_note else reason

        try:
            path = cls.locate()
            if path is None:
                return Probe(cls.name, False, why(f"{cls.tools[0]} not found"), verified=cls.verified)
            # The listing itself: its header names the version, and a tool that hangs
            # or fails here would fail discovery too.
            try:
                run = run_tool([path, *cls.list_args], timeout_s=cls.default_timeout_s)
            except BackendError as e:
                return Probe(cls.name, False, why(str(e)), None, path, verified=cls.verified)
            return Probe(cls.name, True, cls.probe_note, cls.header_version(run.stdout), path, verified=cls.verified)
        except Exception as e:  # a probe must never take doctor down
            return Probe(cls.name, False, why(f"probe failed: {type(e).__name__}: {e}"), verified=cls.verified)

    def _tool(self) -> Tool:
        if self.tool is None:
            path = self.locate()
            if path is None:
                raise BackendUnavailable(f"{self.tools[0]} not found")
            self.tool = Tool(self.tools[0], path, self.timeout_s, version_args=self.version_args,
                             header_version=self.header_version)
        return self.tool

    def read(self) -> dict[int, CardReading]:
        return self._tool().run_parse(self.list_args, type(self).parse)

    def discover(self) -> list[CardInfo]:
        return self._remember_cards(self.read())

    def sample(self) -> list[CardSample]:
        if not self.cards:
            self.discover()
        return self._samples_of(self.read())

    # -- shared bookkeeping ---------------------------------------------------------------

    def _remember_cards(self, readings: dict[int, CardReading]) -> list[CardInfo]:
        """Discovery's result: the cards, from now on watched for going missing."""
        self.cards = {i: readings[i].to_info(i, self.vendor) for i in sorted(readings)}
        self._presence.set_known(self.cards)
        if self.tool is not None and self.tool.header_version is None:
            # A tool whose output names no version is asked now (best effort), after it
            # proved it answers: asked first at an error, a hung tool would cost two timeouts.
            self.tool.version()
        return list(self.cards.values())

    def _samples_of(self, readings: dict[int, CardReading]) -> list[CardSample]:
        """One tick's samples of the cards discovery found (the recording's header lists
        only those); a known card missing from ``readings`` becomes a lost event."""
        t = self.clock()
        known = {i: r for i, r in readings.items() if i in self.cards}
        out = [r.to_sample(t, i, self.cards[i]) for i, r in sorted(known.items())]
        self.events.extend(self._presence.update(known))
        return out

    def _run_view(self, args: tuple[str, ...], fn: Callable[[str], Any]) -> Any:
        """``tool.run_parse`` for backends whose errors name the command as the view that
        failed ("xpu-smi 1.2.39: stats -d 0: <why>")."""
        assert self.tool is not None
        return self.tool.run_parse(args, fn, view=" ".join(args) or "(no arguments)")

    def _read_json_else_text(self, *, json_mode: str, read_json: Callable[[], dict[int, CardReading]],
                             text_mode: str, read_text: Callable[[], dict[int, CardReading]],
                             text_view: str) -> dict[int, CardReading]:
        """``read_json()`` in ``json_mode``; if its layout is not one we know, the tool's
        text view (``read_text()``, ``text_mode``) instead. Both unknown: one ParseError
        saying why each failed. ``mode`` is set only to the one that parsed."""
        try:
            readings = read_json()
            self.mode = json_mode
        except ParseError as e_json:
            try:
                readings = read_text()
                self.mode = text_mode
            except ParseError as e_text:
                raise ParseError(f"{e_json}; {text_view} did not match either "
                                 f"({str(e_text).split(': ', 2)[-1]})") from None
        return readings
