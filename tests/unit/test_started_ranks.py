"""Ranks a trainer starts itself (sattui/trainer/procs.py): mp.spawn children told from
spawned DataLoader workers by their stack, Lightning-style re-runs by LOCAL_RANK."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sattui.model import Frame
from sattui.trainer.classifier import parse_collapsed_line
from sattui.trainer.procs import ProcessTree, env_rank_of, rank_from_env, spawn_target

STACKS = Path(__file__).resolve().parents[1] / "fixtures" / "stacks"
SP = "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/"


class Clock:
    t = 100.0

    def __call__(self) -> float:
        return self.t


def test_env_rank_prefers_rank_then_local_rank():
    assert env_rank_of({"RANK": "3", "LOCAL_RANK": "1"}) == "3"
    assert env_rank_of({"LOCAL_RANK": "1", "NODE_RANK": "0"}) == "1"  # Lightning's ddp children
    assert env_rank_of({"WORLD_SIZE": "2"}) is None and env_rank_of(None) is None
    assert rank_from_env({"LOCAL_RANK": "1"}) == 1 and rank_from_env({"RANK": "x"}) is None


def test_spawn_target_on_real_and_synthetic_stacks():
    # a real mp.spawn rank (captured with py-spy): _wrap of torch/multiprocessing/spawn.py
    line = (STACKS / "collective_gloo.txt").read_text().splitlines()[0]
    frames = parse_collapsed_line(line)[2]
    assert spawn_target(frames) == "rank"
    worker = (Frame("_worker_loop", SP + "torch/utils/data/_utils/worker.py", 300),
              Frame("BaseProcess.run", "/usr/lib/python3.11/multiprocessing/process.py", 108))
    assert spawn_target(worker) == "worker"
    importing = (Frame("_find_and_load", "<frozen importlib._bootstrap>", 1176),
                 Frame("spawn_main", "/usr/lib/python3.11/multiprocessing/spawn.py", 122))
    assert spawn_target(importing) is None and spawn_target(()) is None
    # a user function called _wrap elsewhere is not mp.spawn's
    assert spawn_target((Frame("_wrap", "/home/u/train.py", 3),)) is None


# A parent that starts two children and waits; the children only sleep. CHILD_ARGV says how
# the children are started: "spawn" (spawn's command-line marker) or "self" (its own
# command line again, with LOCAL_RANK=1, as Lightning's ddp launcher does).
PARENT = textwrap.dedent("""
    import os, subprocess, sys, time
    how = sys.argv[1]
    if os.environ.get("LOCAL_RANK"):
        time.sleep(60)
    kids = []
    for i in range(1 if how == "self" else 2):
        if how == "spawn":
            argv = [sys.executable, "-c", "import time; time.sleep(60)", "--multiprocessing-fork"]
            env = None
        else:
            argv = [sys.executable, "-c", sys.argv[-1], how, sys.argv[-1]]
            env = dict(os.environ, LOCAL_RANK=str(i + 1))
        kids.append(subprocess.Popen(argv, env=env))
        time.sleep(0.05)
    print("ready", flush=True)
    time.sleep(60)
""")


def _start(how: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK")}
    p = subprocess.Popen([sys.executable, "-c", PARENT, how, PARENT], env=env, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def _stop(p: subprocess.Popen) -> None:
    import psutil

    kids = psutil.Process(p.pid).children(recursive=True)
    p.kill()
    p.wait()
    for k in kids:
        k.kill()


def _ticks(tree: ProcessTree, n: int = 3) -> dict[int, tuple[str, int | None, int]]:
    samples: list = []
    for _ in range(n):
        samples, _ev = tree.sample()
        time.sleep(0.05)
    return {s.pid: (s.role, s.rank, s.ppid) for s in samples}


def _kids(roles: dict, parent: int) -> list[int]:
    return sorted(pid for pid, (_r, _k, ppid) in roles.items() if ppid == parent)


@pytest.mark.parametrize("probe_says", ["rank", "none"])
def test_mp_spawn_children_are_ranks_when_their_stack_says_so(probe_says):
    wrap = (Frame("_wrap", SP + "torch/multiprocessing/spawn.py", 87),)
    looked: list[int] = []

    def probe(pid: int):
        looked.append(pid)
        return wrap if probe_says == "rank" else None

    p = _start("spawn")
    try:
        tree = ProcessTree(p.pid, Clock(), stack_probe=probe)
        roles = _ticks(tree)
        kids = _kids(roles, p.pid)
        assert len(kids) == 2, roles
        if probe_says == "rank":
            # numbered by start, as torch.multiprocessing.spawn starts ranks 0..N-1
            assert [roles[k][:2] for k in kids] == [("rank", 0), ("rank", 1)], roles
            assert roles[p.pid][0] == "other"  # it only waits for them
            assert tree.trainer_pids() == kids
            assert tree.rank_pids() == {0: kids[0], 1: kids[1]}
            assert tree.role(p.pid) == "other"
        else:
            # undecided (a spawned worker still importing looks the same): workers, as before
            assert [roles[k][0] for k in kids] == ["worker", "worker"], roles
            assert roles[p.pid][0] == "main" and tree.trainer_pids() == [p.pid]
        assert set(looked) <= set(kids)
    finally:
        _stop(p)


def test_without_a_probe_spawned_children_stay_workers():
    p = _start("spawn")
    try:
        tree = ProcessTree(p.pid, Clock())
        roles = _ticks(tree)
        assert {roles[k][0] for k in _kids(roles, p.pid)} == {"worker"}
        assert tree.trainer_pids() == [p.pid]
    finally:
        _stop(p)


def test_a_rerun_with_local_rank_makes_both_ranks():
    # Lightning's ddp launcher: the trainer re-runs its command line with LOCAL_RANK=1; it
    # is rank 0 itself. Before: the child shared its parent's command line, so "worker".
    p = _start("self")
    try:
        tree = ProcessTree(p.pid, Clock(), stack_probe=lambda pid: None)
        roles = _ticks(tree)
        kids = _kids(roles, p.pid)
        assert len(kids) == 1, roles
        assert roles[kids[0]][:2] == ("rank", 1), roles
        assert roles[p.pid][:2] == ("rank", 0), roles
        assert tree.trainer_pids() == [p.pid, kids[0]]
    finally:
        _stop(p)


def test_a_rank_that_shows_its_wrap_late_is_still_a_rank():
    # Under load one spawned rank can still be importing torch when its sibling already
    # runs _wrap: the parent is then known to only wait (role "other"), and the late one
    # must stay a candidate, not be frozen as "other" (CI: rank 1 lost this way).
    wrap = (Frame("_wrap", SP + "torch/multiprocessing/spawn.py", 87),)
    ticks = {"n": 0}
    first: list[int] = []

    def probe(pid: int):
        if not first:
            first.append(pid)
        return wrap if pid == first[0] or ticks["n"] >= 4 else None

    p = _start("spawn")
    try:
        tree = ProcessTree(p.pid, Clock(), stack_probe=probe)
        samples: list = []
        for n in range(8):
            ticks["n"] = n
            samples, _ev = tree.sample()
            time.sleep(0.05)
        roles = {s.pid: (s.role, s.rank, s.ppid) for s in samples}
        kids = _kids(roles, p.pid)
        assert len(kids) == 2, roles
        assert sorted(roles[k][:2] for k in kids) == [("rank", 0), ("rank", 1)], roles
        assert roles[p.pid][0] == "other"
    finally:
        _stop(p)
