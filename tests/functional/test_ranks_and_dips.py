"""Pilot tests: a state strip per rank and the rank key (over the hand-made 8-rank
recording, tests/fixtures/recordings/ranks_fixture.jsonl), and the card screen's dips
with Enter moving the view to one (over the single-process fixture)."""

from __future__ import annotations

from pathlib import Path

from sattui.app import SattuiApp
from sattui.screens.card import CardScreen, DipList
from sattui.screens.main import MainScreen
from sattui.screens.stack_top import StacksScreen
from sattui.screens.workers import WorkersScreen
from sattui.session import ReplaySession
from sattui.view.binning import Axis
from sattui.widgets.timechart import TimeChart
from tests.functional.conftest import (
    FIXTURE,
    assert_snapshot,
    chart_text,
    drawn_screenshot,
    header_text,
    replay,
    settle,
)
from tests.functional.doubles import FrozenLive

RANKS_FIXTURE = Path(FIXTURE).with_name("ranks_fixture.jsonl")
RANKS_END = 75.0
SLOW_RANK, SLOW_PID = 5, 5106


def ranks_replay() -> ReplaySession:
    s = ReplaySession(str(RANKS_FIXTURE))
    s.seek(RANKS_END)
    return s


async def shot(app: SattuiApp, pilot, size: tuple[int, int]) -> str:
    return await drawn_screenshot(app, pilot, size)


# -- one strip per rank --------------------------------------------------------------

async def test_eight_ranks_fit_80x24_with_the_cards_and_the_advice():
    app = SattuiApp(ranks_replay(), show_clock=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        lines = chart_text(app)
        assert all(len(t) == 80 for t in lines)
        for c in range(8):
            assert lines[c].startswith(f"{c} SIMULATED"), lines[c]
        strips = [t for t in lines if t.startswith("rank ")]
        # Not all eight fit: the odd one out (rank 5 waits for data while the others wait
        # in the all-reduce for it) is among those shown, the rest are named.
        assert 2 <= len(strips) < 8 and any(t.startswith(f"rank {SLOW_RANK} ") for t in strips), lines
        more = next(t for t in lines if t.startswith(f"+{8 - len(strips)} ranks"))
        hidden = {r for r in range(8) if not any(t.startswith(f"rank {r} ") for t in strips)}
        assert {int(x) for x in more[15:].split("(")[0].split()} == hidden
        assert "W " in next(t for t in strips if t.startswith(f"rank {SLOW_RANK} "))[58:]
        assert any(t.startswith("process") for t in lines)  # the process list keeps its head
        assert app.screen.query_one("#advice").size.height >= 3
        assert "all ranks" in header_text(app)
        assert_snapshot("ranks_main_80x24", await shot(app, pilot, (80, 24)))


async def test_every_rank_has_its_own_strip_where_there_is_room():
    app = SattuiApp(ranks_replay(), show_clock=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        lines = chart_text(app)
        for r in range(8):
            strip = next(t for t in lines if t.startswith(f"rank {r} "))
            assert ("W" if r == SLOW_RANK else "C") in strip[19:19 + 40], strip
            assert strip.rstrip().endswith("0.4/s"), strip  # its steps per second, seen from outside
        assert not any("+" in t[:3] and "ranks" in t[:12] for t in lines)
        assert any(t.startswith("  all ranks") for t in lines)  # the legend, over all ranks


async def test_the_rank_key_cycles_and_the_stacks_and_workers_screens_follow():
    app = SattuiApp(ranks_replay(), show_clock=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.rank_pid is None
        keys = {key for key, b in app.active_bindings.items() if b.binding.show and b.enabled}
        assert "r" in keys
        await pilot.press("s")
        await settle(pilot)
        assert isinstance(app.screen, StacksScreen)
        title = str(app.screen.query_one("#stacks-title").render())
        assert "all ranks' main threads" in title
        total_all = float(title.split(" · ")[-1].split("s sampled")[0])
        # each rank's steps seen from outside (the fixture's ranks step every ~2.5 s)
        steps = str(app.screen.query_one("#stacks-steps").render())
        assert steps.startswith(" steps/s: r0 0.3") and f"r{SLOW_RANK} 0.3" in steps, steps
        for _ in range(SLOW_RANK + 1):
            await pilot.press("r")
        await settle(pilot)
        assert app.rank_pid == SLOW_PID and "rank 5" in header_text(app)
        title = str(app.screen.query_one("#stacks-title").render())
        assert title.startswith(" rank 5 main thread")
        total_5 = float(title.split(" · ")[-1].split("s sampled")[0])
        steps = str(app.screen.query_one("#stacks-steps").render())
        assert steps.startswith(" 0.3") and "steps/s, p50 2." in steps and ", p90 2." in steps, steps
        assert abs(total_5 * 8 - total_all) < 0.05 * total_all  # one rank's samples of eight
        table = str(app.screen.query_one("#stacks-table").render()).splitlines()
        assert "Condition.wait" in table[1] and "all_reduce" not in table[1]  # rank 5 waits for data
        await pilot.press("r")  # rank 6: waits in the all-reduce
        await settle(pilot)
        table = str(app.screen.query_one("#stacks-table").render()).splitlines()
        assert "all_reduce" in table[1], table[:3]
        await pilot.press("w")
        await settle(pilot)
        assert isinstance(app.screen, WorkersScreen)
        text = "\n".join(chart_text(app))
        assert "rank6 5107" in text and "r6.worker 5213" in text and "r6.worker 5214" in text
        assert "5106" not in text and "5101" not in text and "5211" not in text
        assert "processes of rank 6" in str(app.screen.query_one("#workers-title").render())
        await pilot.press("r")  # rank 7, then all ranks again
        await pilot.press("r")
        await settle(pilot)
        assert app.rank_pid is None
        assert "rank0 5101" in "\n".join(chart_text(app))
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)


async def test_a_single_process_has_no_rank_to_pick():
    app = SattuiApp(replay(), show_clock=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        keys = {key for key, b in app.active_bindings.items() if b.binding.show and b.enabled}
        assert "r" not in keys
        await pilot.press("r")
        await settle(pilot)
        assert app.rank_pid is None
        assert any(t.startswith("main thread") for t in chart_text(app))
        assert "all ranks" not in header_text(app)


# -- the card screen's dips -----------------------------------------------------------

async def test_the_card_screen_lists_the_recent_dips_with_their_cause():
    app = SattuiApp(replay(), show_clock=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, CardScreen)
        dips = app.screen._dips
        assert len(dips) >= 10
        assert [d.t0 for d in dips] == sorted((d.t0 for d in dips), reverse=True)  # newest first
        assert all(d.t1 <= 90.0 + 1e-6 for d in dips)  # nothing past the replay cursor
        lst = app.screen.query_one(DipList)
        assert lst.has_focus and lst.highlighted == 0
        first = str(lst.get_option_at_index(0).prompt)
        assert "1:28" in first and "data wait, both workers at" in first and "% CPU" in first


async def test_enter_on_a_dip_moves_the_replay_cursor_to_it():
    session = replay()
    app = SattuiApp(session, show_clock=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        scr = app.screen
        target = scr._dips[-1]  # the oldest: out of the 1-minute view
        assert target.t1 < 90.0 - app.window_s
        for _ in range(len(scr._dips) - 1):
            await pilot.press("down")
        await pilot.press("enter")
        await settle(pilot)
        assert session.cursor - app.window_s <= target.t0 and target.t1 <= session.cursor
        # The list now ends at the new cursor; the dip stays highlighted; a mark stands under it.
        lst = scr.query_one(DipList)
        assert scr._dips[lst.highlighted].t0 == target.t0
        chart = scr.query_one(TimeChart)
        mark = next(line for line in chart.lines if line.label and "that dip" in line.label[0][0])
        axis = Axis.make(session.cursor, app.window_s, chart.columns.body)
        body = "".join(t for t, _ in mark.body)
        assert body.index("▔") == axis.col(target.t0) and body.rindex("▔") == axis.col(target.t1)


async def test_enter_on_a_dip_pauses_a_live_view_there():
    live = FrozenLive(str(FIXTURE), 150.0)
    app = SattuiApp(live, show_clock=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        scr = app.screen
        # live: the newest dips (their stacks may still be on their way) come without a cause
        assert scr._dips and all(d.t0 < 150.0 for d in scr._dips)
        target = next(d for d in scr._dips if d.t1 < 150.0 - 60.0)
        i = scr._dips.index(target)
        for _ in range(i):
            await pilot.press("down")
        await pilot.press("enter")
        await settle(pilot)
        assert app.paused_at is not None and app.paused_at - app.window_s <= target.t0
        assert target.t1 <= app.paused_at < 150.0
        assert "PAUSED" in header_text(app)
        # a dip still in view pauses the view too, at most at now: it must not slide away
        await pilot.press("p")  # follow now again
        await settle(pilot)
        await pilot.press("home")
        await pilot.press("enter")
        await settle(pilot)
        newest = scr._dips[0]
        assert app.paused_at == 150.0 and 150.0 - app.window_s <= newest.t0
