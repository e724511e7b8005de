"""``/proc/PID/mountinfo``: which file system a path of a process's view is on."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sattui.hostcheck.base import read_text


@dataclass(frozen=True)
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
    """Lines: ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if not sep or len(f) < 6 or len(r) < 2:
            continue
        out.append(Mount(mount_point=_unescape(f[4]), root=_unescape(f[3]), fstype=r[0], source=_unescape(r[1]),
                         options=f[5], super_options=r[2] if len(r) > 2 else ""))
    return out


def mounts_of(pid: int | None = None) -> list[Mount]:
    """The mounts ``pid`` sees (its mount namespace); sattui's own when ``pid`` is None."""
    return parse_mountinfo(read_text(f"/proc/{pid if pid is not None else 'self'}/mountinfo") or "")


def mount_at(mounts: list[Mount], path: str) -> Mount | None:
    """The mount on top at exactly ``path`` (a later mount on the same point hides earlier ones)."""
    found = None
    for m in mounts:
        if m.mount_point == path:
            found = m
    return found
