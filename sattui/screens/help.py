"""The help screen: every key, what the glyphs mean, and where the numbers come from."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence

from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from sattui.clock_events import CLOCK_REASONS
from sattui.screens.sattui_screen import SubScreen
from sattui.states import State
from sattui.view.data import ViewData
from sattui.view.status_lines import ViewState

PARAGRAPHS = (
    ("Reading the strips",
     "Every strip on a screen shares one time axis: the same window, the same buckets, so a "
     "utilization dip and a data wait stand one above the other. Utilization and SM activity "
     "draw each bucket's MEAN as the bar's height, so a busy span reads at its true level, and "
     "its MINIMUM as the bar's texture: solid (▁▂▃▄▅▆▇█) where every sample stayed at 50 % or "
     "more, dotted (⡀⣀⣄⣤⣦⣶⣷⣿) and red where one fell under 50 %, so a dip shorter than a "
     "bucket is never averaged away, with or without colour. CPU, memory, power, temperature "
     "and I/O draw the bucket's mean. A blank cell means no sample there; n/a means the source "
     "does not report the value (never shown as 0). SIMULATED marks a card that is not real "
     "hardware."),
    ("Main-thread states",
     "One letter per bucket, on the state's colour. A wait that fills a quarter of a bucket wins "
     "over compute, so short waits are not drowned. After the top states: the training steps "
     "per second seen from outside over the window (each return from the DataLoader into the "
     "step; 2.1/s), where the sampling rate resolves them; the stacks screen gives their "
     "spread (p50, p90) or why they cannot be seen."),
    ("Ranks",
     "A job of several ranks (torchrun) gets a state strip per rank, labelled rank N. Where they "
     "do not all fit, the strips shown are the picked rank, the odd ones out (a top state few "
     "other ranks share: in ranks that wait for each other, the rank they wait for), then those "
     "losing the most time; +N ranks names the rest. r picks a rank: the stacks and workers "
     "screens then show that rank only (its main thread, its own workers); r again the next; "
     "all ranks first."),
    ("Dips (card screen)",
     "The card's recent dips: runs of utilization under 50 % lasting 0.5 s or more (Nsight "
     "Systems' gpu_gaps), in the 5 minutes up to the view's end, newest first: when, how long, "
     "the lowest utilization, and the cause the time ledger gives that stretch (the biggest "
     "part of the card's idle time, from the state of the rank using the card and what its "
     "workers did at those moments). Live, a dip of the last few seconds waits for its stacks. "
     "Enter moves the view to the highlighted dip (live, it pauses there) and marks it ▔ under "
     "the utilization chart."),
)


def _hang(out: Text, head: str, body: str, width: int, head_style: str = "bold cyan") -> None:
    lines = textwrap.wrap(body, max(20, width - len(head))) or [""]
    out.append(head, head_style)
    out.append(lines[0] + "\n")
    for line in lines[1:]:
        out.append(" " * len(head) + line + "\n")


KeyLine = tuple[str, str]


def _key_text(app: App[object] | None, binding: Binding) -> str:
    if binding.key_display:
        return binding.key_display
    return app.get_key_display(binding) if app is not None else binding.key


def key_lines(bindings: Iterable[Binding | tuple[str, ...]], app: App[object] | None = None) -> list[KeyLine]:
    """``(keys, what)`` for each action, from the bindings themselves (never a hand copy):
    bindings that share a help text are one line (``[ ]``, ``← →``, ``0-9``)."""
    order: list[str] = []
    keys: dict[str, list[str]] = {}
    for b in bindings:
        if not isinstance(b, Binding):
            b = Binding(b[0], b[1], b[2] if len(b) > 2 else "")
        what = b.tooltip or b.description
        if not what:
            continue
        if what not in keys:
            order.append(what)
            keys[what] = []
        for k in _key_text(app, b).split():  # "[ ]" shows a pair in the footer
            if k not in keys[what]:
                keys[what].append(k)
    out = []
    for what in order:
        ks = keys[what]
        out.append((f"{ks[0]}-{ks[-1]}" if len(ks) > 3 else " ".join(ks), what))
    return out


def help_text(width: int = 80, keys: Sequence[tuple[str, Sequence[KeyLine]]] = ()) -> Text:
    """The help, wrapped to ``width`` with hanging indents; ``keys`` is ``(where, lines)``
    per screen (:func:`key_lines`)."""
    out = Text(end="")
    for where, lines in keys:
        out.append(f"Keys {where}\n", "bold")
        for k, what in lines:
            _hang(out, f"  {k:<12} ", what, width)
        out.append("\n")
    for title, body in PARAGRAPHS:
        out.append(f"{title}\n", "bold")
        for line in textwrap.wrap(body, max(20, width - 2)):
            out.append("  " + line + "\n")
        out.append("\n")
    for st in State:
        # The letter as the strip draws it: its own colours, not reverse video.
        out.append("  ")
        out.append(f" {st.glyph} ", Style(color=st.color, bgcolor=st.background, bold=st.bold))
        _hang(out, f" {st.value:<12}", st.help, width - 5, head_style="bold")
    out.append("\nNVML clock-event reasons (card screen)\n", "bold")
    for bit, name in CLOCK_REASONS.items():
        out.append(f"  0x{bit:<4x} {name}\n")
    out.append("\nKernel states (workers screen)\n", "bold")
    out.append("  R running, S sleeping, D disk wait, Z zombie, T stopped\n")
    return out


def screen_keys(app: App[object]) -> list[tuple[str, list[KeyLine]]]:
    """Every screen's keys, read from the bindings of the app and of each screen class."""
    from sattui.screens.card import CardScreen, DipList
    from sattui.screens.main import MainScreen
    from sattui.screens.stack_top import StacksScreen

    everywhere = [*type(app).BINDINGS, *SubScreen.BINDINGS]
    if app.ENABLE_COMMAND_PALETTE:
        everywhere.append(Binding(app.COMMAND_PALETTE_BINDING, "command_palette", "command palette",
                                  tooltip="command palette: every action by name"))
    groups: list[tuple[str, Iterable[Binding | tuple[str, ...]]]] = [
        ("everywhere", everywhere), ("on the main screen", MainScreen.BINDINGS),
        ("on a card", [*CardScreen.BINDINGS, *DipList.BINDINGS]), ("on the stacks screen", StacksScreen.BINDINGS)]
    seen: set[str] = set()
    out = []
    for where, bindings in groups:
        lines = [kl for kl in key_lines(bindings, app) if kl[1] not in seen]
        seen.update(w for _, w in lines)
        if lines:
            out.append((where, lines))
    return out


class HelpScreen(SubScreen):
    def __init__(self) -> None:
        super().__init__(name="help")
        self._width = 0

    def compose(self) -> ComposeResult:
        yield Static(" sattui help", classes="section")
        with VerticalScroll(id="help-scroll"):
            yield Static(id="help-text")
        yield Footer(compact=True)

    def refresh_view(self, data: ViewData, view: ViewState) -> None:
        # Nothing here moves with time; only a new width re-wraps the text.
        width = (self.size.width or self.app.size.width) - 4  # padding and scrollbar
        if width != self._width:
            self._width = width
            self.query_one("#help-text", Static).update(help_text(width, screen_keys(self.app)))
