"""The help screen: every key, what the glyphs mean, and where the numbers come from."""

from __future__ import annotations

import textwrap

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from sattui.screens.base import SubScreen
from sattui.widgets.header import ViewState
from sattui.widgets.rows import CLOCK_REASONS, STATE_GLYPHS
from sattui.widgets.viewdata import ViewData

KEYS = (
    ("q", "quit"),
    ("?", "this help"),
    ("Esc", "back to the previous screen"),
    ("Enter / 0-9", "open the selected card / card N  (↑ ↓ select a card)"),
    ("w", "workers: every process of the trainer's tree, CPU, state and I/O"),
    ("s", "stacks: main-thread functions by share of samples (f: state filter, o: sort by own/total)"),
    ("p", "pause the view (sampling goes on); p again follows now"),
    ("[  ]", "zoom the time window in / out: 30s 1m 2m 5m 15m 30m 1h"),
    ("← →", "move the view back / forward in time (live: pauses; replay: the cursor)"),
    ("Space", "replay: play / pause"),
    ("Ctrl+P", "command palette: every action by name"),
)

STATE_HELP = {
    "data_wait": "waiting for the DataLoader's next batch",
    "data_inline": "loading data on the main thread (num_workers=0)",
    "sync": "host waits for the device (.item(), .cpu(), synchronize)",
    "h2d_copy": "copying to the device",
    "collective": "all_reduce / barrier … (waiting for other ranks)",
    "forward": "forward pass", "backward": "backward pass", "optimizer": "optimizer step",
    "compile": "torch.compile", "checkpoint": "saving a checkpoint", "eval": "evaluation loop",
    "logging": "logging / printing", "other": "none of the above", "idle": "sleeping / waiting on nothing known",
    "startup": "imports after attach (left out of every share)",
}


PARAGRAPHS = (
    ("Reading the strips",
     "Every strip on a screen shares one time axis: the same window, the same buckets, so a "
     "utilization dip and a data wait stand one above the other. Utilization and SM activity "
     "draw each bucket's MINIMUM (▁▂▃▄▅▆▇█), so a short dip stays visible; CPU, memory, power, "
     "temperature and I/O draw the bucket's MEAN. A blank cell means no sample there; n/a means "
     "the source does not report the value (never shown as 0). SIMULATED marks a card that is "
     "not real hardware."),
    ("Main-thread states",
     "One letter per bucket, on the state's colour. A wait that fills a quarter of a bucket wins "
     "over compute, so short waits are not drowned."),
)


def _hang(out: Text, head: str, body: str, width: int, head_style: str = "bold cyan") -> None:
    lines = textwrap.wrap(body, max(20, width - len(head))) or [""]
    out.append(head, head_style)
    out.append(lines[0] + "\n")
    for line in lines[1:]:
        out.append(" " * len(head) + line + "\n")


def help_text(width: int = 80) -> Text:
    """The help, wrapped to ``width`` with hanging indents."""
    out = Text(end="")
    out.append("Keys\n", "bold")
    for k, what in KEYS:
        _hang(out, f"  {k:<13}", what, width)
    for title, body in PARAGRAPHS:
        out.append(f"\n{title}\n", "bold")
        for line in textwrap.wrap(body, max(20, width - 2)):
            out.append("  " + line + "\n")
    for st, what in STATE_HELP.items():
        out.append(f"  {STATE_GLYPHS[st]} ", "reverse")
        _hang(out, f" {st:<12}", what, width - 4, head_style="bold")
    out.append("\nNVML clock-event reasons (card screen)\n", "bold")
    for bit, name in CLOCK_REASONS.items():
        out.append(f"  0x{bit:<4x} {name}\n")
    out.append("\nKernel states (workers screen)\n", "bold")
    out.append("  R running, S sleeping, D disk wait, Z zombie, T stopped\n")
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
            self.query_one("#help-text", Static).update(help_text(width))
