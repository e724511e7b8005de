"""What every sattui screen shares: the status header and a ``refresh_view`` hook the app
calls once per redraw with that redraw's data."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.binding import Binding
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer

from sattui.view.data import ViewData
from sattui.view.status_lines import ViewState
from sattui.widgets.header import StatusHeader

if TYPE_CHECKING:
    from sattui.app import SattuiApp


class SattuiScreen(Screen):
    """A screen redrawn by the app's timer, never by its own."""

    # How far before the window's end the screen reads, when that is more than the window
    # (the app copies the session's series over this much; sattui/view/data.py take()).
    SPAN_S = 0.0

    @property
    def sattui(self) -> SattuiApp:
        return self.app  # type: ignore[return-value]

    def refresh_view(self, data: ViewData, view: ViewState) -> None:
        for h in self.query(StatusHeader):
            h.show(data, view)

    def on_resize(self, event: Resize) -> None:
        # Bins are cut to the width: a new width needs new bins, not stretched strips.
        self.call_after_refresh(self.sattui.redraw, True)
        # 80 columns hold the keys or the palette hint, not both (the help names Ctrl+P).
        for footer in self.query(Footer):
            footer.show_command_palette = event.size.width >= 100

    def on_screen_resume(self) -> None:
        self.sattui.redraw(True)


class SubScreen(SattuiScreen):
    """A drill-down: Esc goes back to where it came from."""

    BINDINGS = [Binding("escape", "app.go_back", "back", tooltip="back to the previous screen")]
