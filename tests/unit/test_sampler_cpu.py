"""The sampler counts all of a py-spy run's CPU, the part after SIGINT included.

py-spy does most of a chunk's output work after it is told to stop (the last sample,
writing a chrometrace of every thread): a 58-thread run read just before SIGINT looked
like 10 % of a core when it cost 13 %, so the CPU budget never lowered the rate. A real
child that works after SIGINT, as py-spy does, stands in for it here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
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


def _sleeper_run(tmp_path: Path, seconds: float) -> stacks._Run:
    proc = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
    run = stacks._Run(proc=proc, out=tmp_path / "o", stdout=tmp_path / "so", stderr=tmp_path / "se",
                      t_spawn=time.monotonic(), rate=10)
    run.pidfd = os.pidfd_open(proc.pid)
    return run


def _started_sampler() -> StackSampler:
    # The wake pipe as start() makes it, without a sampling thread.
    s = StackSampler(1, time.monotonic, lambda c: None, lambda e: None, rate_hz=10)
    s._wake = os.pipe()
    return s


def test_waiting_for_a_run_sleeps_until_it_exits(tmp_path: Path, monkeypatch) -> None:
    # A wait on py-spy's exit used to wake every 50 ms to look for a stop: a third of
    # sattui's own CPU on a small trainer (issue 25). Now it sleeps on the pidfd and the
    # wake pipe until one of them fires.
    s = _started_sampler()
    run = _sleeper_run(tmp_path, 1.0)
    polls = []
    real_poll = s._poll
    monkeypatch.setattr(s, "_poll", lambda r: polls.append(1) or real_poll(r))
    try:
        t0 = time.monotonic()
        assert s._wait_exit(run, until=t0 + 10)
        assert time.monotonic() - t0 < 5
        assert len(polls) <= 3, len(polls)
    finally:
        run.proc.kill()
        run.proc.wait()
        os.close(run.pidfd)
        os.close(s._wake[0])
        os.close(s._wake[1])


def test_stop_wakes_a_wait_for_a_run_at_once(tmp_path: Path) -> None:
    s = _started_sampler()
    run = _sleeper_run(tmp_path, 30.0)
    try:
        threading.Timer(0.3, s.stop, kwargs={"timeout": 0.1}).start()
        t0 = time.monotonic()
        assert not s._wait_exit(run, until=t0 + 20)
        assert time.monotonic() - t0 < 2.0
        # A wait that ignores the stop (the last chunk's output) still waits for the exit.
        run.proc.terminate()
        assert s._wait_exit(run, until=time.monotonic() + 10, ignore_stop=True)
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()
        os.close(run.pidfd)
        os.close(s._wake[0])
        os.close(s._wake[1])
