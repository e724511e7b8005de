"""The cgroup CPU limit of a process against the cores its DataLoader is told to use.

A container's ``--cpus`` (Kubernetes ``limits.cpu``) is a CFS quota: ``cpu.max`` in
cgroup v2, ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` in v1. ``os.cpu_count()`` and
the affinity mask ignore it, so ``num_workers`` sized from them oversubscribes the
quota, and every process of the trainer is throttled together when it runs out. The
limit that counts is the tightest along the cgroup's path up to the hierarchy's root.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from sattui.host import cpu_cgroup, tightest_quota
from sattui.hostcheck.check import Check, read_text
from sattui.hostcheck.mounts import mounts_of
from sattui.hostcheck.target import Target

FIX_LIMIT = "raise the limit (`docker run --cpus=N`; Kubernetes `resources.limits.cpu`)"


@dataclass
class CpuLimit:
    version: int | None  # 1 or 2; None when no cpu controller was found for the process
    cgroup: str | None  # its cgroup's directory, as sattui sees the hierarchy
    cpus: float | None  # quota / period; None: no limit
    set_by: str | None  # the file that sets that limit
    nr_periods: int | None = None
    nr_throttled: int | None = None


def tightest(version: int, leaf: str, top: str) -> tuple[float, str] | None:
    """The smallest quota from ``leaf`` up to ``top`` (the hierarchy's root): (CPUs, the
    file that sets it)."""
    best = tightest_quota(version, leaf, top)
    if best is None:
        return None
    return best[0], os.path.join(best[1], "cpu.max" if version == 2 else "cpu.cfs_quota_us")


def cpu_limit(pid: int | str = "self") -> CpuLimit:
    found = cpu_cgroup(pid, mounts_of(None))
    if found is None:
        return CpuLimit(None, None, None, None)
    version, leaf, top = found
    best = tightest(version, leaf, top)
    lim = CpuLimit(version, leaf, best[0] if best else None, best[1] if best else None)
    if best:
        stat = dict(line.split(None, 1) for line in (read_text(os.path.join(os.path.dirname(best[1]), "cpu.stat"))
                                                      or "").splitlines() if " " in line)
        try:
            lim.nr_periods, lim.nr_throttled = int(stat["nr_periods"]), int(stat["nr_throttled"])
        except (KeyError, ValueError):
            pass
    return lim


def _throttled(lim: CpuLimit) -> str:
    if lim.nr_periods:
        share = 100 * (lim.nr_throttled or 0) / lim.nr_periods
        return f"; throttled in {share:.0f} % of its {lim.nr_periods} periods so far"
    return ""


def check_cgroup_cpu(target: Target | None) -> Check:
    pid = target.pid if target else None
    lim = cpu_limit(pid if pid is not None else "self")
    try:
        affinity = len(os.sched_getaffinity(pid or 0))
    except OSError:
        affinity = os.cpu_count() or 1
    details = {"cgroup_version": lim.version, "cgroup": lim.cgroup, "limit_cpus": lim.cpus, "set_by": lim.set_by,
               "nr_periods": lim.nr_periods, "nr_throttled": lim.nr_throttled, "affinity_cpus": affinity}
    limit = f"a cgroup v{lim.version} CPU limit of {lim.cpus:g} CPUs ({lim.set_by})" if lim.cpus else None
    if target is None:
        n = os.cpu_count() or affinity
        details["cpu_count"] = n
        if lim.cpus is not None and lim.cpus < n:
            return Check("cgroup_cpu", "info", f"sattui's container has {limit}, though os.cpu_count() says {n}"
                         f"{_throttled(lim)}", f"size DataLoader num_workers by the limit (at most "
                         f"{max(0, math.floor(lim.cpus) - 1)} beside the main process), not by os.cpu_count()",
                         details)
        if lim.version is None:
            return Check("cgroup_cpu", "info", f"no cgroup CPU controller found for sattui; {affinity} CPUs in its "
                         "affinity", None, details)
        return Check("cgroup_cpu", "ok", f"no cgroup CPU limit (cgroup v{lim.version}); {affinity} CPUs in the "
                     "affinity", None, details)
    mains, workers = len(target.trainers), len(target.workers)
    want = mains + workers
    details.update(main_processes=mains, dataloader_workers=workers, cores_wanted=want)
    who = (f"its {mains} main process{'es' if mains > 1 else ''} and {workers} DataLoader worker(s) want "
           f"{want} core{'s' if want > 1 else ''}")
    if lim.cpus is not None and lim.cpus < want:
        room = max(0, math.floor(lim.cpus) - mains)
        return Check("cgroup_cpu", "warn", f"the trainer has {limit}; {who}{_throttled(lim)}",
                     f"num_workers={room} per process, or {FIX_LIMIT}", details)
    if affinity < want:
        return Check("cgroup_cpu", "warn", f"the trainer may use {affinity} CPUs (its CPU affinity); {who}",
                     f"num_workers={max(0, affinity - mains)} per process, or give it more CPUs (`docker run "
                     "--cpuset-cpus`, taskset)", details)
    have = limit or (f"no cgroup CPU limit (cgroup v{lim.version})" if lim.version else "no cgroup CPU controller")
    return Check("cgroup_cpu", "ok", f"the trainer has {have} and {affinity} CPUs in its affinity; {who}", None,
                 details)
