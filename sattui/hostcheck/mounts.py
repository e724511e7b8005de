"""``/proc/PID/mountinfo``: which file system a path of a process's view is on."""

from __future__ import annotations

from sattui import host
from sattui.host import Mount, parse_mountinfo

__all__ = ["Mount", "mount_at", "mounts_of", "parse_mountinfo"]


def mounts_of(pid: int | None = None) -> list[Mount]:
    """The mounts ``pid`` sees (its mount namespace); sattui's own when ``pid`` is None."""
    return host.mounts(pid if pid is not None else "self")


def mount_at(mounts: list[Mount], path: str) -> Mount | None:
    """The mount on top at exactly ``path`` (a later mount on the same point hides earlier ones)."""
    found = None
    for m in mounts:
        if m.mount_point == path:
            found = m
    return found
