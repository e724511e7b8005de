"""sattui's own ptrace rights: its capabilities and the Yama scope."""

from __future__ import annotations

from sattui.hostcheck.check import read_text

CAP_SYS_PTRACE = 19


def effective_caps(pid: int | str = "self") -> int | None:
    """The ``CapEff`` mask of ``/proc/PID/status``; None if unreadable."""
    for line in (read_text(f"/proc/{pid}/status") or "").splitlines():
        if line.startswith("CapEff:"):
            try:
                return int(line.split()[1], 16)
            except (IndexError, ValueError):
                return None
    return None


def has_cap_sys_ptrace() -> bool:
    caps = effective_caps()
    return caps is not None and bool(caps & (1 << CAP_SYS_PTRACE))


def ptrace_scope() -> int | None:
    """``kernel.yama.ptrace_scope``; None when Yama is not loaded (then only capabilities count)."""
    raw = (read_text("/proc/sys/kernel/yama/ptrace_scope") or "").strip()
    return int(raw) if raw.isdigit() else None


def security_modules() -> list[str] | None:
    """The active Linux security modules, where securityfs is mounted; None otherwise."""
    raw = read_text("/sys/kernel/security/lsm")
    return [m for m in raw.strip().split(",") if m] if raw else None


def uid_of(pid: int) -> int | None:
    """The real uid of ``pid`` (``/proc/PID/status`` is readable without ptrace rights)."""
    for line in (read_text(f"/proc/{pid}/status") or "").splitlines():
        if line.startswith("Uid:"):
            try:
                return int(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None
