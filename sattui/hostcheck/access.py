"""May py-spy read this trainer's stacks? Asked of py-spy itself (a nonblocking dump:
the trainer is never paused), and when it is refused, why."""

from __future__ import annotations

import os
import re
import subprocess

from sattui.hostcheck.check import Check
from sattui.hostcheck.ptrace import has_cap_sys_ptrace, ptrace_scope, security_modules, uid_of
from sattui.hostcheck.target import Target
from sattui.sampler_status import PTRACE_FIX
from sattui.textsafe import clean
from sattui.trainer.procs import python_by_name
from sattui.trainer.stacks import _py_spy_env, classify_failure, find_py_spy

PROBE_TIMEOUT_S = 20.0
FIX_NOT_PYTHON = ("give the pid of the Python process that trains (`pgrep -af python`); under a launcher "
                  "(a shell script, torchrun) that is one of its children")


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Stack backtrace", "For more information")):
            return clean(line, 120)
    return "no message"


def why_denied(pid: int) -> tuple[str, str]:
    """(why the kernel refuses sattui ptrace access to ``pid``, the fix)."""
    scope = ptrace_scope()
    if scope == 3:
        return ("kernel.yama.ptrace_scope=3 forbids every attach until the next boot",
                "boot with kernel.yama.ptrace_scope below 3")
    if not has_cap_sys_ptrace():
        me, them = os.geteuid(), uid_of(pid)
        if them is not None and them != me:
            return (f"sattui runs as uid {me}, the trainer as uid {them}, and sattui lacks CAP_SYS_PTRACE",
                    PTRACE_FIX)
        if scope == 1:
            return ("kernel.yama.ptrace_scope=1 lets only a process's ancestors trace it",
                    "start the trainer under sattui (`sattui -- python train.py`), or "
                    "`sudo sysctl kernel.yama.ptrace_scope=0`, or run sattui as root")
        if scope == 2:
            return "kernel.yama.ptrace_scope=2 lets only CAP_SYS_PTRACE trace", PTRACE_FIX
        return "sattui lacks CAP_SYS_PTRACE", PTRACE_FIX
    lsms = security_modules()
    active = f" (active here: {', '.join(lsms)})" if lsms else ""
    return (f"a Linux security module{active} or a user namespace above sattui's guards it, although sattui "
            "has CAP_SYS_PTRACE",
            "run sattui inside the trainer's container (`docker exec`, the container started with "
            "`--cap-add SYS_PTRACE`), or allow ptrace in its security profile (AppArmor, SELinux, seccomp)")


def check_stacks(target: Target) -> Check:
    pid = target.pid
    py_spy = find_py_spy()
    if py_spy is None:
        return Check("stacks", "info", "py-spy is not installed: no stacks for any trainer", "`pip install py-spy`")
    try:
        r = subprocess.run([py_spy, "dump", "--pid", str(pid), "--nonblocking"], capture_output=True, text=True,
                           errors="replace", timeout=PROBE_TIMEOUT_S, env=_py_spy_env(), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return Check("stacks", "warn", f"py-spy did not answer for {target.label} within {PROBE_TIMEOUT_S:.0f} s",
                     "retry on a less loaded machine")
    except OSError as e:
        return Check("stacks", "fail", f"cannot run {py_spy}: {e.strerror or e}", "`pip install py-spy`")
    details = {"py_spy": py_spy, "exit_code": r.returncode}
    if r.returncode == 0:
        m = re.search(r"Python v(\d+\.\d+(?:\.\d+)?)", r.stdout)
        details["python"] = m.group(1) if m else None
        ver = f": Python {m.group(1)}" if m else ""
        return Check("stacks", "ok", f"py-spy reads {target.label}{ver}", None, details)
    kind = classify_failure(r.stderr)
    error = _first_line(r.stderr)
    details.update(kind=kind, error=error)
    if kind == "denied":
        why, fix = why_denied(pid)
        details["why"] = why
        if python_by_name(pid) is False:
            # py-spy is refused at /proc/PID/exe before it can look for Python.
            return Check("stacks", "fail", f"{target.label} is not a Python process (by its name and command "
                         f"line), and py-spy may not read it: {why}", FIX_NOT_PYTHON, details)
        return Check("stacks", "fail", f"no permission to read the stacks of {target.label}: {why}", fix, details)
    if kind == "not_python":
        return Check("stacks", "fail", f"{target.label} is not a Python process (py-spy: {error})",
                     FIX_NOT_PYTHON, details)
    if kind == "gone":
        return Check("stacks", "fail", f"{target.label} exited while py-spy looked", None, details)
    return Check("stacks", "warn", f"py-spy could not read {target.label}: {error}", None, details)
