"""One thread's CPU time and run-queue wait, from ``/proc`` (raw readers, no state).

Why a thread and not the process: ``/proc/PID/stat`` sums every thread, so a trainer
whose main thread waits in DDP's all-reduce inside ``backward()`` while its intra-op
threads compute looks busy. ``/proc/PID/task/TID/stat`` is that thread alone, and
``/proc/PID/task/TID/schedstat`` (``/proc/PID/schedstat`` is the main thread's) says how
long it was runnable but waiting for a CPU: the mark of a CPU shared with other work.

``schedstat`` needs the kernel's ``CONFIG_SCHED_INFO`` (on in the distributions' kernels
and here); where it is missing the reader says None, never 0.
"""

from __future__ import annotations


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def parse_thread_ticks(raw: bytes) -> int | None:
    """utime + stime (clock ticks) of one ``stat`` line; None if it is not one."""
    # comm may hold spaces and ')' itself: fields start after the LAST ')'.
    rp = raw.rfind(b")")
    if rp < 0:
        return None
    rest = raw[rp + 2:].split()
    try:
        return int(rest[11]) + int(rest[12])
    except (IndexError, ValueError):
        return None


def thread_ticks(pid: int, tid: int) -> int | None:
    """CPU clock ticks (user + system) thread ``tid`` of ``pid`` has used; None if gone."""
    raw = _read(f"/proc/{pid}/task/{tid}/stat")
    return None if raw is None else parse_thread_ticks(raw)


def parse_schedstat(raw: bytes) -> tuple[int, int] | None:
    """(on-CPU ns, run-queue wait ns) of a ``schedstat`` line: ``RUN WAIT SLICES``."""
    parts = raw.split()
    if len(parts) < 2:
        return None
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        return None


def run_queue_ns(pid: int, tid: int | None = None) -> int | None:
    """Nanoseconds thread ``tid`` (default: the main thread) has spent runnable but not
    running, since it started; None when gone or the kernel keeps no schedstat."""
    path = f"/proc/{pid}/schedstat" if tid is None or tid == pid else f"/proc/{pid}/task/{tid}/schedstat"
    raw = _read(path)
    if raw is None:
        return None
    got = parse_schedstat(raw)
    return None if got is None else got[1]
