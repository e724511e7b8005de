"""The worker-state classifier against real ``py-spy dump --json`` output of real
DataLoader workers (tests/fixtures/worker_stacks/, README there), and its rules on
hand-made stacks where no capture can pin one case down."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from sattui.model import Frame
from sattui.trainer.worker_stacks import parse_dump
from sattui.trainer.worker_states import MAX_FRAMES, WorkerState, classify_worker, kept_frames

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "worker_stacks"
META = json.loads((FIX / "meta.json").read_text())


def _dumps(name: str) -> list[tuple[tuple[Frame, ...], bool | None]]:
    pid = META[name]["worker_pid"]
    out = []
    for d in json.loads((FIX / f"{name}.json").read_text()):
        got = parse_dump(json.dumps(d), pid)
        assert got is not None
        out.append(got)
    return out


@pytest.mark.parametrize("name", sorted(META))
def test_each_capture_is_mostly_its_own_state(name):
    states = Counter(classify_worker(f, a) for f, a in _dumps(name))
    want = WorkerState(META[name]["state"])
    # one look is one instant: a computing worker is caught between two items now and then
    assert states[want] >= len(_dumps(name)) - 1, states
    assert sum(states.values()) >= 4


def test_the_cpu_flag_decides_between_waiting_and_computing_inside_a_fetch():
    for name in ("sleep", "urlopen", "compute", "iterable", "collate"):
        for frames, active in _dumps(name):
            state = classify_worker(frames, active)
            if state in (WorkerState.FETCH_WAIT, WorkerState.FETCH_COMPUTE):
                assert state == (WorkerState.FETCH_COMPUTE if active else WorkerState.FETCH_WAIT)


def test_without_the_flag_waiting_libraries_and_lines_decide():
    (frames, _), *_ = _dumps("urlopen")
    assert classify_worker(frames, None) == WorkerState.FETCH_WAIT  # socket.py innermost
    (frames, _), *_ = _dumps("sleep")
    assert classify_worker(frames, None) == WorkerState.FETCH_COMPUTE  # a user line, no source
    lines = {frames[0].line: "time.sleep(0.2)"}
    assert classify_worker(frames, None, lambda f, n: lines.get(n)) == WorkerState.FETCH_WAIT
    (frames, _), *_ = _dumps("compute")
    assert classify_worker(frames, None, lambda f, n: "x += 1") == WorkerState.FETCH_COMPUTE
    (frames, _), *_ = _dumps("idle")
    assert classify_worker(frames, None) == WorkerState.IDLE


def test_kept_frames_are_the_innermost_below_the_loop():
    (frames, _), *_ = _dumps("sleep")
    kept = kept_frames(frames)
    assert kept[0].name == "Items.__getitem__" and len(kept) <= MAX_FRAMES
    assert all(f.name != "_worker_loop" for f in kept)
    (frames, _), *_ = _dumps("spawn_starting")  # importing, outside the loop: the innermost frames
    assert kept_frames(frames) == frames[:MAX_FRAMES]


def test_rules_on_hand_made_stacks():
    loop = Frame("_worker_loop", "/x/site-packages/torch/utils/data/_utils/worker.py", 374)
    get = Frame("Queue.get", "/usr/lib/python3.11/multiprocessing/queues.py", 113)
    put = Frame("Queue.put", "/usr/lib/python3.11/multiprocessing/queues.py", 96)
    item = Frame("Images.__getitem__", "/u/data.py", 20)
    init = Frame("seed_worker", "/u/train.py", 9)
    assert classify_worker((get, loop), True) == WorkerState.IDLE
    assert classify_worker((item, loop), False) == WorkerState.FETCH_WAIT
    assert classify_worker((item, loop), True) == WorkerState.FETCH_COMPUTE
    assert classify_worker((put, loop), True) == WorkerState.OTHER  # handing a batch over
    assert classify_worker((init, loop), True) == WorkerState.OTHER  # worker_init_fn
    assert classify_worker((loop,), True) == WorkerState.OTHER
    assert classify_worker((item,), True) == WorkerState.OTHER  # no worker loop: not a worker's fetch
    assert classify_worker((), None) == WorkerState.OTHER


def test_parse_dump_picks_the_main_thread_and_refuses_garbage():
    pid = META["idle"]["worker_pid"]
    text = json.dumps(json.loads((FIX / "idle.json").read_text())[0])
    frames, active = parse_dump(text, pid)
    assert frames[0].name == "_PollLikeSelector.select" and active is False
    # py-spy could not map the OS thread id: the thread name still says which is main
    threads = json.loads(text)
    for th in threads:
        th["os_thread_id"] = None
    assert parse_dump(json.dumps(threads), pid)[0] == frames
    assert parse_dump("not json", pid) is None
    assert parse_dump("{}", pid) is None
    assert parse_dump("[]", pid) is None
    assert parse_dump('[{"thread_name": "x", "os_thread_id": 5, "frames": []}]', pid) is None
    weird = [{"os_thread_id": pid, "frames": [{"name": 3}, {"name": "f", "filename": None, "line": True}],
              "active": "yes"}]
    assert parse_dump(json.dumps(weird), pid) == ((Frame("f", "", None),), None)
