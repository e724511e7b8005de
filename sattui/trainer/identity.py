"""Which scheduler job and which Kubernetes pod a trainer belongs to, read from outside.

Two sources, both the trainer's own, never a guess:

* its start-up environment through the allow-list (sattui/trainer/env.py): Slurm's
  ``SLURM_JOB_ID`` / ``SLURM_JOB_NAME`` / ``SLURM_PROCID``, torchrun's
  ``TORCHELASTIC_RUN_ID``, and the pod's name and namespace where the pod spec hands
  them down (the downward API: ``POD_NAME`` / ``POD_NAMESPACE``, or ``MY_POD_NAME`` /
  ``MY_POD_NAMESPACE`` as the Kubernetes docs' example names them);
* ``/proc/PID/cgroup``: the pod's UID is in the path the kubelet gives the pod's cgroup
  (``/kubepods/burstable/pod<uid>/…`` with the cgroupfs driver,
  ``…/kubepods-burstable-pod<uid_with_underscores>.slice/…`` with systemd), and a Slurm
  job's id in the path slurmd gives its steps (``/slurm/uid_N/job_N/step_N`` on cgroup
  v1, ``/system.slice/slurmstepd.scope/job_N/step_N/…`` on v2).

In a pod without a downward-API name, the pod's name is the container's ``HOSTNAME``
(the kubelet sets it to the pod's name unless the spec sets a hostname), taken only when
the process is known to be in a pod. Inside a container with its own cgroup namespace the
path reads ``0::/`` and says nothing: the UID is then unknown (None), not made up.
"""

from __future__ import annotations

import re

from sattui.job import LABELS, JobIdentity
from sattui.trainer.env import read_allowed_env

__all__ = ["LABELS", "JobIdentity", "identity_of", "read_identity"]

# A pod UID as Kubernetes writes it (8-4-4-4-12 hex), with dashes (cgroupfs) or
# underscores (systemd, whose unit names reserve the dash); a static pod's UID is the
# 32-hex hash of its manifest, without either.
_UID = r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32}"
_POD_CGROUPFS = re.compile(r"/pod(" + _UID + r")(?:/|$)")
_POD_SYSTEMD = re.compile(r"-pod(" + _UID + r")\.slice(?:/|:|$)")
# slurmd's cgroup plugin: ".../slurm/uid_N/job_N/..." (v1) or ".../slurmstepd.scope/job_N/..."
# (v2; "<node>_slurmstepd.scope" where one machine runs several slurmd).
_SLURM_JOB = re.compile(r"slurm[^/]*(?:/uid_\d+)?/job_(\d+)(?:/|$)")

POD_NAME_VARS = ("POD_NAME", "MY_POD_NAME")
POD_NAMESPACE_VARS = ("POD_NAMESPACE", "MY_POD_NAMESPACE")
def cgroup_paths(text: str) -> list[str]:
    """The paths of a ``/proc/PID/cgroup`` file (``ID:CONTROLLERS:PATH`` lines, v1 and v2)."""
    out = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[2].startswith("/"):
            out.append(parts[2])
    return out


def pod_uid_from_cgroup(text: str) -> str | None:
    """The pod UID in a ``/proc/PID/cgroup`` file, dashed as the API writes it; None if
    no path is a kubepods one."""
    for path in cgroup_paths(text):
        if "kubepods" not in path:
            continue
        m = _POD_SYSTEMD.search(path) or _POD_CGROUPFS.search(path)
        if m:
            return m.group(1).replace("_", "-")
    return None


def slurm_job_from_cgroup(text: str) -> str | None:
    """The Slurm job id in a ``/proc/PID/cgroup`` file; None outside a job's cgroup."""
    for path in cgroup_paths(text):
        m = _SLURM_JOB.search(path)
        if m:
            return m.group(1)
    return None


def _first(env: dict[str, str], names: tuple[str, ...]) -> str | None:
    for n in names:
        v = env.get(n, "").strip()
        if v:
            return v
    return None


def identity_of(env: dict[str, str], cgroup_text: str, *, in_kubernetes: bool = False) -> JobIdentity:
    """The identity from an allow-listed environment and a cgroup file's text.
    ``in_kubernetes``: the process's environment has the variables the kubelet puts in
    every pod (``KUBERNETES_SERVICE_HOST``), for a container whose cgroup path hides it."""
    uid = pod_uid_from_cgroup(cgroup_text)
    namespace = _first(env, POD_NAMESPACE_VARS)
    pod = _first(env, POD_NAME_VARS)
    if pod is None and (uid is not None or namespace is not None or in_kubernetes):
        pod = env.get("HOSTNAME", "").strip() or None
    return JobIdentity(
        slurm_job_id=_first(env, ("SLURM_JOB_ID", "SLURM_JOBID")) or slurm_job_from_cgroup(cgroup_text),
        slurm_job_name=_first(env, ("SLURM_JOB_NAME",)),
        slurm_procid=_first(env, ("SLURM_PROCID",)),
        pod=pod, pod_uid=uid, namespace=namespace,
        run_id=_first(env, ("TORCHELASTIC_RUN_ID",)))


def _has_variable(pid: int, name: str) -> bool:
    """Whether ``name`` is set in ``pid``'s start-up environment; its value is never read
    into a string (it is not on the allow-list)."""
    try:
        with open(f"/proc/{int(pid)}/environ", "rb") as f:
            raw = f.read()
    except (OSError, ValueError):
        return False
    key = name.encode() + b"="
    return raw.startswith(key) or b"\0" + key in raw


def read_identity(pid: int, env: dict[str, str] | None = None) -> JobIdentity:
    """The identity of a running process (``env``: its allow-listed environment when the
    caller has it already). Unreadable parts are unknown."""
    if env is None:
        env = read_allowed_env(pid) or {}
    try:
        with open(f"/proc/{int(pid)}/cgroup", encoding="utf-8", errors="replace") as f:
            text = f.read(65536)
    except (OSError, ValueError):
        text = ""
    return identity_of(env, text, in_kubernetes=_has_variable(pid, "KUBERNETES_SERVICE_HOST"))
