"""Process-tree helpers without torch: pid checks, NSpid, roles, one tree over time."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sattui.errors import TargetError
from sattui.trainer import procs
from sattui.trainer.procs import ProcessTree, is_launcher, nspid_of, resolve_pid, role_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "procs"
sys.path.insert(0, str(FIXTURES))
from _names import set_comm  # noqa: E402


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# ------------------------------------------------------------------ pids


def test_nspid_of_own_process() -> None:
    ns = nspid_of(os.getpid())
    assert ns is not None and len(ns) >= 1
    assert ns[0] == os.getpid()  # our namespace's number first, innermost last


def test_nspid_of_dead_process_is_none() -> None:
    assert nspid_of(_dead_pid()) is None


@pytest.mark.parametrize("bad", ["dead", 0, -5, 2**22 + 12345, "abc"])
def test_resolve_pid_rejects_with_one_line(bad) -> None:
    pid = _dead_pid() if bad == "dead" else bad
    with pytest.raises(TargetError) as ei:
        resolve_pid(pid)  # type: ignore[arg-type]
    msg = str(ei.value)
    assert msg == f"no such process: {pid}"
    assert "\n" not in msg


def test_resolve_pid_of_live_process_and_thread() -> None:
    assert resolve_pid(os.getpid()) == os.getpid()
    tid: list[int] = []
    stop = threading.Event()

    def run() -> None:
        tid.append(threading.get_native_id())
        stop.wait()

    th = threading.Thread(target=run)
    th.start()
    try:
        while not tid:
            time.sleep(0.01)
        assert tid[0] != os.getpid()
        assert resolve_pid(tid[0]) == os.getpid()  # a thread id names its process
    finally:
        stop.set()
        th.join()


def test_resolve_pid_of_zombie_is_no_such_process() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        for _ in range(200):  # wait until it is a zombie
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            time.sleep(0.01)
        with pytest.raises(TargetError, match=f"^no such process: {pid}$"):
            resolve_pid(pid)
    finally:
        os.waitpid(pid, 0)


def test_process_tree_of_dead_pid() -> None:
    pid = _dead_pid()
    with pytest.raises(TargetError, match=f"^no such process: {pid}$"):
        ProcessTree(pid, time.monotonic)


def test_process_tree_permission_denied_is_one_line(monkeypatch) -> None:
    def denied(path: str):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(procs, "_read_stat", denied)
    with pytest.raises(TargetError) as ei:
        ProcessTree(os.getpid(), time.monotonic)
    assert str(ei.value) == f"cannot read process {os.getpid()}: permission denied"


def test_parse_stat_with_hostile_comm() -> None:
    fields = ["S", "1", "1", "1", "0", "-1", "0", "0", "0", "0", "0", "7", "5", "0", "0", "20",
              "0", "3", "0", "4242", "100", "10"]
    st = procs._parse_stat("123 (a) b (c)) " + " ".join(fields) + " 0 0\n")
    assert st.comm == "a) b (c)"
    assert (st.state, st.ppid, st.ticks, st.threads, st.start) == ("S", 1, 12, 3, 4242)
    assert st.rss == 10 * os.sysconf("SC_PAGE_SIZE")


# ------------------------------------------------------------------ roles

PY = "/usr/bin/python3"
TRAIN = [PY, "train.py", "--lr", "1"]
SPAWN = [PY, "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7)",
         "--multiprocessing-fork"]
FORKSERVER = [PY, "-B", "-c", "from multiprocessing.forkserver import main; main(11, 12, ['__main__'])"]
TRACKER = [PY, "-B", "-c", "from multiprocessing.resource_tracker import main;main(5)"]
COMPILE = [PY, "/site-packages/torch/_inductor/compile_worker/__main__.py", "--workers=4"]


@pytest.mark.parametrize(
    ("comm", "cmdline", "kw", "expected"),
    [
        ("python", TRAIN, dict(is_main=True), ("main", False)),
        ("pt_elastic", [PY, "/usr/bin/torchrun", "train.py"], dict(is_main=True), ("other", False)),
        ("python3", [PY, "-m", "torch.distributed.run", "train.py"], dict(is_main=True), ("other", False)),
        ("pt_data_worker", TRAIN, dict(parent_role="main"), ("worker", False)),
        ("pt_data_worker", FORKSERVER, dict(parent_role="other", parent_cmdline=FORKSERVER), ("worker", False)),
        # fork before the rename, and forkserver children (forks of the server)
        ("python", TRAIN, dict(parent_role="main", parent_cmdline=TRAIN), ("worker", True)),
        ("python", FORKSERVER, dict(parent_role="other", parent_cmdline=FORKSERVER), ("worker", True)),
        # a shell forking subshells is not a DataLoader
        ("bash", ["bash", "x.sh"], dict(parent_role="other", parent_cmdline=["bash", "x.sh"]), ("other", False)),
        ("python", SPAWN, dict(parent_role="main", parent_cmdline=TRAIN), ("worker", True)),
        ("python", SPAWN, dict(parent_role="rank", parent_cmdline=TRAIN), ("worker", True)),
        ("python", SPAWN, dict(parent_role="other", parent_cmdline=["bash"]), ("other", False)),
        ("python", FORKSERVER, dict(parent_role="main", parent_cmdline=TRAIN), ("other", False)),
        ("python", TRACKER, dict(parent_role="main", parent_cmdline=TRAIN), ("other", False)),
        ("python", COMPILE, dict(parent_role="main", parent_cmdline=TRAIN), ("compile", False)),
        ("python", COMPILE, dict(parent_role="compile", parent_cmdline=COMPILE), ("compile", False)),
        ("python3", [PY, "-u", "train.py"],
         dict(parent_role="other", parent_cmdline=[PY, "/usr/bin/torchrun"], env_rank="1"), ("rank", False)),
        # inherited RANK (a rank's own child) is not a new rank
        ("python3", [PY, "-u", "train.py"],
         dict(parent_role="rank", parent_cmdline=[PY, "-u", "train.py"], env_rank="1", parent_env_rank="1"),
         ("worker", True)),
        ("sleep", ["sleep", "10"], dict(parent_role="main", parent_cmdline=TRAIN), ("other", False)),
        ("python", TRAIN, dict(), ("other", False)),  # parent unknown: no fallback guess
    ],
)
def test_role_of(comm, cmdline, kw, expected) -> None:
    args = dict(is_main=False, parent_role=None, parent_cmdline=None)
    args.update(kw)
    assert role_of(comm, cmdline, **args) == expected


def test_is_launcher() -> None:
    assert is_launcher("pt_elastic", [])
    assert is_launcher("python3.11", [PY, "/root/.pyenv/versions/3.11.7/bin/torchrun", "--standalone"])
    assert is_launcher("torchrun", ["torchrun", "--nproc-per-node", "2", "t.py"])
    assert is_launcher("python", [PY, "-m", "torch.distributed.launch", "t.py"])
    assert not is_launcher("python", TRAIN)
    assert not is_launcher("python", [PY, "train.py", "--note", "torchrun"])


# ------------------------------------------------------------------ one tree over time


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _by_pid(samples):
    return {s.pid: s for s in samples}


def test_tree_of_own_process_children_pin_and_events() -> None:
    clock = FakeClock()
    tree = ProcessTree(os.getpid(), clock)
    info = tree.info()
    assert info["pid"] == os.getpid() and info["python"] is True and info["launcher"] is None
    assert isinstance(info["cmdline"], list) and isinstance(info["env"], dict)

    s0, e0 = tree.sample()
    me = _by_pid(s0)[os.getpid()]
    assert me.role == "main" and me.cpu is None and me.read_Bps is None and me.t == 100.0
    assert me.state in ("R", "S") and me.rss and me.rss > 0 and me.threads and me.threads >= 1
    assert e0 == []

    # a busy child, a renamed pin-memory thread of our own
    child = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: pass"])
    stop = threading.Event()
    started = threading.Event()
    pin_tid: list[int] = []

    def pin() -> None:
        set_comm("pt_data_pin")
        pin_tid.append(threading.get_native_id())
        started.set()
        stop.wait()

    th = threading.Thread(target=pin, daemon=True)
    th.start()
    started.wait(5)
    try:
        time.sleep(0.3)
        clock.t = 101.0
        s1, e1 = tree.sample()
        by = _by_pid(s1)
        assert by[child.pid].role == "other" and by[child.pid].ppid == os.getpid()
        # born since the previous tick: its counters started at 0, so its first sample has
        # figures (a busy loop: about a core over the part of the interval it lived; on a
        # loaded box, part of it waited for a core in the run queue)
        first = by[child.pid]
        assert first.cpu is not None and first.run_delay is not None, first
        assert 0.05 < first.cpu < 1.3 and first.cpu + first.run_delay > 0.2, first
        assert first.read_Bps is not None
        assert by[pin_tid[0]].role == "pin" and by[pin_tid[0]].ppid == os.getpid()
        assert by[pin_tid[0]].name == "pt_data_pin" and by[pin_tid[0]].rss is None
        assert isinstance(by[os.getpid()].cpu, float)
        started_pids = {e.data["pid"] for e in e1 if e.type == "proc_started"}
        assert {child.pid, pin_tid[0]} <= started_pids
        assert all(e.t == 101.0 for e in e1)

        time.sleep(0.5)
        s2, _ = tree.sample()
        c = _by_pid(s2)[child.pid]
        # a busy loop is about one core: on it, or (a loaded box) waiting for it
        assert c.cpu is not None and c.run_delay is not None, c
        assert 0.1 < c.cpu < 1.3 and c.cpu + c.run_delay > 0.8, c
        assert c.read_Bps is not None and c.read_Bps >= 0
    finally:
        child.kill()
        child.wait()
        stop.set()
        th.join()
    # a joined Python thread can linger a moment as an OS task: poll, as the monitor would
    e3: list = []
    for _ in range(100):
        s3, ev = tree.sample()
        e3 += ev
        if child.pid not in _by_pid(s3) and pin_tid[0] not in _by_pid(s3):
            break
        time.sleep(0.02)
    assert child.pid not in _by_pid(s3) and pin_tid[0] not in _by_pid(s3)
    exited = {(e.data["pid"], e.data["role"]) for e in e3 if e.type == "proc_exited"}
    assert {(child.pid, "other"), (pin_tid[0], "pin")} <= exited
    assert tree.main_alive()


def test_threads_not_pin_are_looked_at_again_only_now_and_then(monkeypatch) -> None:
    # A trainer of 112 threads read 111 comm files a tick for its pin thread. A thread seen
    # twice under another name is looked at again every PIN_RECHECK_S; a new one on the next
    # tick too (a pin thread names itself as it starts).
    reads: list[str] = []
    real = procs._read_text

    def counting(path: str):
        if path.endswith("/comm"):
            reads.append(path)
        return real(path)

    monkeypatch.setattr(procs, "_read_text", counting)
    stop, named = threading.Event(), threading.Event()
    tids: list[int] = []
    rename = threading.Event()

    def idle() -> None:
        tids.append(threading.get_native_id())
        named.set()
        rename.wait()
        set_comm("pt_data_pin")
        stop.wait()

    th = threading.Thread(target=idle, daemon=True)
    th.start()
    named.wait(5)
    tid = tids[0]
    mine = f"/task/{tid}/comm"
    tree = ProcessTree(os.getpid(), FakeClock())
    try:
        tree.sample()
        tree.sample()  # first seen, then the next tick: looked at both times
        assert sum(r.endswith(mine) for r in reads) == 2, reads
        reads.clear()
        tree.sample()
        assert not [r for r in reads if r.endswith(mine)]  # not again before PIN_RECHECK_S
        # it names itself a pin thread later: found at the next look
        rename.set()
        time.sleep(0.1)
        tree._not_pin = {k: 0.0 for k in tree._not_pin}  # the recheck is due
        samples, _ = tree.sample()
        assert _by_pid(samples)[tid].role == "pin"
    finally:
        rename.set()
        stop.set()
        th.join()


def test_a_child_born_between_ticks_has_its_first_seconds_measured() -> None:
    # A DataLoader worker forked between two ticks: asleep from its start (waiting on its
    # data) it shows ~0 CPU at once, busy (spawn's imports) it shows ~a core. A process
    # that was there before the first tick has no figure in its first sample.
    clock = FakeClock()
    tree = ProcessTree(os.getpid(), clock)
    s0, _ = tree.sample()
    assert _by_pid(s0)[os.getpid()].cpu is None
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1.0)
        clock.t = 101.0
        by = _by_pid(tree.sample()[0])
        # the sleeper's interpreter start-up is its only CPU
        assert by[sleeper.pid].cpu is not None and by[sleeper.pid].cpu < 0.3, by[sleeper.pid]
        # ~a core when it had one; on a loaded box it waited for the rest in the run queue
        b = by[busy.pid]
        assert b.cpu is not None and b.run_delay is not None, b
        assert b.cpu > 0.2 and b.cpu + b.run_delay > 0.8, b
        # when each started, on the tree's clock: between the two ticks (the fake clock is
        # a step of 1 s, the real one a little more); said once
        for p in (sleeper, busy):
            assert by[p.pid].started_t is not None and 99.9 <= by[p.pid].started_t <= 101.0, by[p.pid]
        time.sleep(0.5)
        clock.t = 102.0
        again = _by_pid(tree.sample()[0])
        b2 = again[busy.pid]
        assert b2.started_t is None and b2.cpu is not None and b2.run_delay is not None, b2
        assert b2.cpu > 0.1 and b2.cpu + b2.run_delay > 0.8, b2
    finally:
        for p in (sleeper, busy):
            p.kill()
            p.wait()


def test_info_right_after_popen_has_cmdline_and_env() -> None:
    """`sattui -- CMD` builds the tree while the child is still inside exec."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                         env={"RANK": "2", "WANDB_API_KEY": "not-for-us"})
    try:
        info = ProcessTree(p.pid, time.monotonic).info()
        assert info["cmdline"][1:] == ["-c", "import time; time.sleep(30)"]
        assert info["env"] == {"RANK": "2"} and info["env_readable"] is True
        assert info["nspid"] and info["nspid"][0] == p.pid
    finally:
        p.kill()
        p.wait()


def test_walk_without_children_files_finds_the_same_tree() -> None:
    """Kernels without CONFIG_PROC_CHILDREN: one pass over /proc gives the same members."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        fast = ProcessTree(os.getpid(), time.monotonic)
        slow = ProcessTree(os.getpid(), time.monotonic)
        slow._children_file = False
        got_fast = {s.pid: s.role for s in fast.sample()[0] if s.role != "pin"}
        got_slow = {s.pid: s.role for s in slow.sample()[0] if s.role != "pin"}
        assert got_fast[child.pid] == "other" and got_fast == got_slow
    finally:
        child.kill()
        child.wait()


def test_sample_survives_processes_vanishing(monkeypatch) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        tree = ProcessTree(os.getpid(), time.monotonic)
        tree.sample()
        real = procs._read_stat

        def flaky(path: str):
            if path.startswith(f"/proc/{child.pid}/"):
                raise FileNotFoundError(path)
            return real(path)

        monkeypatch.setattr(procs, "_read_stat", flaky)
        monkeypatch.setattr(procs, "_read_io", lambda pid: None)
        samples, _ = tree.sample()  # must not raise
        assert os.getpid() in _by_pid(samples)
        assert _by_pid(samples)[os.getpid()].read_Bps is None
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to drop to nobody")
def test_tree_of_another_users_process_degrades_to_none() -> None:
    """Without ptrace access: no env, no I/O, but CPU and roles still work, no exception."""
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                              env={"WANDB_API_KEY": "x", "RANK": "0"})
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgid(65534)
            os.setuid(65534)
            tree = ProcessTree(target.pid, time.monotonic)
            tree.sample()
            time.sleep(0.2)
            samples, _ = tree.sample()
            s = samples[0]
            info = tree.info()
            os.write(w, repr((s.role, s.cpu is not None, s.read_Bps, info["env"], info["env_readable"])).encode())
        except BaseException as exc:  # report, never hang the test
            os.write(w, repr(exc).encode())
        finally:
            os._exit(0)
    os.close(w)
    out = b""
    while chunk := os.read(r, 4096):
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    target.kill()
    target.wait()
    assert out.decode() == repr(("main", True, None, {}, False))
