"""The main thread's states: the one home of their names, letters, help texts and colours.

Every main-thread stack sample gets one state (the classifier, ``sattui/trainer/classifier.py``,
says which); the strips draw one letter per bucket on the state's colour, the help screen
lists them, the report's ``trainer.states`` shares are keyed by them (docs/states.md), and the
stylesheet's ``st-*`` rules are generated from :func:`strip_css` here. A state is a
``str`` (``State.DATA_WAIT == "data_wait"``), so recordings and JSON keep plain names.

Colour never carries meaning alone: each state has its own letter, so ``NO_COLOR`` and a
16-colour terminal still read. Waits are warm (red, violet, yellow, orange, cyan), compute
is green, the rest muted; hex, not ANSI names (Textual's default ANSI theme draws red and
magenta alike).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class State(str, Enum):
    """A main-thread state, in display order; ``startup`` is counted apart (see
    :data:`EXCLUDED`)."""

    DATA_WAIT = "data_wait"
    DATA_INLINE = "data_inline"
    SYNC = "sync"
    H2D_COPY = "h2d_copy"
    COLLECTIVE = "collective"
    FORWARD = "forward"
    BACKWARD = "backward"
    OPTIMIZER = "optimizer"
    COMPILE = "compile"
    CHECKPOINT = "checkpoint"
    EVAL = "eval"
    LOGGING = "logging"
    OTHER = "other"
    IDLE = "idle"
    STARTUP = "startup"

    def __str__(self) -> str:
        return self.value

    @property
    def glyph(self) -> str:
        """The strip's letter for it (unique, so the strip reads without colour)."""
        return _LOOK[self].glyph

    @property
    def help(self) -> str:
        return _LOOK[self].help

    @property
    def color(self) -> str:
        return _LOOK[self].color

    @property
    def background(self) -> str | None:
        return _LOOK[self].background

    @property
    def bold(self) -> bool:
        return _LOOK[self].bold

    @property
    def text_style(self) -> str:
        """The Rich style of its name in plain text (the stacks table)."""
        return _LOOK[self].text_style

    @property
    def style_class(self) -> str:
        """The chart's component-class suffix for this state (``chart--st-data_wait``)."""
        return style_class(self.value)


@dataclass(frozen=True)
class _Look:
    glyph: str
    help: str
    color: str
    background: str | None
    bold: bool
    text_style: str


_LOOK = {
    State.DATA_WAIT: _Look("W", "waiting for the DataLoader's next batch", "#ffffff", "#d7263d", True, "bold red"),
    State.DATA_INLINE: _Look("L", "loading data on the main thread (num_workers=0)", "#000000", "#e040fb", True,
                             "bold magenta"),
    State.SYNC: _Look("S", "host waits for the device (.item(), .cpu(), synchronize)", "#000000", "#f4d03f", False,
                      "bold yellow"),
    State.H2D_COPY: _Look("H", "copying to the device", "#000000", "#ff9f43", False, "yellow"),
    State.COLLECTIVE: _Look("C", "all_reduce / barrier … (waiting for other ranks)", "#000000", "#26c6da", False,
                            "bold cyan"),
    State.FORWARD: _Look("f", "forward pass", "#000000", "#66bb6a", False, "green"),
    State.BACKWARD: _Look("b", "backward pass", "#ffffff", "#2e7d32", False, "green"),
    State.OPTIMIZER: _Look("o", "optimizer step", "#000000", "#aed581", False, "green"),
    State.COMPILE: _Look("c", "torch.compile", "#ffffff", "#5c6bc0", False, "blue"),
    State.CHECKPOINT: _Look("K", "saving a checkpoint", "#ffffff", "#8d6e63", False, "magenta"),
    State.EVAL: _Look("E", "evaluation loop", "#000000", "#64b5f6", False, "blue"),
    State.LOGGING: _Look("g", "logging / printing", "#ffffff", "#757575", False, "dim"),
    State.OTHER: _Look("?", "none of the above", "#ffffff", "#616161", False, "dim"),
    State.IDLE: _Look(".", "sleeping / waiting on nothing known", "#9e9e9e", None, False, "dim"),
    State.STARTUP: _Look("~", "imports after attach (left out of every share)", "#757575", None, False, "dim"),
}


# Samples in these are counted apart and left out of every share.
EXCLUDED = (State.STARTUP,)
# The states a share is taken over, in display order (the report's ``trainer.states`` keys).
COUNTED = tuple(s for s in State if s not in EXCLUDED)
NAMES = tuple(s.value for s in State)
COUNTED_NAMES = tuple(s.value for s in COUNTED)
# Waits on something other than the trainer's own compute.
WAITS = (State.DATA_WAIT, State.DATA_INLINE, State.SYNC, State.H2D_COPY, State.COLLECTIVE)
COMPUTE = (State.FORWARD, State.BACKWARD, State.OPTIMIZER)

_BY_NAME = {s.value: s for s in State}


def state_of(name: str | None) -> State | None:
    """The state called ``name``, or None for None or a name this version does not know
    (a recording from a newer sattui)."""
    return _BY_NAME.get(name) if name is not None else None


def glyph(name: str | None) -> str:
    st = state_of(name)
    return st.glyph if st is not None else "?"


def style_class(name: str) -> str:
    """The chart's component-class suffix of a state name (known or not)."""
    return f"st-{name}"


def strip_css(selector: str = "TimeChart > .chart--") -> str:
    """The stylesheet rules of every state's strip colour (appended to app.tcss's)."""
    rules = []
    for s in State:
        decl = [f"color: {s.color};"]
        if s.background:
            decl.append(f"background: {s.background};")
        if s.bold:
            decl.append("text-style: bold;")
        rules.append(f"{selector}{s.style_class} {{ {' '.join(decl)} }}")
    return "\n".join(rules) + "\n"
