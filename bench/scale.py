"""Scale figures for docs/reliability.md.

1. `sattui record` on a trainer with N forked workers and M threads: ticks kept, workers
   found, sattui's own CPU (py-spy excluded). Default 64 workers, 500 threads, 20 s.
2. `--big MB`: a recording grown to MB megabytes (a real short recording repeated with
   shifted times) reported with `sattui report --json`: peak RSS and throughput.

Run: python bench/scale.py [--seconds 20] [--big 2048]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.e2e.conftest import REPO, sattui_cmd  # noqa: E402
from tests.e2e.test_reliability import Spinner, _grow, _kill_py_spy_on  # noqa: E402


def _watch(p: subprocess.Popen) -> tuple[float, int]:
    ps = psutil.Process(p.pid)
    cpu, peak = 0.0, 0
    while p.poll() is None:
        try:
            t = ps.cpu_times()
            cpu = t.user + t.system
            peak = max(peak, ps.memory_info().rss)
        except psutil.Error:
            break
        time.sleep(0.05)
    return cpu, peak


def scale(tmp: Path, workers: int, threads: int, seconds: float) -> Path:
    tr = Spinner(threads=threads, children=workers)
    out = tmp / "scale.jsonl"
    try:
        p = subprocess.Popen(sattui_cmd("record", "--pid", str(tr.pid), "-o", str(out), "--duration",
                                        str(seconds)), cwd=REPO, stderr=subprocess.PIPE, text=True)
        cpu, peak = _watch(p)
        p.communicate()
        kids = {c.pid for c in psutil.Process(tr.pid).children()}
    finally:
        _kill_py_spy_on(tr.pid)
        tr.kill()
    recs = [json.loads(x) for x in out.read_text().splitlines()[1:] if x.strip()]
    ticks = sorted({r["t"] for r in recs if r["kind"] == "proc"})
    last = {r["pid"] for r in recs if r["kind"] == "proc" and r["t"] == ticks[-1]}
    print(f"scale: {workers} workers + {threads} threads, {seconds:g} s: {len(ticks)} ticks, "
          f"{len(kids & last)}/{len(kids)} workers on the last tick, sattui CPU "
          f"{cpu / seconds:.3f} cores (py-spy excluded), peak RSS {peak / 2**20:.0f} MiB")
    return out


def big(tmp: Path, src: Path, mb: int) -> None:
    dst = tmp / "big.jsonl"
    t0 = time.monotonic()
    n = _grow(src, dst, mb * 2**20)
    gen = time.monotonic() - t0
    t0 = time.monotonic()
    p = subprocess.Popen(sattui_cmd("report", str(dst), "--json"), cwd=REPO, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    _, peak = _watch(p)
    p.communicate()
    dt = time.monotonic() - t0
    print(f"report: {dst.stat().st_size / 2**20:.0f} MiB, {n} records (generated in {gen:.0f} s): "
          f"exit {p.returncode}, {dt:.0f} s ({dst.stat().st_size / 2**20 / dt:.1f} MiB/s), "
          f"peak RSS {peak / 2**20:.0f} MiB")
    dst.unlink()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=64)
    ap.add_argument("--threads", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--big", type=int, default=0, metavar="MB", help="also report a recording of MB MiB")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        src = scale(Path(d), a.workers, a.threads, a.seconds)
        if a.big:
            big(Path(d), src, a.big)


if __name__ == "__main__":
    main()
