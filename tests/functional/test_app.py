"""Pilot tests: every key and screen over a ReplaySession on the fixture recording, and
the degraded states over a frozen live session."""

from __future__ import annotations

import asyncio
import math
import threading

import pytest
from textual.command import CommandPalette

from sattui.app import ZOOMS_S, SattuiApp, connect
from sattui.screens.card import CardScreen
from sattui.screens.help import HelpScreen
from sattui.screens.main import MainScreen
from sattui.screens.stack_top import StacksScreen
from sattui.screens.workers import WorkersScreen
from sattui.states import State
from sattui.view.lines import BLOCKS, DOTS
from sattui.widgets.timechart import TimeChart
from tests.functional.conftest import FIXTURE, chart_text, header_text, replay, settle
from tests.functional.doubles import FrozenLive, status

SIZE = (80, 24)


def app_for(session, **kw) -> SattuiApp:
    return SattuiApp(session, show_clock=False, **kw)


# -- the main screen ------------------------------------------------------------------

async def test_main_screen_shows_header_cards_strip_processes_advice(session):
    app = app_for(session)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        head = header_text(app)
        assert "pid 4242 python train.py" in head
        assert "replay 1:30/3:00" in head and "sim" in head and "py-spy 20 Hz" in head
        assert "HIGH" in head and "input_bound" in head
        lines = chart_text(app)
        assert lines[0].startswith("0 SIMULATED"), lines[0]
        assert "util" in lines[0] and "%" in lines[0]
        assert any(line.startswith("main thread") for line in lines)
        assert any(line.startswith("worker 4301") for line in lines)
        assert any(line.startswith("pin 4305") and "n/a" in line for line in lines)  # rss None is n/a, not 0
        advice = str(app.screen.query_one("#advice-text").render())
        assert "input_bound" in advice and "fix" in advice


async def test_state_strip_shares_the_card_strip_time_axis(session):
    """Same left column, same width, and a data wait under every utilization dip."""
    app = app_for(session)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        chart = app.screen.query_one(TimeChart)
        cols = chart.columns
        util = next(line for line in chart.lines if line.key == "card:0" and line.body)
        state = next(line for line in chart.lines if line.label and line.label[0][0] == "main thread")
        assert sum(len(t) for t, _ in util.body) == cols.body
        assert sum(len(t) for t, _ in state.body) == cols.body
        cells_u = "".join(t for t, _ in util.body)
        cells_s = "".join(t for t, _ in state.body)
        dips = [k for k, c in enumerate(cells_u) if c in DOTS]
        solid = [k for k, c in enumerate(cells_u) if c in BLOCKS]
        assert dips and solid, cells_u
        # A bucket drawn dotted (a sample in it fell under 50 %) stands over a data wait,
        # or next to one (a half-second sample can straddle a bucket's edge); a solid one
        # (busy throughout) over none.
        wait = State("data_wait").glyph
        assert all(wait in cells_s[max(0, k - 1):k + 2] for k in dips), (cells_u, cells_s)
        assert all(cells_s[k] != wait for k in solid), (cells_u, cells_s)
        assert sum(cells_s[k] == wait for k in dips) >= 0.7 * len(dips), (cells_u, cells_s)
        # The bar is the mean: a bucket half in a wait stands taller than one wholly in it.
        assert len({c for c in cells_u if c in DOTS}) > 1, cells_u
        texts = [s.text for s in chart._strips]
        row_u = texts[chart.lines.index(util)]
        row_s = texts[chart.lines.index(state)]
        assert row_u[cols.body_x:cols.body_x + cols.body] == cells_u
        assert row_s[cols.body_x:cols.body_x + cols.body] == cells_s


async def test_uses_more_room_when_there_is_some(session):
    app = app_for(session)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        chart = app.screen.query_one(TimeChart)
        assert chart.columns.body > 100
        card_rows = [line for line in chart.lines if line.key == "card:0"]
        assert len(card_rows) >= 4  # a taller util chart, an SM strip and the details line
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        assert chart.columns.body == 42
        assert len([line for line in chart.lines if line.key == "card:0"]) == 2
        assert all(len(s.text) == 80 for s in chart._strips)


# -- navigation -----------------------------------------------------------------------

async def test_enter_and_digit_open_the_card_screen_and_escape_goes_back(session):
    app = app_for(session)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, CardScreen) and app.screen.card == 0
        text = "\n".join(chart_text(app))
        for label in ("util %", "SM %", "memory", "power", "temperature", "SM clock", "PCIe ↓ rx",
                      "PCIe ↑ tx", "GpuIdle", "SwPowerCap", "main thread", "processes on this card"):
            assert label in text, label
        assert "0x4" in text  # the decoded bit is named with its mask
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        await pilot.press("0")
        await settle(pilot)
        assert isinstance(app.screen, CardScreen)
        await pilot.press("escape")
        await pilot.press("7")  # no card 7: say so, stay
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)


async def test_clicking_a_card_row_opens_it(session):
    app = app_for(session)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.click(TimeChart, offset=(20, 0))
        await settle(pilot)
        assert isinstance(app.screen, CardScreen)


async def test_w_s_and_question_mark_open_their_screens_without_stacking(session):
    app = app_for(session)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        assert isinstance(app.screen, WorkersScreen)
        text = "\n".join(chart_text(app))
        assert "worker 4301" in text and "pt_data_worker" in text and "  read" in text and "  state" in text
        await pilot.press("s")
        await settle(pilot)
        assert isinstance(app.screen, StacksScreen)
        assert len(app.screen_stack) == 3  # default screen, main, stacks: never deeper
        table = str(app.screen.query_one("#stacks-table").render())
        assert "Condition.wait" in table and "data_wait" in table
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        assert len(app.screen_stack) == 3
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)


async def test_stacks_filter_and_sort(session):
    app = app_for(session)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        scr = app.screen
        assert scr.state is None
        await pilot.press("f")
        await settle(pilot)
        assert scr.state == "data_wait"  # the biggest state first
        table = str(scr.query_one("#stacks-table").render())
        assert "Linear.forward" not in table and "Condition.wait" in table
        await pilot.press("o")
        await settle(pilot)
        assert scr.by_total
        title = str(scr.query_one("#stacks-title").render())
        assert "by total time" in title and "data_wait only" in title


async def test_q_quits():
    app = app_for(replay())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.is_running and app.return_code is None
        await pilot.press("q")
        await pilot.pause()
        # Checked before run_test's own exit, which would stop any app: the key did it.
        assert not app.is_running
        assert app.return_code == 0


async def test_a_redraw_tick_while_quitting_is_a_no_op():
    # Textual empties the screen stack before the redraw timer stops; a tick that fell in
    # between raised ScreenStackError through the app (CI, in the snapshot tests' exit).
    app = app_for(replay())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
    assert not app.screen_stack
    app._on_timer()


# -- time -------------------------------------------------------------------------------

async def test_brackets_zoom_through_the_levels(session):
    app = app_for(session)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.window_s == 60
        await pilot.press("left_square_bracket")
        assert app.window_s == 30
        await pilot.press("left_square_bracket")
        assert app.window_s == 30  # the shortest
        for want in ZOOMS_S[1:]:
            await pilot.press("right_square_bracket")
            assert app.window_s == want
        await pilot.press("right_square_bracket")
        assert app.window_s == 3600
        await settle(pilot)
        assert "window 1h" in "\n".join(chart_text(app))


async def test_replay_scrub_and_play(session):
    app = app_for(session, redraw_hz=20)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("left")
        assert session.cursor == pytest.approx(85.0)
        await pilot.press("right")
        await pilot.press("right")
        assert session.cursor == pytest.approx(95.0)
        await pilot.press("w")  # ← → move time on every screen, not a scroll view
        await pilot.press("left")
        assert session.cursor == pytest.approx(90.0)
        await pilot.press("right")
        await pilot.press("escape")
        await pilot.press("space")
        assert session.playing
        before = session.cursor
        await asyncio.sleep(0.5)
        await pilot.pause()
        assert session.cursor > before + 0.2  # the app's timer called session.tick()
        await pilot.press("space")
        assert not session.playing
        await pilot.press("p")  # over a recording, p is play/pause too
        assert session.playing
        await pilot.press("p")
        await settle(pilot)
        assert "stopped" in header_text(app)


async def test_live_pause_freezes_the_view_while_sampling_goes_on():
    live = FrozenLive(str(FIXTURE), 90.0)
    app = app_for(live)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert live.started == 1
        await pilot.press("p")
        await settle(pilot)
        assert app.paused_at == 90.0 and "PAUSED" in header_text(app)
        live.t = 100.0  # time goes on
        await settle(pilot)
        assert app.view_end() == 90.0
        await pilot.press("left")
        assert app.view_end() == 85.0
        await pilot.press("p")
        await settle(pilot)
        step = app.live_step_s()  # live, the view's end moves in whole steps
        assert app.paused_at is None and "PAUSED" not in header_text(app)
        assert app.view_end() == math.floor(100.0 / step) * step
        await pilot.press("left")  # live: stepping back pauses
        assert app.paused_at == 95.0
        await pilot.press("right")  # and stepping up to now follows again
        assert app.paused_at is None
        # Space means nothing live: not in the footer, not bound.
        assert app.check_action("play", ()) is False


# -- wiring -----------------------------------------------------------------------------

async def test_on_update_from_a_sampler_thread_posts_a_message():
    live = FrozenLive(str(FIXTURE), 90.0)
    app = app_for(live)
    connect(app, live)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        th = threading.Thread(target=live.on_update)
        th.start()
        th.join()
        await pilot.pause(0.1)
        assert app.updates == 1


async def test_command_palette_lists_the_actions(session):
    app = app_for(session)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for want in ("Help", "Workers", "Stacks", "Pause / follow", "Zoom in", "Zoom out", "Card 0",
                     "Play / pause replay"):
            assert want in titles
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press("escape")


async def test_footer_shows_the_bindings(session):
    app = app_for(session)
    async with app.run_test(size=(160, 24)) as pilot:
        await settle(pilot)
        keys = {key for key, b in app.active_bindings.items() if b.binding.show and b.enabled}
        for key in ("q", "question_mark", "w", "s", "p", "left_square_bracket", "enter", "space"):
            assert key in keys


# -- degraded states --------------------------------------------------------------------

async def test_no_accelerator_found():
    hdr = {"kind": "header", "format": "sattui/1", "pid": 4242, "cmdline": ["python", "train.py"], "backend": None,
           "cards": [], "interval_s": 1.0, "stack_rate_hz": 20.0}
    live = FrozenLive(str(FIXTURE), 90.0, status(backend=None, backend_message="no accelerator found: nvml: no "
                                                  "libnvidia-ml.so; rocm: amd-smi not on PATH"), header=hdr,
                      extra=())
    live.timeline._series = {k: v for k, v in live.timeline._series.items() if k[0] != "card"}
    app = app_for(live)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        head = header_text(app)
        # The reason lists every backend: one line, cut at the edge (doctor gives it whole).
        assert "no accelerator found: nvml: no libnvidia-ml.so" in head
        assert "no accelerator found: no accelerator found" not in head
        assert "no backend" in head
        assert chart_text(app)[0].startswith("cards") and "no accelerator found" in chart_text(app)[0]
        assert any(line.startswith("worker 4301") for line in chart_text(app))  # the rest stays


async def test_no_ptrace_permission_says_the_fix_and_keeps_the_rest():
    fix = "run as root, or: sudo sysctl kernel.yama.ptrace_scope=0"
    live = FrozenLive(str(FIXTURE), 90.0, status(sampler="denied", sampler_message=fix, sampler_rate_hz=None),
                      extra=[{"kind": "event", "t": 1.0, "type": "permission_denied", "message": fix}])
    # No stacks at all when py-spy may not attach.
    live.timeline._series = {k: v for k, v in live.timeline._series.items() if k[0] != "stack"}
    app = app_for(live)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        head = header_text(app)
        assert "no ptrace permission" in head and fix[:40] in head and "py-spy no permission" in head
        assert head.count("ptrace_scope") == 1  # said once, not again from the event
        lines = chart_text(app)
        strip = next(line for line in lines if line.startswith("main thread"))
        assert "no stacks" in strip
        assert lines[0].startswith("0 SIMULATED") and any(line.startswith("worker 4301") for line in lines)


async def test_trainer_exited_keeps_the_last_data_and_shows_the_code():
    live = FrozenLive(str(FIXTURE), 95.0, status(trainer_alive=False, trainer_exit_code=3, sampler="target_gone"),
                      extra=[{"kind": "event", "t": 91.0, "type": "trainer_exited", "message": "trainer 4242 exited",
                              "pid": 4242, "exit_code": 3}])
    app = app_for(live)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        head = header_text(app)
        assert "trainer exited" in head and "exit code 3" in head and "last data" in head
        lines = chart_text(app)
        assert "util" in lines[0] and "n/a" not in lines[0].split("util")[1][:6]  # the last value stays


async def test_card_lost_and_backend_failing_are_said():
    extra = [{"kind": "event", "t": 80.0, "type": "card_lost", "message": "card 0 (Simulated GPU) lost: GPU is lost",
              "card": 0},
             {"kind": "event", "t": 85.0, "type": "backend_failing", "message": "sim: tool timed out after 5 s"}]
    live = FrozenLive(str(FIXTURE), 90.0, extra=extra)
    app = app_for(live)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        head = header_text(app)
        assert "card lost" in head and "GPU is lost" in head
        assert "backend failing" in head and "timed out" in head
        assert chart_text(app)[0].startswith("0 SIMULATED") and "LOST" in chart_text(app)[0]


async def test_many_cards_fit_80x24():
    cards = [{"card": i, "vendor": "nvidia", "name": "NVIDIA H200", "mem_total": 150 * 2 ** 30,
              "power_limit_w": 700.0} for i in range(8)]
    base = FrozenLive(str(FIXTURE), 90.0)
    hdr = dict(base.header, cards=cards, backend="nvml")
    extra = [{"kind": "card", "t": t / 2, "card": i, "util": 90.0 - 10 * i, "mem_used": 2 ** 34,
              "mem_total": 150 * 2 ** 30, "power_w": 500.0, "temp_c": 60.0}
             for i in range(1, 8) for t in range(120, 180)]
    live = FrozenLive(str(FIXTURE), 90.0, status(backend="nvml"), header=hdr, extra=extra)
    app = app_for(live)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        lines = chart_text(app)
        for i in range(8):
            assert lines[i].startswith(f"{i} "), lines[i]
        assert "SIMULATED" not in lines[1]  # real cards are not labelled so
        assert any(line.startswith("main thread") for line in lines)
        advice = app.screen.query_one("#advice")
        assert advice.size.height >= 3
        await pilot.press("down")
        await pilot.press("down")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, CardScreen) and app.screen.card == 2


async def test_no_color_stays_readable(monkeypatch, session):
    monkeypatch.setenv("NO_COLOR", "1")
    app = app_for(session)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.no_color
        strip = next(line for line in chart_text(app) if line.startswith("main thread"))
        # Without colour the states still read: one letter each.
        assert State("data_wait").glyph in strip and State("backward").glyph in strip
        # and a card's dips: dotted bars where the minimum fell under 50 %, solid elsewhere
        util = next(line for line in chart_text(app) if line.startswith("0 SIMULATED"))
        assert any(c in DOTS for c in util) and any(c in BLOCKS for c in util), util
        svg = app.export_screenshot()
        assert "#d7263d" not in svg  # the data_wait red is gone; the letters remain
