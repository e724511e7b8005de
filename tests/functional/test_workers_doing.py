"""The workers screen says what each DataLoader worker's own stacks show it doing
(issue 10: where /proc cannot tell a sleeping worker's reason), from real captured
``py-spy dump``s of a worker asleep inside its ``__getitem__``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from sattui.app import SattuiApp
from sattui.model import WorkerStack
from sattui.screens.workers import WorkersScreen
from sattui.session import ReplaySession
from sattui.trainer.worker_stacks import parse_dump
from sattui.trainer.worker_states import classify_worker, kept_frames
from sattui.view.lines import worker_doing
from sattui.widgets.timechart import TimeChart
from tests.functional.conftest import CURSOR, FIXTURE

STACKS = Path(__file__).resolve().parents[1] / "fixtures" / "worker_stacks"
WORKER = 4301  # a DataLoader worker of the UI fixture recording


def _looks(name: str, t0: float) -> list[WorkerStack]:
    meta = json.loads((STACKS / "meta.json").read_text())[name]
    out = []
    for i, d in enumerate(json.loads((STACKS / f"{name}.json").read_text())):
        got = parse_dump(json.dumps(d), meta["worker_pid"])
        assert got is not None
        frames, active = got
        out.append(WorkerStack(t0 + 5.0 * i, WORKER, str(classify_worker(frames, active)), kept_frames(frames),
                               active))
    return out


async def test_the_workers_screen_counts_the_looks_and_names_the_last_frame(tmp_path):
    rec = tmp_path / "with_worker_stacks.jsonl"
    shutil.copy(FIXTURE, rec)
    looks = _looks("sleep", CURSOR - 40.0)
    assert all(ws.t <= CURSOR for ws in looks)
    with rec.open("a") as f:
        for ws in looks:
            f.write(json.dumps(ws.to_record()) + "\n")
    waits = sum(ws.state == "fetch_wait" for ws in looks)
    assert waits >= len(looks) - 1  # the capture is of a worker asleep in its data source

    session = ReplaySession(str(rec))
    session.seek(CURSOR)
    app = SattuiApp(session, show_clock=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("w")
        await pilot.pause()
        app.redraw(True)
        await pilot.pause()
        assert isinstance(app.screen, WorkersScreen)
        lines = [s.text for s in app.screen.query_one(TimeChart)._strips]
        doing = [ln for ln in lines if ln.startswith("  doing")]
        assert len(doing) == 1, lines  # the fixture's other worker has no looks: no line
        assert f"waits on its data {waits}" in doing[0] and f"of {len(looks)} looks" in doing[0], doing
        assert doing[0].rstrip().endswith("waits on its data"), doing  # the last look, in the value column


def test_the_doing_line_names_where_the_last_look_was():
    looks = _looks("sleep", 0.0)
    body, value = worker_doing(looks, 200)
    last = looks[-1].frames[0]
    assert f"last in {last.name} ({last.filename.rsplit('/', 1)[-1]}:{last.line})" in body[0][0], body
    assert worker_doing([], 200) is None
