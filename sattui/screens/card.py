"""The card screen: larger charts of every metric of one card, its clock-event reasons
decoded, the processes on it, and the trainer's state strip beneath on the same axis."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from sattui.screens.base import SubScreen
from sattui.textsafe import clean
from sattui.view import fmt
from sattui.view.binning import Axis
from sattui.view.data import ViewData
from sattui.view.lines import card_screen_lines, fit
from sattui.widgets.header import StatusHeader, ViewState
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


class CardScreen(SubScreen):
    BINDINGS = [
        *SubScreen.BINDINGS,
        Binding("tab", "next_card(1)", "next card", show=False, key_display="⇥", tooltip="next / previous card"),
        Binding("shift+tab", "next_card(-1)", "previous card", show=False, key_display="⇧⇥",
                tooltip="next / previous card"),
        *(Binding(str(d), f"app.open_card({d})", f"card {d}", show=False, tooltip="open card N")
          for d in range(10)),
    ]

    def __init__(self, card: int) -> None:
        super().__init__(name=f"card-{card}")
        self.card = card
        self._cards: list[int] = []
        self._title: str | None = None

    def compose(self) -> ComposeResult:
        yield StatusHeader(id="header")
        yield Static(id="card-title", classes="section")
        with VerticalScroll(id="card-scroll"):
            yield TimeChart(id="card-chart")
        yield Footer(compact=True)

    def refresh_view(self, data: ViewData, view: ViewState) -> None:
        super().refresh_view(data, view)
        self._cards = [c["card"] for c in data.cards]
        info = next((c for c in data.cards if c["card"] == self.card), {"card": self.card})
        title = card_title(info, data.simulated(info), self.card in data.lost_cards(),
                           self.size.width or self.app.size.width)
        if title != self._title:
            self._title = title
            self.query_one("#card-title", Static).update(Text(title))  # a Text: a tool's card name is not markup
        chart = self.query_one(TimeChart)
        cols = chart.columns
        axis = Axis.make(data.t_end, data.window_s, cols.body)
        header_h = self.query_one(StatusHeader).line_count
        room = (self.size.height or self.app.size.height) - header_h - 1 - 1
        chart.set_lines(card_screen_lines(data, axis, cols, self.card, room))

    def action_next_card(self, step: int) -> None:
        if self.card in self._cards and len(self._cards) > 1:
            i = self._cards.index(self.card)
            self.sattui.action_open_card(self._cards[(i + step) % len(self._cards)])
