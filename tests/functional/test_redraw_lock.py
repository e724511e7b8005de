"""The UI thread and the sampler's lock: a redraw holds ``session.lock`` only to copy what
it reads (ViewData.take), never while it bins and draws (issue 22, item 6)."""

from __future__ import annotations

import threading

import pytest

from sattui.app import SattuiApp
from sattui.recording import RecordingReader
from sattui.screens.card import CardScreen
from sattui.screens.main import MainScreen
from sattui.screens.stack_top import StacksScreen
from sattui.screens.workers import WorkersScreen
from tests.functional.conftest import FIXTURE, header_text, replay, settle
from tests.functional.doubles import FrozenLive
from tests.functional.test_ranks_and_dips import ranks_replay

START = 165.0  # late in the fixture (180 s): the 30-s view's copy starts well after its first events
HOLD_MAX_S = 5.0  # the other thread lets go after this even if the draw never ends


async def _open(app: SattuiApp, pilot, which: str) -> None:
    if which == "card":
        app.action_open_card(0)
    elif which == "stacks":
        app.action_stacks()
    elif which == "workers":
        app.action_workers()
    await settle(pilot)


SCREENS = {"main": MainScreen, "card": CardScreen, "stacks": StacksScreen, "workers": WorkersScreen}


@pytest.mark.parametrize("which", list(SCREENS))
async def test_a_redraw_draws_while_another_thread_holds_the_lock(which):
    """While the screen draws, another thread (the sampler, appending) can take the lock,
    and the draw does not wait for it: before, the app held the lock through the whole
    refresh_view, so the other thread could not take it at all."""
    session = replay()
    app = SattuiApp(session, show_clock=False)
    seen: list[dict[str, bool]] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await _open(app, pilot, which)
        screen = app.screen
        assert isinstance(screen, SCREENS[which])
        draw = screen.refresh_view

        def refresh_view(data, view) -> None:
            taken, done = threading.Event(), threading.Event()
            got: dict[str, bool] = {}

            def sampler() -> None:
                got["took"] = session.lock.acquire(blocking=False)
                taken.set()
                if got["took"]:
                    got["waited_out"] = not done.wait(HOLD_MAX_S)
                    session.lock.release()

            th = threading.Thread(target=sampler)
            th.start()
            taken.wait(HOLD_MAX_S)
            draw(data, view)  # would block on the lock if the draw read the session
            done.set()
            th.join()
            seen.append(got)

        screen.refresh_view = refresh_view  # type: ignore[method-assign]
        app.redraw(True)
        await pilot.pause()
    assert seen, "no redraw ran"
    assert all(g["took"] for g in seen), "the UI thread held the session's lock while drawing"
    assert not any(g["waited_out"] for g in seen), "the draw waited for the lock another thread held"


@pytest.mark.parametrize("window_s", [60.0, 3600.0])
@pytest.mark.parametrize("recording", ["fixture", "ranks"])
async def test_every_screen_reads_only_the_copy(recording, window_s):
    """The copy covers what each screen reads: no query falls back to the live session
    (each one that did would take the lock again, mid-draw)."""
    session = replay() if recording == "fixture" else ranks_replay()
    app = SattuiApp(session, show_clock=False, window_s=window_s)
    datas = []
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        for which in SCREENS:
            await _open(app, pilot, which)
            screen = app.screen
            assert isinstance(screen, SCREENS[which])
            draw = screen.refresh_view

            def refresh_view(data, view, draw=draw, name=which) -> None:
                draw(data, view)
                datas.append((name, data))

            screen.refresh_view = refresh_view  # type: ignore[method-assign]
            app.redraw(True)
            await pilot.pause()
            app.action_go_back()
            await settle(pilot)
    assert {name for name, _ in datas} == set(SCREENS)
    for name, data in datas:
        assert data.copied is not None, name
        assert data.copied.misses == 0, (name, data.copied.misses)


async def test_a_live_view_copies_only_what_came_since_and_keeps_old_events():
    """Live, each redraw brings the last one's copy up to date with the samples added
    since (the copy's lists are the last ones, moved on), and an event from long before
    the window still shows (events are copied whole, not only the window's)."""
    from sattui.model import Event

    session = FrozenLive(str(FIXTURE), START, extra=[
        {"kind": "event", "t": 1.0, "type": "card_lost", "message": "card 0 fell off the bus", "card": 0}])
    app = SattuiApp(session, show_clock=False, window_s=30.0)
    datas = []
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        draw = app.screen.refresh_view

        lists = []

        def refresh_view(data, view) -> None:
            draw(data, view)
            datas.append(data)
            lists.append(data.copied.series("card", 0)._items)

        app.screen.refresh_view = refresh_view  # type: ignore[method-assign]
        reader_rest = [r for r in RecordingReader(str(FIXTURE)).records() if START < float(r["t"]) <= START + 10]
        for step in range(1, 11):
            with session.lock:  # as the sampler appends: under the lock
                for r in reader_rest:
                    if START + step - 1 < float(r["t"]) <= START + step:
                        session.feed.add_record(r)
                session.t = START + step
            app.redraw(True)
            await pilot.pause()
        assert "card 0 fell off the bus" in header_text(app)
    assert len(datas) >= 10
    t_lo = datas[-1].copied.t_lo
    assert t_lo > 1.0  # the event is older than the copied span
    for data in datas:
        assert data.copied.misses == 0
        assert "card 0 fell off the bus" in [e.message for e in data.events if isinstance(e, Event)]
    # Brought up to date, not copied afresh: the same list, moved from copy to copy.
    assert all(a is b for a, b in zip(lists[-10:], lists[-9:]))
    # The newest copy's card samples: what the session holds over its span, the last
    # second's included.
    last = datas[-1]
    ring = session.timeline.series("card", 0)
    assert last.copied.series("card", 0)._items == ring.window(last.copied.t_lo, last.copied.t_hi)
    assert ring.last_t() > START + 9 and last.copied.series("card", 0).last_t() == ring.last_t()
