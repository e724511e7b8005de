"""The stacks screen: the main thread's functions by share of samples in the window, per
state, like ``py-spy top``."""

from __future__ import annotations

import math

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from sattui.ledger import steps as step_seen
from sattui.screens.sattui_screen import SubScreen
from sattui.states import state_of
from sattui.textsafe import clean
from sattui.view import fmt
from sattui.view.data import ViewData
from sattui.view.lines import fit, rank_steps
from sattui.view.stacktable import FunctionRow, states_present, top_functions
from sattui.view.status_lines import ViewState
from sattui.widgets.header import StatusHeader

MAX_ROWS = 60
# cells before the function column (29) + the table's padding (2) + a scrollbar (2)
LABEL_OFFSET = 33


class StacksScreen(SubScreen):
    BINDINGS = [
        *SubScreen.BINDINGS,
        Binding("f", "cycle_state", "filter", tooltip="show one state's functions (f again: the next state)"),
        Binding("o", "toggle_sort", "sort", tooltip="sort by own / total time"),
    ]

    def __init__(self) -> None:
        super().__init__(name="stacks")
        self.state: str | None = None
        self.by_total = False
        self._states: list[str] = []
        self._key: object = None

    def compose(self) -> ComposeResult:
        yield StatusHeader(id="header")
        yield Static(id="stacks-title", classes="section")
        yield Static(id="stacks-steps")
        with VerticalScroll(id="stacks-scroll"):
            yield Static(id="stacks-table")
        yield Footer(compact=True)

    def refresh_view(self, data: ViewData, view: ViewState) -> None:
        super().refresh_view(data, view)
        t0 = data.t_end - data.window_s
        width = self.size.width or self.app.size.width
        # Recount when the view has moved by 1/400 of the window (0.15 s at 1 min, 9 s at
        # 1 h): a long window holds tens of thousands of spans.
        moved = math.floor(data.t_end / (data.window_s / 400))
        key = (id(data.session), moved, data.window_s, self.state, self.by_total, width, data.rank_pid)
        if key == self._key:
            return
        self._key = key
        samples = data.stack_samples(t0 - 30.0)
        self._states = states_present(samples)
        total, rows = top_functions(samples, t0, data.t_end + 1e-6, self.state)
        filt = "all states" if self.state is None else f"{self.state} only"
        who = "main thread" if data.rank_label is None else \
            "all ranks' main threads" if data.rank_pid is None else f"{data.rank_label} main thread"
        title = (f" {who} · last {fmt.window(data.window_s)} · {filt} · "
                 f"by {'total' if self.by_total else 'own'} time · {total:.1f}s sampled")
        self.query_one("#stacks-title", Static).update(fit(title, width))
        steps = self._steps_line(data, t0) if total > 0 else ""
        self.query_one("#stacks-steps", Static).update(Text(fit(" " + clean(steps), width), "dim"))
        self.query_one("#stacks-table", Static).update(self._table(data, rows, total, width))

    @staticmethod
    def _steps_line(data: ViewData, t0: float) -> str:
        """The shown rank's steps seen from outside (rate and spread), or each rank's rate."""
        pids = [data.rank_pid] if data.rank_pid is not None else [p for p, _ in data.ranks]
        if len(pids) == 1:
            return step_seen.short_words(rank_steps(data, pids[0], t0))
        rates = []
        for pid in pids:
            sps = rank_steps(data, pid, t0).get("steps_per_s")
            rank = data.rank_of(pid)
            who = f"r{rank}" if rank is not None else str(pid)
            rates.append(f"{who} {'?' if sps is None else f'{sps:.2f}'}")
        return "steps/s: " + ", ".join(rates) + " (r picks a rank: its step spread)"

    def _table(self, data: ViewData, rows: list[FunctionRow], total: float, width: int) -> Text:
        out = Text(no_wrap=True, overflow="ellipsis", end="")
        if total <= 0:
            why = data.sampler_note or ("no stack samples in this window" if data.header.get("pid") is not None
                                        else "no trainer: cards only")
            out.append(f" {clean(why)}", "yellow" if data.sampler_note else "dim")
            return out
        if self.by_total:
            rows = sorted(rows, key=lambda r: (-r.total_s, -r.own_s, r.label))
        out.append(f" {'own':>5} {'total':>6}  {'state':<14}function (file:line)\n", "bold")
        for r in rows[:MAX_ROWS]:
            st = r.state or ""
            known = state_of(r.state)
            glyph = known.glyph if known is not None and r.own_s > 0 else " "
            out.append(f" {r.own_s / total:5.1%} {r.total_s / total:6.1%}  ")
            out.append(glyph, known.text_style if known is not None else "")
            out.append(f" {fit(st if r.own_s > 0 else '', 11):<11} ", known.text_style if known is not None else "dim")
            out.append(fit(r.label, max(10, width - LABEL_OFFSET)) + "\n")
        if len(rows) > MAX_ROWS:
            out.append(f" … {len(rows) - MAX_ROWS} more functions", "dim")
        return out

    def action_cycle_state(self) -> None:
        order = [None, *self._states]
        i = order.index(self.state) if self.state in order else 0
        self.state = order[(i + 1) % len(order)]
        self.sattui.redraw(True)

    def action_toggle_sort(self) -> None:
        self.by_total = not self.by_total
        self.sattui.redraw(True)
