"""The status header widget: trainer, uptime, backend, sampler, verdict, and every
degraded state, as :func:`sattui.view.status_lines.header_lines` words them.

Drawn from one :class:`~sattui.view.data.ViewData` per redraw; the text is only
re-set when it changed, so a steady screen costs no layout.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from sattui.textsafe import clean
from sattui.view.data import ViewData
from sattui.view.lines import Run
from sattui.view.status_lines import ViewState, header_lines
from sattui.widgets.timechart import RunStyles

HEADER_STYLES = ("title", "dim", "value", "good", "warn", "bad", "sim", "high", "medium", "low", "info", "paused")


class StatusHeader(Widget):
    COMPONENT_CLASSES = {f"header--{n}" for n in HEADER_STYLES}
    DEFAULT_CSS = """
    StatusHeader { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._runs: list[list[Run]] = []
        self._styles = RunStyles(self, "header--")

    def show(self, data: ViewData, view: ViewState) -> None:
        runs = header_lines(data, view, self.size.width or self.app.size.width)
        if runs != self._runs:
            relayout = len(runs) != len(self._runs)
            self._runs = runs
            self.refresh(layout=relayout)

    @property
    def line_count(self) -> int:
        """Lines the header takes now (screens give the rest to their charts)."""
        return len(self._runs)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()

    def render(self) -> Text:
        out = Text(no_wrap=True, overflow="ellipsis", end="")
        for i, line in enumerate(self._runs):
            if i:
                out.append("\n")
            for t, name in line:
                # Messages quote tools and paths: every run is escaped on its way out.
                out.append(clean(t), self._styles(name) if name else None)
        return out
