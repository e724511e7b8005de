"""The monitor's own cost: time to the first full frame, and its CPU while redrawing.

Each case runs the real app in a child process on a real pseudo-terminal (so Textual's
whole path runs, down to writing escape codes; the parent drains the terminal), over a
ReplaySession of the fixture recording (tests/fixtures/recordings/ui_fixture.jsonl):

* first frame: from just before the child is started (the parent's monotonic clock,
  which the child shares) to the end of the refresh that drew the first data;
* CPU: ``time.process_time()`` of the child (all its threads) over ``--seconds`` after the
  first frame, as % of one core. "playing": the replay cursor moves at real speed, so
  every redraw has a new window to bin (what a live session costs); "paused": nothing
  moves (a paused view, or a live one between samples).

* lock held: how long the UI thread holds ``session.lock`` per redraw (the sampler thread
  appends under it, so a live sampler waits that long): the median and the longest of
  the redraws measured, from a timing wrapper put around the session's lock.

Targets (issue): first frame ≤ 1 s; own CPU ≤ 5 % of a core at the default redraw rate.

Run:  python bench/tui_frame.py [--seconds 20] [--case "8 ranks"] [--against /path/to/other/checkout]

``--against`` runs each case twice, with this checkout's sattui and with the other's
(the child imports the package from there), one after the other: a before/after in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _pty import open_terminal  # bench/_pty.py (this script's folder is on sys.path)

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "recordings" / "ui_fixture.jsonl"

CASES = (
    # name, columns, rows, play, window_s, recording (None: the fixture)
    ("80x24 playing, 1m window", 80, 24, True, 60.0, None),
    ("80x24 paused", 80, 24, False, 60.0, None),
    ("160x48 playing, 1m window", 160, 48, True, 60.0, None),
    ("160x48 playing, 15m window", 160, 48, True, 900.0, None),
    ("8 cards 1h, 160x48, 1h window", 160, 48, True, 3600.0, "big"),
    ("8 ranks 1h, 160x48, 1h window", 160, 48, True, 3600.0, "big8"),
)


def write_big(path: str, hours: float = 1.0, cards: int = 8, ranks: int = 0) -> None:
    """A long, wide recording for the worst case: 8 cards at 2 Hz, 5 processes at 1 Hz,
    main-thread spans at ~4 per second, one hour. With ``ranks``: a torchrun job of that
    many ranks (rank i on card i, one DataLoader worker each), each with its own spans at
    ~4 per second and a step (a return from the DataLoader into forward) every half second."""
    import random

    rng = random.Random(1)
    dur = hours * 3600
    hdr = {"kind": "header", "format": "sattui/1", "started_at": "2026-11-30T15:00:00+00:00", "host": "bench",
           "pid": 1000, "cmdline": ["python", "train.py"], "backend": "nvml", "interval_s": 1.0,
           "stack_rate_hz": 20.0, "cards": [{"card": c, "vendor": "nvidia", "name": "NVIDIA H200",
                                             "mem_total": 150 * 2 ** 30, "power_limit_w": 700.0}
                                            for c in range(cards)]}
    with open(path, "w") as f:
        f.write(json.dumps(hdr) + "\n")
        t = 0.0
        chunk_t = 0.0
        procs: list[tuple[int, int, str, int | None]]
        if ranks:
            procs = [(1000, 1, "other", None)]
            procs += [(1001 + r, 1000, "rank", r) for r in range(ranks)]
            procs += [(1101 + r, 1001 + r, "worker", r) for r in range(ranks)]
            mains = [1001 + r for r in range(ranks)]
        else:
            procs = [(1000, 1, "main", None)] + [(1001 + i, 1000, "worker", None) for i in range(4)]
            mains = [1000]
        samples: dict[int, list[list]] = {pid: [] for pid in mains}
        while t < dur:
            t = round(t + 0.5, 3)
            for c in range(cards):
                f.write(json.dumps({"kind": "card", "t": t, "card": c, "util": rng.choice((3.0, 97.0, 99.0)),
                                    "sm_active": 70.0, "mem_used": 2 ** 36, "mem_total": 150 * 2 ** 30,
                                    "power_w": 500.0, "temp_c": 70.0, "clock_reasons": 4}) + "\n")
            if t == int(t):
                for pid, ppid, role, rank in procs:
                    f.write(json.dumps({"kind": "proc", "t": t, "pid": pid, "ppid": ppid, "role": role, "rank": rank,
                                        "name": "python", "cpu": rng.random(), "state": "R", "rss": 2 ** 30,
                                        "read_Bps": 1e7, "write_Bps": 0.0}) + "\n")
            for pid in mains:
                samples[pid].append([t - 0.5, 0.25, pid, 0, "data_wait"])
                samples[pid].append([t - 0.25, 0.25, pid, 1, "forward"])
            if t - chunk_t >= 5:
                for pid in mains:
                    f.write(json.dumps({"kind": "stacks", "t": chunk_t, "t_end": t, "pid": pid, "rate_hz": 20.0,
                                        "errors": 0, "threads": {str(pid): "MainThread"},
                                        "frames": [["get", "queue.py", 180], ["__next__", "dataloader.py", 733],
                                                   ["forward", "model.py", 10], ["train", "train.py", 40]],
                                        "stacks": [[0, 1, 3], [2, 3]], "samples": samples[pid]}) + "\n")
                chunk_t, samples = t, {pid: [] for pid in mains}


class TimedLock:
    """The session's lock, timing how long the UI (main) thread holds it, outermost
    acquire to its release (the lock is re-entrant: inner ones are part of the hold)."""

    def __init__(self, lock: Any) -> None:
        self._lock = lock
        self._depth = 0
        self._since = 0.0
        self.held: list[float] = []  # seconds, one per outermost hold on the main thread

    def acquire(self, *args: Any, **kwargs: Any) -> bool:
        got = self._lock.acquire(*args, **kwargs)
        if got and threading.current_thread() is threading.main_thread():
            if self._depth == 0:
                self._since = time.perf_counter()
            self._depth += 1
        return bool(got)

    def release(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self._depth -= 1
            if self._depth == 0:
                self.held.append(time.perf_counter() - self._since)
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def child(out: str, seconds: float, play: bool, window_s: float, recording: str, tree: str) -> None:
    t_launch = float(os.environ["SATTUI_BENCH_T0"])
    sys.path.insert(0, tree)
    from sattui.app import SattuiApp
    from sattui.session import ReplaySession

    session = ReplaySession(recording)
    session.seek(30.0 if recording == str(FIXTURE) else session.duration - seconds - 5)
    timed = TimedLock(session.lock)
    session.lock = timed  # type: ignore[assignment]
    result: dict[str, float] = {}

    class BenchApp(SattuiApp):
        def on_first_frame(self) -> None:
            result["first_frame_s"] = self.first_frame_at - t_launch  # type: ignore[operator]
            if play:
                session.toggle_play()
            self._cpu0 = time.process_time()
            self._wall0 = time.monotonic()
            self._redraws0 = self.redraws
            self._held0 = len(timed.held)
            self.set_timer(seconds, self._done)

        def _done(self) -> None:
            cpu = time.process_time() - self._cpu0
            wall = time.monotonic() - self._wall0
            held = sorted(timed.held[self._held0:])
            result.update(cpu_pct=100.0 * cpu / wall, wall_s=wall, redraws=self.redraws - self._redraws0,
                          lock_median_ms=1e3 * held[len(held) // 2] if held else 0.0,
                          lock_max_ms=1e3 * held[-1] if held else 0.0, lock_holds=len(held))
            self.exit()

    BenchApp(session, window_s=window_s, show_clock=False).run()
    Path(out).write_text(json.dumps(result))


def run_case(cols: int, rows: int, play: bool, window_s: float, seconds: float, recording: str,
             tree: str = str(ROOT)) -> dict[str, float]:
    master, slave = open_terminal(cols, rows)
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor")
    env["SATTUI_BENCH_T0"] = repr(time.monotonic())
    proc = subprocess.Popen([sys.executable, __file__, "--child", out, "--seconds", str(seconds),
                             "--window", str(window_s), "--recording", recording, "--tree", tree]
                            + (["--play"] if play else []),
                            stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    try:
        proc.wait(timeout=seconds + 60)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    try:
        return json.loads(Path(out).read_text() or "{}")
    finally:
        os.unlink(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="CPU measuring time per case (default 20)")
    ap.add_argument("--child", metavar="OUT", help=argparse.SUPPRESS)
    ap.add_argument("--play", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--window", type=float, default=60.0, help=argparse.SUPPRESS)
    ap.add_argument("--recording", default=str(FIXTURE), help=argparse.SUPPRESS)
    ap.add_argument("--tree", default=str(ROOT), help=argparse.SUPPRESS)
    ap.add_argument("--case", action="append", default=[], metavar="TEXT",
                    help="run only the cases whose name contains TEXT (repeatable; default: all)")
    ap.add_argument("--against", metavar="DIR",
                    help="another checkout of sattui: each case runs with it too, for a before/after")
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.seconds, args.play, args.window, args.recording, args.tree)
        return 0
    cases = [c for c in CASES if not args.case or any(text in c[0] for text in args.case)]
    if not cases:
        ap.error(f"no case matches {args.case}")
    trees = [("", str(ROOT))]
    if args.against:
        trees = [("this", str(ROOT)), ("against", str(Path(args.against).resolve()))]
    import textual

    print(f"sattui TUI cost (textual {textual.__version__}, python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs; default redraw 2 Hz; {args.seconds:.0f} s per case)")
    if args.against:
        print(f"this: {ROOT}\nagainst: {trees[1][1]}")
    print(f"{'case':<38} {'first frame':>12} {'own CPU':>10} {'redraws':>8} {'lock held median / max':>24}")
    worst_frame = worst_cpu = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, cols, rows, play, window, rec in cases:
            path = str(FIXTURE)
            if rec is not None:
                path = os.path.join(tmp, f"{rec}.jsonl")
                if not os.path.exists(path):
                    write_big(path, ranks=8 if rec == "big8" else 0)
            for label, tree in trees:
                r = run_case(cols, rows, play, window, args.seconds, path, tree)
                shown = f"{name} [{label}]" if label else name
                if not r:
                    print(f"{shown:<38} failed")
                    return 1
                note = ""
                if rec is not None:
                    note = f"  (first frame includes loading a {os.path.getsize(path) / 1e6:.0f} MB recording)"
                elif tree == str(ROOT):
                    worst_frame = max(worst_frame, r["first_frame_s"])
                if tree == str(ROOT):
                    worst_cpu = max(worst_cpu, r["cpu_pct"])
                lock = f"{r['lock_median_ms']:.2f} / {r['lock_max_ms']:.2f} ms"
                print(f"{shown:<38} {r['first_frame_s']:>10.2f} s {r['cpu_pct']:>8.1f} % {r['redraws']:>8.0f} "
                      f"{lock:>24}{note}")
    print(f"targets: first frame <= 1 s ({'met' if worst_frame <= 1 else 'MISSED'}, worst {worst_frame:.2f} s); "
          f"own CPU <= 5 % of a core ({'met' if worst_cpu <= 5 else 'MISSED'}, worst {worst_cpu:.1f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
