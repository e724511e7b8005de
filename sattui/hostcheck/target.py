"""The trainer a ``doctor --pid`` looks at: its process tree and DataLoader workers."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import psutil

from sattui.hostcheck.check import read_text
from sattui.textsafe import clean, clean_argv
from sattui.trainer.procs import WORKER_COMM

# Without persistent workers the DataLoader replaces its workers every epoch; a few
# looks a moment apart keep one unlucky instant from reading "no workers".
LOOKS = 3
LOOK_GAP_S = 0.1


@dataclass
class Target:
    pid: int
    comm: str
    cmdline: list[str]
    procs: list[int] = field(default_factory=list)  # the pid and its descendants
    workers: list[int] = field(default_factory=list)  # DataLoader workers among them
    trainers: list[int] = field(default_factory=list)  # the processes those workers serve

    @property
    def root(self) -> str:
        """The trainer's file system as it sees it (its mount namespace, e.g. its container's /dev/shm)."""
        return f"/proc/{self.pid}/root"

    @property
    def label(self) -> str:
        return f"pid {self.pid} ({clean_argv(self.cmdline, 48) if self.cmdline else clean(self.comm, 48)})"

    @classmethod
    def of(cls, pid: int) -> Target | None:
        """The live process ``pid`` in sattui's PID namespace, or None when there is none."""
        try:
            p = psutil.Process(pid)
            if p.status() == psutil.STATUS_ZOMBIE:
                return None
        except psutil.Error:
            return None
        comm = (read_text(f"/proc/{pid}/comm") or "?").strip()
        raw = read_text(f"/proc/{pid}/cmdline") or ""
        t = cls(pid=pid, comm=comm, cmdline=[a for a in raw.split("\0") if a])
        for i in range(LOOKS):
            if i:
                time.sleep(LOOK_GAP_S)
            t._walk(p)
        return t

    def _walk(self, p: psutil.Process) -> None:
        try:
            kids = p.children(recursive=True)
        except psutil.Error:
            kids = []
        procs, workers, trainers = [self.pid], [], set()
        for k in kids:
            procs.append(k.pid)
            if (read_text(f"/proc/{k.pid}/comm") or "").strip() == WORKER_COMM:
                workers.append(k.pid)
                try:
                    trainers.add(k.ppid())
                except psutil.Error:
                    pass
        self.procs = sorted(set(self.procs) | set(procs))
        if len(workers) >= len(self.workers):
            self.workers = workers
            self.trainers = sorted(trainers - set(workers)) or [self.pid]
