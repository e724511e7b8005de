"""ProcessTree against real process trees: the demo trainer under each start method,
torchrun-shaped launchers, orphans. Each test polls ``sample()`` like the monitor does.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sattui.model import Event, ProcSample
from sattui.trainer.procs import ProcessTree
from tests.e2e.conftest import torchrun_cmd

pytestmark = [pytest.mark.e2e, pytest.mark.beside]

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "procs"
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
SECRET = "sattui-e2e-" + secrets.token_hex(12)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "WANDB_API_KEY": SECRET,
        "HF_TOKEN": SECRET,
        "NCCL_IB_AUTH_TOKEN": SECRET,
        "SATTUI_FAKE_SECRET": SECRET,
        "NCCL_SOCKET_IFNAME": "lo",
        "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
    })
    return env


def _start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _trainer(*extra: str, seconds: float = 8) -> subprocess.Popen:
    return _start(["-m", "sattui.demo.trainer", "--scenario", "input_bound",
                   "--seconds", str(seconds), *extra])


class Watch:
    """A ProcessTree plus everything it said, sampled every ``dt`` seconds."""

    def __init__(self, pid: int, dt: float = 0.5) -> None:
        self.t0 = time.monotonic()
        self.tree = ProcessTree(pid, lambda: time.monotonic() - self.t0)
        self.dt = dt
        self.ticks: list[list[ProcSample]] = []
        self.events: list[Event] = []

    def tick(self) -> list[ProcSample]:
        samples, events = self.tree.sample()
        self.ticks.append(samples)
        self.events.extend(events)
        return samples

    def until(self, cond: Callable[[list[ProcSample]], bool], timeout: float = 20.0) -> list[ProcSample]:
        end = time.monotonic() + timeout
        while True:
            samples = self.tick()
            if cond(samples):
                return samples
            if time.monotonic() > end:
                roles = [(s.pid, s.role, s.name, s.cpu) for s in samples]
                raise AssertionError(f"condition not met in {timeout} s; last tick: {roles}")
            time.sleep(self.dt)

    def kill_all(self, p: subprocess.Popen) -> None:
        """Kill the trainer and everything of its tree still alive.

        SIGKILLing a forkserver trainer leaves its forkserver and workers running; the
        tree still knows them (former members stay while alive), so ask it.
        """
        p.kill()
        p.wait()
        try:
            left = self.tree.sample()[0]
        except Exception:  # cleanup must not mask the test's own failure
            left = []
        for s in left:
            if s.role != "pin":
                try:
                    os.kill(s.pid, 9)
                except ProcessLookupError:
                    pass

    def no_secret(self) -> None:
        blob = repr(self.tree.info()) + repr(self.ticks) + repr(self.events)
        blob += repr([s.to_record() for tick in self.ticks for s in tick])
        assert SECRET not in blob


def _role(samples: list[ProcSample], role: str) -> list[ProcSample]:
    return [s for s in samples if s.role == role]


def _busy_workers(n: int) -> Callable[[list[ProcSample]], bool]:
    def cond(samples: list[ProcSample]) -> bool:
        w = [s for s in _role(samples, "worker") if s.name == "pt_data_worker"]
        return len(w) >= n and all(s.cpu is not None and s.cpu > 0.05 for s in w) and \
            len(_role(samples, "pin")) == 1
    return cond


def _finish(p: subprocess.Popen, w: Watch, timeout: float = 25.0) -> None:
    """Sample through the trainer's exit (as zombie, then reaped): no exception."""
    end = time.monotonic() + timeout
    while p.poll() is None and time.monotonic() < end:
        w.tick()
        time.sleep(w.dt)
    assert p.poll() == 0
    w.tick()
    assert not w.tree.main_alive()
    assert any(e.type == "trainer_exited" for e in w.events)
    assert sum(e.type == "trainer_exited" for e in w.events) == 1


@needs_torch
@pytest.mark.long
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_and_pin_under(method: str) -> None:
    p = _trainer("--workers", "2", "--pin-memory", "--start-method", method, seconds=9)
    w = Watch(p.pid)
    try:
        samples = w.until(_busy_workers(2))
        main = _role(samples, "main")
        assert [s.pid for s in main] == [p.pid]
        workers = [s for s in _role(samples, "worker") if s.name == "pt_data_worker"]
        assert len(workers) == 2
        for s in workers:
            assert s.ppid == p.pid
            assert 0.05 < s.cpu < 1.5  # cores, not percent: input_bound workers busy-loop
            assert s.rss and s.rss > 10_000_000 and s.threads and s.state
        pin = _role(samples, "pin")[0]
        assert pin.ppid == p.pid and pin.name == "pt_data_pin" and pin.rss is None
        # nothing else is called a worker: the resource tracker is "other"
        assert len(_role(samples, "worker")) == 2
        info = w.tree.info()
        assert info["python"] and info["launcher"] is None and info["cmdline"][1:3] == ["-m", "sattui.demo.trainer"]
        assert info["env"].get("NCCL_SOCKET_IFNAME") == "lo"
        _finish(p, w)
        assert w.tick() == [] or all(s.pid != p.pid for s in w.ticks[-1])
        w.no_secret()
    finally:
        w.kill_all(p)


@needs_torch
def test_workers_respawn_every_epoch() -> None:
    p = _trainer("--workers", "2", "--epoch-items", "256", "--start-method", "fork", seconds=10)
    w = Watch(p.pid, dt=0.3)
    try:
        w.until(lambda s: len(_role(s, "worker")) >= 2)
        sets: list[frozenset[int]] = []
        end = time.monotonic() + 8
        while time.monotonic() < end and len(set(sets)) < 3:
            ws = frozenset(s.pid for s in _role(w.tick(), "worker"))
            if ws:
                sets.append(ws)
            time.sleep(w.dt)
        assert len(set(sets)) >= 2, sets
        started = [e for e in w.events if e.type == "proc_started" and e.data["role"] == "worker"]
        exited = [e for e in w.events if e.type == "proc_exited" and e.data["role"] == "worker"]
        assert started and exited
        assert all(isinstance(e.data["pid"], int) for e in started + exited)
    finally:
        w.kill_all(p)


@needs_torch
def test_forkserver_workers_are_grandchildren() -> None:
    p = _trainer("--workers", "2", "--pin-memory", "--start-method", "forkserver", seconds=9)
    w = Watch(p.pid)
    try:
        samples = w.until(_busy_workers(2))
        by_pid = {s.pid: s for s in samples}
        workers = [s for s in _role(samples, "worker") if s.name == "pt_data_worker"]
        servers = {s.ppid for s in workers}
        assert len(servers) == 1 and p.pid not in servers
        server = by_pid[servers.pop()]
        assert server.role == "other" and server.ppid == p.pid
        assert all(s.cpu and s.cpu > 0.05 for s in workers)
    finally:
        w.kill_all(p)


def test_fake_torchrun_ranks_and_their_workers() -> None:
    p = _start([str(FIXTURES / "fake_torchrun.py"), "--nproc", "2", "--seconds", "6"])
    time.sleep(0.2)  # let it rename itself to pt_elastic
    w = Watch(p.pid)
    try:
        samples = w.until(lambda s: len(_role(s, "rank")) == 2 and len(_role(s, "worker")) == 2, timeout=10)
        launcher = [s for s in samples if s.pid == p.pid][0]
        assert launcher.role == "other" and launcher.name == "pt_elastic"
        ranks = {s.rank: s for s in _role(samples, "rank")}
        assert set(ranks) == {0, 1} and all(s.ppid == p.pid for s in ranks.values())
        assert w.tree.rank_pids() == {0: ranks[0].pid, 1: ranks[1].pid}
        for s in _role(samples, "worker"):
            assert s.ppid in (ranks[0].pid, ranks[1].pid)
            assert s.rank == (0 if s.ppid == ranks[0].pid else 1)
        assert w.tree.info()["launcher"] == "torchrun"
        _finish(p, w, timeout=15)
        assert w.tree.rank_pids() == {}
        w.no_secret()
    finally:
        w.kill_all(p)


@needs_torch
def test_real_torchrun_ranks() -> None:
    p = subprocess.Popen([*torchrun_cmd(), "--standalone", "--nproc-per-node", "2",
                          str(FIXTURES / "sleep_rank.py"), "6"], cwd=ROOT, env=_env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    w = Watch(p.pid)
    try:
        samples = w.until(lambda s: len(_role(s, "rank")) == 2, timeout=25)
        ranks = w.tree.rank_pids()
        assert sorted(ranks) == [0, 1]
        # the launcher is the `torchrun` script's python (or a pyenv shim's child)
        launcher = [s for s in samples if s.name == "pt_elastic"]
        assert len(launcher) == 1 and launcher[0].role in ("main", "other")
        assert all(s.ppid == launcher[0].pid for s in _role(samples, "rank"))
        w.no_secret()
    finally:
        p.terminate()  # torchrun tears its ranks down on SIGTERM
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        w.kill_all(p)


def test_orphans_compile_and_mp_spawn_ranks() -> None:
    p = _start([str(FIXTURES / "tree.py"), "--seconds", "4", "--orphan", "3", "--compile", "--mp-spawn", "1"])
    w = Watch(p.pid)
    try:
        samples = w.until(lambda s: len(_role(s, "rank")) == 1 and len(_role(s, "compile")) == 1, timeout=15)
        rank = _role(samples, "rank")[0]
        # mp.spawn: no RANK in its environ; numbered by its place among its parent's spawn ranks
        assert rank.rank == 0
        assert any(s.ppid == rank.pid and s.role == "worker" for s in samples)
        orphan = [s.pid for s in _role(samples, "worker") if s.ppid == p.pid][0]
        _finish(p, w, timeout=10)
        left = {s.pid: s for s in w.tick()}
        assert orphan in left and left[orphan].role == "worker" and left[orphan].ppid != p.pid
        w.no_secret()
    finally:
        w.kill_all(p)
