"""The cell-difference writer (sattui/widgets/cell_diff.py) draws what Textual draws.

Both streams, Textual's own and the one sattui writes, are played on a model terminal
(cursor moves, SGR state, text); after every update of a real app (the fixture replayed,
playing, screens switched, a resize) the two screens must be the same cell for cell,
colours and attributes included, and the written bytes far fewer.
"""

from __future__ import annotations

import random
import re

import pytest
import textual.app
from rich.cells import get_character_cell_size
from rich.color import Color, ColorSystem
from rich.console import Console
from rich.style import Style
from textual._compositor import ChopsUpdate

from sattui.app import SattuiApp
from sattui.widgets.cell_diff import _ATTRS, CellDiffUpdate, sgr_change, sgr_of
from tests.functional.conftest import replay

_CONSOLE = Console(color_system="truecolor", force_terminal=True)
_TOKEN = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b\]8;[^\x1b]*\x1b\\|\x1b[^\[\]]|([^\x1b])", re.S)
_ON = {on: name for name, on, _ in _ATTRS}
_OFF: dict[str, set[str]] = {}
for _name, _on, _off in _ATTRS:
    _OFF.setdefault(_off, set()).add(_on)


class ModelTerminal:
    """Just enough of a terminal to compare two streams: each cell keeps its character
    and the SGR state (attributes, foreground, background) it was written with."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.cells = [[(" ", frozenset(), "39", "49")] * width for _ in range(height)]
        self.x = self.y = 0
        self.attrs: frozenset[str] = frozenset()
        self.fg, self.bg = "39", "49"

    def sgr(self, params: str) -> None:
        codes = (params or "0").split(";")
        i = 0
        while i < len(codes):
            c = codes[i]
            if c in ("38", "48"):
                n = 5 if codes[i + 1] == "2" else 3
                value = ";".join(codes[i: i + n])
                if c == "38":
                    self.fg = value
                else:
                    self.bg = value
                i += n
                continue
            if c == "0":
                self.attrs, self.fg, self.bg = frozenset(), "39", "49"
            elif c in _ON:
                self.attrs = self.attrs | {c}
            elif c in _OFF:
                self.attrs = self.attrs - _OFF[c]
            elif c == "39" or 30 <= int(c) <= 37 or 90 <= int(c) <= 97:
                self.fg = c
            elif c == "49" or 40 <= int(c) <= 47 or 100 <= int(c) <= 107:
                self.bg = c
            else:
                raise AssertionError(f"SGR code the model does not know: {c}")
            i += 1

    def feed(self, data: str) -> None:
        for m in _TOKEN.finditer(data):
            ch = m.group(3)
            if ch is not None:
                if ch == "\n":
                    self.y += 1
                elif ch == "\r":
                    self.x = 0
                else:
                    w = get_character_cell_size(ch)
                    if 0 <= self.y < self.height and 0 <= self.x < self.width:
                        row = self.cells[self.y]
                        # As terminals do: writing over half of a wide character blanks it.
                        if row[self.x][0] == "" and self.x > 0:
                            row[self.x - 1] = (" ", *row[self.x - 1][1:])
                        if self.x + w < self.width and row[self.x + w][0] == "":
                            row[self.x + w] = (" ", *row[self.x + w][1:])
                        row[self.x] = (ch, self.attrs, self.fg, self.bg)
                        if w == 2 and self.x + 1 < self.width:
                            self.cells[self.y][self.x + 1] = ("", self.attrs, self.fg, self.bg)
                    self.x += w
                continue
            final = m.group(2)
            if final == "H":
                row, _, col = (m.group(1) or "1;1").partition(";")
                self.y, self.x = int(row or 1) - 1, int(col or 1) - 1
            elif final == "m":
                self.sgr(m.group(1))
            # other controls (sync, cursor shape, OSC 8 links) change no cell


def make_styles() -> list[Style]:
    """Fresh objects: Rich caches a style's codes for the first colour system asked."""
    return [Style(), Style(bold=True, color="red"),
            Style(dim=True, bgcolor="#121212"),
            Style(bold=True, dim=True, color=Color.parse("#4ebf71"), bgcolor=Color.parse("#121212")),
            Style(italic=True, underline=True, color="bright_blue"), Style(reverse=True, strike=True),
            Style(color=Color.parse("#e0e0e0"), bgcolor=Color.parse("#121212")),
            Style(overline=True, underline2=True, blink=True, bgcolor="color(200)")]


STYLES = make_styles()
_SHOWN_ON_BLANK = {"4", "21", "9", "7", "53", "51", "52", "8"}


def seen_as(row: list[tuple[str, frozenset[str], str, str]]) -> list[tuple[str, frozenset[str], str | None, str]]:
    """What a row looks like: a space shows its background and its lines, never its
    foreground (unless reversed)."""
    return [(ch, attrs & _SHOWN_ON_BLANK, None, bg) if ch == " " and "7" not in attrs else (ch, attrs, fg, bg)
            for ch, attrs, fg, bg in row]


@pytest.mark.parametrize("system", [ColorSystem.TRUECOLOR, ColorSystem.EIGHT_BIT, ColorSystem.STANDARD])
def test_every_style_change_reaches_the_style_written_whole(system: ColorSystem) -> None:
    styles, written_whole = make_styles(), make_styles()
    for old in [None, *styles]:
        for new, again in zip(styles, written_whole):
            whole, diffed = ModelTerminal(1, 1), ModelTerminal(1, 1)
            if old is not None:
                diffed.feed(sgr_change(None, sgr_of(old, system)))
            diffed.feed(sgr_change(sgr_of(old, system) if old is not None else None, sgr_of(new, system)))
            codes = again._make_ansi_codes(system)  # what Rich writes for it
            whole.feed(f"\x1b[0m\x1b[{codes}m" if codes else "")
            assert (diffed.attrs, diffed.fg, diffed.bg) == (whole.attrs, whole.fg, whole.bg), (old, new)


def textuals_own(update: object, console: Console) -> str:
    """Textual's stream for ``update``, its caches emptied first: Rich and Textual keep a
    style's codes for the first colour system asked, and a test run earlier in this
    process may have asked for another (a real app has one console)."""
    lines = update.chops if isinstance(update, ChopsUpdate) else update.strips  # type: ignore[attr-defined]
    for line in lines:
        for strip in (line.values() if isinstance(line, dict) else line):
            if strip is None:
                continue
            strip._render_cache = None
            for seg in strip:
                if seg.style is not None:
                    seg.style._ansi = None
    return update.render_segments(console)  # type: ignore[attr-defined]


async def _run(keys: list[str | tuple[int, int]], size: tuple[int, int], monkeypatch: pytest.MonkeyPatch,
               wait_s: float = 0.3) -> dict[str, int]:
    """Run the app over the fixture, pressing ``keys`` (a tuple: resize to it) with
    ``wait_s`` after each; play each update on two model terminals and compare them after
    each. Returns the updates and the bytes of each stream after the first frame."""
    seen = {"updates": 0, "plain": 0, "diffed": 0}
    terms: dict[str, ModelTerminal] = {}

    def capture(app: textual.app.App, screen: object, renderable: object) -> None:
        if renderable is None:
            return
        assert isinstance(renderable, CellDiffUpdate), f"written whole: {type(renderable).__name__}"
        w, h = app.size
        if "plain" not in terms or (terms["plain"].width, terms["plain"].height) != (w, h):
            terms["plain"], terms["diffed"] = ModelTerminal(w, h), ModelTerminal(w, h)
        plain = textuals_own(renderable.update, app.console)
        diffed = renderable.render_segments(app.console)
        terms["plain"].feed(plain)
        terms["diffed"].feed(diffed)
        seen["updates"] += 1
        if seen["updates"] > 1:
            seen["plain"] += len(plain.encode())
            seen["diffed"] += len(diffed.encode())
        for y in range(h):
            assert seen_as(terms["diffed"].cells[y]) == seen_as(terms["plain"].cells[y]), \
                f"update {seen['updates']}, row {y}"

    monkeypatch.setattr(textual.app.App, "_display", capture)
    app = SattuiApp(replay(), show_clock=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        for k in keys:
            if isinstance(k, tuple):
                await pilot.resize_terminal(*k)
            else:
                await pilot.press(k)
            await pilot.pause(wait_s)
    return seen


async def test_the_screen_drawn_is_textuals_cell_for_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    keys: list[str | tuple[int, int]] = ["space", "enter", "escape", "w", "escape", (200, 50), "s", "escape",
                                         (100, 30), "space", "left", "right"]
    seen = await _run(keys, (80, 24), monkeypatch)
    assert seen["updates"] >= 10
    # Screen switches and resizes write whole screens in both; the rest is differences.
    assert seen["diffed"] < seen["plain"] * 0.6, seen


async def test_a_playing_replay_writes_a_fraction_of_textuals_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    # Playing at 1×: the charts scroll a bucket at a time, the values change, the rest stays.
    seen = await _run(["space"], (200, 50), monkeypatch, wait_s=4.0)
    # Measured: a quarter (cells that did not change are not written, and a colour change
    # is a difference, not a reset and the whole style).
    assert seen["updates"] >= 3
    assert seen["diffed"] < seen["plain"] * 0.35, seen


def test_wide_characters_are_never_cut() -> None:
    from rich.segment import Segment
    from textual._compositor import LayoutUpdate
    from textual.geometry import Region
    from textual.strip import Strip

    from sattui.widgets.cell_diff import ScreenCells

    rng = random.Random(7)
    cells, plain_term, diffed_term = ScreenCells(), ModelTerminal(12, 1), ModelTerminal(12, 1)
    words = ["ab", "漢", "字c", "x", "  ", "é"]
    for _ in range(200):
        line, n = [], 0
        while n < 12:
            w = rng.choice(words)
            if n + len(w) + (1 if any(get_character_cell_size(c) == 2 for c in w) else 0) > 12:
                w = " "
            line.append(Segment(w, rng.choice(STYLES[:3])))
            n += sum(get_character_cell_size(c) for c in w)
        strip = Strip(line).crop(0, 12)
        update = LayoutUpdate([[strip]], Region(0, 0, 12, 1))
        plain_term.feed(update.render_segments(_CONSOLE))
        diffed_term.feed(cells.render(update, 12, 1, ColorSystem.TRUECOLOR))
        assert seen_as(diffed_term.cells[0]) == seen_as(plain_term.cells[0])



def test_an_update_the_writer_cannot_read_goes_out_as_textual_wrote_it():
    # a later Textual 8.x whose updates this writer does not know: its own bytes, and
    # every cell written afresh on the next frame
    from rich.console import Console

    from sattui.widgets.cell_diff import CellDiffUpdate, ScreenCells

    class Unknown:
        def render_segments(self, console):
            return "textual's own bytes"

    cells = ScreenCells()
    forgot = []
    cells.forget = lambda *a, **k: forgot.append(True)  # type: ignore[method-assign]
    out = CellDiffUpdate(Unknown(), cells, 80, 24).render_segments(Console())  # type: ignore[arg-type]
    assert out == "textual's own bytes" and forgot
