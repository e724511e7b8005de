"""``sattui cluster``'s first screen: the monitor's look for a whole job, one block per
host on one time axis (sattui/cluster/view.py draws it), the job's verdict on top. Enter
on a host opens it in the one-node screens (main, card, help), fed from Prometheus
through a :class:`~sattui.cluster.hostsession.HostSession`; Esc comes back. The app that
runs it: sattui/cluster_app.py.

Prometheus is read in a Textual thread worker running the poller, never on the UI
thread: the screen only draws the poller's latest snapshot, on the app's redraw timer.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer

from sattui.cluster.view import job_lines, status_lines
from sattui.view.binning import Axis
from sattui.view.lines import axis_line
from sattui.widgets.timechart import TimeChart

if TYPE_CHECKING:
    from sattui.cluster_app import ClusterApp


class ClusterUpdated(Message):
    """Posted from the poller's worker thread after each read."""


class ClusterScreen(Screen):
    BINDINGS = [
        Binding("enter", "open_host", "host", tooltip="open the selected host's cards and ranks"),
        Binding("up", "select(-1)", "previous host", show=False),
        Binding("down", "select(1)", "next host", show=False),
    ]

    def __init__(self) -> None:
        super().__init__(name="cluster")
        self.selected: str | None = None
        self.hosts: list[str] = []
        self.top = 0

    def compose(self) -> ComposeResult:
        yield TimeChart(id="cluster-chart")
        yield Footer(compact=True)

    @property
    def app_(self) -> ClusterApp:
        return self.app  # type: ignore[return-value]

    def refresh_cluster(self) -> None:
        app = self.app_
        snap = app.poller.snapshot()
        chart = self.query_one(TimeChart)
        cols = chart.columns
        app.poller.columns = cols.body
        now = time.time()
        axis = Axis.make(now, app.poller.window_s, cols.body)
        height = (self.size.height or app.size.height) - 1  # the footer
        status = status_lines(snap, app.poller.url, cols.width, now)
        room = max(1, height - len(status) - 1)
        lines, self.hosts, self.top = job_lines(snap, axis, cols, room, self.selected, self.top)
        if self.selected not in self.hosts:
            self.selected = self.hosts[0] if self.hosts else None
            lines, self.hosts, self.top = job_lines(snap, axis, cols, room, self.selected, self.top)
        chart.set_lines(status + lines + [axis_line(axis, cols, now, True)])

    def action_select(self, step: int) -> None:
        if not self.hosts:
            return
        i = self.hosts.index(self.selected) if self.selected in self.hosts else 0
        self.selected = self.hosts[max(0, min(len(self.hosts) - 1, i + step))]
        self.refresh_cluster()

    def action_open_host(self) -> None:
        if self.selected is None:
            self.notify("no host to open", severity="warning")
            return
        self.app_.open_host(self.selected)

    def on_time_chart_line_clicked(self, event: TimeChart.LineClicked) -> None:
        if event.key.startswith("host:"):
            self.selected = event.key.split(":", 1)[1]
            self.app_.open_host(self.selected)

    def on_resize(self) -> None:
        self.call_after_refresh(self.refresh_cluster)
