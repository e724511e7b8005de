"""The stack sampler against real processes and real py-spy (needs ptrace: root or same user)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from sattui.model import Event, StackChunk
from sattui.trainer.stacks import StackSampler, find_py_spy

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.beside,  # make test runs it beside others: chunks' shape, not shares
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
    pytest.mark.skipif(find_py_spy() is None, reason="py-spy not installed"),
]

REPO = Path(__file__).resolve().parents[2]
T0 = time.monotonic()


def clock() -> float:
    return time.monotonic() - T0


class Sink:
    def __init__(self) -> None:
        self.chunks: list[StackChunk] = []
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def chunk(self, c: StackChunk) -> None:
        with self._lock:
            self.chunks.append(c)

    def event(self, e: Event) -> None:
        with self._lock:
            self.events.append(e)


def py_spy_children() -> list[psutil.Process]:
    """py-spy processes this test process started and that still exist (zombies included)."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.name() == "py-spy":
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def wait_for(cond, timeout: float, step: float = 0.1) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return cond()


@pytest.fixture
def trainer():
    procs: list[subprocess.Popen] = []

    def start(*args: str) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-m", "sattui.demo.trainer", *args], cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(p)
        assert p.stdout is not None
        line = p.stdout.readline()  # printed once the model and loader exist
        assert line.startswith("trainer pid"), line
        return p

    yield start
    for p in procs:
        p.kill()
        p.wait()


def test_live_trainer_gives_chunks_of_main_thread_stacks(trainer) -> None:
    tr = trainer("--scenario", "input_bound", "--seconds", "30")
    sink = Sink()
    t_start = clock()
    # The steady chunks' switch too, brought forward (45 s → 3 s) and scaled down (2 → 1 s,
    # 5 → 3 s): the longer runs still follow each other without a gap (below).
    sampler = StackSampler(tr.pid, clock, sink.chunk, sink.event, chunk_s=1.0, steady_chunk_s=3.0,
                           steady_after_s=3.0)
    sampler.start()
    try:
        assert wait_for(lambda: sum(1 for c in sink.chunks if any(s.is_main for s in c.samples)) >= 6, 30)
        assert sampler.status == "sampling"
    finally:
        sampler.stop()
    t_stop = clock()
    assert sampler.status == "stopped"
    assert py_spy_children() == []
    assert [e.type for e in sink.events if e.type != "sampler_rate"] == []

    chunks = sink.chunks
    assert len(chunks) >= 3
    prev_end = t_start
    for c in chunks:
        assert c.pid == tr.pid and c.rate_hz >= 1
        assert prev_end <= c.t <= c.t_end <= t_stop
        for s in c.samples:
            assert c.t <= s.t and s.t + s.dur <= c.t_end + 1e-9 and s.dur > 0
            # A thread that is starting or ending holds no Python frame yet (py-spy reads it
            # with an empty stack: a CI run saw one among the loader's threads); the main
            # thread always has one while the trainer runs.
            assert s.frames or not s.is_main, s
            assert all(f.filename for f in s.frames)
        prev_end = c.t_end
    main = [s for c in chunks for s in c.samples if s.is_main]
    assert all(s.tid == tr.pid and s.thread_name == "MainThread" for s in main)
    # Main-thread spans of a chunk follow each other without overlapping.
    for c in chunks:
        spans = sorted((s.t, s.t + s.dur) for s in c.samples if s.is_main)
        assert all(a_end <= b_start + 1e-9 for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    lengths = [c.t_end - c.t for c in chunks]
    assert lengths[0] < 2.0 and max(lengths[-3:-1]) > 2.5, lengths  # (the last one cut by stop())
    spans = sorted((s.t, s.t + s.dur) for s in main)
    covered = sum(z - a for a, z in spans)
    assert covered >= 0.97 * (spans[-1][1] - spans[0][0]), (covered, spans[0], spans[-1])
    # The input-bound trainer spends most of its time waiting in the DataLoader.
    waits = [s for s in main if any(f.filename.endswith("torch/utils/data/dataloader.py") for f in s.frames)]
    assert waits
    assert main[0].frames[-1].name == "_run_module_as_main"  # outermost last


def test_stop_right_after_start_leaves_no_py_spy(trainer) -> None:
    tr = trainer("--scenario", "input_bound", "--seconds", "20")
    sink = Sink()
    sampler = StackSampler(tr.pid, clock, sink.chunk, sink.event, chunk_s=2.0)
    sampler.start()
    assert wait_for(lambda: py_spy_children() != [], 5, 0.01)
    t = time.monotonic()
    sampler.stop()
    assert time.monotonic() - t < 5.0
    assert py_spy_children() == []
    assert sampler.status == "stopped"
    assert not sampler._thread.is_alive()


def test_not_a_python_process() -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    sink = Sink()
    try:
        sampler = StackSampler(sleeper.pid, clock, sink.chunk, sink.event, chunk_s=1.0)
        sampler.start()
        # A just-started process gets a few seconds to initialise its interpreter first.
        assert wait_for(lambda: sampler.status == "not_python", 40)  # py-spy's tries run slow on a loaded box
        sampler.stop()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert [e.type for e in sink.events] == ["not_python"]
    assert sink.events[0].message == "not a Python process"
    assert "not a Python process" in (sampler.status_message or "")
    assert sink.chunks == []
    assert py_spy_children() == []


def test_target_exiting_mid_sampling_stops_quietly() -> None:
    short = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3.5)"])
    sink = Sink()
    try:
        sampler = StackSampler(short.pid, clock, sink.chunk, sink.event, chunk_s=1.0)
        sampler.start()
        # The target is our child: after it exits it stays a zombie until waited for.
        assert wait_for(lambda: sampler.status == "target_gone", 15)
        assert wait_for(lambda: not sampler._thread.is_alive(), 5)
        sampler.stop()
    finally:
        short.kill()
        short.wait()
    assert sampler.status == "target_gone"
    assert [e.type for e in sink.events] == ["sampler_stopped"]
    assert sink.events[0].data["reason"] == "target_gone"
    assert sink.chunks, "the chunks before the exit are delivered"
    assert any(any(f.name == "<module>" for f in s.frames) for c in sink.chunks for s in c.samples)
    assert py_spy_children() == []


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to run py-spy as another user")
def test_permission_denied_names_the_fix(tmp_path: Path) -> None:
    # py-spy run as `nobody` may not read a root-owned process: the real denial path.
    wrapper = tmp_path / "py-spy"
    wrapper.write_text(f"#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups "
                       f"{find_py_spy()} \"$@\"\n")
    wrapper.chmod(0o755)
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    sink = Sink()
    try:
        time.sleep(0.5)
        sampler = StackSampler(target.pid, clock, sink.chunk, sink.event, chunk_s=1.0, py_spy=str(wrapper))
        sampler.start()
        assert wait_for(lambda: sampler.status == "denied", 10)
        sampler.stop()
    finally:
        target.kill()
        target.wait()
    assert [e.type for e in sink.events] == ["permission_denied"]
    msg = sink.events[0].message
    assert "\n" not in msg
    assert "ptrace_scope=0" in msg and "SYS_PTRACE" in msg and "root" in msg
    assert sampler.status_message == msg
    assert py_spy_children() == []
