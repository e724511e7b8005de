"""A terminal of a given size for a bench's child (sattui's UI draws into it).

The child's output is read and thrown away on a daemon thread, so the child never
blocks on a full pty; what the benches measure is its own CPU, not the terminal's.
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import termios
import threading


def _drain(master: int) -> None:
    while True:
        try:
            if not os.read(master, 65536):
                break
        except OSError:
            break


def open_terminal(cols: int, rows: int) -> tuple[int, int]:
    """``(master, slave)`` of a new pty sized ``cols`` × ``rows``, its output drained.
    Give ``slave`` to the child and close it here once the child has it; close
    ``master`` when done (the drain thread ends then)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    threading.Thread(target=_drain, args=(master,), daemon=True).start()
    return master, slave
