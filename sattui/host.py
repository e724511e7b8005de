"""Facts about the machine sattui runs on that the sampler records and the advisor and
doctor compare against (headless, no third-party imports).

Raw readers only (each one read of a ``/proc``, cgroup or sysfs file; None where the file
is missing or says nothing usable, never 0): the per-tick host record keeps its deltas in
sattui/host_sampler.py.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

PROC_STAT = "/proc/stat"
PROC_MEMINFO = "/proc/meminfo"
SYS_CPU = "/sys/devices/system/cpu"


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


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


# --------------------------------------------------------------------------- /proc/stat


@dataclass(frozen=True, slots=True)
class CpuTimes:
    """Host-wide CPU time since boot, in clock ticks (``/proc/stat`` line ``cpu``)."""

    busy: int  # user + nice + system + irq + softirq (guest time is inside user)
    idle: int  # idle + iowait
    steal: int  # a hypervisor ran something else while this guest wanted the CPU
    cpus: int  # the ``cpuN`` lines: CPUs online


def parse_proc_stat(text: str) -> CpuTimes | None:
    busy = idle = steal = None
    cpus = 0
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        head, *vals = line.split()
        if head != "cpu":
            cpus += 1
            continue
        try:
            v = [int(x) for x in vals[:8]]
        except ValueError:
            return None
        if len(v) < 8:
            return None
        user, nice, system, idl, iowait, irq, softirq, stl = v
        busy, idle, steal = user + nice + system + irq + softirq, idl + iowait, stl
    if busy is None or idle is None or steal is None:
        return None
    return CpuTimes(busy, idle, steal, cpus)


def read_proc_stat(path: str = PROC_STAT) -> CpuTimes | None:
    text = _read(path)
    return None if text is None else parse_proc_stat(text)


# --------------------------------------------------------------------------- /proc/meminfo


@dataclass(frozen=True, slots=True)
class HostMemory:
    """The host's memory in bytes (``/proc/meminfo``); None where a line is missing."""

    total: int | None  # MemTotal
    available: int | None  # MemAvailable: what new allocations can get without swapping


def parse_meminfo(text: str) -> HostMemory | None:
    got: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemAvailable"):
            parts = rest.split()
            if parts and parts[0].isdigit():
                got[key] = int(parts[0]) * (1024 if parts[1:2] == ["kB"] else 1)
    if not got:
        return None
    return HostMemory(got.get("MemTotal"), got.get("MemAvailable"))


def read_meminfo(path: str = PROC_MEMINFO) -> HostMemory | None:
    text = _read(path)
    return None if text is None else parse_meminfo(text)


# --------------------------------------------------------------------------- cgroups


@dataclass(frozen=True, slots=True)
class Mount:
    mount_point: str
    root: str  # the mounted directory inside its file system (a cgroup path, a bind source)
    fstype: str
    source: str
    options: str  # this mount's options (rw, nosuid …)
    super_options: str  # the file system's (size=65536k, a cgroup v1 controller list …)


def _unescape(text: str) -> str:
    # The kernel writes space, tab, newline and backslash in paths as octal escapes.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def parse_mountinfo(text: str) -> list[Mount]:
    """Lines ``ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL…] - FSTYPE SOURCE SUPER_OPTIONS``."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if not sep or len(f) < 6 or len(r) < 2:
            continue
        out.append(Mount(mount_point=_unescape(f[4]), root=_unescape(f[3]), fstype=r[0], source=_unescape(r[1]),
                         options=f[5], super_options=r[2] if len(r) > 2 else ""))
    return out


def mounts(pid: int | str = "self") -> list[Mount]:
    """The mounts ``pid`` sees (its mount namespace); sattui's own by default."""
    return parse_mountinfo(_read(f"/proc/{pid}/mountinfo") or "")


def parse_proc_cgroup(text: str) -> list[tuple[str, list[str], str]]:
    """``/proc/PID/cgroup`` lines ``ID:CONTROLLERS:PATH`` (v2: ``0::PATH``)."""
    out = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            out.append((parts[0], [c for c in parts[1].split(",") if c], parts[2]))
    return out


def under_mount(mount: Mount, path: str) -> str | None:
    """Where cgroup ``path`` is in the file tree through ``mount`` (None: not under it)."""
    root = mount.root.rstrip("/")
    if root and path != root and not path.startswith(root + "/"):
        return None  # the process's cgroup is outside what this mount shows
    rel = path[len(root):].lstrip("/")
    return os.path.join(mount.mount_point, rel) if rel else mount.mount_point


def cpu_cgroup(pid: int | str, mounts: list[Mount]) -> tuple[int, str, str] | None:
    """(version, the process's cgroup directory, the hierarchy's mount point) of its CPU
    controller: a v1 ``cpu`` hierarchy first (hybrid hosts mount v2 without it), else v2."""
    lines = parse_proc_cgroup(_read(f"/proc/{pid}/cgroup") or "")
    for _, controllers, path in lines:
        if "cpu" in controllers:
            for m in mounts:
                if m.fstype == "cgroup" and "cpu" in m.super_options.split(","):
                    d = under_mount(m, path)
                    if d is not None:
                        return 1, d, m.mount_point
    for hid, controllers, path in lines:
        if hid == "0" and not controllers:
            for m in mounts:
                if m.fstype == "cgroup2":
                    d = under_mount(m, path)
                    # without the cpu controller there is no cpu.max, nor throttling in cpu.stat
                    if d is not None and "cpu" in (_read(os.path.join(m.mount_point, "cgroup.controllers"))
                                                   or "").split():
                        return 2, d, m.mount_point
    return None


def read_cpu_quota(version: int, d: str) -> float | None:
    """The CPU quota set on cgroup directory ``d``, in cores; None: none set (or unreadable)."""
    if version == 2:
        parts = (_read(os.path.join(d, "cpu.max")) or "").split()
        if len(parts) == 2 and parts[0] != "max":
            try:
                return int(parts[0]) / int(parts[1])
            except (ValueError, ZeroDivisionError):
                return None
        return None
    try:
        quota = int((_read(os.path.join(d, "cpu.cfs_quota_us")) or "").strip())
        period = int((_read(os.path.join(d, "cpu.cfs_period_us")) or "").strip())
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def tightest_quota(version: int, leaf: str, top: str) -> tuple[float, str] | None:
    """The smallest quota from ``leaf`` up to ``top`` (the hierarchy's root): (cores, the
    directory that sets it). A container's limit may sit on a parent (a Kubernetes pod)."""
    best: tuple[float, str] | None = None
    d, top = os.path.normpath(leaf), os.path.normpath(top)
    while True:
        cores = read_cpu_quota(version, d)
        if cores is not None and (best is None or cores < best[0]):
            best = (cores, d)
        if d == top or len(d) <= len(top):
            return best
        d = os.path.dirname(d)


@dataclass(frozen=True, slots=True)
class Throttling:
    """A cgroup's CFS bandwidth counters since it was made (``cpu.stat``)."""

    periods: int  # enforcement periods with runnable tasks
    throttled_periods: int  # periods in which the quota ran out
    throttled_ns: int  # time its run queues spent throttled, summed over CPUs


def parse_cpu_stat(text: str) -> Throttling | None:
    """v1 ``throttled_time`` (ns) or v2 ``throttled_usec``; None without the counters (a v2
    cgroup whose ``cpu`` controller is not enabled lists only its usage)."""
    vals: dict[str, int] = {}
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        try:
            vals[k] = int(v)
        except ValueError:
            continue
    if "nr_periods" not in vals or "nr_throttled" not in vals:
        return None
    if "throttled_time" in vals:
        ns = vals["throttled_time"]
    elif "throttled_usec" in vals:
        ns = vals["throttled_usec"] * 1000
    else:
        return None
    return Throttling(vals["nr_periods"], vals["nr_throttled"], ns)


def read_cpu_stat(d: str) -> Throttling | None:
    text = _read(os.path.join(d, "cpu.stat"))
    return None if text is None else parse_cpu_stat(text)


# --------------------------------------------------------------------------- cpufreq


def cpufreq_khz(cpu: int, name: str, sys_cpu: str = SYS_CPU) -> int | None:
    """``cpuN/cpufreq/<name>`` in kHz (``scaling_cur_freq``, ``cpuinfo_max_freq``); None
    where the kernel exposes no cpufreq (many VMs: the hypervisor sets the clock)."""
    text = _read(f"{sys_cpu}/cpu{cpu}/cpufreq/{name}")
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def cpufreq_governor(cpu: int, sys_cpu: str = SYS_CPU) -> str | None:
    text = _read(f"{sys_cpu}/cpu{cpu}/cpufreq/scaling_governor")
    return (text.strip() or None) if text is not None else None
