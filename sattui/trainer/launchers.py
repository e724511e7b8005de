"""Finding the trainer below a launcher: ``bash train.sh``, ``srun``, ``mpirun``,
``accelerate launch``, ``deepspeed``, ``torchrun``.

Many jobs start through a wrapper, and the pid a user has (or the command sattui starts)
is the wrapper's, not the trainer's. When the given process is not Python, or is a known
Python launcher, :class:`TrainerFinder` looks below it, every tick, for the processes
whose main thread is the training loop:

* a Python process with a rank in its start-up environment (``RANK`` from torchrun /
  deepspeed / accelerate, ``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``, ``SLURM_PROCID``) —
  taken at once, before its imports finish;
* a Python process that has PyTorch loaded (``libtorch*.so`` mapped, from
  ``/proc/PID/maps``; also TensorFlow and JAX/XLA);
* a Python process that owns DataLoader workers.

Only the topmost such process of a branch is a trainer: its children are its workers,
compile workers and helpers. A launcher in between (torchrun's agent, ``accelerate``)
is passed through, as is a Python process that loaded no framework (``python
wrapper.py``), so the trainer found is the one below it. A trainer that starts later
than the wrapper (a script that sleeps, prepares data, then runs python) is found on the
tick it appears, and one that exits is replaced by the next one found.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sattui.textsafe import clean
from sattui.trainer.env import read_allowed_env

# Libraries whose mapping says "a deep-learning framework runs here" (file name prefixes).
FRAMEWORK_LIBS = (b"libtorch", b"libtensorflow_framework", b"xla_extension", b"libjax")
# Environment variables that number the ranks of a job, by launcher; the first set wins.
RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
# Python launchers by script or module name: they start the trainer, they do not train.
PYTHON_LAUNCHERS = {
    "torchrun": "torchrun",
    "torch.distributed.run": "torchrun",
    "torch.distributed.launch": "torchrun",
    "accelerate": "accelerate",
    "deepspeed": "deepspeed",
}
# ... and by module prefix (``python -m accelerate.commands.launch``, deepspeed's runner).
LAUNCHER_MODULE_PREFIXES = (("accelerate.", "accelerate"), ("deepspeed.launcher.", "deepspeed"))
_MAPS_MAX = 8 << 20  # a torch process maps ~2,000 regions (~300 kB of text); stop far above


def python_launcher(comm: str, cmdline: list[str]) -> str | None:
    """``"torchrun"``, ``"accelerate"``, ``"deepspeed"`` when a Python process is one of
    those launchers (its script or ``-m`` module, not an argument that names one)."""
    if comm == "pt_elastic":  # torch.distributed.run names its thread so
        return "torchrun"
    if not cmdline:
        return None
    first = os.path.basename(cmdline[0])
    if first in PYTHON_LAUNCHERS:
        return PYTHON_LAUNCHERS[first]
    args = iter(cmdline[1:])
    for arg in args:
        if arg == "-m":
            mod = next(args, "")
            return PYTHON_LAUNCHERS.get(mod) or next((k for p, k in LAUNCHER_MODULE_PREFIXES if mod.startswith(p)),
                                                     None)
        if arg == "-c":
            return None
        if arg in ("-X", "-W", "-Q"):
            next(args, None)  # these flags take a value
            continue
        if arg.startswith("-"):
            continue
        return PYTHON_LAUNCHERS.get(os.path.basename(arg))
    return None


def framework_loaded(pid: int) -> str | None:
    """The file name of the first framework library ``pid`` has mapped, else None.

    Reading ``/proc/PID/maps`` needs the same rights as ptrace-read (root, or the
    trainer's own user): without them the answer is None, "not seen".
    """
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            data = f.read(_MAPS_MAX)
    except OSError:
        return None
    for marker in FRAMEWORK_LIBS:
        i = data.find(b"/" + marker)
        if i >= 0:
            end = data.find(b"\n", i)
            name = data[i + 1: end if end >= 0 else len(data)].decode("utf-8", "replace")
            return clean(name.strip(), 200)
    return None


def rank_of(env: dict[str, str] | None) -> tuple[int | None, str | None]:
    """The process's rank and the variable that gave it, from its allow-listed environment."""
    for var in RANK_VARS:
        if env and var in env:
            try:
                return int(env[var]), var
            except ValueError:
                continue
    return None, None


@dataclass(slots=True)
class Found:
    """One trainer process found below the launcher."""

    pid: int
    start: int  # start time in clock ticks: (pid, start) is the identity
    rank: int | None
    reason: str  # why it was taken, for a person

    @property
    def role(self) -> str:
        return "rank" if self.rank is not None else "main"


@dataclass(slots=True)
class Candidate:
    """What the process tree knows about one process, as the finder needs it."""

    pid: int
    ppid: int
    start: int
    comm: str
    cmdline: list[str]
    python: bool
    helper: bool  # a DataLoader / compile worker or multiprocessing helper: never a trainer


class TrainerFinder:
    """Chooses the trainer processes below a launcher, once per tick (see the module doc)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.found: dict[int, Found] = {}
        self.ever_found = False

    def scan(self, procs: list[Candidate], worker_parents: set[int]) -> list[Found]:
        """``procs`` parents before children (the tree's breadth-first walk), the root
        included; ``worker_parents``: pids that own DataLoader workers. Returns the
        trainers found this tick that were not found before."""
        by_pid = {p.pid: p for p in procs}
        taken: set[int] = set()  # trainers, and everything below one
        now: dict[int, Found] = {}
        new: list[Found] = []
        for p in procs:
            if p.pid == self.root:
                continue
            if p.ppid in taken:
                taken.add(p.pid)
                continue
            if not p.cmdline:
                continue  # inside exec (or a kernel thread): judged once its command line reads
            if not p.python or p.helper or python_launcher(p.comm, p.cmdline):
                continue  # passed through: a shell, srun, a launcher, a worker of nobody
            f = self.found.get(p.pid)
            if f is not None and f.start == p.start:
                now[p.pid] = f
                taken.add(p.pid)
                continue
            f = self._judge(p, p.pid in worker_parents, by_pid)
            if f is not None:
                now[p.pid] = f
                taken.add(p.pid)
                new.append(f)
        self.found = now
        self.ever_found = self.ever_found or bool(now)
        return new

    def _judge(self, p: Candidate, owns_workers: bool, by_pid: dict[int, Candidate]) -> Found | None:
        env = read_allowed_env(p.pid)
        rank, var = rank_of(env)
        parent = by_pid.get(p.ppid)
        if rank is None and parent is not None and python_launcher(parent.comm, parent.cmdline) == "torchrun":
            # torchrun gives each worker its RANK: a child without one (yet) is caught
            # between fork and exec, or its environment did not read; judged next tick
            return None
        parent_rank = rank_of(read_allowed_env(parent.pid))[0] if parent is not None and rank is not None else None
        if rank is not None and parent_rank != rank:
            return Found(p.pid, p.start, rank, f"{var}={rank} in its environment")
        lib = framework_loaded(p.pid)
        if lib is not None:
            return Found(p.pid, p.start, rank, f"{lib} loaded")
        if owns_workers:
            return Found(p.pid, p.start, rank, "it owns DataLoader workers")
        return None

    def pids(self) -> list[int]:
        """The trainers now, ranks in rank order first."""
        return [f.pid for f in sorted(self.found.values(), key=lambda f: (f.rank is None, f.rank, f.pid))]
