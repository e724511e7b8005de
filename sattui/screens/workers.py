"""The workers screen: every process of the trainer's tree with its CPU, kernel state and
I/O histories on the shared time axis."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from sattui.screens.sattui_screen import SubScreen
from sattui.view.binning import Axis
from sattui.view.data import ViewData
from sattui.view.lines import worker_screen_lines
from sattui.view.status_lines import ViewState
from sattui.widgets.header import StatusHeader
from sattui.widgets.timechart import TimeChart


class WorkersScreen(SubScreen):
    def __init__(self) -> None:
        super().__init__(name="workers")
        self._title = ""

    def compose(self) -> ComposeResult:
        yield StatusHeader(id="header")
        yield Static(" processes of the trainer's tree", id="workers-title", classes="section")
        with VerticalScroll(id="workers-scroll"):
            yield TimeChart(id="workers-chart")
        yield Footer(compact=True)

    def refresh_view(self, data: ViewData, view: ViewState) -> None:
        super().refresh_view(data, view)
        title = " processes of the trainer's tree" if data.rank_pid is None else \
            f" processes of {data.rank_label} (r: the next rank)"
        if title != self._title:
            self._title = title
            self.query_one("#workers-title", Static).update(title)
        chart = self.query_one(TimeChart)
        cols = chart.columns
        axis = Axis.make(data.t_end, data.window_s, cols.body)
        # The rows under the header, the title and the footer are the charts'.
        height = (self.size.height or self.app.size.height) - self.query_one(StatusHeader).line_count - 2
        chart.set_lines(worker_screen_lines(data, axis, cols, height))
