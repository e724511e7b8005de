"""The main screen: header, one row per card, the main thread's state strip under them on
the same time axis, the processes, and the advice."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Static

from sattui.screens.sattui_screen import SattuiScreen
from sattui.view.binning import Axis
from sattui.view.data import ViewData
from sattui.view.lines import main_lines
from sattui.view.status_lines import ViewState
from sattui.widgets.advice import AdvicePanel
from sattui.widgets.header import StatusHeader
from sattui.widgets.timechart import TimeChart

ADVICE_MIN_LINES = 4  # the verdict's evidence and fix must stay readable at 80×24


class MainScreen(SattuiScreen):
    BINDINGS = [
        Binding("enter", "open_selected", "card", tooltip="open the selected card"),
        Binding("up", "select(-1)", "previous card", show=False, tooltip="select a card"),
        Binding("down", "select(1)", "next card", show=False, tooltip="select a card"),
        *(Binding(str(d), f"app.open_card({d})", f"card {d}", show=False, tooltip="open card N")
          for d in range(10)),
    ]

    def __init__(self) -> None:
        super().__init__(name="main")
        self.selected: int | None = None
        self._cards: list[int] = []

    def compose(self) -> ComposeResult:
        yield StatusHeader(id="header")
        yield TimeChart(id="main-chart")
        yield Static(" advice", id="advice-title", classes="section")
        yield AdvicePanel(id="advice")
        yield Footer(compact=True)

    def refresh_view(self, data: ViewData, view: ViewState) -> None:
        header = self.query_one(StatusHeader)
        header.show(data, view)
        chart = self.query_one(TimeChart)
        cols = chart.columns
        axis = Axis.make(data.t_end, data.window_s, cols.body)
        self._cards = [c["card"] for c in data.cards]
        if self.selected not in self._cards:
            self.selected = self._cards[0] if self._cards else None
        header_h = header.line_count
        room = (self.size.height or self.app.size.height) - header_h - 1 - 1 - ADVICE_MIN_LINES
        advice = self.query_one(AdvicePanel)
        lines = main_lines(data, axis, cols, room, self.selected if len(self._cards) > 1 else None,
                           advice_want=advice.show(data) - ADVICE_MIN_LINES)
        chart.set_lines(lines[: max(1, room)])

    def action_select(self, step: int) -> None:
        if not self._cards:
            return
        i = self._cards.index(self.selected) if self.selected in self._cards else 0
        self.selected = self._cards[(i + step) % len(self._cards)]
        self.sattui.redraw(True)

    def action_open_selected(self) -> None:
        if self.selected is not None:
            self.sattui.action_open_card(self.selected)
        else:
            self.notify("no card to open", severity="warning")

    def on_time_chart_line_clicked(self, event: TimeChart.LineClicked) -> None:
        if event.key.startswith("card:"):
            card = int(event.key.split(":", 1)[1])
            self.selected = card
            self.sattui.action_open_card(card)
