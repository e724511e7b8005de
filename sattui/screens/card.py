"""The card screen: larger charts of every metric of one card, its clock-event reasons
decoded, the processes on it, and the trainer's state strip beneath on the same axis."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from sattui.screens.base import SubScreen
from sattui.textsafe import clean
from sattui.widgets import fmt
from sattui.widgets.binning import Axis
from sattui.widgets.header import StatusHeader, ViewState
from sattui.widgets.rows import card_screen_lines
from sattui.widgets.timechart import TimeChart
from sattui.widgets.viewdata import ViewData


class CardScreen(SubScreen):
    BINDINGS = [
        *SubScreen.BINDINGS,
        Binding("tab", "next_card(1)", "next card", show=False),
        Binding("shift+tab", "next_card(-1)", "previous card", show=False),
        *(Binding(str(d), f"app.open_card({d})", f"card {d}", show=False) for d in range(10)),
    ]

    def __init__(self, card: int) -> None:
        super().__init__(name=f"card-{card}")
        self.card = card
        self._cards: list[int] = []

    def compose(self) -> ComposeResult:
        yield StatusHeader(id="header")
        yield Static(id="card-title", classes="section")
        with VerticalScroll(id="card-scroll"):
            yield TimeChart(id="card-chart")
        yield Footer(compact=True)

    def refresh_view(self, data: ViewData, view: ViewState) -> None:
        super().refresh_view(data, view)
        self._cards = [c["card"] for c in data.cards]
        info = next((c for c in data.cards if c["card"] == self.card), {"card": self.card})
        parts = [f" card {self.card}"]
        if data.simulated(info):
            parts.append("SIMULATED")
        parts.append(str(info.get("name") or "unknown card"))
        if info.get("vendor"):
            parts.append(str(info["vendor"]))
        if info.get("mem_total"):
            parts.append(f"{fmt.size(info['mem_total'])} memory")
        if info.get("power_limit_w"):
            parts.append(f"{fmt.watts(info['power_limit_w'])} limit")
        if info.get("pcie_gen_max"):
            parts.append(f"PCIe gen{info['pcie_gen_max']} x{info.get('pcie_width_max') or '?'}")
        if self.card in data.lost_cards():
            parts.append("LOST")
        # The name and vendor are the tool's words: escaped, and a Text, not markup.
        title = clean(" · ".join(parts))
        t = self.query_one("#card-title", Static)
        if getattr(t, "_sattui_text", None) != title:
            t._sattui_text = title  # type: ignore[attr-defined]
            t.update(Text(title))
        chart = self.query_one(TimeChart)
        cols = chart.columns
        axis = Axis.make(data.t_end, data.window_s, cols.body)
        header_h = len(self.query_one(StatusHeader)._runs)
        room = (self.size.height or self.app.size.height) - header_h - 1 - 1
        chart.set_lines(card_screen_lines(data, axis, cols, self.card, room))

    def action_next_card(self, step: int) -> None:
        if self.card in self._cards and len(self._cards) > 1:
            i = self._cards.index(self.card)
            self.sattui.action_open_card(self._cards[(i + step) % len(self._cards)])
