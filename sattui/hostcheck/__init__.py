"""What containers and hosts get wrong for a training job, each finding with its fix.

``sattui doctor`` runs these after its own checks (ptrace, py-spy, card backends);
``sattui doctor --pid PID`` runs them for that trainer: its PID namespace, whether
py-spy may read it, its ``/dev/shm``, its NVIDIA settings and device nodes, the CPU
frequency of its CPUs and its cgroup CPU limit against its DataLoader workers.
Headless: nothing here imports Textual.
"""

from __future__ import annotations

from sattui.hostcheck.access import check_stacks
from sattui.hostcheck.cgroup import check_cgroup_cpu
from sattui.hostcheck.check import Check
from sattui.hostcheck.cpufreq import check_cpufreq
from sattui.hostcheck.nvidia import check_nvidia
from sattui.hostcheck.pidns import check_pid_namespace
from sattui.hostcheck.shm import check_shm
from sattui.hostcheck.target import Target

__all__ = ["Check", "Target", "run_checks"]


def run_checks(pid: int | None = None) -> list[Check]:
    """Every check, for the trainer ``pid`` (when given and visible) or for this process."""
    target = Target.of(pid) if pid is not None else None
    checks = [check_pid_namespace(pid, target)]
    if target is not None:
        checks.append(check_stacks(target))
    checks += [check_shm(target), check_nvidia(target), check_cpufreq(target), check_cgroup_cpu(target)]
    return checks
