"""``sattui cluster``'s app: the monitor's app over a job (the screens are the one-node
ones, plus sattui/screens/cluster.py's hosts screen first).

Prometheus is read in a Textual thread worker running the poller, never on the UI
thread: the screens only draw the poller's latest snapshot, on the app's redraw timer.
"""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.screen import Screen
from textual.worker import get_current_worker

from sattui.app import SattuiApp
from sattui.cluster.hostsession import HostSession
from sattui.cluster.view import ClusterPoller
from sattui.screens.cluster import ClusterScreen, ClusterUpdated
from sattui.screens.main import MainScreen
from sattui.view.binning import BinCache


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
        self._data = None  # the last redraw's copies were of the host before
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
