"""Whose PID namespace: can sattui see the trainer at all, and by which number?

A process in a container has one pid per PID namespace it is nested in; the ``NSpid``
line of ``/proc/PID/status`` lists them, the one of the namespace ``/proc`` belongs to
first. From the host a containerised trainer is visible (under its host pid); from
another container it is not, whatever pid is given.
"""

from __future__ import annotations

import os
import re

from sattui.hostcheck.check import Check, read_text
from sattui.hostcheck.target import Target
from sattui.textsafe import clean, clean_argv
from sattui.trainer.procs import is_python, nspid_of

# The inode of the initial PID namespace is fixed (include/linux/proc_ns.h,
# PROC_PID_INIT_INO): any other number means sattui runs in a nested one, a container.
PROC_PID_INIT_INO = 0xEFFFFFFC

FIX_HOST_PID = ("run sattui where the trainer's processes are visible: on the host, inside the trainer's "
                "container (`docker exec`), or start sattui's container with `--pid=host` "
                "(Kubernetes: `hostPID: true`; or `--pid=container:TRAINER` to share the trainer container's)")
# How many namesakes (same pid inside another namespace) to name at most.
MAX_NAMESAKES = 3


def own_pid_ns() -> int | None:
    """The inode of sattui's PID namespace (``/proc/self/ns/pid``)."""
    try:
        m = re.fullmatch(r"pid:\[(\d+)\]", os.readlink("/proc/self/ns/pid"))
    except OSError:
        return None
    return int(m.group(1)) if m else None


def namesakes(pid: int) -> list[tuple[int, list[int], str]]:
    """Processes that are ``pid`` inside a nested PID namespace: (our pid, NSpid, name).

    Someone who took the pid from ``ps`` inside a container and gives it to a sattui
    outside names another process (or none); these are what they meant.
    """
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        ns = nspid_of(int(entry))
        if ns and len(ns) > 1 and ns[-1] == pid and ns[0] != pid:
            raw = read_text(f"/proc/{entry}/cmdline") or ""
            comm = (read_text(f"/proc/{entry}/comm") or "?").strip()
            cmd = [a for a in raw.split("\0") if a]
            out.append((int(entry), ns, clean_argv(cmd, 60) if cmd else clean(comm, 60), is_python(comm, cmd)))
    # Python ones first: a trainer is what was meant.
    out.sort(key=lambda x: (not x[3], x[0]))
    return [(p, ns, name) for p, ns, name, _ in out]


def _ns_words(ns: int | None) -> tuple[bool | None, str]:
    if ns is None:
        return None, "sattui's PID namespace is unknown (/proc/self/ns/pid unreadable)"
    if ns == PROC_PID_INIT_INO:
        return True, "sattui runs in the host's PID namespace"
    return False, f"sattui runs in a nested PID namespace (pid:[{ns}], a container)"


def check_pid_namespace(pid: int | None, target: Target | None) -> Check:
    own = own_pid_ns()
    host, where = _ns_words(own)
    details: dict = {"own_pid_ns": own, "host_pid_ns": host}
    if pid is None:
        if host is False:
            return Check("pid_namespace", "info", f"{where}: it sees this container's processes only",
                         "if the trainer runs elsewhere: " + FIX_HOST_PID, details)
        return Check("pid_namespace", "ok" if host else "info", f"{where}: every process here is visible",
                     None, details)
    details["pid"] = pid
    if target is None:
        details["visible"] = False
        others = namesakes(pid)
        details["namesakes"] = [{"pid": p, "nspid": ns} for p, ns, _ in others]
        if host is False:
            return Check("pid_namespace", "fail", f"no process {pid} in sattui's PID namespace; {where}, "
                         "so a trainer in another container or on the host is invisible to it", FIX_HOST_PID, details)
        hint = _namesake_hint(pid, others)
        return Check("pid_namespace", "fail", f"no process {pid} here" + (f"; {hint}" if hint else ""),
                     f"give the trainer's pid as seen here: `sattui --pid {others[0][0]}`" if others else
                     "find the trainer's pid with `pgrep -af python`", details)
    details["visible"] = True
    ns = nspid_of(pid)
    details["nspid"] = ns
    python = is_python(target.comm, target.cmdline)
    if not python:
        others = [o for o in namesakes(pid) if o[0] != pid]
        details["namesakes"] = [{"pid": p, "nspid": n} for p, n, _ in others]
        if others:
            return Check("pid_namespace", "warn", f"{target.label} is not a Python process; "
                         + _namesake_hint(pid, others),
                         f"if you took pid {pid} from inside a container, give its pid here: "
                         f"`sattui --pid {others[0][0]}`", details)
    if ns and len(ns) > 1:
        return Check("pid_namespace", "ok", f"{target.label} is pid {ns[-1]} inside its own PID namespace "
                     "(a container); sattui sees it from outside", None, details)
    return Check("pid_namespace", "ok", f"{target.label} is in sattui's PID namespace", None, details)


def _namesake_hint(pid: int, others: list[tuple[int, list[int], str]]) -> str:
    if not others:
        return ""
    named = ", ".join(f"{p} ({name})" for p, _, name in others[:MAX_NAMESAKES])
    more = f" and {len(others) - MAX_NAMESAKES} more" if len(others) > MAX_NAMESAKES else ""
    return f"pid {pid} inside a container is, here: {named}{more}"
