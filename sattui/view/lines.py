"""What the time chart draws, as plain data (no Textual here).

A screen turns a :class:`~sattui.view.data.ViewData` into a list of
:class:`Line`s; the :class:`~sattui.widgets.timechart.TimeChart` widget turns each Line
into one cached Strip. Every Line has three columns: ``label`` (fixed width), ``body``
(the time axis: exactly ``Columns.body`` cells, one per bucket of the shared
:class:`~sattui.view.binning.Axis`) and ``value``; or one ``full`` run list that spans
the width. Runs are ``(text, style)`` where ``style`` names a component class of the
chart without its ``chart--`` prefix ("" = the chart's own style).

Glyphs:

* Utilization and SM activity draw each bucket's **mean** as the bar's height
  (``▁▂▃▄▅▆▇█``, ⅛ steps), so busy spans read at their true level, and its **minimum** as
  the bar's texture: a bucket where a sample fell under :data:`~sattui.view.dips.DIP_UTIL`
  (50 %) is drawn dotted (``⡀⣀⣄⣤⣦⣶⣷⣿``, the same eight heights) in the "bad" colour, so a
  dip shorter than a bucket is never averaged away, with colour or without (``NO_COLOR``).
* CPU, memory, power, temperature, clocks and PCIe draw each bucket's **mean**.
* Screens lay their charts out at their least height, then share the rows the window has
  left among them (:mod:`sattui.view.grow`).
* The main thread's state strip draws one **letter per bucket** (``W`` data_wait,
  ``f`` forward …, :class:`sattui.states.State`) on the state's colour, so the strip reads the
  same without colour (``NO_COLOR``) or with 16 colours.
* A blank cell is "no sample here", never zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sattui.clock_events import CLOCK_REASONS, CLOCK_REASONS_BAD, decode_clock_reasons
from sattui.ledger import steps as step_seen
from sattui.ledger.bins import COMPUTE
from sattui.states import State, glyph, style_class
from sattui.textsafe import clean
from sattui.view import fmt
from sattui.view.binning import (
    Axis,
    bin_bits,
    bin_letters,
    bin_values_settled,
    state_seconds,
    states_settled,
    typical_hold,
)
from sattui.view.dips import DIP_UTIL
from sattui.view.grow import Group, share_rows

if TYPE_CHECKING:
    from sattui.model import CardSample, ProcSample
    from sattui.view.data import ViewData

Binned = tuple[list[float | None], list[float | None], list[float | None]]

Run = tuple[str, str]
Runs = tuple[Run, ...]
BLOCKS = "▁▂▃▄▅▆▇█"
# A bucket that dipped: the same eight heights in braille dots, filled from the bottom up.
DOTS = "⡀⣀⣄⣤⣦⣶⣷⣿"

KERNEL_STATES = {"R": "run", "S": "sleep", "D": "disk", "Z": "zombie", "T": "stopped", "t": "traced", "I": "idle"}

@dataclass(frozen=True, slots=True)
class Line:
    label: Runs = ()
    body: Runs = ()
    value: Runs = ()
    full: Runs | None = None
    key: str | None = None  # what a click on the line selects ("card:0")


@dataclass(frozen=True, slots=True)
class Columns:
    width: int
    label: int
    body: int
    value: int

    @property
    def body_x(self) -> int:
        return self.label + 1


def columns_for(width: int) -> Columns:
    """Column widths for a chart ``width`` cells wide; every screen uses this one rule so
    every strip on every screen starts at the same column."""
    if width >= 180:
        label, value = 26, 34  # room for a card's whole name ("0 SIMULATED Simulated GPU")
    elif width >= 120:
        label, value = 18, 34
    elif width >= 60:
        label, value = 14, 22
    else:
        label, value = 10, 12
    body = max(8, width - label - value - 2)
    return Columns(width, label, body, value)


# -- glyph runs -------------------------------------------------------------------------

def merge(cells: Sequence[Run]) -> Runs:
    """Join neighbouring cells of one style: fewer Segments per Strip."""
    out: list[Run] = []
    for text, style in cells:
        if out and out[-1][1] == style:
            out[-1] = (out[-1][0] + text, style)
        else:
            out.append((text, style))
    return tuple(out)


def band(v: float | None) -> str:
    """Utilization colour band: ≥ 80 good, ≥ 50 warn, below bad (GPU util < 50 % is the
    advisor's "poor" anchor)."""
    if v is None:
        return "nodata"
    return "good" if v >= 80 else "warn" if v >= DIP_UTIL else "bad"


def spark(values: Sequence[float | None], scale: float, style: Callable[[float], str] | str,
          zero_dim: bool = False) -> Runs:
    """One row of ⅛ blocks; ``zero_dim`` draws exact zeros muted (an idle disk is not news,
    but it is still a sample, unlike a blank)."""
    cells: list[Run] = []
    top = len(BLOCKS) - 1
    for v in values:
        if v is None:
            cells.append((" ", "nodata"))
            continue
        if zero_dim and v <= 0:
            cells.append((BLOCKS[0], "nodata"))
            continue
        i = min(top, max(0, int(v / scale * len(BLOCKS)))) if scale > 0 else 0
        cells.append((BLOCKS[i], style if isinstance(style, str) else style(v)))
    return merge(cells)


def chart(values: Sequence[float | None], scale: float, height: int,
          style: Callable[[float], str] | str, dipped: Sequence[bool] | None = None) -> list[Runs]:
    """A ``height``-row block chart, top row first (``8 × height`` levels). A real value
    always lights at least the bottom eighth, so 0 reads apart from "no data". A bucket
    ``dipped`` is drawn in dots, in the "bad" style."""
    rows: list[list[Run]] = [[] for _ in range(height)]
    levels = 8 * height
    for k, v in enumerate(values):
        if v is None:
            for r in rows:
                r.append((" ", ""))
            continue
        lv = max(1, min(levels, math.ceil(v / scale * levels))) if scale > 0 else 1
        dip = dipped is not None and dipped[k]
        glyphs = DOTS if dip else BLOCKS
        st = "bad" if dip else style if isinstance(style, str) else style(v)
        for i in range(height):
            fill = lv - 8 * (height - 1 - i)
            # An empty cell takes no style of its own: the spaces above a bar merge into
            # one run (one colour change fewer per bucket on the terminal).
            rows[i].append((" ", "") if fill <= 0 else (glyphs[min(8, fill) - 1], st))
    return [merge(r) for r in rows]


def dips_in(mins: Sequence[float | None], threshold: float = DIP_UTIL) -> list[bool]:
    """Per bucket: did a sample fall under ``threshold`` (the card dipped there)."""
    return [m is not None and m < threshold for m in mins]


def util_spark(mins: Sequence[float | None], means: Sequence[float | None], scale: float = 100.0) -> Runs:
    """One row of utilization: the mean's height, dotted and "bad" where the minimum dipped,
    else solid in the mean's band."""
    cells: list[Run] = []
    top = len(BLOCKS) - 1
    for lo, v in zip(mins, means):
        if v is None:
            cells.append((" ", "nodata"))
            continue
        i = min(top, max(0, int(v / scale * len(BLOCKS)))) if scale > 0 else 0
        if lo is not None and lo < DIP_UTIL:
            cells.append((DOTS[i], "bad"))
        else:
            cells.append((BLOCKS[i], band(v)))
    return merge(cells)


def state_cells(states: Sequence[str | None]) -> Runs:
    return merge([(" ", "nodata") if s is None else (glyph(s), style_class(s)) for s in states])


def legend(shares: dict[str, float], width: int) -> Runs:
    """``W data_wait 41%  b backward 27% …`` for the states in the window, biggest first,
    cut at a whole entry."""
    runs: list[Run] = []
    used = 0
    for st, share in sorted(shares.items(), key=lambda kv: -kv[1]):
        text = f" {st} {share:.0%}  "
        if used + 1 + len(text) > width:
            break
        runs += [(glyph(st), style_class(st)), (text, "dim")]
        used += 1 + len(text)
    return tuple(runs)


def text(s: str, style: str = "") -> Runs:
    return ((s, style),)


def fit(s: str, width: int) -> str:
    """Cut ``s`` to ``width`` cells with an ellipsis (labels and command lines), its
    control characters escaped first (names come from other users: sattui/textsafe.py).
    The cut falls at a word boundary where one is near the end (in the last third), so a
    word is not shown in half; a long single word is cut where it must be."""
    width = max(1, width)
    s = clean(s)
    if len(s) <= width:
        return s
    cut = clean(s, width)[:-1]  # never inside an escape
    space = cut.rfind(" ")
    if space >= max(1, width * 2 // 3) and s[space] == " ":
        cut = cut[:space]
    return cut.rstrip(" ,;:·(") + "…"


def bar(frac: float | None, width: int) -> Runs:
    """A ``width``-cell horizontal bar in eighths, for memory and power."""
    if frac is None:
        return ((fmt.NA.ljust(width), "nodata"),)
    frac = min(1.0, max(0.0, frac))
    eighths = round(frac * width * 8)
    full, part = divmod(eighths, 8)
    s = "█" * full + (" ▏▎▍▌▋▊▉"[part] if part and full < width else "")
    style = "bad" if frac >= 0.95 else "warn" if frac >= 0.9 else "bar"
    return ((s, style), ("░" * (width - len(s)), "dim"))


# -- axis -------------------------------------------------------------------------------

_TICKS = ((30, 10), (60, 15), (120, 30), (300, 60), (900, 300), (1800, 600), (3600, 900))


def tick_step(window_s: float) -> float:
    for w, step in _TICKS:
        if window_s <= w:
            return step
    return window_s / 4


def axis_line(axis: Axis, cols: Columns, t_end: float, live: bool, label: str = "") -> Line:
    """Tick labels under the strips: relative (``-45s``) when live, absolute replay time
    (``1:30``) over a recording, right-aligned on the bucket they name."""
    n = cols.body
    cells = [" "] * n
    step = tick_step(axis.t1 - axis.t0)
    marks: list[tuple[int, str]] = []
    if live:
        marks.append((n - 1, "now"))
        k = 1
        while True:
            t = t_end - k * step
            if t < axis.t0:
                break
            marks.append((axis.col(t), "-" + fmt.window(k * step)))
            k += 1
    else:
        t = math.floor(t_end / step) * step
        marks.append((n - 1, fmt.clock(t_end)))
        while t >= axis.t0:
            if t >= 0:
                marks.append((axis.col(t), fmt.clock(t)))
            t -= step
    limit = n + 1  # leftmost cell taken so far; labels go right to left with a gap
    for col, lab in marks:
        end = min(col, n - 1) + 1
        start = end - len(lab)
        if start < 0 or end >= limit:
            continue
        cells[start:end] = list(lab)
        limit = start
    return Line(label=text(label, "dim"), body=text("".join(cells), "axis"),
                value=text(f"window {fmt.window(axis.t1 - axis.t0)}", "dim"))


# -- shared helpers over a ViewData -------------------------------------------------------

LOOKBACK_S = 5.0  # a sample just after t0 stands for time back before it


def binned(data: ViewData, kind: str, key: Hashable, attr: str, axis: Axis) -> Binned:
    """``(mins, means, maxs)`` of one attribute of one series over the axis, through the
    app's cache (rebinned once per quarter bucket, see ``ViewData.quantum``)."""
    def compute() -> Binned:
        samples = data.window(kind, key, axis.t0 - LOOKBACK_S)
        times = [s.t for s in samples]
        hold = typical_hold(times)
        # the buckets that ended before the newest sample come from earlier redraws: an
        # hour's window of 8 cards rebinned each quarter bucket was a third of the monitor's CPU
        memo = data.cache.settled((kind, key, attr, round(axis.bw, 9), hold))
        return bin_values_settled(times, lambda i, j: [getattr(s, attr) for s in samples[i:j]], axis, hold, memo)
    return data.cache.get((kind, key, attr, axis), data.quantum(axis), compute)


@dataclass(frozen=True, slots=True)
class RankStrip:
    """One trainer process's main thread over the window: a rank of a torchrun job, or the
    trainer of a single-process one."""

    pid: int
    label: str
    states: tuple[str | None, ...]
    shares: dict[str, float]
    # Steps seen from outside over the window (sattui/ledger/steps.py figures()):
    # steps_per_s, step_s_p50, step_s_p90, or None each with steps_null_reason.
    steps: dict[str, Any]

    @property
    def lost(self) -> float:
        """The share of its sampled time not spent on its own work (waits, stalls, idle):
        the states the ledger does not count as compute (sattui/ledger/bins.py)."""
        return max(0.0, 1.0 - sum(self.shares.get(st, 0.0) for st in COMPUTE)) if self.shares else 0.0


# How far before the window the steps' spans are read: the step begun first in it has its
# start (sattui/ledger/bins.py reads as far for a stretch of bins).
STEP_LOOK_S = 15.0


# Steps over a long window are counted in blocks of this many seconds, each once its
# spans are all in (STEP_SETTLE_S: py-spy chunks arrive late), and summed: an hour's window
# of 8 ranks walked every ~9 s was a third of the monitor's CPU.
STEP_BLOCK_S = 120.0
STEP_SETTLE_S = 10.0


def _steps(data: ViewData, pid: int, t0: float, sampled_s: float) -> dict[str, Any]:
    # The steps begun in the window, found in the spans from a little before it (so the
    # first one has its start), measured as the report measures them.
    n, hist, seen = _steps_over(data, pid, t0, data.t_end + 1e-6)
    return step_seen.figures(n, hist, sampled_s, data.stack_rate_hz, seen)


def _steps_over(data: ViewData, pid: int, lo: float, hi: float) -> step_seen.Bin:
    """:func:`step_seen.over` of ``[lo, hi)``; the whole blocks in it settled long enough
    are counted once and kept (each from spans a little before and after it, so its first
    step has its start and its last phase sighting its end)."""
    b0 = math.ceil(lo / STEP_BLOCK_S)
    b1 = math.floor(min(hi, data.t_end - STEP_SETTLE_S - STEP_LOOK_S) / STEP_BLOCK_S)
    if b1 - b0 < 2:
        return step_seen.over(data.window("stack", pid, lo - STEP_LOOK_S), lo, hi)
    tl = data.timeline

    def counted(a: float, z: float, upto: float) -> step_seen.Bin:
        return step_seen.over(tl.window("stack", pid, a - STEP_LOOK_S, upto), a, z)

    blocks: dict[int, step_seen.Bin] = data.cache.get(("step-blocks", pid), None, dict)
    parts = [counted(lo, b0 * STEP_BLOCK_S, b0 * STEP_BLOCK_S + STEP_LOOK_S)]
    for b in range(b0, b1):
        got = blocks.get(b)
        if got is None:
            a, z = b * STEP_BLOCK_S, (b + 1) * STEP_BLOCK_S
            got = blocks[b] = counted(a, z, z + STEP_LOOK_S)
        parts.append(got)
    parts.append(counted(b1 * STEP_BLOCK_S, hi, data.t_end + 1e-6))
    return step_seen.merged(parts)


def rank_steps(data: ViewData, pid: int, t0: float) -> dict[str, Any]:
    """One trainer process's steps over ``[t0, t_end]`` (sattui/ledger/steps.py figures()),
    counted again when the view has moved by 1/400 of its length (a window of an hour holds
    72,000 spans a rank)."""
    def compute() -> dict[str, Any]:
        secs = state_seconds(data.stack_spans_for(pid, t0), t0, data.t_end + 1e-6)
        secs.pop(State.STARTUP, None)
        return _steps(data, pid, t0, sum(secs.values()))
    length = max(data.t_end - t0, 1e-3)
    return data.cache.get(("steps", pid, round(length, 3)), math.floor(data.t_end / (length / 400)), compute)


def rank_strips(data: ViewData, axis: Axis) -> list[RankStrip]:
    """A strip per sampled trainer process, in rank order: the state per bucket and the
    share of each state in the window."""
    out = []
    order = {pid: i for i, (pid, _) in enumerate(data.ranks)}
    for pid in sorted(data.stack_pids(axis.t0), key=lambda p: (order.get(p, len(order)), p)):
        def compute(pid: int = pid) -> tuple[tuple[str | None, ...], dict[str, float], dict[str, Any]]:
            newest = data.window("stack", pid, data.t_end - data.STACK_LOOKBACK_S)
            states, secs = states_settled(lambda t: data.stack_spans_for(pid, t), newest[-1].t if newest else None,
                                          axis, data.cache.settled(("states", pid, axis.bw)))
            secs.pop(State.STARTUP, None)
            total = sum(secs.values())
            shares = {k: v / total for k, v in secs.items()} if total > 0 else {}
            return tuple(states), shares, _steps(data, pid, axis.t0, total)
        states, shares, steps = data.cache.get(("states", pid, axis), data.quantum(axis), compute)
        if any(s is not None for s in states):
            out.append(RankStrip(pid, data.trainer_label(pid), states, shares, steps))
    return out


def pick_strips(strips: list[RankStrip], room: int, picked: int | None) -> list[RankStrip]:
    """The ``room`` strips to show when not all fit, in rank order: the picked rank, then
    the odd ones out (a top state few other ranks share: in a job whose ranks wait for
    each other, the rank they wait for is busy with something else), then those losing
    the most time."""
    if len(strips) <= room:
        return strips
    tops = [max(s.shares.items(), key=lambda kv: kv[1])[0] if s.shares else None for s in strips]
    alike = {t: tops.count(t) for t in tops}
    order = sorted(range(len(strips)), key=lambda i: (strips[i].pid != picked, alike[tops[i]], -strips[i].lost, i))
    chosen = {strips[i].pid for i in order[:room]}
    return [s for s in strips if s.pid in chosen]


def _strip_value(st: RankStrip, width: int) -> str:
    """The strip's top states and, where its steps were seen, their rate (``2.1/s``):
    the second state goes first when they do not all fit."""
    top = [f"{glyph(k)} {v:.0%}" for k, v in sorted(st.shares.items(), key=lambda kv: -kv[1])[:2]]
    sps = st.steps.get("steps_per_s")
    rate = [f"{sps:.1f}/s"] if sps is not None else []
    while len(top) > 1 and len("  ".join(top + rate)) > width:
        top.pop()
    return "  ".join(top + rate)


def state_lines(data: ViewData, axis: Axis, cols: Columns, with_legend: bool = True, room: int | None = None,
                pids: set[int] | None = None) -> list[Line]:
    """The main-thread state strip of each rank (one line each), and their legend.

    ``room``: the lines there are. When every rank and the legend do not fit, the legend
    goes, then the strips are cut to those :func:`pick_strips` chooses and a ``+N ranks``
    line names the rest (the stacks and workers screens show each rank: ``r`` picks one).
    ``pids``: only these processes' strips (a card's screen shows the rank using it).
    """
    strips = rank_strips(data, axis)
    if pids:
        strips = [st for st in strips if st.pid in pids] or strips
    if not strips:
        note = data.sampler_note or ("no stack samples in this window" if data.header.get("pid") else
                                     "no trainer: cards only")
        return [Line(label=text("main thread", "label"), body=text(fit(note, cols.body), "warn" if data.sampler_note
                                                                    else "dim"))]
    n = len(strips)
    shown, with_legend = (strips, with_legend) if room is None or n + int(with_legend) <= room else \
        (strips, False) if n <= room else (pick_strips(strips, max(1, room - 1), data.rank_pid), False)
    lines = []
    for st in shown:
        picked = data.rank_pid == st.pid and len(strips) > 1
        lines.append(Line(label=text(fit(st.label, cols.label), "selected" if picked else "label"),
                          body=state_cells(st.states), value=text(_strip_value(st, cols.value), "value"),
                          key=f"rank:{st.pid}"))
    hidden = [st for st in strips if st not in shown]
    if hidden:
        names = " ".join(st.label.removeprefix("rank ") for st in hidden)
        lines.append(Line(label=text(f"+{len(hidden)} ranks", "dim"),
                          body=text(fit(f"{names} (r picks one; s, w show it)", cols.body), "dim")))
    if with_legend:
        total_shares: dict[str, float] = {}
        for st in strips:
            for k, v in st.shares.items():
                total_shares[k] = total_shares.get(k, 0.0) + v / n
        head = "  states" if n == 1 else "  all ranks"
        lines.append(Line(full=((head.ljust(cols.label + 1), "dim"),
                                *legend(total_shares, cols.width - cols.label - 1))))
    return lines


# -- main screen ----------------------------------------------------------------------------

def card_label(data: ViewData, info: dict, width: int) -> Runs:
    c = info.get("card")
    name = fmt.short_card_name(info.get("name"))
    runs: list[Run] = [(f"{c} ", "label")]
    if data.simulated(info):
        runs.append(("SIMULATED", "sim"))
        rest = width - len(runs[0][0]) - sum(len(r[0]) for r in runs[1:]) - 1
        if rest > 3:
            runs.append((" " + fit(name, rest), "label"))
    else:
        used = sum(len(r[0]) for r in runs)
        runs.append((fit(name, width - used), "label"))
    return tuple(runs)


@dataclass(frozen=True, slots=True)
class CardLayout:
    """How much room a card gets on the main screen."""

    util_rows: int = 1   # height of the utilization chart
    sm_rows: int = 0     # height of the SM activity chart under it (0: none)
    power_rows: int = 0  # height of the power chart under that (0: none)
    details: bool = True  # the memory / power / temperature / PCIe line

    @property
    def lines(self) -> int:
        return self.util_rows + self.sm_rows + self.power_rows + int(self.details)


def card_lines(data: ViewData, axis: Axis, cols: Columns, info: dict, layout: CardLayout, selected: bool) -> list[Line]:
    c = info["card"]
    key = f"card:{c}"
    mins, means, _ = binned(data, "card", c, "util", axis)
    last = data.last_card(c)
    util = last.util if last else None
    sm = last.sm_active if last else None
    label = card_label(data, info, cols.label)
    if selected:
        label = tuple((t, "selected" if s == "label" else s) for t, s in label)
    val: list[Run] = [("util ", "dim"), (fmt.pct_text(util, 4), band(util)),
                      ("  sm ", "dim"), (fmt.pct_text(sm, 4), "value")]
    if c in data.lost_cards():
        # The label keeps SIMULATED; the loss takes the values' place (they are stale now).
        val = [("LOST", "bad-tag"), (" last util ", "dim"), (fmt.pct_text(util), "value")]
    elif cols.value >= 30:
        mem = (last.mem_used / last.mem_total * 100) if last and last.mem_used is not None and last.mem_total else None
        val += [("  mem ", "dim"), (fmt.pct_text(mem, 4), "value")]
    if not layout.details and cols.value < 30:
        val = list(val[:2]) + [(" ", ""), (fmt.temp(last.temp_c if last else None), "value")]
    if all(v is None for v in mins):
        known = data.has_data("card", c, axis.t0 - LOOKBACK_S)
        rows = [text(fit("util n/a" if known else "no samples in this window", cols.body), "nodata")]
        rows += [()] * (layout.util_rows - 1)
    else:
        rows = chart(means, 100.0, layout.util_rows, band, dips_in(mins)) if layout.util_rows > 1 else \
            [util_spark(mins, means)]
    lines = [Line(label=label, body=rows[0], value=tuple(val), key=key)]
    for i, r in enumerate(rows[1:], 1):
        lab = text("  util (mean)", "dim") if i == 1 else ()
        lines.append(Line(label=lab, body=r, key=key))
    if layout.sm_rows:
        sm_mins, sm_means, _ = binned(data, "card", c, "sm_active", axis)
        if any(v is not None for v in sm_mins):
            sm_rows = chart(sm_means, 100.0, layout.sm_rows, band, dips_in(sm_mins)) if layout.sm_rows > 1 else \
                [util_spark(sm_mins, sm_means)]
            lines += [Line(label=text("  SM active", "dim") if i == 0 else (), body=r, key=key)
                      for i, r in enumerate(sm_rows)]
    if layout.power_rows:
        _, pw_means, _ = binned(data, "card", c, "power_w", axis)
        limit = (last.power_limit_w if last and last.power_limit_w else None) or info.get("power_limit_w")
        if any(v is not None for v in pw_means):
            scale = limit or max(v for v in pw_means if v is not None) or 1.0
            lines += [Line(label=text("  power", "dim") if i == 0 else (), body=r, key=key)
                      for i, r in enumerate(chart(pw_means, scale, layout.power_rows, "bar"))]
    if layout.details:
        lines.append(Line(full=card_details(data, info, last, cols), key=key))
    return lines


def card_details(data: ViewData, info: dict, last: CardSample | None, cols: Columns) -> Runs:
    """``  mem ██████░░ 62.1/80.0G  285/300W  71°C  PCIe ↓3.1G/s ↑40M/s`` under a card's strip."""
    runs: list[Run] = [(" " * 2, "")]
    mem_used = last.mem_used if last else None
    mem_total = (last.mem_total if last and last.mem_total else None) or info.get("mem_total")
    frac = mem_used / mem_total if mem_used is not None and mem_total else None
    runs += [("mem ", "dim"), *bar(frac, 10 if cols.width < 120 else 20),
             (f" {fmt.size(mem_used)}/{fmt.size(mem_total)}", "value")]
    power = last.power_w if last else None
    limit = (last.power_limit_w if last and last.power_limit_w else None) or info.get("power_limit_w")
    hot = bool(power and limit and power >= 0.97 * limit)
    runs += [("  pwr ", "dim"), (f"{fmt.watts(power)}/{fmt.watts(limit)}", "warn" if hot else "value")]
    runs += [("  ", ""), (fmt.temp(last.temp_c if last else None), "value")]
    rx = last.pcie_rx_Bps if last else None
    tx = last.pcie_tx_Bps if last else None
    runs += [("  PCIe ", "dim"), (f"↓{fmt.rate(rx)} ↑{fmt.rate(tx)}", "value")]
    if cols.width >= 120:
        gen, width = (last.pcie_gen, last.pcie_width) if last else (None, None)
        runs += [("  link ", "dim"), (f"gen{gen if gen is not None else '?'} x{width if width is not None else '?'}"
                                      if gen is not None or width is not None else fmt.NA, "value")]
        clk = last.sm_clock_mhz if last else None
        runs += [("  clock ", "dim"), (fmt.mhz(clk), "value")]
        reasons = [r for r in decode_clock_reasons(last.clock_reasons if last else None) if r != "GpuIdle"]
        if reasons:
            runs += [("  ", ""), (",".join(reasons), "warn")]
    return tuple(runs)


ROLE_LABEL = {"main": "main", "worker": "worker", "pin": "pin", "compile": "compile", "other": "other"}


def proc_label(s: ProcSample) -> str:
    role = f"rank{s.rank}" if s.role == "rank" and s.rank is not None else ROLE_LABEL.get(s.role, s.role)
    if s.role == "worker" and s.rank is not None:
        role = f"r{s.rank}.worker"
    return f"{role} {s.pid}"


PROC_HEAD = f"{'st':<3}{'cores':<5}{'rss':>6}{'read':>8}"


def proc_value(data: ViewData, last: ProcSample, cols: Columns) -> Runs:
    """``S  0.12   3.2G    0B/s`` under :data:`PROC_HEAD`, column for column."""
    if data.proc_gone(last):
        return (("gone", "dim"),)
    st = last.state or "?"
    runs: list[Run] = [(f"{st:<3}", "bad" if st in "DZ" else "value"), (f"{fmt.cores(last.cpu):<5}", "value"),
                       (f"{fmt.size(last.rss):>6}", "value"), (f"{fmt.rate(last.read_Bps):>8}", "value")]
    if cols.value >= 30:
        runs.append((f"{fmt.rate(last.write_Bps):>8}", "value"))
    return tuple(runs)


def cpu_style(v: float) -> str:
    return "cpu-hot" if v >= 0.9 else "cpu"


def proc_lines(data: ViewData, axis: Axis, cols: Columns, limit: int | None = None,
               cpu_rows: dict[int, int] | None = None) -> list[Line]:
    """The process list: a head, then each process alive with its CPU chart (one row, or
    ``cpu_rows[pid]`` rows where the screen has room). ``limit``: lines after the head."""
    procs = data.proc_index(axis.t0 - LOOKBACK_S)
    head_val = PROC_HEAD + (f"{'write':>8}" if cols.value >= 30 else "")
    lines = [Line(label=text("process", "head"), body=text(fit("CPU (cores, mean per bucket; █ = 1 core)", cols.body),
                                                           "head"),
                  value=text(head_val, "head"))]
    if not procs:
        note = "no trainer processes in this window" if data.header.get("pid") is not None else \
            "no trainer: cards only (start with --pid PID or -- CMD)"
        lines.append(Line(label=text("", ""), body=text(fit(note, cols.body), "dim")))
        return lines
    # Without persistent workers every epoch leaves exited workers behind: the main screen
    # lists the ones alive (the workers screen has them all).
    alive = [(pid, last) for pid, last in procs if not data.proc_gone(last)]
    gone = len(procs) - len(alive)
    rows_of = cpu_rows or {}
    room = None if limit is None else limit - (1 if gone else 0)
    shown = alive if room is None or len(alive) <= room else alive[: max(0, room - 1)]
    for pid, last in shown:
        _, means, _ = binned(data, "proc", pid, "cpu", axis)
        n = rows_of.get(pid, 1)
        rows = chart(means, 1.0, n, cpu_style) if n > 1 else [spark(means, 1.0, cpu_style)]
        key = f"proc:{pid}"
        lines.append(Line(label=text(fit(proc_label(last), cols.label), "label"),
                          body=rows[0], value=proc_value(data, last, cols), key=key))
        lines += [Line(body=r, key=key) for r in rows[1:]]
    if len(shown) < len(alive):
        lines.append(Line(label=text(f"+{len(alive) - len(shown)} more", "dim"), body=text("w: all processes", "dim")))
    if gone:
        lines.append(Line(label=text(f"{gone} exited", "dim"),
                          body=text(fit("in this window (w: all processes)", cols.body), "dim")))
    return lines


PROCS_MIN = 2  # the process list's head and one line


def _reports(data: ViewData, card: int, attr: str, axis: Axis) -> bool:
    """Does the card report ``attr`` in this window (a chart of it would not be blank)?"""
    return any(v is not None for v in binned(data, "card", card, attr, axis)[1])


def rows_below(peak: float, scale: float, most: int = 64) -> int:
    """The most rows a chart of values up to ``peak`` (full height ``scale``) may have and
    still draw in its top row: ``n`` rows while the top one starts under the peak."""
    if scale <= 0 or peak <= 0:
        return 1
    frac = min(1.0, peak / scale)
    n = 1
    while n < most and n / (n + 1) < frac:
        n += 1
    return n


def _peak(data: ViewData, kind: str, key: Hashable, attr: str, axis: Axis) -> float:
    return max((v for v in binned(data, kind, key, attr, axis)[1] if v is not None), default=0.0)
PROCS_FIRST = 6  # processes listed before the charts grow (the rest, once they have)
UTIL_ROWS_FIRST = 4  # a card's utilization chart grows to this before more processes are listed
UTIL_ROWS_MAX = 8


def main_lines(data: ViewData, axis: Axis, cols: Columns, height: int | None, selected_card: int | None,
               advice_want: int = 0) -> list[Line]:
    """The main screen's chart: cards, the state strip right under them (so a dip and a
    data wait stand one above the other), the time axis, the processes.

    ``height`` is the room there is (None: draw everything at its least height). Every
    chart is laid out at its least height first (a card one line, with its details line
    where that fits); the advice then takes up to ``advice_want`` more lines (so every
    finding reads whole), and what is left goes to the charts (:func:`share_rows`): each
    card's utilization chart up to :data:`UTIL_ROWS_FIRST` rows, the processes not yet
    listed, the utilization up to :data:`UTIL_ROWS_MAX`, an SM activity and a power
    chart per card, then each process's CPU chart.
    """
    cards = data.cards
    procs = data.proc_index(axis.t0 - LOOKBACK_S)
    alive = [pid for pid, last in procs if not data.proc_gone(last)]
    gone = len(alive) < len(procs)
    state_n = max(1, len(data.stack_pids(axis.t0))) + 1
    first = min(len(alive), PROCS_FIRST)
    fixed = state_n + 1 + 1 + max(1, first) + int(len(alive) > first) + int(gone)
    layouts = {c["card"]: CardLayout(1, 0, 0, True) for c in cards}
    cpu_rows: dict[int, int] = {}
    proc_extra = 0
    if height is not None:
        # A few cards keep their details line from the start; many get it once each has
        # a two-row chart (the numbers are on the card screen too).
        details = len(cards) <= 2 and len(cards) * 2 + fixed <= height
        card_n = max(1, len(cards) * (1 + int(details)))
        spare = height - card_n - fixed
        spare -= min(max(0, spare), advice_want)
        ids = tuple(c["card"] for c in cards)
        sm_ids = tuple(("sm", c) for c in ids if _reports(data, c, "sm_active", axis))
        pw_ids = tuple(("pw", c) for c in ids if _reports(data, c, "power_w", axis))
        cpu_most: dict[Hashable, int] = {("cpu", p): rows_below(_peak(data, "proc", p, "cpu", axis), 1.0) - 1
                                         for p in alive}
        cpu_ids = tuple(k for k, n in cpu_most.items() if n > 0)
        extra, _ = share_rows(spare, [
            Group(ids, 1), Group(() if details else tuple(("details", c) for c in ids), 1),
            Group(ids, UTIL_ROWS_FIRST - 1), Group(("procs",), len(alive) - first, even=False),
            Group(ids, UTIL_ROWS_MAX - 1), Group(sm_ids, 3), Group(pw_ids, 2),
            Group(cpu_ids, 2, even=False, most=cpu_most), Group(sm_ids, 4), Group(pw_ids, 4),
            Group(cpu_ids, 5, even=False, most=cpu_most),
            # What is still left (a card or two, few processes, a tall window): the
            # utilization first, then whichever charts can use it.
            Group(ids, 2 * UTIL_ROWS_MAX - 1), Group(pw_ids + sm_ids, UTIL_ROWS_MAX - 1, even=False),
            Group(cpu_ids, 2 * UTIL_ROWS_MAX - 1, even=False, most=cpu_most)])
        layouts = {c: CardLayout(1 + extra.get(c, 0), extra.get(("sm", c), 0), extra.get(("pw", c), 0),
                                 details or bool(extra.get(("details", c)))) for c in ids}
        cpu_rows = {p: 1 + extra.get(("cpu", p), 0) for p in alive}
        proc_extra = extra.get("procs", 0)
    lines: list[Line] = []
    if not cards:
        msg = data.status.backend_message if data.status is not None and data.status.backend_message else None
        lines.append(Line(label=text("cards", "label"),
                          body=text(fit(msg or "no accelerator found", cols.body), "warn")))
    for info in cards:
        lines += card_lines(data, axis, cols, info, layouts[info["card"]], selected_card == info["card"])
    # Under the cards, each rank's strip: before the processes (the workers screen lists
    # them all), which keep their head and one line.
    state_room = None if height is None else max(2, height - len(lines) - 1 - PROCS_MIN)
    lines += state_lines(data, axis, cols, room=state_room)
    lines.append(axis_line(axis, cols, data.t_end, data.live))
    limit = None
    if height is not None:
        listed = first + proc_extra
        grown = sum(n - 1 for n in cpu_rows.values())
        limit = max(PROCS_MIN, height - len(lines)) - 1 - grown
        if len(alive) > listed:
            limit = min(limit, listed + 1 + int(gone))
    lines += proc_lines(data, axis, cols, limit=limit, cpu_rows=cpu_rows)
    return lines


# -- card screen ----------------------------------------------------------------------------

def _metric_block(label: str, rows: list[Runs], value: Runs, cols: Columns) -> list[Line]:
    return [Line(label=text(label, "label") if i == 0 else (), body=r, value=value if i == 0 else ())
            for i, r in enumerate(rows)]


def _stats(vals: Sequence[float | None], f: Callable[[float | None], str]) -> str:
    real = [v for v in vals if v is not None]
    if not real:
        return ""
    return f"min {f(min(real))} max {f(max(real))}"


CARD_METRICS = ("util", "sm_active", "mem_used", "power_w", "temp_c", "sm_clock_mhz", "pcie_rx_Bps", "pcie_tx_Bps")
# Who gets a taller chart when there is room, in order (one more row each time round).
_GROW = ("util", "util", "sm_active", "power_w", "mem_used", "sm_clock_mhz", "sm_active", "power_w")


def metric_heights(room: int | None, fixed: int) -> dict[str, int]:
    """Rows per metric chart of the card screen: one each, then one more at a time in
    :data:`_GROW`'s order, then what is still left shared out (:func:`share_rows`), the
    utilization first (up to :data:`UTIL_ROWS_MAX`), so the charts fill the window."""
    h = dict.fromkeys(CARD_METRICS, 1)
    spare = 0 if room is None else room - fixed - len(CARD_METRICS)
    for name in _GROW:
        if spare <= 0:
            break
        h[name] += 1
        spare -= 1
    if spare > 0:
        extra, _ = share_rows(spare, [
            Group(("util",), UTIL_ROWS_MAX - h["util"]), Group(("sm_active", "power_w", "mem_used"), 2, even=False),
            Group(("sm_active", "power_w", "sm_clock_mhz", "temp_c"), 4, even=False),
            Group(("util", "sm_active", "power_w", "mem_used", "sm_clock_mhz", "temp_c", "pcie_rx_Bps",
                   "pcie_tx_Bps"), 8, even=False)])
        for grown, n in extra.items():
            h[str(grown)] += n
    return h


def mark_line(axis: Axis, cols: Columns, span: tuple[float, float]) -> Line | None:
    """``▔▔▔`` under the buckets of ``span`` (the dip the view was moved to), or None when
    it is out of view."""
    a, b = span
    if b < axis.t0 or a >= axis.t1:
        return None
    lo, hi = max(0, axis.col(a)), min(axis.n - 1, axis.col(b))
    return Line(label=text("  ▔ that dip", "warn"), body=(((" " * lo), ""), ("▔" * (hi - lo + 1), "warn")))


def card_screen_lines(data: ViewData, axis: Axis, cols: Columns, card: int, room: int | None,
                      mark: tuple[float, float] | None = None) -> list[Line]:
    """Every metric of one card, its clock-event reasons, the state strip, the processes.

    ``room``: the lines there are; charts grow taller into what the rest leaves free.
    ``mark``: a time span to mark under the utilization chart (the dip Enter moved to).
    """
    info = next((i for i in data.cards if i["card"] == card), {"card": card})
    known = data.has_data("card", card, axis.t0 - LOOKBACK_S)
    last = data.last_card(card)
    tail = clock_reason_lines(data, axis, cols, card)
    # The strip of the rank using this card (from the vendor's process list), else every rank's.
    users = {int(p) for p in (last.procs or {}) if str(p).isdigit()} if last is not None else set()
    tail += state_lines(data, axis, cols, pids=users)
    tail.append(axis_line(axis, cols, data.t_end, data.live))
    procs = card_proc_lines(data, axis, cols, last)
    hts = metric_heights(room, len(tail) + min(len(procs), 3))
    lines: list[Line] = []

    def metric(attr: str, label: str, scale: float | None, f: Callable[[float | None], str],
               style: Callable[[float], str] | str, dips: bool = False) -> None:
        """Each bucket's mean as the bar; with ``dips``, buckets whose minimum fell under
        DIP_UTIL dotted (the min and max stats then come from the samples' extremes)."""
        mins, means, maxs = binned(data, "card", card, attr, axis)
        cur = getattr(last, attr) if last else None
        if all(v is None for v in means):
            why = "n/a (this card does not report it)" if known else "n/a (no samples in this window)"
            lines.append(Line(label=text(label, "label"), body=text(fit(why, cols.body), "nodata"),
                              value=((f"now {f(cur)}", "value"),)))
            return
        sc = scale or max(v for v in means if v is not None) or 1.0
        stats = _stats([*mins, *maxs], f) if dips else _stats(means, f)
        val = ((f"now {f(cur)}", "value"), ("  " + stats, "dim")) if cols.value >= 30 else \
            ((f"now {f(cur)}", "value"),)
        rows = chart(means, sc, hts[attr], style, dips_in(mins) if dips else None)
        lines.extend(_metric_block(label, rows, val, cols))

    mem_total = (last.mem_total if last and last.mem_total else None) or info.get("mem_total")
    limit = (last.power_limit_w if last and last.power_limit_w else None) or info.get("power_limit_w")
    clk_max = (last.sm_clock_max_mhz if last and last.sm_clock_max_mhz else None) or info.get("sm_clock_max_mhz")
    metric("util", "util %", 100.0, fmt.pct_text, band, dips=True)
    marked = mark_line(axis, cols, mark) if mark is not None else None
    if marked is not None:
        lines.append(marked)
    metric("sm_active", "SM %", 100.0, fmt.pct_text, band, dips=True)
    metric("mem_used", "memory", mem_total, fmt.size, "bar")
    metric("power_w", "power", limit, fmt.watts, "bar")
    metric("temp_c", "temperature", 100.0, fmt.temp, "bar")
    metric("sm_clock_mhz", "SM clock", clk_max, fmt.mhz, "bar")
    metric("pcie_rx_Bps", "PCIe ↓ rx", None, fmt.rate, "cpu")
    metric("pcie_tx_Bps", "PCIe ↑ tx", None, fmt.rate, "cpu")
    return lines + tail + procs


def clock_reason_lines(data: ViewData, axis: Axis, cols: Columns, card: int) -> list[Line]:
    def compute() -> dict[int, list[bool]] | None:
        samples = data.window("card", card, axis.t0 - LOOKBACK_S)
        masks = [s.clock_reasons for s in samples]
        if all(m is None for m in masks):
            return None
        times = [s.t for s in samples]
        return bin_bits(times, masks, axis, typical_hold(times))
    bits = data.cache.get(("bits", card, axis), data.quantum(axis), compute)
    if bits is None:
        return [Line(label=text("clock events", "label"),
                     body=text(fit("n/a (only NVML reports clock-event reasons)", cols.body), "nodata"))]
    if not bits:
        return [Line(label=text("clock events", "label"), body=text("none in this window", "dim"))]
    out = []
    for bit in sorted(bits):
        row = bits[bit]
        name = CLOCK_REASONS.get(bit, f"0x{bit:x}")
        style = "bad" if bit & CLOCK_REASONS_BAD else "dim"
        share = sum(row) / max(1, sum(1 for k in range(axis.n) if axis.t0 + k * axis.bw <= data.t_end))
        out.append(Line(label=text(fit(name, cols.label), "label"),
                        body=merge([("■", style) if on else (" ", "nodata") for on in row]),
                        value=text(f"0x{bit:x} {share:.0%} of window", "dim")))
    return out


def card_proc_lines(data: ViewData, axis: Axis, cols: Columns, last: CardSample | None) -> list[Line]:
    head = Line(full=text(fit("processes on this card (device memory, from the vendor)", cols.width), "head"))
    if last is None or last.procs is None:
        return [head, Line(full=text("  n/a (the vendor gives no process list)", "nodata"))]
    if not last.procs:
        return [head, Line(full=text("  none", "dim"))]
    procs = dict(data.proc_index(axis.t0 - LOOKBACK_S))
    out = [head]
    for pid_s, mem in sorted(last.procs.items(), key=lambda kv: -(kv[1] or 0)):
        try:
            pid = int(pid_s)
        except ValueError:
            pid = -1
        p = procs.get(pid)
        who = f"{proc_label(p)} {p.name}" if p else f"pid {pid_s} (outside the trainer's tree)"
        out.append(Line(full=((f"  {pid_s:>7}  ", "value"), (fmt.size(mem).rjust(6), "value"),
                              ("  " + fit(who, max(10, cols.width - 20)), "label"))))
    return out


# -- workers screen -----------------------------------------------------------------------

def kernel_cells(letters: Sequence[str | None]) -> Runs:
    return merge([(" ", "nodata") if s is None else (s, "k-" + s if s in "RSDZ" else "value") for s in letters])


# What a worker's own stacks say it does (sattui/trainer/worker_states.py), in words.
WORKER_DOING = {"idle": "waits for work", "fetch_wait": "waits on its data", "fetch_compute": "computes",
                "other": "other"}


def worker_doing(looks: Sequence[Any], width: int) -> tuple[Runs, Runs] | None:
    """The body and value of a worker's "doing" line from its stack looks in the window:
    how many looks found it in each state, and where the last one was."""
    if not looks:
        return None
    counts: dict[str, int] = {}
    for ws in looks:
        counts[str(ws.state)] = counts.get(str(ws.state), 0) + 1
    order = sorted(counts, key=lambda k: -counts[k])
    body = " · ".join(f"{WORKER_DOING.get(k, k)} {counts[k]}" for k in order) + f" of {len(looks)} looks"
    last = looks[-1]
    if last.frames:
        f = last.frames[0]
        where = f.filename.rsplit("/", 1)[-1] + ("" if f.line is None else f":{f.line}")
        body += f" — last in {f.name} ({where})"
    return text(fit(body, width), "dim"), text(WORKER_DOING.get(str(last.state), str(last.state)), "value")


def worker_screen_lines(data: ViewData, axis: Axis, cols: Columns, height: int | None = None) -> list[Line]:
    """Every process of the trainer's tree: its CPU, kernel state, what its stacks say it
    does, its I/O. ``height``: the rows there are; what the least layout leaves goes to
    the processes' CPU charts, then to their read and write charts (:func:`share_rows`)."""
    t0 = axis.t0 - LOOKBACK_S
    procs = [(pid, last) for pid, last in data.proc_index(t0) if data.of_rank(last)]
    lines = [Line(label=text("process", "head"),
                  body=text(fit("CPU cores (mean) · kernel state (R run S sleep D disk Z zombie) · I/O", cols.body),
                            "head"),
                  value=text("now", "head"))]
    if not procs:
        lines.append(Line(label=text("", ""), body=text("no trainer processes in this window", "dim")))
        return lines

    def io_scale() -> float:
        # One I/O scale for every process, so a worker's bar can be compared with another's.
        top = 1e6
        for pid, _ in procs:
            for s in data.window("proc", pid, t0):
                for v in (s.read_Bps, s.write_Bps):
                    if v is not None and v > top:
                        top = v
        return top
    io_max = data.cache.get(("io_max", axis, tuple(p for p, _ in procs)), data.quantum(axis), io_scale)
    blocks: list[tuple[int, Any, Line, Line, Line, Line | None, str, Any, Any]] = []
    for pid, last in procs:
        _, cpu, _ = binned(data, "proc", pid, "cpu", axis)
        _, rd, _ = binned(data, "proc", pid, "read_Bps", axis)
        _, wr, _ = binned(data, "proc", pid, "write_Bps", axis)

        def letters_of(pid: int = pid) -> list[str | None]:
            samples = data.window("proc", pid, t0)
            times = [s.t for s in samples]
            return bin_letters(times, [s.state for s in samples], axis, typical_hold(times))
        letters = data.cache.get(("kstate", pid, axis), data.quantum(axis), letters_of)
        gone = data.proc_gone(last)
        name = f"{last.name}" + (f" · {last.threads} threads" if last.threads else "") + (" · gone" if gone else "")
        head = Line(full=((fit(proc_label(last), cols.label).ljust(cols.label + 1), "selected"),
                          (fit(name, cols.width - cols.label - 1), "dim")))
        cpu_line = Line(label=text("  cpu", "dim"), body=spark(cpu, 1.0, cpu_style),
                        value=text(("gone" if gone else f"{fmt.cores(last.cpu)} cores"), "value"))
        state = Line(label=text("  state", "dim"), body=kernel_cells(letters),
                     value=text("gone" if gone else f"{last.state or '?'} "
                                f"{KERNEL_STATES.get(last.state or '', '')}".rstrip(), "value"))
        doing = worker_doing(data.window("worker_stack", pid, t0), cols.body)
        doing_line = Line(label=text("  doing", "dim"), body=doing[0], value=doing[1]) if doing is not None else None
        io = "none" if all(v is None for v in rd) and all(v is None for v in wr) else "some"
        blocks.append((pid, last, head, cpu_line, state, doing_line, io, rd, wr))

    # A tall CPU chart's top is the process's peak (to a hundredth of a core; its second
    # row says so), so a process that never uses a whole core still fills its chart.
    cpu_top = {b[0]: max(0.05, math.ceil(_peak(data, "proc", b[0], "cpu", axis) * 100 - 1e-9) / 100)
               for b in blocks}
    extra: dict[Any, int] = {}
    if height is not None:
        least = 1 + 1 + sum(3 + (d is not None) + (1 if io == "none" else 2) for *_, d, io, _, _ in blocks)
        most: dict[Any, int] = {}
        for b in blocks:
            most[("cpu", b[0])] = rows_below(_peak(data, "proc", b[0], "cpu", axis), cpu_top[b[0]]) - 1
            if b[6] != "none":
                most[("rd", b[0])] = rows_below(max((v or 0) for v in b[7]), io_max) - 1
                most[("wr", b[0])] = rows_below(max((v or 0) for v in b[8]), io_max) - 1
        cpu_ids = tuple(k for k, n in most.items() if k[0] == "cpu" and n > 0)
        io_ids = tuple(k for k, n in most.items() if k[0] != "cpu" and n > 0)
        extra, _ = share_rows(height - least, [
            Group(cpu_ids, 3, even=False, most=most), Group(io_ids, 2, even=False, most=most),
            Group(cpu_ids, 7, even=False, most=most), Group(io_ids, 5, even=False, most=most),
            Group(cpu_ids + io_ids, 63, even=False, most=most)])

    for pid, last, head, cpu_line, state, doing_line, io, rd, wr in blocks:
        lines.append(head)
        n = 1 + extra.get(("cpu", pid), 0)
        if n > 1:
            _, cpu, _ = binned(data, "proc", pid, "cpu", axis)
            rows = chart(cpu, cpu_top[pid], n, cpu_style)
            lines.append(Line(label=cpu_line.label, body=rows[0], value=cpu_line.value))
            lines.append(Line(label=text(f"  top {cpu_top[pid]:g} core", "dim"), body=rows[1]))
            lines += [Line(body=r) for r in rows[2:]]
        else:
            lines.append(cpu_line)
        lines.append(state)
        if doing_line is not None:
            lines.append(doing_line)
        if io == "none":
            lines.append(Line(label=text("  I/O", "dim"), body=text("n/a (no /proc/PID/io for this one)", "nodata")))
            continue
        for tag, vals, lab, val in (("rd", rd, "  read", f"{fmt.rate(last.read_Bps)}  rss {fmt.size(last.rss)}"),
                                    ("wr", wr, "  write", fmt.rate(last.write_Bps))):
            n = 1 + extra.get((tag, pid), 0)
            rows = chart(vals, io_max, n, "io") if n > 1 else [spark(vals, io_max, "io", zero_dim=True)]
            lines.append(Line(label=text(lab, "dim"), body=rows[0], value=text(val, "value")))
            lines += [Line(body=r) for r in rows[1:]]
    lines.append(axis_line(axis, cols, data.t_end, data.live, label=f"I/O █ = {fmt.rate(io_max)}"))
    return lines
