"""Shared pieces of the TUI tests: the deterministic fixture recording, a replay
positioned on it, and an SVG snapshot comparison (Textual's own export_screenshot;
pytest-textual-snapshot pins syrupy 4.8.0, which needs pytest<9)."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
from pathlib import Path

import pytest

from sattui.session import ReplaySession

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "recordings" / "ui_fixture.jsonl"
SNAPSHOTS = HERE / "snapshots"
CURSOR = 90.0  # inside the fixture's input-bound stretch, past its 60 s finding
UPDATE_ENV = "SATTUI_UPDATE_SNAPSHOTS"


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run ``async def`` tests (Textual's Pilot is async) without a plugin dependency."""
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        asyncio.run(pyfuncitem.obj(**args))
        return True
    return None


def replay(cursor: float = CURSOR) -> ReplaySession:
    s = ReplaySession(str(FIXTURE))
    s.seek(cursor)
    return s


@pytest.fixture
def session() -> ReplaySession:
    return replay()


def _normalise(svg: str) -> str:
    # Rich names the SVG's CSS classes after a hash of the content; the pixels are what
    # matter, so compare with the hash taken out (a diff then shows the real change).
    return re.sub(r"terminal-\d+", "terminal", svg)


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {"textual": version("textual"), "rich": version("rich")}


def assert_snapshot(name: str, svg: str) -> None:
    path = SNAPSHOTS / f"{name}.svg"
    pinned = SNAPSHOTS / "versions.json"
    if os.environ.get(UPDATE_ENV) == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        pinned.write_text(json.dumps(_versions(), indent=1) + "\n", encoding="utf-8")
    elif pinned.exists() and json.loads(pinned.read_text(encoding="utf-8")) != _versions():
        # Another Textual or Rich draws other pixels (a footer, a border). The test extra
        # pins the versions the snapshots were made with (pyproject.toml), so this is an
        # environment not installed from it: say so rather than skip every snapshot.
        pytest.fail(f"snapshots were made with {json.loads(pinned.read_text())}, this is {_versions()}: "
                    "install the pinned versions (pip install -e '.[test]'), or, moving the pins, "
                    f"regenerate with {UPDATE_ENV}=1")
    if os.environ.get(UPDATE_ENV) == "1" or not path.exists():
        if not path.exists() and os.environ.get(UPDATE_ENV) != "1" and os.environ.get("CI"):
            pytest.fail(f"missing snapshot {path}; run with {UPDATE_ENV}=1 to write it")
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(svg, encoding="utf-8")
        return
    want = path.read_text(encoding="utf-8")
    if _normalise(want) != _normalise(svg):
        got = path.with_suffix(".actual.svg")
        got.write_text(svg, encoding="utf-8")
        pytest.fail(f"screen {name} differs from {path.name} (now in {got.name}); if the change is "
                    f"intended, regenerate with {UPDATE_ENV}=1 python -m pytest tests/functional")


# -- reading a screen as a person would: shared by the Pilot and snapshot tests ---------

def chart_text(app) -> list[str]:
    from sattui.widgets.timechart import TimeChart
    return [s.text for s in app.screen.query_one(TimeChart)._strips]


def header_text(app) -> str:
    from sattui.widgets.header import StatusHeader
    return "\n".join("".join(t for t, _ in line) for line in app.screen.query_one(StatusHeader)._runs)


async def settle(pilot) -> None:
    await pilot.pause()
    pilot.app.redraw(True)
    await pilot.pause()


async def drawn_screenshot(app, pilot, size: tuple[int, int]) -> str:
    """An SVG of the screen once a redraw has gone through (a loaded machine can draw
    before a new screen has composed, and the redraw then skips it), then once more."""
    for _ in range(50):
        done = app.redraws
        app.redraw(True)
        await pilot.pause()
        if app.redraws > done:
            break
    app.redraw(True)
    await pilot.pause()
    return app.export_screenshot(title=f"sattui {size[0]}x{size[1]}")
