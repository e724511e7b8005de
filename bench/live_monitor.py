"""The live monitor's own cost: `sattui --pid P` on a real trainer, in a real terminal.

A real PyTorch trainer (the demo trainer's ``--scenario``, with its DataLoader workers)
runs; the full-screen monitor is started on it in a pseudo-terminal of the given size
(the parent drains what it draws), with the default card backend detection, py-spy
sampling, the process tree, the advisor every 5 s with its time ledger, and the screen
redrawn at its default rate. After ``--attach-s`` (imports, py-spy's first start and the
sampler fitting its rate are left out: a user attaches once for hours) the CPU of the
sattui process (all its threads) and of its children (py-spy) is measured over
``--seconds``, in % of one core.

    python bench/live_monitor.py [--seconds 60] [--size 80x24] [--scenario input_bound]

Target (issue 10): the live monitor ≤ 5 % of a core (sattui's own process; py-spy's
share is printed beside it, and budgeted separately in docs/sampling.md).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
from _pty import open_terminal  # bench/_pty.py (this script's folder is on sys.path)

REPO = Path(__file__).resolve().parents[1]


def measure(scenario: str, cols: int, rows: int, attach_s: float, seconds: float) -> dict[str, float]:
    trainer = subprocess.Popen([sys.executable, "-m", "sattui.demo.trainer", "--scenario", scenario,
                                "--seconds", str(attach_s + seconds + 60)], cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    master, slave = open_terminal(cols, rows)
    mon = None
    try:
        time.sleep(3.0)  # the trainer's imports and its workers' start
        if trainer.poll() is not None:
            raise SystemExit(f"the {scenario} trainer exited ({trainer.returncode}) before sattui attached")
        env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor")
        mon = subprocess.Popen([sys.executable, "-m", "sattui", "--pid", str(trainer.pid)], cwd=REPO,
                               stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
        os.close(slave)
        slave = -1
        ps = psutil.Process(mon.pid)
        time.sleep(attach_s)
        if mon.poll() is not None:
            raise SystemExit(f"sattui exited ({mon.returncode}) during the attach")
        c0, t0 = ps.cpu_times(), time.monotonic()
        time.sleep(seconds)
        c1, t1 = ps.cpu_times(), time.monotonic()
        wall = t1 - t0
        return {"sattui_pct": 100.0 * (c1.user + c1.system - c0.user - c0.system) / wall,
                "pyspy_pct": 100.0 * (c1.children_user + c1.children_system
                                      - c0.children_user - c0.children_system) / wall,
                "rss_mb": ps.memory_info().rss / 1e6, "wall_s": wall}
    finally:
        if slave >= 0:
            os.close(slave)
        if mon is not None and mon.poll() is None:
            mon.terminate()
            try:
                mon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                mon.kill()
        trainer.terminate()
        try:
            trainer.wait(timeout=10)
        except subprocess.TimeoutExpired:
            trainer.kill()
        os.close(master)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="measuring time (default 60)")
    ap.add_argument("--attach-s", type=float, default=15.0, help="left out after sattui starts (default 15)")
    ap.add_argument("--size", default="80x24", help="terminal columns x rows (default 80x24)")
    ap.add_argument("--scenario", default="input_bound", help="the demo trainer's scenario (default input_bound)")
    args = ap.parse_args()
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    r = measure(args.scenario, cols, rows, args.attach_s, args.seconds)
    print(f"sattui --pid on the {args.scenario} trainer, {cols}x{rows}, {os.cpu_count()} CPUs, "
          f"{r['wall_s']:.0f} s measured after {args.attach_s:.0f} s:")
    print(f"  sattui's own process {r['sattui_pct']:.1f} % of a core (target <= 5 %: "
          f"{'met' if r['sattui_pct'] <= 5 else 'MISSED'}), py-spy {r['pyspy_pct']:.1f} %, "
          f"RSS {r['rss_mb']:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
