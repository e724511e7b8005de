"""The trainer's process tree over time: who is who, and what each one costs.

Linux only: everything comes from ``/proc``. One ``ProcessTree`` per watched trainer;
``sample()`` is meant to run about once a second on a sampling thread.

Roles (``ProcSample.role``), decided in this order for every process found:

``main``     the pid sattui was given, unless that is a launcher (below).
``worker``   comm ``pt_data_worker`` (torch >= 2.2 renames DataLoader workers). Before the
             rename, and for older torch: a child of ``main``/``rank`` whose cmdline
             equals its parent's (fork, and the children of a forkserver server, which
             are forks of it), or whose cmdline carries the spawn markers
             (``multiprocessing.spawn`` / ``--multiprocessing-fork``). Spawned workers
             import torch for several seconds before they rename.
``rank``     a process whose start-up environ has ``RANK`` (else ``LOCAL_RANK``) while
             its parent's has none (or a different one): torchrun / elastic / deepspeed
             style ranks, the launcher's children, and the ranks a trainer starts itself
             with a rank in the child's environment (Lightning's ``ddp`` launcher re-runs
             its own command line with ``LOCAL_RANK=1..``; ``multiprocessing`` or
             ``subprocess`` with ``RANK`` set). ``rank`` = int(RANK or LOCAL_RANK).
             ``torch.multiprocessing.spawn`` children (also Lightning's ``ddp_spawn``)
             carry no rank of their own: their command line is spawn's, like a spawned
             DataLoader worker's before it renames. Such a child is a rank when one
             ``py-spy dump`` of it shows ``_wrap`` of ``torch/multiprocessing/spawn.py``
             on its main thread (a worker runs ``_worker_loop`` of
             ``torch/utils/data/_utils/worker.py`` and renames itself), or when it owns
             DataLoader workers; its rank is its place among its parent's spawn ranks by
             start time (spawn starts ranks 0..N-1 in order). A ``main`` whose rank
             children run its own command line (Lightning ``ddp``) is itself a rank (its
             RANK/LOCAL_RANK, else 0); one whose rank children run another command line
             (``mp.spawn``'s parent, which only waits in ``join``) becomes ``other``.
``compile``  cmdline mentions ``torch/_inductor/compile_worker`` (and its children).
``pin``      not a process: the pin-memory THREAD (``/proc/PID/task/TID/comm`` ==
             ``pt_data_pin``) of main/rank/other processes. Its sample has pid = TID,
             ppid = the owning pid, rss/io None (shared with its process).
``other``    everything else: a torchrun launcher given as the pid (comm ``pt_elastic``
             or a torchrun / torch.distributed.run cmdline), the multiprocessing
             resource_tracker and forkserver server, shells, anything the trainer runs.

``ProcSample.rank`` of a non-rank process is the rank it belongs to (nearest ancestor
that has one; ``main`` has one when its own environ says ``RANK``), so a worker of rank 1
carries rank 1.

Besides ``stat`` and ``io``, each tick reads the main thread's run-queue wait of every
process (``/proc/PID/schedstat``: ``run_delay``) and the main thread's own CPU of the
trainer, ranks and workers (``/proc/PID/task/PID/stat``: ``cpu_main``), and now and then a
worker's USS (``/proc/PID/smaps_rollup``: ``uss``); see sattui/trainer/sched.py and smaps.py.

Known limits:

* A pid given from inside a container's PID namespace cannot be mapped to ours in
  general; sattui must run in (or above) the trainer's namespace. ``nspid`` is shown
  for display and for matching NVML's host pids.
* An ``mp.spawn`` rank is told from a spawned worker by its stack, so only when stacks
  are sampled (``stack_probe``; not with ``--no-stacks``): without, one that owns no
  DataLoader workers stays ``worker``. Each undecided spawned child (its command line
  has spawn's marker; a forked one is never looked at) is looked at once a tick, at most
  ``SPAWN_PROBES`` times.
* Environment is the one a process started with (``/proc/PID/environ``).

Why ``/proc`` is parsed here instead of through psutil getters: one read of
``/proc/PID/stat`` gives identity (start time), comm, state, ppid, CPU ticks, thread
count and RSS at once, and the same parser reads the pin thread's
``/proc/PID/task/TID/stat``. psutil only checks the pid at start.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import psutil

from sattui.errors import TargetError
from sattui.frames import norm_path
from sattui.model import Event, Frame, ProcSample
from sattui.textsafe import clean, clean_argv
from sattui.trainer.env import read_allowed_env
from sattui.trainer.launchers import Candidate, Found, TrainerFinder, python_launcher
from sattui.trainer.sched import run_queue_ns, thread_ticks
from sattui.trainer.smaps import uss_bytes

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# A process's first figures are over at least this long (CPU time comes in 10-ms ticks).
MIN_LIFE_S = 0.2
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

WORKER_COMM = "pt_data_worker"
PIN_COMM = "pt_data_pin"
LAUNCHER_COMM = "pt_elastic"

_SPAWN_MARKERS = ("multiprocessing.spawn", "--multiprocessing-fork")
_FORKSERVER_MARKER = "multiprocessing.forkserver"
_INFRA_MARKERS = ("multiprocessing.resource_tracker", "multiprocessing.semaphore_tracker",
                  _FORKSERVER_MARKER)
_COMPILE_MARKERS = ("_inductor/compile_worker", "_inductor.compile_worker")
# What a spawned child's main thread runs (py-spy's frames, innermost first): mp.spawn's
# per-rank wrapper, or a DataLoader worker's loop.
_SPAWN_RANK_FRAME = ("torch/multiprocessing/spawn.py", "_wrap")
_WORKER_LOOP_FRAME = ("torch/utils/data/_utils/worker.py", "_worker_loop")
# Looks at one undecided spawned child (one a tick): a spawned worker renames itself once
# its imports are done (seconds), a rank shows _wrap as soon as its own code runs.
SPAWN_PROBES = 60
# Roles whose main thread's own CPU is recorded (cpu_main): the training loop's thread of a
# trainer or rank, and a worker's fetch loop.
_MAIN_THREAD_ROLES = ("main", "rank", "worker")
# A worker's USS is read this often at most. smaps_rollup walks the page tables (about
# 7 ms of CPU for a 200 MB worker here, bench/signals_cost.py), so the reads also stay
# within USS_CPU_BUDGET of a core: with many large workers each one is read less often.
USS_EVERY_S = 10.0
USS_CPU_BUDGET = 0.01
# A thread seen twice under another name than PIN_COMM is looked at again only this often:
# a pin thread names itself as it starts (a new thread is looked at on the next tick too),
# and a trainer of 112 threads cost 111 reads of a comm file each tick (a tenth of sattui's
# own CPU beside it, issue 25).
PIN_RECHECK_S = 10.0

# Errors that mean "this process (or thread) went away or hides from us while we
# looked". Anything of these is a skip, never an exception out of sample().
_GONE = (OSError, ValueError, IndexError, psutil.Error)



# --------------------------------------------------------------------------- /proc bits


@dataclass(slots=True)
class _Stat:
    comm: str
    state: str
    ppid: int
    ticks: int  # utime + stime, in clock ticks
    threads: int
    start: int  # start time in clock ticks since boot: (pid, start) is the identity
    rss: int  # bytes


def _parse_stat(text: str) -> _Stat:
    # comm may contain spaces and ')' itself, so split around the LAST ')'.
    lp, rp = text.index("("), text.rindex(")")
    rest = text[rp + 2 :].split()
    return _Stat(comm=text[lp + 1 : rp], state=rest[0], ppid=int(rest[1]),
                 ticks=int(rest[11]) + int(rest[12]), threads=int(rest[17]),
                 start=int(rest[19]), rss=int(rest[21]) * _PAGE)


def _read_stat(path: str) -> _Stat:
    with open(path, "rb") as f:
        return _parse_stat(f.read().decode("utf-8", "replace"))


def _boot_clock() -> float | None:
    """Seconds since boot on the clock /proc/PID/stat's start time counts in (it includes
    suspend, as CLOCK_BOOTTIME does); None where there is none."""
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):
        return None


def _run_delay(now_ns: int | None, before_ns: int | None, dt: float | None) -> float | None:
    """Share of ``dt`` a thread waited on the run queue, 0-1 (the two reads and the tick's
    clock are a few microseconds apart, hence the clamp)."""
    if now_ns is None or before_ns is None or not dt:
        return None
    return min(1.0, max(0, now_ns - before_ns) / 1e9 / dt)


def _read_io(pid: int) -> tuple[int, int] | None:
    # Needs ptrace-read access (same user or root); None means "unknown", not 0.
    try:
        with open(f"/proc/{pid}/io", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    vals: dict[str, int] = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        if k in ("read_bytes", "write_bytes"):
            vals[k] = int(v)
    if len(vals) != 2:
        return None
    return vals["read_bytes"], vals["write_bytes"]


def _read_text(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def _read_cmdline(pid: int) -> tuple[bytes, list[str]] | None:
    """Raw and split ``/proc/PID/cmdline``; None if unreadable.

    Split like psutil does: NUL-separated, or space-separated when a process rewrote
    its argv as one string (setproctitle).
    """
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    text = raw.decode("utf-8", "replace")
    if not text:
        return raw, []
    if text.endswith("\0"):
        text = text[:-1]
    parts = text.split("\0")
    if len(parts) == 1 and " " in parts[0] and not raw.endswith(b"\0"):
        parts = parts[0].split(" ")
    return raw, parts


def _tids(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        return []


def nspid_of(pid: int, tid: int | None = None) -> list[int] | None:
    """The ``NSpid`` line of ``/proc/PID/status``: our pid first, innermost namespace last.

    None if the process is gone, unreadable, or the kernel predates NSpid (< 4.1).
    """
    path = f"/proc/{pid}/status" if tid is None else f"/proc/{pid}/task/{tid}/status"
    text = _read_text(path)
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("NSpid:"):
            try:
                return [int(x) for x in line.split()[1:]]
            except ValueError:
                return None
    return None


def _inner_nspid(ns: list[int] | None, pid: int) -> int | None:
    return ns[-1] if ns and ns[-1] != pid else None


def resolve_pid(pid: int) -> int:
    """Check that ``pid`` names a live process in OUR pid namespace and return it.

    A thread id is resolved to its process (``/proc/TID`` exists for threads too). A pid
    seen inside a container is another namespace's number and cannot be mapped back in
    general; run sattui in the trainer's namespace (or above it) and pass our pid.
    Raises ``TargetError("no such process: PID")`` otherwise (zombies included: they
    have exited).
    """
    try:
        pid = int(pid)
    except (TypeError, ValueError):
        raise TargetError(f"no such process: {pid}") from None
    if pid <= 0:
        raise TargetError(f"no such process: {pid}")
    try:
        st = _read_stat(f"/proc/{pid}/stat")
    except PermissionError:
        raise TargetError(f"cannot read process {pid}: permission denied") from None
    except _GONE:
        raise TargetError(f"no such process: {pid}") from None
    if st.state in ("Z", "X"):
        raise TargetError(f"no such process: {pid}")
    text = _read_text(f"/proc/{pid}/status") or ""
    for line in text.splitlines():
        if line.startswith("Tgid:"):
            try:
                tgid = int(line.split()[1])
            except (IndexError, ValueError):
                break
            return tgid
    return pid


# --------------------------------------------------------------------------- roles


def _joined(cmdline: Iterable[str]) -> str:
    return " ".join(cmdline)


def _identity(pid: int) -> tuple[str, list[str], str | None]:
    """``(comm, cmdline, exe)`` of a process, read afresh ("" / [] / None when gone)."""
    comm = (_read_text(f"/proc/{pid}/comm") or "").strip()
    got = _read_cmdline(pid)
    try:
        exe: str | None = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        exe = None
    return comm, got[1] if got else [], exe

def is_launcher(comm: str, cmdline: list[str]) -> bool:
    """A torchrun / torch.distributed.run launcher (the elastic agent)."""
    return python_launcher(comm, cmdline) == "torchrun"


# The environment variables that number a rank, first set wins: torchrun sets both,
# Lightning's ``ddp`` launcher only LOCAL_RANK for the ranks it starts.
RANK_ENV_VARS = ("RANK", "LOCAL_RANK")


def env_rank_of(env: dict[str, str] | None) -> str | None:
    """The raw rank value of a start-up environment (RANK, else LOCAL_RANK), None if unset."""
    for var in RANK_ENV_VARS:
        if env and var in env:
            return env[var]
    return None


def _env_int(env: dict[str, str] | None, var: str) -> int | None:
    try:
        return int(env[var]) if env and var in env else None
    except ValueError:
        return None


def _env_labels(m: _Member) -> dict[str, Any]:
    return {"local_rank": m.env_local_rank, "world_size": m.env_world_size, "run_id": m.env_run_id}


def rank_from_env(env: dict[str, str] | None) -> int | None:
    raw = env_rank_of(env)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return None


def spawn_target(frames: Iterable[Frame]) -> str | None:
    """What a spawned child runs, from its main thread's frames: ``"rank"`` (mp.spawn's
    ``_wrap``), ``"worker"`` (a DataLoader worker's loop), None (still starting, or
    something else)."""
    for f in frames:
        path = norm_path(f.filename)
        for (suffix, name), what in ((_SPAWN_RANK_FRAME, "rank"), (_WORKER_LOOP_FRAME, "worker")):
            if f.name == name and (path == suffix or path.endswith("/" + suffix)):
                return what
    return None


def role_of(
    comm: str,
    cmdline: list[str],
    *,
    is_main: bool,
    parent_role: str | None,
    parent_cmdline: list[str] | None,
    env_rank: str | None = None,
    parent_env_rank: str | None = None,
) -> tuple[str, bool]:
    """Role of one process from what ``/proc`` says about it and its parent.

    Returns ``(role, fallback)``: ``fallback`` is True when ``worker`` was guessed from
    the cmdline only (not yet renamed), which ``ProcessTree`` may later upgrade to
    ``rank`` if that process turns out to own DataLoader workers (mp.spawn DDP).
    ``env_rank`` / ``parent_env_rank`` are the raw ``RANK`` values (None if unset).
    """
    if is_main:
        return ("other" if is_launcher(comm, cmdline) else "main"), False
    if comm == WORKER_COMM:
        return "worker", False
    text = _joined(cmdline)
    if parent_role == "compile" or any(m in text for m in _COMPILE_MARKERS):
        return "compile", False
    if env_rank is not None and env_rank != parent_env_rank:
        return "rank", False
    if is_launcher(comm, cmdline):
        return "other", False
    parent_text = _joined(parent_cmdline) if parent_cmdline is not None else None
    trainer_parent = parent_role in ("main", "rank")
    forkserver_parent = parent_text is not None and _FORKSERVER_MARKER in parent_text
    if parent_text is not None and text == parent_text and (trainer_parent or forkserver_parent):
        # fork: the child shares its parent's cmdline until exec (and workers never exec)
        return "worker", True
    if any(m in text for m in _INFRA_MARKERS):
        return "other", False
    if trainer_parent and any(m in text for m in _SPAWN_MARKERS):
        return "worker", True
    return "other", False


def is_python(comm: str, cmdline: list[str], exe: str | None = None) -> bool:
    """A guess: py-spy can only read Python processes."""
    names = [comm, os.path.basename(cmdline[0]) if cmdline else "", os.path.basename(exe or "")]
    if comm in (WORKER_COMM, LAUNCHER_COMM, PIN_COMM):
        return True
    return any(n.startswith("python") or n.startswith("pypy") for n in names if n)


def python_by_name(pid: int) -> bool | None:
    """``is_python`` from what ``/proc`` shows without ptrace rights (comm, cmdline).

    For telling "not Python" from "no permission" when py-spy is refused (doctor): py-spy
    first reads ``/proc/PID/exe``, which needs ptrace-read access, so a refused non-Python
    process would otherwise pass for a Python one sattui may not read. None when the
    process is gone.
    """
    comm, cmdline, exe = _identity(pid)
    if not comm and not cmdline:
        return None
    return is_python(comm, cmdline, exe)


# --------------------------------------------------------------------------- the tree


@dataclass(slots=True)
class _Member:
    """What we remember about one process (or pin thread) between samples."""

    pid: int
    start: int
    cmdline: list[str]
    env_rank: str | None  # raw RANK/LOCAL_RANK of the start-up environ (None: unset/unreadable)
    nspid: int | None
    role: str = "other"
    rank: int | None = None
    name: str = ""
    ppid: int | None = None
    fallback: bool = False  # worker guessed from cmdline only
    trainer: bool = False  # sticky: seen owning DataLoader workers
    spawn_rank: bool = False  # sticky: its stack showed mp.spawn's _wrap
    probes: int = 0  # stack looks taken to tell a spawned rank from a worker
    spawn_index: int | None = None  # place among its parent's spawn ranks (its rank)
    starts_ranks: str | None = None  # sticky: "self" (ranks rerun its command line) | "other"
    ticks: int | None = None
    main_ticks: int | None = None  # the main thread's own (task/PID/stat)
    run_ns: int | None = None  # the main thread's run-queue wait so far (schedstat)
    uss_due: float | None = None  # monotonic time of the next USS read (workers)
    io: tuple[int, int] | None = None
    mono: float | None = None
    started_t: float | None = None  # born since the previous tick: when, on the recording's clock
    zombie: bool = False
    owner: int | None = None  # pin threads: the owning pid
    children: list[int] = field(default_factory=list)
    cmdline_raw: bytes | None = None
    # the start-up environment's LOCAL_RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID (None: unset)
    env_local_rank: int | None = None
    env_world_size: int | None = None
    env_run_id: str | None = None


class ProcessTree:
    """The process tree under one pid, re-walked on every ``sample()``."""

    def __init__(self, pid: int, clock: Callable[[], float], *, uss_every_s: float = USS_EVERY_S,
                 stack_probe: Callable[[int], Iterable[Frame] | None] | None = None) -> None:
        pid = resolve_pid(pid)
        try:
            psutil.Process(pid).cmdline()
        except psutil.AccessDenied:
            raise TargetError(f"cannot read process {pid}: permission denied") from None
        except psutil.Error:
            raise TargetError(f"no such process: {pid}") from None
        self.pid = pid
        self._settle()
        self._clock = clock
        self.uss_every_s = uss_every_s
        # One look at a process's main-thread stack (py-spy dump), to tell an mp.spawn rank
        # from a spawned DataLoader worker; None: not looked at (--no-stacks, unit tests).
        self.stack_probe = stack_probe
        self._workers = 0  # DataLoader workers in the last tick (spreads the USS reads)
        self._members: dict[int, _Member] = {}  # process pid -> member
        self._pins: dict[tuple[int, int], _Member] = {}  # (owner pid, tid) -> pin thread
        # (owner pid, tid) of threads seen not to be pin threads -> when to look again
        self._not_pin: dict[tuple[int, int], float] = {}
        self._first = True
        # (monotonic, boot-clock) time of the previous tick: a process born after it has its
        # whole life in this tick's interval (see _baseline_at_birth)
        self._prev_tick: tuple[float, float] | None = None
        # this tick's clock, monotonic and boot-clock times, and the previous tick's
        self._tick: tuple[float, float, float | None, tuple[float, float] | None] = (0.0, 0.0, None, None)
        self._main_gone = False
        self._children_file = os.path.exists(f"/proc/{pid}/task/{pid}/children")
        # A launcher (a shell, srun, torchrun, accelerate …) is not the trainer: the
        # finder looks below it every tick. Re-judged every tick: a shell may exec python.
        self._root_python: bool | None = None
        self.launcher: str | None = self._launcher_kind()
        self.finder: TrainerFinder | None = TrainerFinder(pid) if self.launcher else None

    def _launcher_kind(self) -> str | None:
        """None when the root is the trainer itself (a Python process that launches
        nothing), else what launches it: ``torchrun``, ``accelerate``, ``deepspeed``, or
        the name of a non-Python root (``bash``, ``srun`` …)."""
        comm, cmdline, exe = _identity(self.pid)
        self._root_python = is_python(comm, cmdline, exe)
        if self._root_python:
            return python_launcher(comm, cmdline)
        return clean(comm or os.path.basename(cmdline[0]) if cmdline else comm or "?", 40)

    def looking_message(self) -> str:
        """What a launcher root means for sampling, for a person."""
        what = "not a Python process" if self._root_python is False else "a launcher"
        return (f"pid {self.pid} ({self.launcher}) is {what}: looking below it for the trainer "
                "(a Python process with torch loaded, a rank, or one owning DataLoader workers)")

    def trainer_pids(self) -> list[int]:
        """The processes to sample: the root itself, or the trainers found below it, and
        the ranks any of them started (mp.spawn, Lightning's launchers), in rank order. A
        process that started ranks and does not train itself (``other``) is left out."""
        if self.finder is None:
            base = [self.pid] if not self._main_gone else []
        else:
            base = self.finder.pids()
        ranks = list(self.rank_pids().values())
        if not ranks:
            return base
        rest = [p for p in base if p not in ranks
                and (p not in self._members or self._members[p].role != "other")]
        return ranks + rest

    def role(self, pid: int) -> str | None:
        """The role the tree gives ``pid`` now (None: not a member)."""
        m = self._members.get(pid)
        return m.role if m is not None else None

    def found(self) -> list[Found]:
        return list(self.finder.found.values()) if self.finder is not None else []

    def _settle(self, timeout: float = 0.5) -> None:
        """Wait (briefly) until a just-started process shows its cmdline and environ.

        Right after ``subprocess.Popen`` returns (``sattui -- CMD``), the child is
        still inside exec: measured, its ``/proc/PID/cmdline`` and ``environ`` read
        empty for about a millisecond, and ``info()`` would record an empty cmdline.
        """
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            got = _read_cmdline(self.pid)
            if got is None or got[1]:
                return
            time.sleep(0.005)

    # ------------------------------------------------------------------ public

    def main_alive(self) -> bool:
        if self._main_gone:
            return False
        try:
            st = _read_stat(f"/proc/{self.pid}/stat")
        except _GONE:
            return False
        m = self._members.get(self.pid)
        if st.state in ("Z", "X") or (m is not None and m.start != st.start):
            return False
        return True

    def info(self) -> dict[str, Any]:
        # read afresh, not cached: a process may exec again (a shell wrapper, pyenv's
        # torchrun shim) and the first read may have raced the child's exec
        comm, cmdline, exe = _identity(self.pid)
        env = read_allowed_env(self.pid)
        return {
            "pid": self.pid,
            "cmdline": cmdline,
            "env": env if env is not None else {},
            "env_readable": env is not None,  # {} above can mean "not allowed to read"
            "nspid": nspid_of(self.pid),
            "python": is_python(comm, cmdline, exe),
            "launcher": self.launcher,
        }

    def rank_pids(self) -> dict[int, int]:
        out: dict[int, tuple[int, int]] = {}
        for m in self._members.values():
            if m.role == "rank" and m.rank is not None and not m.zombie:
                # two processes with one rank (elastic restart overlap): the newer wins
                if m.rank not in out or out[m.rank][1] < m.start:
                    out[m.rank] = (m.pid, m.start)
        return {r: p for r, (p, _s) in sorted(out.items())}

    def sample(self) -> tuple[list[ProcSample], list[Event]]:
        t = self._clock()
        mono = time.monotonic()
        boot = _boot_clock()
        events: list[Event] = []
        first, self._first = self._first, False
        self._tick = (t, mono, boot, self._prev_tick)
        self._prev_tick = (mono, boot) if boot is not None else None

        stats = self._walk()
        if self.finder is None and not self._main_gone and self._root_python:
            # A Python root can still turn out to be a launcher: torchrun names its
            # thread pt_elastic only once it runs, a shim may exec torchrun.
            kind = self._launcher_kind()
            if kind is not None:
                self.launcher, self.finder = kind, TrainerFinder(self.pid)
        if self.finder is not None and not self._main_gone:
            self._find(stats, t, events)
        seen: set[int] = set()
        samples: list[ProcSample] = []

        # classify parents before children: walk order is breadth-first from the roots
        for pid, st in stats.items():
            try:
                self._visit(pid, st, t, mono, first, seen, samples, events)
            except _GONE:
                continue  # vanished or hid while we read it: it simply isn't in this tick

        # upgrade spawn-guessed "workers" that own workers: they are mp.spawn trainers
        for pid in seen:
            m = self._members[pid]
            if m.fallback and any(self._members.get(c) is not None
                                  and self._members[c].role == "worker"
                                  and self._members[c].name == WORKER_COMM for c in m.children):
                m.trainer = True

        self._find_started_ranks(seen)

        for pid in [p for p in self._members if p not in stats]:
            self._forget(pid, t, events, first)
        if not self._main_gone and self.pid not in seen and self.pid not in stats:
            self._trainer_exited(t, events)

        samples.extend(self._sample_pins(seen, t, mono, events, first))
        self._workers = sum(1 for s in samples if s.role == "worker")
        return samples, events

    def _find_started_ranks(self, seen: set[int]) -> None:
        """Ranks the trainer started itself (docs in the module): look at undecided
        spawned children's stacks, number mp.spawn ranks, and mark their parent. Takes
        effect on the next tick's roles (as the DataLoader-owner upgrade does)."""
        members = self._members
        for pid in seen:
            m = members[pid]
            parent = members.get(m.ppid) if m.ppid is not None else None
            if (self.stack_probe is None or not m.fallback or m.trainer or m.spawn_rank
                    or m.name == WORKER_COMM or m.probes >= SPAWN_PROBES
                    # only a spawned child can be an mp.spawn rank; a forked one (its
                    # parent's command line) is a worker or the trainer's own helper, and a
                    # py-spy dump a tick for each of 64 of them cost the ticks themselves
                    or not any(mk in _joined(m.cmdline) for mk in _SPAWN_MARKERS)
                    or parent is None
                    or (parent.role not in ("main", "rank") and parent.starts_ranks != "other")):
                continue
            m.probes += 1
            try:
                frames = self.stack_probe(pid)
            except Exception:  # a failing look is "not known yet", never a lost tick
                frames = None
            what = spawn_target(frames or ())
            if what == "rank":
                m.spawn_rank = True
            elif what == "worker":
                m.probes = SPAWN_PROBES  # decided: it renames itself in a moment
        by_parent: dict[int, list[_Member]] = {}
        for pid in seen:
            m = members[pid]
            if m.ppid is not None and (m.spawn_rank or m.trainer or m.role == "rank"):
                by_parent.setdefault(m.ppid, []).append(m)
        for ppid, kids in by_parent.items():
            spawned = sorted((k for k in kids if k.spawn_rank or k.trainer), key=lambda k: (k.start, k.pid))
            for i, k in enumerate(spawned):
                k.spawn_index = i
            parent = members.get(ppid)
            if parent is None or parent.starts_ranks is not None or parent.role != "main":
                continue
            started = [k for k in kids if k.role == "rank" or k.spawn_rank or k.trainer]
            if started:
                same = any(k.cmdline == parent.cmdline for k in started)
                if not same and any(c in members and members[c].name == WORKER_COMM for c in parent.children):
                    continue  # it iterates a DataLoader itself: a trainer, not only a waiting parent
                parent.starts_ranks = "self" if same else "other"

    def _visit(self, pid: int, st: _Stat, t: float, mono: float, first: bool, seen: set[int],
               samples: list[ProcSample], events: list[Event]) -> None:
        m = self._members.get(pid)
        if m is not None and m.start != st.start:
            self._forget(pid, t, events, first)  # pid reused by a stranger
            m = None
        if st.state in ("Z", "X"):
            # exited but not yet reaped by its parent: it is gone for us; say so once
            if m is not None and not m.zombie:
                m.zombie = True
                self._exit_event(m, t, events, first)
            if pid == self.pid:
                self._trainer_exited(t, events)
            return
        new = m is None
        if m is None:
            m = self._meet(pid, st)
            if m is None:
                return
            self._baseline_at_birth(m, st)
            self._members[pid] = m
        else:
            self._refresh(m)
        self._classify(m, st)
        seen.add(pid)
        samples.append(self._proc_sample(m, st, t, mono))
        if new and not first:
            events.append(Event(t, "proc_started", f"{m.role} {pid} started ({m.name})",
                                {"pid": pid, "role": m.role}))

    # ------------------------------------------------------------------ launchers

    def _find(self, stats: dict[int, _Stat], t: float, events: list[Event]) -> None:
        """Re-judge the root (a shell may have exec'd python) and find the trainers below it."""
        kind = self._launcher_kind()
        assert self.finder is not None
        if kind is None:  # the wrapper became the trainer (``exec python train.py``)
            st = stats.get(self.pid)
            m = self._members.get(self.pid)
            if st is None:
                return
            events.append(self._found_event(t, Found(self.pid, st.start, None,
                                                     f"{self.launcher} pid {self.pid} exec'd it"), m))
            self.finder = None
            self.launcher = None
            if m is not None:
                m.role = "main"
            return
        self.launcher = kind
        cands: list[Candidate] = []
        worker_parents: set[int] = set()
        for pid, st in stats.items():
            m = self._members.get(pid)
            if m is not None and m.start == st.start:
                # read again: a child last seen between fork and exec still showed its
                # parent's command line (a shell's, for torchrun's agent below `bash -c`)
                self._refresh(m)
                cmdline = m.cmdline
            else:
                got = _read_cmdline(pid)
                cmdline = got[1] if got else []
            if st.comm == WORKER_COMM:
                worker_parents.add(st.ppid)
            text = _joined(cmdline)
            helper = st.comm in (WORKER_COMM, PIN_COMM) or any(
                x in text for x in _SPAWN_MARKERS + _INFRA_MARKERS + _COMPILE_MARKERS)
            cands.append(Candidate(pid, st.ppid, st.start, st.comm, cmdline, is_python(st.comm, cmdline), helper))
        for f in self.finder.scan(cands, worker_parents):
            events.append(self._found_event(t, f, self._members.get(f.pid), next(
                (c.cmdline for c in cands if c.pid == f.pid), None)))

    def _found_event(self, t: float, f: Found, m: _Member | None, cmdline: list[str] | None = None) -> Event:
        cmd = cmdline if cmdline is not None else (m.cmdline if m is not None else [])
        shown = clean_argv([os.path.basename(cmd[0]), *cmd[1:]], 80) if cmd else "?"
        rank = f" (rank {f.rank})" if f.rank is not None else ""
        msg = f"trainer{rank}: pid {f.pid} ({shown}), found under {self.launcher} pid {self.pid}: {f.reason}"
        return Event(t, "trainer_found", msg, {"pid": f.pid, "rank": f.rank, "under": self.pid,
                                                "launcher": self.launcher, "reason": f.reason,
                                                "cmdline": list(cmd)})

    # ------------------------------------------------------------------ walking

    def _walk(self) -> dict[int, _Stat]:
        """Stat of every tree member, breadth-first from the roots.

        Roots are the main pid and every member we already know: a process whose
        parent died (orphaned worker, or everything once the trainer is gone) stays in
        the tree as long as it lives. Identity is (pid, start time), so a reused pid
        never brings a stranger or its children in.
        """
        roots = [self.pid] + [p for p in self._members if p != self.pid]
        out: dict[int, _Stat] = {}
        queue: list[int] = []
        for pid in roots:
            if pid in out:
                continue
            try:
                st = _read_stat(f"/proc/{pid}/stat")
            except _GONE:
                continue
            m = self._members.get(pid)
            if m is not None and m.start != st.start:
                continue  # reused pid: not ours; it gets forgotten
            if pid == self.pid and self._main_gone:
                continue
            out[pid] = st
            queue.append(pid)
        by_parent = None if self._children_file else self._ppid_map()
        i = 0
        while i < len(queue):
            pid = queue[i]
            i += 1
            kids = self._kids(pid) if by_parent is None else by_parent.get(pid, [])
            m = self._members.get(pid)
            if m is not None:
                m.children = kids
            for c in kids:
                if c in out:
                    continue
                try:
                    st = _read_stat(f"/proc/{c}/stat")
                except _GONE:
                    continue
                out[c] = st
                queue.append(c)
        return out

    def _kids(self, pid: int) -> list[int]:
        # /proc/PID/task/TID/children lists the children each THREAD forked; reading
        # only the tree's own processes is far cheaper than scanning all of /proc.
        # It can miss a child forked while we read; known members are roots anyway,
        # and a new child shows up on the next tick.
        kids: list[int] = []
        for tid in _tids(pid):
            text = _read_text(f"/proc/{pid}/task/{tid}/children")
            if text:
                kids.extend(int(x) for x in text.split())
        return kids

    @staticmethod
    def _ppid_map() -> dict[int, list[int]]:
        # Fallback without CONFIG_PROC_CHILDREN: one pass over all of /proc.
        out: dict[int, list[int]] = {}
        try:
            names = os.listdir("/proc")
        except OSError:
            return out
        for name in names:
            if not name.isdigit():
                continue
            try:
                ppid = _read_stat(f"/proc/{name}/stat").ppid
            except _GONE:
                continue
            out.setdefault(ppid, []).append(int(name))
        return out

    # ------------------------------------------------------------------ members

    def _meet(self, pid: int, st: _Stat) -> _Member | None:
        """First sight of a process: the facts that never change after exec."""
        m = _Member(pid=pid, start=st.start, cmdline=[], env_rank=None,
                    nspid=_inner_nspid(nspid_of(pid), pid), name=st.comm)
        self._refresh(m)
        return m

    def _baseline_at_birth(self, m: _Member, st: _Stat) -> None:
        """A process born since the previous tick gets figures in its first sample, over
        its own life, and says when it started (``started_t``): its counters (CPU ticks,
        I/O, run-queue wait) started at 0 when it was forked. Without this a new
        DataLoader worker's first second had no CPU figure, and the ledger could not tell
        a worker still starting (spawn's imports) from one already waiting on its data (a
        forked worker is in its loop within milliseconds)."""
        t, mono, boot, prev = self._tick
        # the start time is counted in whole clock ticks (truncated): one tick of slack
        if prev is None or boot is None or (st.start + 1) / _CLK_TCK < prev[1]:
            return
        life = min(max(0.0, boot - st.start / _CLK_TCK), mono - prev[0])
        # Its figures are over its own life (a worker born 0.2 s before the tick and busy
        # all along is busy, not at 20 %); a life of a few clock ticks is not resolved.
        m.ticks, m.main_ticks, m.run_ns, m.io = 0, 0, 0, (0, 0)
        m.mono = mono - max(life, MIN_LIFE_S)
        m.started_t = t - life

    @staticmethod
    def _refresh(m: _Member) -> None:
        """Re-read cmdline (one small read) and, if it changed, the RANK of the environ.

        A child caught between fork and exec still shows its parent's cmdline and
        environment (a torchrun rank without its RANK); the exec changes the cmdline,
        so comparing it every tick catches that without re-reading every environ.
        """
        got = _read_cmdline(m.pid)
        if got is None or got[0] == m.cmdline_raw:
            return
        if not got[1] and m.cmdline:
            # An exiting process has released its memory and reads an empty command line
            # for its last ticks: it is still what it was (a found trainer stays "main").
            return
        m.cmdline_raw, m.cmdline = got
        env = read_allowed_env(m.pid)
        m.env_rank = env_rank_of(env)
        m.env_local_rank, m.env_world_size = _env_int(env, "LOCAL_RANK"), _env_int(env, "WORLD_SIZE")
        m.env_run_id = (env or {}).get("TORCHELASTIC_RUN_ID") or None

    def _classify(self, m: _Member, st: _Stat) -> None:
        m.name = st.comm
        m.ppid = st.ppid
        parent = self._members.get(st.ppid)
        if parent is not None and (parent.zombie or parent.owner is not None):
            parent = None
        finder = self.finder
        found = finder.found.get(m.pid) if finder is not None else None
        if found is not None and found.start == m.start:
            m.role, m.fallback, m.rank = found.role, False, found.rank
            if m.starts_ranks == "self":  # Lightning's ddp below a wrapper: rank 0 itself
                m.role, m.rank = "rank", found.rank if found.rank is not None else 0
            return
        if finder is not None and m.pid == self.pid:
            # The launcher: ``main`` (what was given) until a trainer shows up below it.
            m.role, m.fallback = ("other" if finder.ever_found else "main"), False
            m.rank = rank_from_env({"RANK": m.env_rank} if m.env_rank is not None else None)
            return
        if parent is None and m.pid != self.pid and m.ticks is not None:
            return  # orphan (or parent left the tree): keep what we knew
        # A launcher's children are never its DataLoader workers (a shell forks subshells
        # that share its command line until they exec).
        launcher_child = finder is not None and parent is not None and parent.pid == self.pid
        parent_role = "other" if launcher_child else parent.role if parent else None
        if not launcher_child and parent is not None and parent.starts_ranks == "other":
            # mp.spawn's waiting parent reads "other" once one rank showed _wrap; a sibling
            # still importing is a rank to tell yet, as it was under a "main" parent
            parent_role = "main"
        role, fallback = role_of(
            st.comm, m.cmdline, is_main=m.pid == self.pid and finder is None,
            parent_role=parent_role,
            parent_cmdline=parent.cmdline if parent else None,
            env_rank=m.env_rank, parent_env_rank=parent.env_rank if parent else None,
        )
        if (fallback or role == "other") and (m.trainer or m.spawn_rank):
            # sticky evidence: it owns DataLoader workers or runs mp.spawn's _wrap (its
            # parent, once known to start ranks, is "other" and no longer a trainer parent)
            role, fallback = "rank", False
        if role == "main" and m.starts_ranks is not None:
            # it started ranks: with its own command line it is one of them (rank 0 of
            # Lightning's ddp), else it only waits for them (mp.spawn's parent)
            role = "rank" if m.starts_ranks == "self" else "other"
        m.role, m.fallback = role, fallback
        if role == "rank" or (m.pid == self.pid and self.finder is None):
            m.rank = rank_from_env({"RANK": m.env_rank} if m.env_rank is not None else None)
            if m.rank is None and role == "rank":
                m.rank = m.spawn_index if m.spawn_index is not None else (
                    0 if m.starts_ranks == "self" else None)
        else:
            m.rank = parent.rank if parent else None

    def _proc_sample(self, m: _Member, st: _Stat, t: float, mono: float) -> ProcSample:
        dt = mono - m.mono if m.mono is not None and mono > m.mono else None
        cpu = None
        if m.ticks is not None and dt:
            cpu = max(0, st.ticks - m.ticks) / _CLK_TCK / dt
        io = _read_io(m.pid)
        rd = wr = None
        if io is not None and m.io is not None and dt:
            rd = max(0, io[0] - m.io[0]) / dt
            wr = max(0, io[1] - m.io[1]) / dt
        cpu_main = None
        if m.role in _MAIN_THREAD_ROLES:
            main_ticks = thread_ticks(m.pid, m.pid)
            if main_ticks is not None and m.main_ticks is not None and dt:
                cpu_main = max(0, main_ticks - m.main_ticks) / _CLK_TCK / dt
            m.main_ticks = main_ticks
        run_ns = run_queue_ns(m.pid)
        run_delay = _run_delay(run_ns, m.run_ns, dt)
        m.ticks, m.io, m.mono, m.run_ns = st.ticks, io, mono, run_ns
        started_t, m.started_t = m.started_t, None  # said once, in its first sample
        return ProcSample(t=t, pid=m.pid, ppid=st.ppid, role=m.role, rank=m.rank, name=st.comm,
                          cpu=cpu, state=st.state, rss=st.rss, read_Bps=rd, write_Bps=wr,
                          nspid=m.nspid, threads=st.threads, cpu_main=cpu_main, run_delay=run_delay,
                          uss=self._uss(m, mono) if m.role == "worker" else None,
                          started_t=round(started_t, 3) if started_t is not None else None,
                          **(_env_labels(m) if m.role in ("main", "rank") else {}))

    def _uss(self, m: _Member, mono: float) -> int | None:
        """A worker's USS when its read is due (else None), each read within the budget."""
        every = self.uss_every_s
        if m.uss_due is None:
            # first sight: spread the workers' reads over the period (consecutive pids)
            m.uss_due = mono + m.pid % max(1, int(every))
        if mono < m.uss_due:
            return None
        c0 = time.thread_time()
        uss = uss_bytes(m.pid)
        cost = time.thread_time() - c0
        m.uss_due = mono + max(every, cost * max(1, self._workers) / USS_CPU_BUDGET)
        return uss

    def _sample_pins(self, seen: set[int], t: float, mono: float,
                     events: list[Event], first: bool) -> list[ProcSample]:
        """Pin-memory threads of the processes that can iterate a DataLoader."""
        out: list[ProcSample] = []
        alive: set[tuple[int, int]] = set()
        not_pin, listed = self._not_pin, set()
        for pid in seen:
            owner = self._members[pid]
            if owner.role in ("worker", "compile"):
                continue  # workers never run a pin thread; spares N comm reads each
            for tid in _tids(pid):
                if tid == pid:
                    continue  # the main thread keeps the process's name
                key = (pid, tid)
                listed.add(key)
                due = not_pin.get(key)
                if due is not None and mono < due:
                    continue
                comm = _read_text(f"/proc/{pid}/task/{tid}/comm")
                if comm is None or comm.strip() != PIN_COMM:
                    # the next tick for a thread first seen, then every PIN_RECHECK_S
                    not_pin[key] = mono + (PIN_RECHECK_S if due is not None else 0.0)
                    continue
                not_pin.pop(key, None)
                try:
                    st = _read_stat(f"/proc/{pid}/task/{tid}/stat")
                except _GONE:
                    continue
                p = self._pins.get(key)
                if p is not None and p.start != st.start:
                    self._exit_event(p, t, events, first)
                    p = None
                new = p is None
                if p is None:
                    p = _Member(pid=tid, start=st.start, cmdline=[], env_rank=None,
                                nspid=_inner_nspid(nspid_of(pid, tid), tid) if owner.nspid else None,
                                role="pin", name=PIN_COMM, owner=pid)
                    self._pins[key] = p
                p.rank = owner.rank
                cpu = None
                dt = mono - p.mono if p.mono is not None and mono > p.mono else None
                if p.ticks is not None and dt:
                    cpu = max(0, st.ticks - p.ticks) / _CLK_TCK / dt
                run_ns = run_queue_ns(pid, tid)
                run_delay = _run_delay(run_ns, p.run_ns, dt)
                p.ticks, p.mono, p.run_ns = st.ticks, mono, run_ns
                alive.add(key)
                out.append(ProcSample(t=t, pid=tid, ppid=pid, role="pin", rank=owner.rank,
                                      name=PIN_COMM, cpu=cpu, state=st.state, rss=None,
                                      read_Bps=None, write_Bps=None, nspid=p.nspid,
                                      threads=None, run_delay=run_delay))
                if new and not first:
                    events.append(Event(t, "proc_started", f"pin {tid} started ({PIN_COMM})",
                                        {"pid": tid, "role": "pin"}))
        for key in [k for k in self._pins if k not in alive]:
            self._exit_event(self._pins.pop(key), t, events, first)
        for key in [k for k in not_pin if k not in listed]:
            del not_pin[key]  # gone: its tid may come back as another thread
        return out

    # ------------------------------------------------------------------ events

    def _exit_event(self, m: _Member, t: float, events: list[Event], first: bool) -> None:
        if not first and m.pid != self.pid:
            events.append(Event(t, "proc_exited", f"{m.role} {m.pid} exited",
                                {"pid": m.pid, "role": m.role}))

    def _forget(self, pid: int, t: float, events: list[Event], first: bool) -> None:
        m = self._members.pop(pid, None)
        if m is None:
            return
        if not m.zombie:
            self._exit_event(m, t, events, first)
            if pid == self.pid:
                self._trainer_exited(t, events)

    def _trainer_exited(self, t: float, events: list[Event]) -> None:
        if self._main_gone:
            return
        self._main_gone = True
        events.append(Event(t, "trainer_exited", f"trainer {self.pid} exited", {"pid": self.pid}))
