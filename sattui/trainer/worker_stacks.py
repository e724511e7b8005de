"""DataLoader workers' stacks at a low rate: one ``py-spy dump`` at a time, round-robin.

The trainer's own stacks come from ``py-spy record`` in chunks (sattui/trainer/stacks.py);
a worker needs far less: one look every few seconds says whether it waits for its next
index, waits on its data, or computes (sattui/trainer/worker_states.py). So each live
worker gets one ``py-spy dump --pid W --nonblocking --json`` about every ``period_s``,
oldest first, one at a time, and never more often than its cost allows: a dump's CPU
(py-spy's own, from ``wait4``) divided by ``cpu_budget`` is the least gap between two
dumps, so with many workers each one is looked at less often instead of the budget
growing. ``--nonblocking``: the worker is never paused (docs/sampling.md).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from sattui.frames import read_source_line
from sattui.model import Event, Frame, WorkerStack
from sattui.trainer.stacks import _py_spy_env, classify_failure, find_py_spy
from sattui.trainer.worker_states import classify_worker, kept_frames

log = logging.getLogger(__name__)

DEFAULT_PERIOD_S = 5.0
# Share of one core the dumps may use. A dump of a worker that imported torch cost
# 6-20 ms of CPU here (bench/signals_cost.py): 8 workers every 5 s is ~2 % of a core.
DEFAULT_CPU_BUDGET = 0.03
FIRST_COST_GUESS_S = 0.02
DUMP_TIMEOUT_S = 5.0
MAX_CONSECUTIVE_FAILURES = 10


def parse_dump(text: str, pid: int) -> tuple[tuple[Frame, ...], bool | None] | None:
    """(frames innermost first, active) of the main thread in ``py-spy dump --json``
    output; None if it is not such output or has no main thread."""
    try:
        threads = json.loads(text)
    except ValueError:
        return None
    if not isinstance(threads, list):
        return None
    main: dict[str, Any] | None = None
    for th in threads:
        if not isinstance(th, dict):
            continue
        if th.get("os_thread_id") == pid:
            main = th
            break
        if main is None and th.get("thread_name") == "MainThread":
            main = th  # py-spy could not map the OS thread id: the name still says it
    if main is None or not isinstance(main.get("frames"), list):
        return None
    frames = []
    for f in main["frames"]:
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            continue
        filename = f.get("filename")
        line = f.get("line")
        frames.append(Frame(f["name"], filename if isinstance(filename, str) else "",
                            line if isinstance(line, int) and not isinstance(line, bool) else None))
    active = main.get("active")
    return tuple(frames), active if isinstance(active, bool) else None


class WorkerStackSampler:
    """Dumps the workers given by :meth:`set_workers`, on its own thread.

    ``on_stack`` gets a :class:`WorkerStack` per dump read; ``on_event`` a
    ``worker_sampler_failing`` event when dumps keep failing (then it stops).
    """

    def __init__(self, clock: Callable[[], float], on_stack: Callable[[WorkerStack], None],
                 on_event: Callable[[Event], None], *, period_s: float = DEFAULT_PERIOD_S,
                 cpu_budget: float = DEFAULT_CPU_BUDGET, py_spy: str | None = None) -> None:
        self.clock = clock
        self.on_stack = on_stack
        self.on_event = on_event
        self.period_s = period_s
        self.cpu_budget = cpu_budget
        self.py_spy = py_spy or find_py_spy()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._workers: list[int] = []
        self._last: dict[int, float] = {}  # pid -> monotonic time of its last dump
        self._last_end = 0.0
        self.cost_s = FIRST_COST_GUESS_S  # CPU of one dump, smoothed
        self.dumps = 0
        self.failures = 0
        self.cpu_s = 0.0  # py-spy CPU over all dumps (bench/signals_cost.py)
        self._failing = 0

    # -- public

    def set_workers(self, pids: Iterable[int]) -> None:
        with self._lock:
            self._workers = sorted(set(pids))
            for pid in [p for p in self._last if p not in self._workers]:
                del self._last[pid]  # an exited worker (its pid may come back as a new one)

    def start(self) -> bool:
        if self._thread is not None:
            return True
        if not self.py_spy or not os.access(self.py_spy, os.X_OK):
            return False  # the trainer's sampler says py-spy is missing
        self._thread = threading.Thread(target=self._main, name="sattui-worker-stacks", daemon=True)
        self._thread.start()
        return True

    def stop(self, timeout: float = DUMP_TIMEOUT_S + 1) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- loop

    def _main(self) -> None:
        try:
            while not self._stop.is_set():
                pid, due = self._next(time.monotonic())
                wait = due - time.monotonic()
                if pid is None or wait > 0:
                    self._stop.wait(min(max(wait, 0.0), 0.5))  # re-check: workers come and go
                    continue
                if not self._dump(pid):
                    return
        except Exception:  # a bug here must not take the monitor down
            log.exception("worker stack sampler crashed")

    def _next(self, now: float) -> tuple[int | None, float]:
        """The worker looked at longest ago (never first), and when it is due."""
        with self._lock:
            workers = list(self._workers)
            last = dict(self._last)
        if not workers:
            return None, now + 0.5
        pid = min(workers, key=lambda p: last.get(p, float("-inf")))
        due = last.get(pid, float("-inf")) + self.period_s
        return pid, max(due, self._last_end + self.cost_s / self.cpu_budget)

    def _dump(self, pid: int) -> bool:
        """One dump of ``pid``; False when sampling should end."""
        t0 = self.clock()
        got = self._run(pid)
        t1 = self.clock()
        now = time.monotonic()
        with self._lock:
            if pid in self._workers:
                self._last[pid] = now
        self._last_end = now
        if got is None:
            return False
        rc, out, err, cpu = got
        self.dumps += 1
        if cpu is not None:
            self.cpu_s += cpu
            self.cost_s = 0.7 * self.cost_s + 0.3 * cpu
        parsed = parse_dump(out, pid) if rc == 0 else None
        if parsed is not None:
            self._failing = 0
            frames, active = parsed
            state = classify_worker(frames, active, read_source_line)
            self.on_stack(WorkerStack(t=(t0 + t1) / 2, pid=pid, state=state.value, frames=kept_frames(frames),
                                      active=active))
            return True
        self.failures += 1
        if rc != 0 and classify_failure(err) == "gone":
            return True  # the worker exited meanwhile: nothing wrong
        self._failing += 1
        if self._failing >= MAX_CONSECUTIVE_FAILURES:
            why = " ".join(err.split())[:200] if rc != 0 else "unreadable output"
            self.on_event(Event(self.clock(), "worker_sampler_failing",
                                f"worker stacks: py-spy dump failed {self._failing} times in a row; "
                                f"worker states are not sampled ({why})",
                                {"pid": pid, "failures": self._failing}))
            return False
        return True

    def _run(self, pid: int) -> tuple[int, str, str, float | None] | None:
        """(exit code, stdout, stderr, py-spy's CPU seconds) of one dump; None if py-spy
        cannot run at all."""
        cmd = [self.py_spy or "py-spy", "dump", "--pid", str(pid), "--nonblocking", "--json"]
        # Unnamed temporary files (created exclusively, unlinked at once): no link to
        # follow, nothing left behind, and no pipe that a large dump could fill.
        with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
            try:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, env=_py_spy_env(),
                                        start_new_session=True, close_fds=True)
            except OSError as exc:
                log.warning("cannot run py-spy (%s): %s", self.py_spy, exc)
                return None
            status, ru = self._wait(proc)
            fo.seek(0)
            fe.seek(0)
            out = fo.read().decode("utf-8", "replace")
            err = fe.read().decode("utf-8", "replace")
        cpu = ru.ru_utime + ru.ru_stime if ru is not None else None
        return status, out, err, cpu

    def _wait(self, proc: subprocess.Popen[bytes]) -> tuple[int, Any]:
        """Reap ``proc`` with ``wait4`` (its own rusage: the dump's CPU, whatever else this
        process runs), killing it past ``DUMP_TIMEOUT_S``."""
        end = time.monotonic() + DUMP_TIMEOUT_S
        delay = 0.002
        killed = False
        while True:
            try:
                wpid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            except ChildProcessError:
                return -1, None
            if wpid:
                proc.returncode = os.waitstatus_to_exitcode(status)  # reaped: Popen must not wait again
                return proc.returncode, ru
            if not killed and (time.monotonic() >= end or self._stop.is_set()):
                proc.kill()
                killed = True
            time.sleep(delay)
            delay = min(0.02, delay * 2)


def dump_main_stack(pid: int, py_spy: str | None = None,
                    timeout_s: float = DUMP_TIMEOUT_S) -> tuple[Frame, ...] | None:
    """The main thread's frames (innermost first) of one ``py-spy dump --nonblocking``;
    None when py-spy is missing, fails, or the process is gone. For a one-off look (the
    process tree asks what a spawned child runs: sattui/trainer/procs.py)."""
    exe = py_spy or find_py_spy()
    if exe is None:
        return None
    cmd = [exe, "dump", "--pid", str(pid), "--nonblocking", "--json"]
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, env=_py_spy_env(),
                              timeout=timeout_s, close_fds=True)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    parsed = parse_dump(proc.stdout.decode("utf-8", "replace"), pid)
    return parsed[0] if parsed is not None else None
