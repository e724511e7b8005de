"""Finding the trainer below a launcher, on real process trees (no torch needed here:
a child maps a library file named like PyTorch's, which is what /proc/PID/maps shows)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from sattui.trainer import procs as procs_mod
from sattui.trainer.launchers import framework_loaded, python_launcher, rank_of
from sattui.trainer.procs import ProcessTree


@pytest.mark.parametrize("comm, cmdline, want", [
    ("torchrun", ["/v/bin/python3", "/v/bin/torchrun", "--nproc-per-node", "2", "train.py"], "torchrun"),
    ("python", ["python", "-m", "torch.distributed.run", "train.py"], "torchrun"),
    ("pt_elastic", ["python", "x.py"], "torchrun"),
    ("accelerate", ["/v/bin/python3", "/v/bin/accelerate", "launch", "train.py"], "accelerate"),
    ("python", ["python", "-m", "accelerate.commands.launch", "train.py"], "accelerate"),
    ("deepspeed", ["/v/bin/python3", "/v/bin/deepspeed", "train.py"], "deepspeed"),
    ("python", ["python", "-u", "-m", "deepspeed.launcher.runner", "train.py"], "deepspeed"),
    ("python", ["python", "train.py", "--launcher", "accelerate"], None),  # an argument, not the program
    ("python", ["python", "-c", "import torchrun"], None),
    ("python", ["python", "-m", "accelerated_thing"], None),
    ("python", [], None),
])
def test_python_launchers_by_program_not_by_argument(comm, cmdline, want):
    assert python_launcher(comm, cmdline) == want


def test_rank_from_the_launchers_variables():
    assert rank_of({"RANK": "3", "SLURM_PROCID": "9"}) == (3, "RANK")
    assert rank_of({"OMPI_COMM_WORLD_RANK": "1"}) == (1, "OMPI_COMM_WORLD_RANK")
    assert rank_of({"SLURM_PROCID": "x", "PMI_RANK": "2"}) == (2, "PMI_RANK")
    assert rank_of({}) == (None, None) and rank_of(None) == (None, None)


# A Python child that maps a file named like PyTorch's library (then waits), as `import
# torch` would; with FAKE_RANK it also carries a rank in its environment.
_MAPPER = r"""
import mmap, os, sys, time
lib = sys.argv[1]
if lib != "-":
    f = open(lib, "rb")
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
if len(sys.argv) > 2 and sys.argv[2] == "fork":
    os.fork()  # a worker forked before it renames itself: the library is mapped in both
print("ready", flush=True)
time.sleep(60)
"""


def _wait(cond, timeout=15.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def lib(tmp_path):
    p = tmp_path / "torch" / "lib" / "libtorch_cpu.so"
    p.parent.mkdir(parents=True)
    p.write_bytes(b"\0" * 4096)
    return str(p)


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        try:
            os.killpg(p.pid, 9)
        except OSError:
            pass
        p.wait()


def _shell(procs, script: str, **kw) -> subprocess.Popen:
    p = subprocess.Popen(["bash", "-c", script], start_new_session=True, **kw)
    procs.append(p)
    return p


def _tick_until(tree: ProcessTree, cond, timeout=15.0):
    events = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        samples, evs = tree.sample()
        events += evs
        if cond(samples, events):
            return samples, events
        time.sleep(0.2)
    raise AssertionError(f"not found in time: {[e.message for e in events]}")


def _py(script_args: str) -> str:
    return f"{sys.executable} -c '{_MAPPER}' {script_args}"


def _python(procs, lib: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", _MAPPER, lib], stdout=subprocess.PIPE, text=True,
                         start_new_session=True)
    procs.append(p)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_framework_loaded_reads_the_maps(procs, lib):
    assert framework_loaded(_python(procs, lib).pid) == "libtorch_cpu.so"
    assert framework_loaded(_python(procs, "-").pid) is None
    assert framework_loaded(2 ** 22 + 5) is None  # no such process


def test_a_trainer_that_starts_later_below_a_shell_is_found(procs, lib):
    sh = _shell(procs, f"sleep 1; {_py('-')} & {_py(lib)}; true")
    tree = ProcessTree(sh.pid, time.monotonic)
    assert tree.launcher == "bash" and tree.trainer_pids() == []
    assert "is not a Python process: looking below it" in tree.looking_message()
    samples, events = _tick_until(tree, lambda s, e: any(x.type == "trainer_found" for x in e))
    found = [e for e in events if e.type == "trainer_found"]
    assert len(found) == 1
    pid = found[0].data["pid"]
    assert found[0].data["reason"] == "libtorch_cpu.so loaded" and found[0].data["under"] == sh.pid
    assert f"found under bash pid {sh.pid}" in found[0].message
    assert tree.trainer_pids() == [pid]
    # the Python process without the library (a helper) was passed over
    roles = {s.pid: s.role for s in samples}
    assert roles[pid] == "main" and roles[sh.pid] == "other"
    assert sorted(r for p, r in roles.items() if p not in (pid, sh.pid)) == ["other"] * (len(roles) - 2)


def test_a_found_trainer_that_is_exiting_stays_the_trainer(procs, lib, monkeypatch):
    # An exiting process has released its memory: its command line reads empty for its last
    # ticks (CI saw the trainer's last sample as "other" below a shell wrapper).
    sh = _shell(procs, f"{_py(lib)}; true")
    tree = ProcessTree(sh.pid, time.monotonic)
    _, events = _tick_until(tree, lambda s, e: bool(tree.trainer_pids()))
    pid = tree.trainer_pids()[0]
    real = procs_mod._read_cmdline
    monkeypatch.setattr(procs_mod, "_read_cmdline", lambda p: (b"", []) if p == pid else real(p))
    for _ in range(2):
        samples, evs = tree.sample()
        assert {s.role for s in samples if s.pid == pid} == {"main"}
        assert tree.trainer_pids() == [pid] and not [e for e in evs if e.type == "trainer_found"]


def test_every_rank_below_a_launcher_is_taken_at_once(procs):
    # Two ranks (srun / mpirun style: a rank variable, no library yet) below one shell.
    # A subshell shares the shell's command line, as a forked DataLoader worker shares the
    # trainer's: below a launcher it is no worker.
    sh = _shell(procs, f"(sleep 60; true) & RANK=0 {_py('-')} & SLURM_PROCID=1 {_py('-')} & wait")
    tree = ProcessTree(sh.pid, time.monotonic)
    _, events = _tick_until(tree, lambda s, e: len(tree.trainer_pids()) == 2)
    ranks = sorted((e.data["rank"], e.data["reason"]) for e in events if e.type == "trainer_found")
    assert ranks == [(0, "RANK=0 in its environment"), (1, "SLURM_PROCID=1 in its environment")]
    samples, _ = tree.sample()
    assert sorted((s.role, s.rank) for s in samples if s.pid in tree.trainer_pids()) == [("rank", 0), ("rank", 1)]
    assert {s.role for s in samples if s.pid not in tree.trainer_pids()} == {"other"}
    assert any(s.name == "bash" and s.pid != sh.pid for s in samples)  # the subshell was seen


def test_a_shell_that_execs_python_becomes_the_trainer(procs, lib):
    sh = _shell(procs, f"sleep 0.5; exec {_py(lib)}")
    tree = ProcessTree(sh.pid, time.monotonic)
    assert tree.launcher == "bash"
    _, events = _tick_until(tree, lambda s, e: any(x.type == "trainer_found" for x in e))
    f = next(e for e in events if e.type == "trainer_found")
    assert f.data["pid"] == sh.pid and "exec'd it" in f.data["reason"]
    assert tree.finder is None and tree.trainer_pids() == [sh.pid]
    samples, _ = tree.sample()
    assert next(s for s in samples if s.pid == sh.pid).role == "main"


def test_a_python_trainer_given_directly_is_not_a_launcher(procs, lib):
    p = _python(procs, lib)
    tree = ProcessTree(p.pid, time.monotonic)
    assert tree.launcher is None and tree.finder is None and tree.trainer_pids() == [p.pid]
    samples, events = tree.sample()
    assert next(s for s in samples if s.pid == p.pid).role == "main" and events == []


def test_only_the_topmost_trainer_of_a_branch_is_taken(procs, lib):
    sh = _shell(procs, f"{_py(lib + ' fork')}; true")
    tree = ProcessTree(sh.pid, time.monotonic)
    samples, events = _tick_until(tree, lambda s, e: len(s) >= 3 and any(x.type == "trainer_found" for x in e))
    time.sleep(0.3)
    samples, more = tree.sample()
    found = [e.data["pid"] for e in events + more if e.type == "trainer_found"]
    assert len(found) == 1 and tree.trainer_pids() == found
    child = next(s for s in samples if s.ppid == found[0])
    assert child.role == "worker"  # a fork of the trainer, as a DataLoader worker is


def test_a_shells_subshell_is_no_worker_while_no_trainer_is_found(procs):
    sh = _shell(procs, "(sleep 60; true); true")
    tree = ProcessTree(sh.pid, time.monotonic)
    samples, _ = _tick_until(tree, lambda s, e: any(x.name == "sleep" for x in s))
    roles = {(s.name, s.pid == sh.pid): s.role for s in samples}
    assert roles == {("bash", True): "main", ("bash", False): "other", ("sleep", False): "other"}


def test_below_torchrun_a_child_without_its_rank_yet_is_not_taken(procs, lib, tmp_path):
    # torchrun gives every worker RANK; a child of its agent seen without one is caught
    # between fork and exec (or its environment did not read). Taken as a rankless
    # trainer, it once showed up as a third "trainer" of a 2-rank job on a loaded box.
    agent = tmp_path / "torchrun"  # python_launcher knows the agent by its script's name
    agent.write_text(f"#!{sys.executable}\n"
                     "import os, subprocess, sys\n"
                     f"env = {{k: v for k, v in os.environ.items() if k != 'RANK'}}\n"
                     f"a = subprocess.Popen([sys.executable, '-c', {_MAPPER!r}, {lib!r}], env=env)\n"
                     f"b = subprocess.Popen([sys.executable, '-c', {_MAPPER!r}, {lib!r}], env={{**env, 'RANK': '0'}})\n"
                     "a.wait(); b.wait()\n")
    agent.chmod(0o755)
    sh = _shell(procs, f"{agent}; true")
    tree = ProcessTree(sh.pid, time.monotonic)
    _, events = _tick_until(tree, lambda s, e: len(tree.trainer_pids()) >= 1)
    time.sleep(0.5)
    _, more = tree.sample()
    found = [e.data for e in events + more if e.type == "trainer_found"]
    assert [(f["rank"], f["reason"]) for f in found] == [(0, "RANK=0 in its environment")], found
