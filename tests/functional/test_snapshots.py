"""The screens as SVG, compared with tests/functional/snapshots/ (regenerate with
SATTUI_UPDATE_SNAPSHOTS=1), at 80×24, 120×40 and 200×50. Deterministic: the fixture
recording, the replay cursor at 90 s, no wall clock anywhere on screen; the cluster
screen over a made-up job of two hosts read at a fixed time."""

from __future__ import annotations

import json
import re
import threading

import pytest

import sattui.screens.cluster as cluster_screen
from sattui.app import SattuiApp
from sattui.cluster.source import CardData, HostData, JobData, RankData
from sattui.cluster.view import ClusterPoller, Snapshot
from sattui.cluster_app import ClusterApp
from tests.functional.conftest import REPO, SNAPSHOTS, assert_snapshot, drawn_screenshot, replay

SCREENS = {"main": [], "card": ["enter"], "workers": ["w"], "stacks": ["s"], "help": ["question_mark"]}
SIZES = [(80, 24), (120, 40), (200, 50)]


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


# -- the cluster screen, over a job that never changes ------------------------------------

T1 = 1_000_000.0


def made_up_job() -> JobData:
    """Two hosts of four ranks on four cards; rank 5 (host b, its second) waits on data."""
    data = JobData(T1 - 60, T1, {}, 2.0)
    for h, name in enumerate(("node-a", "node-b")):
        hd = data.hosts[name] = HostData(name, True)
        for c in range(4):
            util = [(T1 - 60 + 2 * k, 35.0 if (h, c) == (1, 1) and k % 3 else 92.0 - c) for k in range(30)]
            hd.cards.append(CardData(name, str(c), model="NVIDIA H100", util=util))
        for r in range(4):
            slow = (h, r) == (1, 1)
            steps = [(T1 - 60 + 2 * k, {"data_wait": 1.2, "forward": 0.8} if slow else
                      {"collective": 0.9, "backward": 1.1}) for k in range(30)]
            hd.ranks.append(RankData(name, str(h * 4 + r), str(r), "run", steps=steps,
                                     strip=[(t, "data_wait" if slow else "backward") for t, _ in steps]))
    return data


class FixedPoller(ClusterPoller):
    """A poller whose one snapshot is the made-up job (no Prometheus)."""

    def __init__(self) -> None:
        super().__init__("http://prometheus.invalid:9090", "made-up", window_s=60.0)
        self._snap = Snapshot(made_up_job(), None, [], None, T1)

    def run(self, cancelled: threading.Event | None = None) -> None:
        if cancelled is not None:
            cancelled.wait()


class FixedClock:
    @staticmethod
    def time() -> float:
        return T1


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_cluster_snapshot(size: tuple[int, int], monkeypatch) -> None:
    monkeypatch.setattr(cluster_screen, "time", FixedClock)
    app = ClusterApp(FixedPoller(), show_clock=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        app.redraw(True)
        await pilot.pause()
        assert_snapshot(f"cluster_{size[0]}x{size[1]}", app.export_screenshot(title=f"sattui {size[0]}x{size[1]}"))
