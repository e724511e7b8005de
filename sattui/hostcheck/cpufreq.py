"""CPU frequency: the governor and the clock now against the maximum (cpufreq sysfs).

DataLoader workers decode and augment on the CPU; a governor that keeps cores slow
(``powersave``, or a slow ramp in ``ondemand``/``conservative``) starves the accelerator
as surely as too few workers do. Many VMs expose no cpufreq at all: the hypervisor
decides, and the guest cannot see it.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from sattui.hostcheck.check import Check, read_text
from sattui.hostcheck.target import Target

SYS_CPU = "/sys/devices/system/cpu"
FIX_GOVERNOR = "`sudo cpupower frequency-set -g performance` (or write `performance` to each scaling_governor)"


@dataclass
class Policy:
    cpus: list[int]
    governor: str | None
    cur_khz: int | None
    max_khz: int | None


@dataclass
class CpuFreq:
    policies: list[Policy] = field(default_factory=list)


def _int(text: str | None) -> int | None:
    try:
        return int((text or "").strip())
    except ValueError:
        return None


def _cpus(text: str | None) -> list[int]:
    return [int(x) for x in (text or "").split() if x.isdigit()]


def read_cpufreq(sys_cpu: str = SYS_CPU) -> CpuFreq | None:
    """Every cpufreq policy, or None when the kernel exposes none."""
    base = os.path.join(sys_cpu, "cpufreq")
    try:
        names = sorted(n for n in os.listdir(base) if n.startswith("policy"))
    except OSError:
        names = []
    out = CpuFreq()
    for name in names:
        d = os.path.join(base, name)
        cpus = _cpus(read_text(os.path.join(d, "affected_cpus")))
        if not cpus and name[6:].isdigit():
            cpus = [int(name[6:])]
        out.policies.append(Policy(
            cpus=cpus,
            governor=(read_text(os.path.join(d, "scaling_governor")) or "").strip() or None,
            cur_khz=_int(read_text(os.path.join(d, "scaling_cur_freq"))),
            max_khz=_int(read_text(os.path.join(d, "cpuinfo_max_freq")))))
    return out if out.policies else None


def check_cpufreq(target: Target | None, sys_cpu: str = SYS_CPU) -> Check:
    freq = read_cpufreq(sys_cpu)
    if freq is None:
        return Check("cpu_frequency", "info", f"CPU frequency: not exposed (no cpufreq in {sys_cpu}; usual in a VM, "
                     "where the hypervisor sets it)", None, {"cpufreq": False})
    allowed: set[int] | None = None
    if target is not None:
        try:
            allowed = set(os.sched_getaffinity(target.pid))
        except OSError:
            allowed = None
    pols = [p for p in freq.policies if allowed is None or set(p.cpus) & allowed] or freq.policies
    govs = Counter(p.governor or "?" for p in pols for _ in p.cpus)
    cur = [p.cur_khz for p in pols if p.cur_khz]
    top = [p.max_khz for p in pols if p.max_khz]
    cur_mean = sum(cur) / len(cur) if cur else None
    top_mean = sum(top) / len(top) if top else None
    details = {"cpufreq": True, "governors": dict(govs), "cur_khz_mean": cur_mean, "max_khz_mean": top_mean}
    whose = "the trainer's CPUs" if target is not None else "CPUs"
    gov_words = ", ".join(f"{g} on {n}" for g, n in govs.most_common())
    clock = ""
    if cur_mean and top_mean:
        c, m = cur_mean / 1e6, top_mean / 1e6
        clock = f"; now {c:.2f} GHz of {m:.2f} GHz max ({100 * c / m:.0f} %)"
    what = f"CPU frequency of {whose}: governor {gov_words}{clock}"
    if set(govs) - {"performance"}:
        return Check("cpu_frequency", "warn", f"{what}: cores may run below their top clock while workers need "
                     "them", FIX_GOVERNOR, details)
    return Check("cpu_frequency", "ok", what, None, details)
