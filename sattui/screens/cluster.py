"""``sattui cluster``: the monitor's look for a whole job, one block per host on one time
axis (sattui/cluster/view.py draws it), the job's verdict on top. Enter on a host opens
it in the one-node screens (main, card, help), fed from Prometheus through a
:class:`~sattui.cluster.hostsession.HostSession`; Esc comes back.

Prometheus is read in a Textual thread worker running the poller, never on the UI
thread: the screen only draws the poller's latest snapshot, on the app's redraw timer.
"""

from __future__ import annotations

import time
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer
from textual.worker import get_current_worker

from sattui.app import SattuiApp
from sattui.cluster.hostsession import HostSession
from sattui.cluster.view import ClusterPoller, job_lines, status_lines
from sattui.screens.main import MainScreen
from sattui.view.binning import Axis, BinCache
from sattui.view.lines import axis_line
from sattui.widgets.timechart import TimeChart


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


class ClusterApp(SattuiApp):
    """The monitor's app over a job: its first screen is the cluster's, and a host opened
    from it becomes the session the one-node screens draw."""

    TITLE = "sattui cluster"
    BINDINGS = [*SattuiApp.BINDINGS, Binding("escape", "go_back", "back", tooltip="back to the hosts")]

    def __init__(self, poller: ClusterPoller, **kwargs: Any) -> None:
        self.poller = poller
        super().__init__(HostSession("-", True, url=poller.url), start_session=False, **kwargs)

    def first_screen(self) -> Screen:
        return ClusterScreen()

    def on_mount(self) -> None:
        # SattuiApp.on_mount runs after this (Textual calls each class's handler): it opens
        # first_screen() and starts the redraw timer.
        def on_update() -> None:
            self.post_message(ClusterUpdated())
        self.poller.on_update = on_update
        self.run_worker(self._read, name="prometheus", thread=True, exit_on_error=False)

    def _read(self) -> None:
        """The thread worker's body: every Prometheus read happens here, off the UI thread."""
        self.poller.run(get_current_worker().cancelled_event)

    def on_unmount(self) -> None:
        self.poller.stop()

    def on_cluster_updated(self, _msg: ClusterUpdated) -> None:
        self._dirty = True
        self.updates += 1
        if self.screen_stack and isinstance(self.screen, ClusterScreen):  # none left while quitting
            self.screen.refresh_cluster()

    def redraw(self, force: bool = False) -> None:
        if self.screen_stack and isinstance(self.screen, ClusterScreen):
            self.screen.refresh_cluster()
            self.redraws += 1
            return
        super().redraw(force)

    def open_host(self, name: str) -> None:
        snap = self.poller.snapshot()
        h = snap.data.hosts.get(name) if snap.data is not None else None
        session = HostSession(name, h.sattui if h is not None else True, url=self.poller.url)
        self.session = session
        self.cache = BinCache()
        self.poller.open_host = session
        self.poller.poke()
        self.push_screen(MainScreen())

    def action_go_back(self) -> None:
        if isinstance(self.screen, ClusterScreen):
            return
        if isinstance(self.screen, MainScreen):
            self.poller.open_host = None
            self.pop_screen()
            return
        if not any(isinstance(s, MainScreen) for s in self.screen_stack):
            self.pop_screen()  # help opened over the hosts
            return
        super().action_go_back()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if isinstance(self.screen, ClusterScreen) and action in ("workers", "stacks", "pause", "scrub", "play",
                                                                 "go_back"):
            return False  # the one-node screens' keys; Esc has nowhere to go from the hosts
        return super().check_action(action, parameters)

    def action_zoom(self, step: int) -> None:
        super().action_zoom(step)
        self.poller.window_s = self.window_s
        self.poller.poke()


def run_cluster(poller: ClusterPoller, **kwargs: Any) -> int:
    app = ClusterApp(poller, window_s=poller.window_s, **kwargs)
    try:
        app.run()
    finally:
        poller.stop()
    return 0
