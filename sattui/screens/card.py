"""The card screen: larger charts of every metric of one card, its clock-event reasons
decoded, the processes on it, and the trainer's state strip beneath on the same axis."""

from __future__ import annotations

import textwrap
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from sattui.ledger.bins import Dip
from sattui.screens.sattui_screen import SubScreen
from sattui.textsafe import clean
from sattui.view import fmt
from sattui.view.binning import Axis
from sattui.view.data import ViewData
from sattui.view.dips import DIP_MIN_S, DIP_SPAN_S, DIP_UTIL, PENDING, recent_dips
from sattui.view.lines import card_screen_lines, fit
from sattui.view.status_lines import ViewState
from sattui.widgets.header import StatusHeader
from sattui.widgets.timechart import TimeChart


def card_title(info: dict[str, Any], simulated: bool, lost: bool, width: int) -> str:
    """`` card 0 · SIMULATED · name · 16 GB memory · …`` cut to ``width``: the facts that
    do not fit are left out whole, least telling first, so the name is never cut for a
    wattage."""
    must = [f" card {info.get('card')}"] + (["SIMULATED"] if simulated else []) + (["LOST"] if lost else [])
    name = fit(str(info.get("name") or "unknown card"), max(8, width - len(" · ".join(must)) - 3))
    extra = []
    if info.get("mem_total"):
        extra.append(f"{fmt.size(info['mem_total'])} memory")
    if info.get("pcie_gen_max"):
        extra.append(f"PCIe gen{info['pcie_gen_max']} x{info.get('pcie_width_max') or '?'}")
    if info.get("power_limit_w"):
        extra.append(f"{fmt.watts(info['power_limit_w'])} limit")
    if info.get("vendor"):
        extra.append(clean(info["vendor"]))  # the tool's word: escaped before it is measured
    parts = [*must, name]
    for e in extra:
        if len(" · ".join([*parts, e])) <= width:
            parts.append(e)
    return " · ".join(parts)


class DipList(OptionList):
    """The card's recent dips, newest first; Enter moves the view to the highlighted one."""

    BINDINGS = [Binding("enter", "select", "dip", key_display="⏎",
                        tooltip="move the view to the highlighted dip (↑ ↓ pick one)")]


def dip_row(d: Dip, t_end: float, live: bool, width: int, whole: bool = False) -> Text:
    """``  1:02  2.4s  min 3%  data wait, both workers at 99 % CPU``: when (replay time, or
    how long before the view's end live), how long, how low, and why. The why is cut at a
    word where the row has no room for it; ``whole`` (the highlighted row) wraps it under
    itself instead, so the cause of the dip picked reads in full at 80 columns."""
    when = f"-{fmt.duration(t_end - d.t0)}" if live else fmt.clock(d.t0)
    head = f" {when:>7} {d.length_s:5.1f}s  min {fmt.pct_text(d.util_min, 3)}  "
    room = max(10, width - len(head) - 2)
    style = "dim" if d.cause == PENDING else ""
    out = Text(head, no_wrap=True, overflow="ellipsis", end="")
    if not whole:
        out.append(fit(d.detail, room), style)
        return out
    lines = textwrap.wrap(clean(d.detail), room) or [""]
    out.append(lines[0], style)
    for line in lines[1:]:
        out.append("\n" + " " * len(head) + line, style)
    return out


class CardScreen(SubScreen):
    BINDINGS = [
        *SubScreen.BINDINGS,
        Binding("tab", "next_card(1)", "next card", show=False, key_display="⇥", tooltip="next / previous card"),
        Binding("shift+tab", "next_card(-1)", "previous card", show=False, key_display="⇧⇥",
                tooltip="next / previous card"),
        *(Binding(str(d), f"app.open_card({d})", f"card {d}", show=False, tooltip="open card N")
          for d in range(10)),
    ]
    SPAN_S = DIP_SPAN_S  # the dips list reads five minutes, whatever the zoom

    def __init__(self, card: int) -> None:
        super().__init__(name=f"card-{card}")
        self.card = card
        self._cards: list[int] = []
        self._title: str | None = None
        self._dips: list[Dip] = []
        self._dip_rows: Any = None
        self._dip_view: tuple[float, bool, int] | None = None  # what the rows were drawn for
        self._whole: int | None = None  # the row drawn whole (the highlighted one)
        self.marked: tuple[float, float] | None = None  # the dip the view was moved to

    def compose(self) -> ComposeResult:
        yield StatusHeader(id="header")
        yield Static(id="card-title", classes="section")
        with VerticalScroll(id="card-scroll"):
            yield TimeChart(id="card-chart")
        yield Static(f" recent dips · util < {DIP_UTIL:.0f}% for ≥ {DIP_MIN_S:g} s, last "
                     f"{fmt.window(DIP_SPAN_S)} · newest first", id="dips-title", classes="section")
        yield DipList(id="dips", compact=True)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one(DipList).focus()

    def refresh_view(self, data: ViewData, view: ViewState) -> None:
        super().refresh_view(data, view)
        self._cards = [c["card"] for c in data.cards]
        info = next((c for c in data.cards if c["card"] == self.card), {"card": self.card})
        title = card_title(info, data.simulated(info), self.card in data.lost_cards(),
                           self.size.width or self.app.size.width)
        if title != self._title:
            self._title = title
            self.query_one("#card-title", Static).update(Text(title))  # a Text: a tool's card name is not markup
        height = self.size.height or self.app.size.height
        n_dips = self._show_dips(data)
        chart = self.query_one(TimeChart)
        cols = chart.columns
        axis = Axis.make(data.t_end, data.window_s, cols.body)
        # The dips list takes a quarter of the screen, then what the charts leave free.
        header_h = self.query_one(StatusHeader).line_count
        list_h = max(1, min(n_dips, max(3, (height - 4) // 4)))
        room = height - header_h - 1 - 1 - 1 - list_h
        lines = card_screen_lines(data, axis, cols, self.card, room, mark=self.marked)
        chart.set_lines(lines)
        list_h = max(list_h, min(n_dips, room - len(lines) + list_h))
        lst = self.query_one(DipList)
        if lst.styles.height is None or lst.styles.height.value != list_h:
            lst.styles.height = list_h

    def _show_dips(self, data: ViewData) -> int:
        """Fill the dips list (only when it changed, keeping the highlighted dip); returns
        the lines it takes."""
        dips = recent_dips(data, self.card)
        width = self.size.width or self.app.size.width
        rows = tuple((d.t0, d.t1, d.cause, d.detail) for d in dips)
        key = (rows, round(data.t_end) if data.live else None, width)
        lst = self.query_one(DipList)
        if key != self._dip_rows:
            self._dip_rows = key
            old = lst.highlighted
            keep = self._dips[old].t0 if old is not None and old < len(self._dips) else None
            self._dips = dips
            if dips:
                at = next((i for i, d in enumerate(dips) if d.t0 == keep), 0)
                self._dip_view = (data.t_end, data.live, width)
                self._whole = at
                lst.set_options([Option(dip_row(d, data.t_end, data.live, width, whole=i == at))
                                 for i, d in enumerate(dips)])
                lst.highlighted = at
            else:
                self._whole = None
                lst.set_options([Option(Text(f" none in the last {fmt.window(DIP_SPAN_S)}"), disabled=True)])
        return len(dips) + self._whole_extra

    @property
    def _whole_extra(self) -> int:
        """Lines the highlighted dip's wrapped cause adds to the list."""
        i = self._whole
        if i is None or self._dip_view is None or not 0 <= i < len(self._dips):
            return 0
        t_end, live, width = self._dip_view
        return dip_row(self._dips[i], t_end, live, width, whole=True).plain.count("\n")

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        """The highlighted dip's cause reads whole (wrapped); the one left goes back to a line."""
        i, old = event.option_index, self._whole
        if i == old or self._dip_view is None or not 0 <= i < len(self._dips):
            return
        lst = self.query_one(DipList)
        t_end, live, width = self._dip_view
        if old is not None and 0 <= old < len(self._dips):
            lst.replace_option_prompt_at_index(old, dip_row(self._dips[old], t_end, live, width))
        lst.replace_option_prompt_at_index(i, dip_row(self._dips[i], t_end, live, width, whole=True))
        self._whole = i

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        i = event.option_index
        if 0 <= i < len(self._dips):
            d = self._dips[i]
            self.marked = (d.t0, d.t1)
            self.sattui.show_span(d.t0, d.t1)

    def action_next_card(self, step: int) -> None:
        if self.card in self._cards and len(self._cards) > 1:
            i = self._cards.index(self.card)
            self.sattui.action_open_card(self._cards[(i + step) % len(self._cards)])
