"""A real PyTorch CPU trainer whose every name tries to take over the terminal that shows it.

Run as ``python tests/e2e/hostile_trainer.py ARG...`` with hostile arguments (the test
passes escape sequences and newlines). It then gives itself:

* a process name (``prctl(PR_SET_NAME)``, 15 bytes at most) holding an OSC title
  sequence and a newline: ``/proc/PID/stat`` shows it raw;
* a Python thread named with escape sequences and a newline (py-spy reports the name);
* a training step whose function and file names (``co_name``, ``co_qualname``,
  ``co_filename``) carry escape sequences and a newline (py-spy reports the frames).

It prints one hostile line on stdout (for the trainer log), writes ``$HOSTILE_READY``
once it trains, and trains until killed or ``$HOSTILE_SECONDS`` have passed.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time

PROC_NAME = b"\x1b]0;PWN\x07\nX"  # 12 bytes: fits the kernel's 15
THREAD_NAME = "\x1b]0;THREADPWN\x07\nthread"
FUNC_NAME = "\x1b]0;FUNCPWN\x07step\nfn"
FILE_NAME = "/tmp/\x1b[31mred\x1b[0m\nfile.py"
STDOUT_LINE = "\x1b]0;LOGPWN\x07 trainer says hello"
PR_SET_NAME = 15


def set_process_name(name: bytes) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NAME)")


def main() -> int:
    import torch
    from torch import nn

    torch.set_num_threads(1)
    set_process_name(PROC_NAME)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))

    def step() -> None:
        for _ in range(20):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

    step.__code__ = step.__code__.replace(co_name=FUNC_NAME, co_qualname=FUNC_NAME, co_filename=FILE_NAME)
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait, name=THREAD_NAME, daemon=True)
    helper.start()
    print(STDOUT_LINE, flush=True)
    seconds = float(os.environ.get("HOSTILE_SECONDS", "120"))
    ready = os.environ.get("HOSTILE_READY")
    t_end = time.monotonic() + seconds
    first = True
    while time.monotonic() < t_end:
        step()
        if first and ready:
            with open(ready, "w") as f:
                f.write(str(os.getpid()))
            first = False
    stop.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())
