"""Facts about the machine sattui runs on that the sampler records and the advisor and
doctor compare against (headless, no third-party imports)."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """CPUs this process may use: the affinity mask, limited by a cgroup v2 ``cpu.max``
    quota (containers: ``os.cpu_count()`` overstates them, docs/rules.md, cpu_contention)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            n = max(1, min(n, int(int(quota) // int(period)) or 1))
    except (OSError, ValueError):
        pass
    return max(1, n)
