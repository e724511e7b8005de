"""The UI thread and the sampler's lock: a redraw holds ``session.lock`` only to copy what
it reads (ViewData.take), never while it bins and draws (issue 22, item 6)."""

from __future__ import annotations

import threading

import pytest

from sattui.app import SattuiApp
from sattui.screens.card import CardScreen
from sattui.screens.main import MainScreen
from sattui.screens.stacks import StacksScreen
from sattui.screens.workers import WorkersScreen
from tests.functional.conftest import replay, settle
from tests.functional.test_ranks_and_dips import ranks_replay

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
