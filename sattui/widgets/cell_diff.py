"""Write to the terminal only the cells that changed, with only the colour codes that changed.

Why this sits under Textual's compositor rather than in the widgets (issue 25 item 3,
measured with bench/terminal_bytes.py and a capture of the demo's pty):

- Textual writes a dirty row from the left edge of the widget that covers it to the
  right edge of the dirty region, so a chart whose value column moved rewrote the whole
  row; a panel re-set with the same text rewrote every row of it (the advice: 12 rows
  1.5 times a second, 3 in 4 of them identical).
- Each Segment goes out as ``ESC[<all attributes, fg, bg>m text ESC[0m`` (about 40 bytes of
  codes in truecolour), so a chart row of alternating colours cost 64 colour changes of
  40 bytes: 70 % of the bytes at 80×24 were colour codes.

:class:`ScreenCells` keeps what the terminal shows (a character and a Rich style per
cell, as far as this app wrote it), and turns each compositor update into the changed
cells only, each colour change written as the difference from the one before (a new
foreground alone is ``ESC[38;2;r;g;bm``). The screen drawn is the same, cell for cell
(tests/functional/test_cell_diff.py replays both streams on a model terminal).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.cells import cell_len, get_character_cell_size
from rich.color import ColorSystem
from rich.console import Console
from rich.style import Style
from textual._compositor import ChopsUpdate, CompositorUpdate, LayoutUpdate
from textual.strip import Strip

# (attribute, its SGR code, the code that turns it off)
_ATTRS = (("bold", "1", "22"), ("dim", "2", "22"), ("italic", "3", "23"), ("underline", "4", "24"),
          ("blink", "5", "25"), ("blink2", "6", "25"), ("reverse", "7", "27"), ("conceal", "8", "28"),
          ("strike", "9", "29"), ("underline2", "21", "24"), ("frame", "51", "54"), ("encircle", "52", "54"),
          ("overline", "53", "55"))
_OFF = {on: off for _, on, off in _ATTRS}
MERGE_GAP_CELLS = 4  # unchanged cells rewritten rather than a cursor move (a move is 6–9 bytes)

# A style as SGR parts: the attribute codes, the foreground's, the background's, the link.
Sgr = tuple[frozenset[str], str, str, str | None]
_DEFAULT: Sgr = (frozenset(), "39", "49", None)


def sgr_of(style: Style | None, system: ColorSystem) -> Sgr:
    if style is None:
        return _DEFAULT
    attrs = frozenset(code for name, code, _ in _ATTRS if getattr(style, name))
    fg = ";".join(style.color.downgrade(system).get_ansi_codes(True)) if style.color is not None else "39"
    bg = ";".join(style.bgcolor.downgrade(system).get_ansi_codes(False)) if style.bgcolor is not None else "49"
    return attrs, fg, bg, style.link


def sgr_change(old: Sgr | None, new: Sgr) -> str:
    """The shortest SGR sequence we know that takes the terminal from ``old`` (None:
    unknown) to ``new``."""
    if old is None:
        codes = ["0", *sorted(new[0])]
        codes += [c for c in (new[1], new[2]) if c not in ("39", "49")]
        return f"\x1b[{';'.join(codes)}m"
    if old[:3] == new[:3]:
        return ""
    codes = []
    gone = old[0] - new[0]
    if gone:
        offs = {_OFF[c] for c in gone}
        codes += sorted(offs)
        # 22 turns bold and dim off together: one that stays is set again.
        codes += sorted(c for c in new[0] if _OFF[c] in offs)
    codes += sorted(new[0] - old[0])
    if old[1] != new[1]:
        codes.append(new[1])
    if old[2] != new[2]:
        codes.append(new[2])
    return f"\x1b[{';'.join(codes)}m"


# Attributes a space shows (a line, a box, colours swapped); any other is invisible on it.
_SHOWN_ON_BLANK = frozenset({"4", "21", "9", "7", "53", "51", "52", "8"})


def blank_alike(a: Sgr, b: Sgr) -> bool:
    """A space drawn with ``a`` looks like one drawn with ``b``: the same background and
    lines, whatever the foreground (a chart's empty sky between bars of two colours
    then needs no colour change)."""
    return a[2] == b[2] and a[3] == b[3] and a[0] & _SHOWN_ON_BLANK == b[0] & _SHOWN_ON_BLANK and \
        "7" not in a[0] | b[0]


def strip_cells(strip: Strip | Iterable[Any], chars: list[str | None], styles: list[Style | None], x: int,
                lo: int, hi: int) -> int:
    """Write ``strip``'s cells into ``chars``/``styles`` from column ``x``, only those in
    ``[lo, hi)``; returns the column after it. A wide character takes its cell and a ``""``
    after it (the cell it covers)."""
    for seg in strip:
        text, style, control = seg
        if control:
            continue
        n = len(text)
        if cell_len(text) == n:
            a, b = max(x, lo), min(x + n, hi)
            if a < b:
                chars[a:b] = text[a - x: b - x]
                styles[a:b] = [style] * (b - a)
            x += n
            continue
        for ch in text:
            w = get_character_cell_size(ch)
            if w == 0:
                if lo <= x - 1 < hi and chars[x - 1] is not None:
                    chars[x - 1] = (chars[x - 1] or "") + ch  # a combining mark joins its cell
                continue
            for k in range(w):
                if lo <= x + k < hi:
                    chars[x + k] = ch if k == 0 else ""
                    styles[x + k] = style
            x += w
    return x


class ScreenCells:
    """What this app last wrote to each cell of the terminal (None: not known)."""

    def __init__(self) -> None:
        self.width = 0
        self.height = 0
        self.chars: list[list[str | None]] = []
        self.styles: list[list[Style | None]] = []
        self._sgr: dict[tuple[Style | None, ColorSystem], Sgr] = {}
        self.cells_written = 0

    def forget(self, width: int | None = None, height: int | None = None) -> None:
        """The terminal's content is not known (start, resize, back from a suspend):
        the next update writes every cell it covers."""
        self.width = self.width if width is None else width
        self.height = self.height if height is None else height
        self.chars = [[None] * self.width for _ in range(self.height)]
        self.styles = [[None] * self.width for _ in range(self.height)]

    def _sgr_of(self, style: Style | None, system: ColorSystem) -> Sgr:
        key = (style, system)
        s = self._sgr.get(key)
        if s is None:
            if len(self._sgr) > 4096:
                self._sgr.clear()  # styles come and go with themes; keep the map small
            s = self._sgr[key] = sgr_of(style, system)
        return s

    def _blank_alike(self, a: Style | None, b: Style | None, system: ColorSystem) -> bool:
        return blank_alike(self._sgr_of(a, system), self._sgr_of(b, system))

    def render(self, update: CompositorUpdate, width: int, height: int, system: ColorSystem) -> str:
        """The terminal sequence that makes the screen what ``update`` draws, writing only
        the cells that differ from what is known to be there."""
        if (width, height) != (self.width, self.height):
            self.forget(width, height)
        rows: list[tuple[int, int, int, list[str | None], list[Style | None]]] = []
        if isinstance(update, LayoutUpdate):
            x0 = update.region.x
            for y, line in enumerate(update.strips, update.region.y):
                if not 0 <= y < height:
                    continue
                chars, styles = list(self.chars[y]), list(self.styles[y])
                x = x0
                for strip in line:
                    x = strip_cells(strip, chars, styles, x, 0, width)
                rows.append((y, max(0, x0), min(width, x), chars, styles))
        elif isinstance(update, ChopsUpdate):
            for y, x1, x2 in update.spans:
                if not 0 <= y < height:
                    continue
                chars, styles = list(self.chars[y]), list(self.styles[y])
                lo, hi = max(0, x1), min(width, x2)
                for end, (x, chop) in zip(update.chop_ends[y], update.chops[y].items()):
                    if chop is None or x >= hi or end <= lo:
                        continue
                    strip_cells(chop, chars, styles, x, lo, hi)
                rows.append((y, lo, hi, chars, styles))
        else:
            raise TypeError(f"not a screen update: {type(update).__name__}")
        return self._write(rows, system)

    def _write(self, rows: list[tuple[int, int, int, list[str | None], list[Style | None]]],
               system: ColorSystem) -> str:
        out: list[str] = []
        state: Sgr | None = None  # the terminal's SGR state is not ours to know at the start
        for y, lo, hi, chars, styles in rows:
            old_c, old_s = self.chars[y], self.styles[y]
            changed = [x for x in range(lo, hi) if chars[x] != old_c[x] or (
                styles[x] != old_s[x] and not (chars[x] == " " and self._blank_alike(old_s[x], styles[x], system)))]
            if not changed:
                continue
            runs: list[list[int]] = []
            for x in changed:
                if runs and x - runs[-1][1] <= MERGE_GAP_CELLS:
                    runs[-1][1] = x + 1
                else:
                    runs.append([x, x + 1])
            for a, b in runs:
                # Never start or end inside a wide character, old or new: the terminal
                # would blank its other half.
                while a > 0 and (chars[a] == "" or old_c[a] == ""):
                    a -= 1
                while b < self.width and (chars[b] == "" or old_c[b] == ""):
                    b += 1
                out.append(f"\x1b[{y + 1};{a + 1}H")
                for x in range(a, b):
                    ch = chars[x]
                    if ch == "":
                        continue  # the wide character before it covers it
                    style = styles[x]
                    new = self._sgr_of(style, system)
                    if new != state and not (ch == " " and state is not None and blank_alike(state, new)):
                        if state is not None and state[3] is not None and state[3] != new[3]:
                            out.append("\x1b]8;;\x1b\\")
                        out.append(sgr_change(state, new))
                        if new[3] is not None and (state is None or state[3] != new[3]):
                            out.append(f"\x1b]8;id={style._link_id if style else ''};{new[3]}\x1b\\")
                        state = new
                    out.append(" " if ch is None else ch)
                    self.cells_written += 1
            old_c[lo:hi] = chars[lo:hi]
            old_s[lo:hi] = styles[lo:hi]
        if state is not None:
            if state[3] is not None:
                out.append("\x1b]8;;\x1b\\")
            if state != _DEFAULT:
                out.append("\x1b[0m")
        return "".join(out)


class CellDiffUpdate(CompositorUpdate):
    """A compositor update written through :class:`ScreenCells` (Textual's ``_display``
    asks for ``render_segments`` only when it really writes to a terminal)."""

    def __init__(self, update: CompositorUpdate, cells: ScreenCells, width: int, height: int) -> None:
        self.update = update
        self.cells = cells
        self.width = width
        self.height = height

    def __rich_console__(self, console: Console, options: Any) -> Any:
        return self.update.__rich_console__(console, options)  # type: ignore[attr-defined]

    def render_segments(self, console: Console) -> str:
        system = console._color_system or ColorSystem.TRUECOLOR
        try:
            return self.cells.render(self.update, self.width, self.height, system)
        except Exception:  # noqa: BLE001 — a Textual whose updates differ from 8.2's
            # Textual's own writing, whole, and every cell written again next time: the
            # screen stays right whatever this writer failed to read.
            self.cells.forget()
            return self.update.render_segments(console)
