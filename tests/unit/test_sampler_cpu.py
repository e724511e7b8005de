"""The sampler counts all of a py-spy run's CPU, the part after SIGINT included.

py-spy does most of a chunk's output work after it is told to stop (the last sample,
writing a chrometrace of every thread): a 58-thread run read just before SIGINT looked
like 10 % of a core when it cost 13 %, so the CPU budget never lowered the rate. A real
child that works after SIGINT, as py-spy does, stands in for it here.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from sattui.trainer import stacks
from sattui.trainer.stacks import StackSampler

# Idle until SIGINT, then burn ~0.4 s of CPU and exit 0.
_WORKS_AFTER_SIGINT = r"""
import signal, sys, time
got = []
signal.signal(signal.SIGINT, lambda *a: got.append(1))
print("ready", flush=True)
while not got:
    time.sleep(0.01)
t = time.process_time()
while time.process_time() - t < 0.4:
    pass
"""


def test_a_runs_cpu_is_read_at_its_exit_not_at_its_interrupt(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _WORKS_AFTER_SIGINT], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        s = StackSampler(1, time.monotonic, lambda c: None, lambda e: None, rate_hz=10)
        run = stacks._Run(proc=proc, out=tmp_path / "o", stdout=tmp_path / "so", stderr=tmp_path / "se",
                          t_spawn=time.monotonic(), rate=10)
        s._read_cpu(run)  # what the sampler knew when it sent SIGINT
        before = run.cpu_s
        assert before is not None and before < 0.3
        proc.send_signal(signal.SIGINT)
        assert s._wait_exit(run, until=time.monotonic() + 20, ignore_stop=True)
        assert proc.returncode == 0  # reaped by the sampler's own poll
        assert run.cpu_s is not None and run.cpu_s >= before + 0.35, (before, run.cpu_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
