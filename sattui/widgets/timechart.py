"""The one Line-API widget that draws every time strip of a screen.

Why one widget and not Textual's ``Sparkline``: the stock one buckets with ``max`` (it
hides exactly the dips we look for) and eight of them redrawn at 10 Hz took 76 % of a
core, nearly all in its Rich-compatibility render path (measured when this widget was
written; bench/tui_frame.py measures this one). Here the screen bins
the data once per redraw (``sattui.view.lines``), this widget turns each
:class:`~sattui.view.lines.Line` into a :class:`~textual.strip.Strip` once, reuses the
Strip while the Line is unchanged, and ``render_line`` only hands cached Strips out.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from textual.events import Click
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from sattui.states import State
from sattui.textsafe import clean
from sattui.view.lines import Columns, Line, Runs, columns_for

STYLE_NAMES = (
    "good", "warn", "bad", "nodata", "label", "selected", "sim", "bad-tag", "value", "dim", "head", "axis",
    "bar", "cpu", "cpu-hot", "io", "k-R", "k-S", "k-D", "k-Z", *(s.style_class for s in State),
)


class RunStyles:
    """Maps run style names to Rich styles through a widget's component classes (so the
    colours live in app.tcss and follow the theme)."""

    def __init__(self, widget: Widget, prefix: str) -> None:
        self.widget = widget
        self.prefix = prefix
        self._cache: dict[str, Style] = {}

    def clear(self) -> None:
        self._cache.clear()

    def __call__(self, name: str) -> Style:
        st = self._cache.get(name)
        if st is None:
            base = self.widget.rich_style
            if name:
                try:
                    st = self.widget.get_component_rich_style(f"{self.prefix}{name}")
                except KeyError:
                    st = base
            else:
                st = base
            self._cache[name] = st
        return st


def fit_runs(runs: Runs, width: int, style_of: RunStyles, pad_style: Style) -> list[Segment]:
    """Exactly ``width`` cells: runs cut where they overflow, spaces after.

    Every string a chart shows becomes a Segment here, so this is where untrusted text
    (process and card names) is escaped, whatever built the Line."""
    segs: list[Segment] = []
    used = 0
    for text, name in runs:
        if used >= width:
            break
        text = clean(text)
        if used + len(text) > width:
            text = text[: width - used]
        segs.append(Segment(text, style_of(name)))
        used += len(text)
    if used < width:
        segs.append(Segment(" " * (width - used), pad_style))
    return segs


class TimeChart(Widget):
    """Rows of labelled strips over one shared time axis (see ``sattui.view.lines``)."""

    COMPONENT_CLASSES = {f"chart--{n}" for n in STYLE_NAMES}
    DEFAULT_CSS = """
    TimeChart { height: auto; width: 1fr; }
    """

    class LineClicked(Message):
        """A line with a ``key`` was clicked (``card:0``, ``proc:4301``)."""

        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._lines: list[Line] = []
        self._strips: list[Strip] = []
        self._cache: dict[tuple[Line, int], Strip] = {}
        self._styles = RunStyles(self, "chart--")

    @property
    def columns(self) -> Columns:
        parent = self.parent
        width = self.size.width or (parent.size.width if isinstance(parent, Widget) else 0) or self.app.size.width
        return columns_for(width)

    @property
    def lines(self) -> list[Line]:
        return self._lines

    def set_lines(self, lines: Sequence[Line]) -> None:
        lines = list(lines)
        width = self.size.width or self.columns.width
        old_n = len(self._lines)
        if lines == self._lines and len(self._strips) == len(lines) and self._strips and \
                self._strips[0].cell_length == width:
            return
        old = self._strips
        self._lines = lines
        self._rebuild(width)
        if len(lines) != old_n or len(old) != len(self._strips) or not self.is_mounted:
            self.refresh(layout=len(lines) != old_n)
            return
        # Only the rows that changed go to the terminal (Textual writes a widget's dirty
        # rows whole): a sample that only moves a value leaves the chart's other rows be,
        # where a whole-widget refresh rewrote every row of a 50-row screen.
        dirty = [Region(0, y, width, 1) for y, (a, b) in enumerate(zip(old, self._strips)) if a is not b]
        if dirty:
            self.refresh(*dirty)

    def _rebuild(self, width: int) -> None:
        cols = columns_for(width)
        fresh: dict[tuple[Line, int], Strip] = {}
        strips = []
        for line in self._lines:
            key = (line, width)
            strip = self._cache.get(key) or fresh.get(key)
            if strip is None:
                strip = self._build(line, cols)
            fresh[key] = strip
            strips.append(strip)
        self._cache = fresh  # keep only this frame's strips: the next frame mostly repeats them
        self._strips = strips

    def _build(self, line: Line, cols: Columns) -> Strip:
        base = self.rich_style
        st = self._styles
        if line.full is not None:
            segs = fit_runs(line.full, cols.width, st, base)
        else:
            gap = Segment(" ", base)
            segs = [*fit_runs(line.label, cols.label, st, base), gap,
                    *fit_runs(line.body, cols.body, st, base), gap,
                    *fit_runs(line.value, cols.width - cols.label - cols.body - 2, st, base)]
        # One Segment per run of one style (the gaps, pads and blank sky merged): each
        # Segment costs a colour change on the terminal.
        return Strip(segs, cols.width).simplify()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._cache.clear()
        if self._lines:
            self._rebuild(self.size.width or self.columns.width)

    def on_resize(self) -> None:
        self._cache.clear()
        if self._lines:
            self._rebuild(self.size.width)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines)

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return container.width

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y < len(self._strips):
            strip = self._strips[y]
            return strip if strip.cell_length == width else strip.crop_extend(0, width, self.rich_style)
        return Strip.blank(width, self.rich_style)

    def on_click(self, event: Click) -> None:
        y = event.y
        key = self._lines[y].key if 0 <= y < len(self._lines) else None
        if key:
            self.post_message(self.LineClicked(key))
