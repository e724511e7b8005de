"""The ``host`` record: one per tick, what the trainer's machine did over the interval.

Read per tick: ``/proc/stat`` (host CPU busy and steal), the ``cpu.stat`` of the
trainer's cgroup (CFS throttling), the trainer's affinity (a syscall) and
``scaling_cur_freq`` of each CPU it may run on. Things that seldom change (which cgroup,
its quota, the governors, the maximum clocks) are re-read every ``REFRESH_S``, so a trainer
moved to another cgroup or a governor switched is seen within that time.

Why these: a DataLoader worker runnable but not running is either sharing its CPUs
with other work (run delay, per process, sattui/trainer/sched.py) or held back by its
container's CPU quota (throttled periods); a worker that computes on a core clocked at
half its maximum takes twice as long. The ledger tells those apart only if they are
recorded at the same moments as the stacks (docs/format.md, ``host``).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable

from sattui import host
from sattui.model import HostSample

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
REFRESH_S = 30.0
# At most this many CPUs' clocks are read per tick (evenly spread over the trainer's
# CPUs): each is one sysfs read, and a 192-core host needs no 192 reads a second for a mean.
MAX_FREQ_CPUS = 64


def _spread(cpus: list[int], n: int) -> list[int]:
    if len(cpus) <= n:
        return cpus
    step = len(cpus) / n
    return [cpus[int(i * step)] for i in range(n)]


class HostSampler:
    """Deltas of the host's counters between calls of :meth:`sample`, for trainer ``pid``."""

    def __init__(self, pid: int, clock: Callable[[], float], *, proc_stat: str = host.PROC_STAT,
                 sys_cpu: str = host.SYS_CPU, refresh_s: float = REFRESH_S,
                 meminfo: str = host.PROC_MEMINFO) -> None:
        self.pid = pid
        self._meminfo = meminfo
        self._clock = clock
        self._proc_stat = proc_stat
        self._sys_cpu = sys_cpu
        self._refresh_s = refresh_s
        self._next_refresh = 0.0
        self._mono: float | None = None
        self._stat: host.CpuTimes | None = None
        self._throttle: host.Throttling | None = None
        self._cg_version: int | None = None
        self._cg_dir: str | None = None  # whose cpu.stat: the tightest quota's, else the trainer's own
        self._cg_limit: float | None = None
        self._max_khz: dict[int, int | None] = {}
        self._governor: dict[int, str | None] = {}
        self._cpufreq = False

    def _refresh(self, cpus: list[int]) -> None:
        found = host.cpu_cgroup(self.pid, host.mounts())
        if found is None:
            self._cg_version = self._cg_dir = self._cg_limit = None
        else:
            version, leaf, top = found
            best = host.tightest_quota(version, leaf, top)
            cg_dir = best[1] if best else leaf
            if cg_dir != self._cg_dir:
                self._throttle = None  # other counters: no delta across the switch
            self._cg_version, self._cg_dir, self._cg_limit = version, cg_dir, best[0] if best else None
        self._max_khz = {c: host.cpufreq_khz(c, "cpuinfo_max_freq", self._sys_cpu) for c in cpus}
        self._governor = {c: host.cpufreq_governor(c, self._sys_cpu) for c in cpus}
        self._cpufreq = any(v is not None for v in self._max_khz.values()) or any(
            v is not None for v in self._governor.values())

    def _cpus(self) -> list[int]:
        try:
            return sorted(os.sched_getaffinity(self.pid))
        except OSError:  # the trainer is gone: the host's CPUs
            return list(range(os.cpu_count() or 1))

    def sample(self) -> HostSample:
        t = self._clock()
        mono = time.monotonic()
        cpus = _spread(self._cpus(), MAX_FREQ_CPUS)
        if mono >= self._next_refresh or any(c not in self._max_khz for c in cpus):
            self._refresh(cpus)
            self._next_refresh = mono + self._refresh_s
        dt = mono - self._mono if self._mono is not None and mono > self._mono else None
        out = HostSample(t=t, cg_version=self._cg_version, cg_cpu_limit=self._cg_limit)

        stat = host.read_proc_stat(self._proc_stat)
        if stat is not None:
            out.cpus = stat.cpus
            if self._stat is not None and dt:
                out.cpu_busy = max(0, stat.busy - self._stat.busy) / _CLK_TCK / dt
                out.cpu_steal = max(0, stat.steal - self._stat.steal) / _CLK_TCK / dt
        self._stat = stat

        thr = host.read_cpu_stat(self._cg_dir) if self._cg_dir is not None else None
        prev = self._throttle
        if thr is not None and prev is not None and dt and thr.periods >= prev.periods:
            out.cg_periods = thr.periods - prev.periods
            out.cg_throttled_periods = max(0, thr.throttled_periods - prev.throttled_periods)
            out.cg_throttled_s = max(0, thr.throttled_ns - prev.throttled_ns) / 1e9
        self._throttle = thr

        if self._cpufreq:
            cur = [k for k in (host.cpufreq_khz(c, "scaling_cur_freq", self._sys_cpu) for c in cpus)
                   if k is not None]
            top = [k for k in (self._max_khz.get(c) for c in cpus) if k is not None]
            out.freq_mhz = sum(cur) / len(cur) / 1000 if cur else None
            out.freq_max_mhz = sum(top) / len(top) / 1000 if top else None
            govs = Counter(g for g in (self._governor.get(c) for c in cpus) if g is not None)
            out.governor = ",".join(sorted(govs)) if govs else None
        mem = host.read_meminfo(self._meminfo)
        if mem is not None:
            out.mem_total, out.mem_available = mem.total, mem.available
        self._mono = mono
        return out
