"""The screens use the window they are given (issue 26): the rows left after the fixed
lines go to the charts, at most one row in ten blank at 120×40 and 200×50 with one card
and with eight; a resize redraws at once at the new size and keeps the view's state;
the highlighted dip's cause reads whole at 80 columns; a live view moves in steps (the
terminal's traffic, issue 25)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

import sattui.screens.card as card_screen
from sattui.app import LIVE_STEP_S, SattuiApp
from sattui.screens.card import CardScreen, DipList, dip_row
from sattui.screens.main import MainScreen
from sattui.session import ReplaySession
from sattui.view.grow import Group, share_rows
from sattui.view.lines import fit
from sattui.widgets.timechart import TimeChart
from tests.functional.conftest import FIXTURE, settle
from tests.functional.doubles import FrozenLive

RANKS_FIXTURE = FIXTURE.with_name("ranks_fixture.jsonl")
RECORDINGS = {"1card": (FIXTURE, 90.0), "8cards": (RANKS_FIXTURE, 75.0)}
SCREENS = {"main": [], "card": ["enter"], "workers": ["w"]}


def screen_rows(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


def blank(rows: list[str]) -> int:
    return sum(1 for r in rows if not r.strip())


def replay_of(name: str) -> ReplaySession:
    path, cursor = RECORDINGS[name]
    s = ReplaySession(str(path))
    s.seek(cursor)
    return s


@pytest.mark.parametrize("size", [(120, 40), (200, 50)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
@pytest.mark.parametrize("recording", list(RECORDINGS))
async def test_at_most_one_row_in_ten_is_blank(recording: str, screen: str, size: tuple[int, int]) -> None:
    app = SattuiApp(replay_of(recording), show_clock=False)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        for k in SCREENS[screen]:
            await pilot.press(k)
            await settle(pilot)
        rows = screen_rows(app)
        assert len(rows) == size[1]
        assert blank(rows) * 10 <= size[1], "\n".join(rows)


async def test_a_card_chart_grows_with_the_window_and_stays_one_line_at_80x24() -> None:
    async def util_rows(size: tuple[int, int]) -> int:
        app = SattuiApp(replay_of("1card"), show_clock=False)
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            n = 0
            for ln in app.screen.query_one(TimeChart).lines:
                if ln.key != "card:0" or ln.full is not None or (ln.label and ln.label[0][0].strip() in
                                                                   ("SM active", "power")):
                    break
                n += 1
            return n
    assert await util_rows((80, 24)) == 1
    assert 4 <= await util_rows((200, 50)) <= 12


async def test_resizing_redraws_at_once_and_keeps_the_view() -> None:
    session = replay_of("1card")
    app = SattuiApp(session, show_clock=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("right_square_bracket")  # a 2-minute window
        await settle(pilot)
        scr = app.screen
        assert isinstance(scr, MainScreen) and app.window_s == 120.0
        cursor = session.cursor
        for size in ((200, 50), (100, 30)):
            await pilot.resize_terminal(*size)
            # No forced redraw here: the resize itself must bring the new layout.
            for _ in range(5):
                await pilot.pause()
            rows = screen_rows(app)
            assert len(rows) == size[1] and all(len(r) == size[0] for r in rows)
            chart = app.screen.query_one(TimeChart)
            assert chart.lines and all(s.cell_length == size[0] for s in chart._strips)
            assert blank(rows) * 10 <= size[1], "\n".join(rows)
            assert app.screen is scr and app.window_s == 120.0 and session.cursor == cursor


LONG = ("data wait: the main thread waits on the DataLoader queue while both workers decode "
        "images at 99 % CPU (stacks not in yet)")


def test_a_cut_falls_at_a_word_with_an_ellipsis_and_a_long_word_still_fits() -> None:
    cut = fit(LONG, 50)
    assert cut.endswith("…") and len(cut) <= 50
    assert LONG.startswith(cut[:-1]) and LONG[len(cut) - 1] == " "  # the next character starts a new word
    assert fit("abcdefghijklmnop", 8) == "abcdefg…"
    assert fit("short", 50) == "short"


async def test_the_highlighted_dip_reads_whole_at_80_columns(monkeypatch) -> None:
    real = card_screen.recent_dips

    def long_causes(data, card):
        return [replace(d, detail=LONG) for d in real(data, card)]
    monkeypatch.setattr(card_screen, "recent_dips", long_causes)
    app = SattuiApp(replay_of("1card"), show_clock=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        scr = app.screen
        assert isinstance(scr, CardScreen)
        lst = scr.query_one(DipList)

        def prompt(i: int) -> str:
            return " ".join(str(lst.get_option_at_index(i).prompt).split())
        assert lst.highlighted == 0 and LONG in prompt(0)
        assert prompt(1).endswith("…") and LONG not in prompt(1)
        await pilot.press("down")
        await settle(pilot)
        assert lst.highlighted == 1 and LONG in prompt(1) and LONG not in prompt(0)
        rows = screen_rows(app)
        # On screen, wrapped under itself: the cause's last words on the rows that follow.
        at = next(i for i, r in enumerate(rows) if "decode images at 99 % CPU" in r)
        assert "(stacks not in yet)" in rows[at + 1], "\n".join(rows)


def test_a_row_cut_for_its_width_keeps_whole_words() -> None:
    d = replace(card_screen.Dip(0, 10.0, 12.5, 3.0, "data_wait", None), detail=LONG)
    row = dip_row(d, 90.0, False, 80).plain
    assert len(row) <= 80 and row.endswith("…")
    assert " ".join(dip_row(d, 90.0, False, 80, whole=True).plain.split()).endswith(LONG)


def test_rows_are_shared_evenly_among_cards_and_whole_rounds_only() -> None:
    extra, left = share_rows(10, [Group(("a", "b", "c"), 2), Group(("p",), 9, even=False)])
    assert extra == {"a": 2, "b": 2, "c": 2, "p": 4} and left == 0
    extra, left = share_rows(2, [Group(("a", "b", "c"), 2)])
    assert extra == {} and left == 2  # two rows cannot go evenly to three cards
    extra, left = share_rows(5, [Group(("a",), 1), Group(("a",), 3)])
    assert extra == {"a": 3} and left == 2


async def test_a_live_view_moves_in_steps_so_the_charts_do_not_repaint_every_tick() -> None:
    live = FrozenLive(str(FIXTURE), 90.0)
    app = SattuiApp(live, show_clock=False)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        chart = app.screen.query_one(TimeChart)
        step = app.live_step_s()
        # A step is whole buckets (138 columns over 60 s: 5 of 0.43 s), at least LIVE_STEP_S.
        bucket = 60.0 / chart.columns.body
        assert step >= LIVE_STEP_S and abs(step / bucket - round(step / bucket)) < 1e-6 and step < LIVE_STEP_S + bucket
        start = math.floor(90.0 / step) * step
        live.t = start
        await settle(pilot)
        strips = list(chart._strips)
        assert app.view_end() == start
        live.t = start + step * 0.9  # the clock moves within a step: not one row redrawn
        await settle(pilot)
        assert app.view_end() == start
        assert all(a is b for a, b in zip(strips, chart._strips))
        live.t = start + step  # a step: the strips scroll by one step's buckets
        await settle(pilot)
        assert app.view_end() == pytest.approx(start + step)
        assert any(a is not b for a, b in zip(strips, chart._strips))


def test_a_chart_grows_only_as_tall_as_its_values_reach() -> None:
    from sattui.view.lines import rows_below

    assert rows_below(0.3, 1.0) == 1 and rows_below(0.5, 1.0) == 1  # a second row would stay empty
    assert rows_below(0.7, 1.0) == 3 and rows_below(0.9, 1.0) == 9
    extra, left = share_rows(10, [Group(("a", "b"), 9, even=False, most={"a": 2})])
    assert extra == {"a": 2, "b": 8} and left == 0
