"""``/dev/shm`` against what the DataLoader needs.

DataLoader workers hand every batch to the main process through shared memory: torch
creates a file in ``/dev/shm`` (``torch_<pid>_<random>_<n>``), unlinks it and passes the
descriptor, so the batches in flight (``num_workers × prefetch_factor`` of them) live
there as deleted, mapped files. When the tmpfs is full the next write faults and the
worker dies with "bus error" ("DataLoader worker ... is killed by signal: Bus error").
Docker gives a container a 64 MiB ``/dev/shm`` unless told otherwise.

With a trainer, its own view is read (``/proc/PID/root/dev/shm`` is its mount
namespace's) and the bytes its processes map or hold open there are summed, file by file.
"""

from __future__ import annotations

import os
import time

from sattui.hostcheck.check import MIB, Check, mib
from sattui.hostcheck.mounts import mount_at, mounts_of
from sattui.hostcheck.target import Target

SHM = "/dev/shm"
DOCKER_DEFAULT_BYTES = 64 * MIB
# The queue fills and drains; the fullest of a few looks a moment apart is the need.
LOOKS = 5
LOOK_GAP_S = 0.1
FULL_SHARE = 0.9
FIX = ("give the container a larger /dev/shm: `docker run --shm-size=8g` (or `--ipc=host`); Kubernetes: an "
       "`emptyDir` with `medium: Memory` mounted at /dev/shm; or fewer workers / a smaller prefetch_factor")


def shm_held(pids: list[int]) -> tuple[int, int]:
    """(files, bytes) of ``/dev/shm`` files that ``pids`` map or hold open, each file once.

    A batch is mapped while a process reads or writes it; between the two it may exist
    only as a descriptor (a worker keeps a duplicate until the main process fetches it).
    """
    sizes: dict[tuple[int, int], int] = {}

    def add(key: tuple[int, int], n: int) -> None:
        sizes[key] = max(sizes.get(key, 0), n)

    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps", "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError:
            text = ""
        for line in text.splitlines():
            parts = line.split(None, 5)
            if len(parts) < 6 or not parts[5].startswith(SHM + "/"):
                continue
            try:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                major, minor = (int(x, 16) for x in parts[3].split(":"))
                add((os.makedev(major, minor), int(parts[4])), hi - lo)
            except ValueError:
                continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            link = f"/proc/{pid}/fd/{fd}"
            try:
                if not os.readlink(link).startswith(SHM + "/"):
                    continue
                st = os.stat(link)
            except OSError:
                continue
            add((st.st_dev, st.st_ino), st.st_size)
    return len(sizes), sum(sizes.values())


def in_flight(target: Target) -> tuple[int, int]:
    """The most ``/dev/shm`` the trainer's tree held over a few looks: (files, bytes)."""
    best = (0, 0)
    for i in range(LOOKS):
        if i:
            time.sleep(LOOK_GAP_S)
        got = shm_held(target.procs)
        if got[1] > best[1]:
            best = got
    return best


def check_shm(target: Target | None) -> Check:
    path = target.root + SHM if target else SHM
    mount = mount_at(mounts_of(target.pid if target else None), SHM)
    details: dict = {"path": path, "fstype": mount.fstype if mount else None,
                     "mount_options": mount.super_options if mount else None}
    try:
        st = os.statvfs(path)
    except PermissionError as e:
        details["error"] = e.strerror
        return Check("shm", "info", f"cannot look at the trainer's {SHM} ({path}: {e.strerror})", None, details)
    except OSError as e:
        details["error"] = e.strerror
        return Check("shm", "fail", f"{SHM} is missing ({e.strerror}): DataLoader workers cannot pass batches",
                     "mount a tmpfs on /dev/shm (`mount -t tmpfs -o size=8g tmpfs /dev/shm`)", details)
    size, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    details.update(size_bytes=size, free_bytes=free)
    what = f"{SHM}: {mib(size)} {mount.fstype if mount else '(no mount of its own)'}, {mib(free)} free"
    workers = len(target.workers) if target else None
    need = None
    if target is not None:
        files, need = in_flight(target)
        details.update(workers=workers, in_flight_files=files, in_flight_bytes=need)
        if workers:
            what += f"; its {workers} DataLoader worker(s) hold {mib(need)} in {files} batch file(s)"
        else:
            what += "; no DataLoader workers (num_workers=0: batches never pass through it)"
    if need and free < need:
        return Check("shm", "fail", f"{what}: less free than already in flight, the next batches may not fit "
                     "(a worker then dies with 'bus error')", FIX, details)
    if size and (size - free) / size >= FULL_SHARE:
        return Check("shm", "warn", f"{what}: {100 * (size - free) / size:.0f} % full", FIX, details)
    if size <= DOCKER_DEFAULT_BYTES and workers != 0:
        return Check("shm", "warn", f"{what}: Docker's default size, too small for DataLoader workers with "
                     "image-sized batches (they die with 'bus error' when it fills)", FIX, details)
    return Check("shm", "ok", what, None, details)
