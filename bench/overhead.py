"""Overhead of `sattui record` on a real PyTorch trainer, and sattui's own cost.

For each trainer, runs alternate: the trainer alone, then the trainer with
`sattui record --pid` attached, repeated in pairs. Steps/s come from the trainer's own
per-second log over the same window of each run; the figure is the median of the
per-pair ratios. While recording, sattui's own CPU is split into the py-spy sampler
(sattui's reaped py-spy children) and the rest (the sattui process itself), in cores,
with its peak RSS.

    python bench/overhead.py                 # both trainers, 3 pairs, 20 s windows
    python bench/overhead.py --pairs 5 --window 30
    python bench/overhead.py --pin           # trainer on CPU 0, sattui and py-spy on CPU 1

On a box whose cores the trainer keeps busy, any CPU sattui takes comes out of the
trainer (about sattui's cores / the box's cores). ``--pin`` gives each side its own
core, as on a GPU server with cores to spare, so the ratio shows what attaching costs
beyond that CPU (py-spy's memory reads, /proc reads).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]

TRAINERS = {
    "small": ["--scenario", "compute_bound"],
    "60-thread": ["--scenario", "compute_bound", "--extra-threads", "56"],
}


def _truth(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _steps_per_s(lines: list[dict], t_from: float, t_to: float) -> float:
    """Steps/s between two trainer-elapsed times, from the trainer's own log."""
    a = min(lines, key=lambda r: abs(r["elapsed_s"] - t_from))
    b = min(lines, key=lambda r: abs(r["elapsed_s"] - t_to))
    return (b["steps"] - a["steps"]) / (b["elapsed_s"] - a["elapsed_s"])


def _on_cpus(cpus: set[int] | None):
    """A preexec function pinning the child (and what it forks) to ``cpus``."""
    if not cpus:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def one_run(trainer_args: list[str], window_s: float, with_sattui: bool, out_dir: Path,
            trainer_cpus: set[int] | None = None, sattui_cpus: set[int] | None = None) -> dict:
    truth = out_dir / f"truth-{time.monotonic_ns()}.jsonl"
    settle_s = 3.0
    tr = subprocess.Popen([sys.executable, "-m", "sattui.demo.trainer", *trainer_args,
                           "--seconds", str(window_s + settle_s + 15), "--truth", str(truth)],
                          cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          preexec_fn=_on_cpus(trainer_cpus))
    try:
        while len(_truth(truth)) < 2:
            if tr.poll() is not None:
                raise SystemExit("trainer died")
            time.sleep(0.1)
        time.sleep(settle_s)
        start_elapsed = _truth(truth)[-1]["elapsed_s"]
        res: dict = {}
        if with_sattui:
            rec = out_dir / f"rec-{time.monotonic_ns()}.jsonl"
            sp = subprocess.Popen([sys.executable, "-m", "sattui", "record", "--pid", str(tr.pid), "-o", str(rec),
                                   "--duration", str(window_s)], cwd=REPO,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  preexec_fn=_on_cpus(sattui_cpus))
            ps = psutil.Process(sp.pid)
            rss_max = 0
            t0 = time.monotonic()
            last = None
            while sp.poll() is None:
                try:
                    with ps.oneshot():
                        rss_max = max(rss_max, ps.memory_info().rss)
                        last = ps.cpu_times()
                except psutil.Error:
                    break
                time.sleep(0.5)
            wall = time.monotonic() - t0
            sp.wait()
            if last is not None:
                res["sattui_cpu_cores"] = (last.user + last.system) / wall
                res["sampler_cpu_cores"] = (last.children_user + last.children_system) / wall
            res["sattui_rss_mb"] = rss_max / 1e6
            res["record_bytes"] = rec.stat().st_size if rec.exists() else 0
        else:
            time.sleep(window_s)
        end_elapsed = _truth(truth)[-1]["elapsed_s"]
        res["steps_per_s"] = _steps_per_s(_truth(truth), start_elapsed, end_elapsed)
        return res
    finally:
        tr.terminate()
        try:
            tr.wait(10)
        except subprocess.TimeoutExpired:
            tr.kill()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--window", type=float, default=20.0, help="seconds measured per run")
    ap.add_argument("--trainer", choices=sorted(TRAINERS), action="append")
    ap.add_argument("--pin", action="store_true", help="trainer on CPU 0, sattui (and its py-spy) on CPU 1")
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if args.pin and len(cpus) < 2:
        raise SystemExit("--pin needs two usable CPUs")
    trainer_cpus, sattui_cpus = ({cpus[0]}, {cpus[1]}) if args.pin else (None, None)
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}; load {os.getloadavg()[0]:.2f}"
          + (f"; trainer on CPU {cpus[0]}, sattui on CPU {cpus[1]}" if args.pin else ""))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for name in args.trainer or list(TRAINERS):
            ratios, runs = [], []
            for i in range(args.pairs):
                alone = one_run(TRAINERS[name], args.window, False, out, trainer_cpus, sattui_cpus)
                withs = one_run(TRAINERS[name], args.window, True, out, trainer_cpus, sattui_cpus)
                ratios.append(withs["steps_per_s"] / alone["steps_per_s"])
                runs.append(withs)
                print(f"  {name} pair {i + 1}: alone {alone['steps_per_s']:.1f} steps/s, with sattui "
                      f"{withs['steps_per_s']:.1f} steps/s (ratio {ratios[-1]:.3f}); sampler "
                      f"{withs['sampler_cpu_cores'] * 100:.1f} % of a core, rest {withs['sattui_cpu_cores'] * 100:.1f} %,"
                      f" RSS {withs['sattui_rss_mb']:.0f} MB", flush=True)
            med = statistics.median(ratios)
            print(f"{name}: median steps/s ratio {med:.3f} (slowdown {(1 - med) * 100:+.1f} %); "
                  f"sampler {statistics.median(r['sampler_cpu_cores'] for r in runs) * 100:.1f} % of a core; "
                  f"rest of sattui {statistics.median(r['sattui_cpu_cores'] for r in runs) * 100:.1f} %; "
                  f"RSS {max(r['sattui_rss_mb'] for r in runs):.0f} MB; "
                  f"recording {statistics.median(r['record_bytes'] for r in runs) / args.window / 1e3:.1f} kB/s",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
