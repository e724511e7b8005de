"""Memory only one process maps (USS), from ``/proc/PID/smaps_rollup`` (raw reader).

RSS cannot show the copy-on-read leak of forked DataLoader workers: a worker that only
reads the dataset's Python objects still writes their reference counts, so the pages it
shared with the trainer become its own copies one by one; RSS stays flat while the USS
(private pages) grows. ``smaps_rollup`` (Linux >= 4.14) sums ``smaps`` in one read, but
the kernel walks the process's page tables to produce it: its cost grows with the
mapped memory (docs/sampling.md, bench/signals_cost.py), so callers read it seldom.
"""

from __future__ import annotations

_PRIVATE = (b"Private_Clean:", b"Private_Dirty:")


def parse_uss(raw: bytes) -> int | None:
    """Private_Clean + Private_Dirty (bytes) of a ``smaps_rollup`` text; None if either is missing."""
    found: dict[bytes, int] = {}
    for line in raw.splitlines():
        for key in _PRIVATE:
            if line.startswith(key):
                parts = line[len(key):].split()
                try:
                    kib = int(parts[0])
                except (IndexError, ValueError):
                    return None
                found[key] = kib * 1024  # the kernel writes every smaps figure in kB
    if len(found) != len(_PRIVATE):
        return None
    return sum(found.values())


def uss_bytes(pid: int) -> int | None:
    """USS of ``pid`` in bytes; None when gone, unreadable (needs ptrace-read rights) or
    the kernel has no ``smaps_rollup``."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return parse_uss(raw)
