"""The screens as SVG, compared with tests/functional/snapshots/ (regenerate with
SATTUI_UPDATE_SNAPSHOTS=1). Deterministic: the fixture recording, the replay cursor at
90 s, no wall clock anywhere on screen."""

from __future__ import annotations

import json
import re

import pytest

from sattui.app import SattuiApp
from tests.functional.conftest import REPO, SNAPSHOTS, assert_snapshot, drawn_screenshot, replay

SCREENS = {"main": [], "card": ["enter"], "workers": ["w"], "stacks": ["s"], "help": ["question_mark"]}
SIZES = [(80, 24), (160, 48)]


async def shot(size: tuple[int, int], keys: list[str]) -> str:
    app = SattuiApp(replay(), show_clock=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        for k in keys:
            await pilot.press(k)
            await pilot.pause()
        return await drawn_screenshot(app, pilot, size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
async def test_screen_snapshot(screen: str, size: tuple[int, int]) -> None:
    assert_snapshot(f"{screen}_{size[0]}x{size[1]}", await shot(size, SCREENS[screen]))


async def test_snapshots_are_deterministic() -> None:
    from tests.functional.conftest import _normalise

    a = await shot((80, 24), [])
    b = await shot((80, 24), [])
    assert _normalise(a) == _normalise(b)


def test_the_test_extra_pins_the_versions_the_snapshots_were_made_with() -> None:
    # Pinned, not version-tolerant: the SVGs are exact pixels, and a Textual release may
    # move any of them. The runtime dependency stays textual>=8.0; only the test extra
    # pins, so bumping Textual means regenerating the SVGs and moving these pins together.
    made_with = json.loads((SNAPSHOTS / "versions.json").read_text(encoding="utf-8"))
    extra = re.search(r"^test = \[(.*?)^\]", (REPO / "pyproject.toml").read_text(encoding="utf-8"), re.M | re.S)
    assert extra, "no [project.optional-dependencies] test = [...] in pyproject.toml"
    pins = dict(re.findall(r'"([A-Za-z0-9_.-]+)==([^"]+)"', extra.group(1)))
    assert {k: pins.get(k) for k in made_with} == made_with
