"""Terminal traffic of the live monitor: the bytes ``sattui demo`` writes to its terminal
per second once it has settled (issue 25 item 3: ≤ 3 KiB/s at 80×24 and ≤ 8 KiB/s at
200×50 in the demo's steady state; ``htop`` writes about 0.5 KiB/s at 80×24).

The demo runs on a real pseudo-terminal of the given size (a real trainer, its
DataLoader workers, py-spy, the SIMULATED card); this process reads everything the
monitor writes, throws the first ``--settle`` seconds away (start-up, first frames, the
window filling) and counts the next ``--seconds``. ``--htop`` measures ``htop`` the same
way, where it is installed, for comparison.

Run:  python bench/terminal_bytes.py [--size 80x24 200x50] [--settle 12] [--seconds 20] [--htop]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


DUMP: list[bytes] | None = None  # --dump: what was counted, kept for a look


def _read_for(master: int, seconds: float, keep: bool = False) -> int:
    """Bytes read from ``master`` over ``seconds`` (reading as they come, so the child
    never blocks on a full terminal)."""
    got = 0
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        ready, _, _ = select.select([master], [], [], min(left, 0.5))
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            got += len(chunk)
            if keep and DUMP is not None:
                DUMP.append(chunk)
    return got


def measure(cmd: list[str], cols: int, rows: int, settle_s: float, seconds: float, keys: bytes = b"") -> float:
    """Bytes per second ``cmd`` writes to a ``cols`` × ``rows`` terminal after ``settle_s``
    (``keys`` typed once it has drawn, half-way through the settling)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor", COLUMNS=str(cols), LINES=str(rows))
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True,
                            start_new_session=True, cwd=ROOT)
    os.close(slave)
    try:
        _read_for(master, settle_s / 2)
        if keys:
            os.write(master, keys)
        _read_for(master, settle_s / 2)
        if proc.poll() is not None:
            raise SystemExit(f"terminal_bytes: {cmd[0]} exited early (code {proc.returncode})")
        return _read_for(master, seconds, keep=True) / seconds
    finally:
        try:
            os.killpg(proc.pid, signal.SIGINT)
            deadline = time.monotonic() + 10
            while proc.poll() is None and time.monotonic() < deadline:
                _read_for(master, 0.2)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        finally:
            os.close(master)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", nargs="*", default=["80x24", "200x50"], help="COLSxROWS, one or more")
    ap.add_argument("--settle", type=float, default=12.0, help="seconds not counted at the start")
    ap.add_argument("--seconds", type=float, default=20.0, help="seconds counted")
    ap.add_argument("--scenario", default="starved", help="the demo's scenario")
    ap.add_argument("--htop", action="store_true", help="also measure htop (where installed)")
    ap.add_argument("--replay", metavar="FILE", help="measure `sattui replay FILE` playing instead of the demo "
                    "(no trainer: a quick look at the drawing alone)")
    ap.add_argument("--dump", metavar="FILE", help="write the bytes counted to FILE (to see what is redrawn)")
    args = ap.parse_args(argv)
    global DUMP
    DUMP = [] if args.dump else None
    try:
        sizes = [(int(c), int(r)) for c, r in (s.lower().split("x") for s in args.size)]
    except ValueError:
        print(f"terminal_bytes: a size is COLSxROWS (80x24), got {' '.join(args.size)}", file=sys.stderr)
        return 2
    demo = [sys.executable, "-m", "sattui", "demo", "--scenario", args.scenario]
    what, keys = f"sattui demo --scenario {args.scenario}", b""
    if args.replay:
        demo, what, keys = [sys.executable, "-m", "sattui", "replay", args.replay], "sattui replay (playing)", b" "
    print(f"bytes written to the terminal per second, after {args.settle:g} s, over {args.seconds:g} s")
    for cols, rows in sizes:
        rate = measure(demo, cols, rows, args.settle, args.seconds, keys)
        print(f"  {what}  {cols}x{rows}  {rate / 1024:6.1f} KiB/s")
        if args.dump and DUMP is not None:
            Path(f"{args.dump}.{cols}x{rows}").write_bytes(b"".join(DUMP))
            DUMP.clear()
        if args.htop:
            htop = shutil.which("htop")
            if htop is None:
                print("  htop: not installed")
            else:
                rate = measure([htop], cols, rows, args.settle, args.seconds)
                print(f"  htop  {cols}x{rows}  {rate / 1024:6.1f} KiB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
