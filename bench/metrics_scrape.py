"""What serving Prometheus scrapes costs sattui (``--metrics HOST:PORT``).

    python bench/metrics_scrape.py                 # 8 cards, 8 ranks, 60 s per phase
    python bench/metrics_scrape.py --seconds 20    # quicker, noisier

An exporter process holds a node as large as one 8-card host gets (8 NVIDIA cards, 8
ranks with every main-thread state, idle ledger by state and cause, workers, findings:
the series one sattui publishes) and serves it with sattui's own server
(sattui/metrics/server.py). This process scrapes it once a second, as Prometheus does
with ``scrape_interval: 1s`` (with ``Accept-Encoding: gzip``, as Prometheus asks), in
alternating phases: scraping, then idle, then scraping … The exporter's own CPU time
(``/proc/PID/stat``) over each phase gives its cost; the figure is the scraping phases'
CPU minus the idle phases', in % of one core, side by side with the 0.5 % budget.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

BUDGET_PCT = 0.5

EXPORTER = textwrap.dedent("""
    import sys, time, threading
    from sattui.metrics.node import NodeMetrics
    from sattui.metrics.server import MetricsServer
    from sattui.ledger.bins import JobLedger, RankLedger, CardLedger
    from sattui.states import COUNTED_NAMES

    node = NodeMetrics("bench-node", read_env=lambda pid: {"RANK": str(pid - 1000), "LOCAL_RANK": str(pid - 1000),
                                                         "TORCHELASTIC_RUN_ID": "bench"})
    cards = [{"card": i, "vendor": "nvidia", "name": "NVIDIA H200", "uuid": f"GPU-{i:08d}", "mem_total": 150 << 30}
             for i in range(8)]
    node.set_header({"backend": "nvml", "cards": cards, "env": {}})
    causes = ["worker_busy", "worker_io_bound", "straggler", "periodic_stall", "host_sync_stall"]
    t = 0.0

    def tick():
        global t
        t += 1.0
        recs = [{"kind": "card", "t": t, "card": i, "util": 90.0, "sm_active": 80.0, "tensor_active": 30.0,
                 "dram_active": 40.0, "mem_used": 70 << 30, "mem_total": 150 << 30, "power_w": 600.0,
                 "temp_c": 70.0, "sm_clock_mhz": 1900} for i in range(8)]
        for r in range(8):
            recs.append({"kind": "proc", "t": t, "pid": 1000 + r, "role": "rank", "rank": r, "cpu": 1.0})
            for w in range(4):
                recs.append({"kind": "proc", "t": t, "pid": 2000 + 10 * r + w, "role": "worker", "rank": r,
                             "cpu": 0.8})
        recs += [{"kind": "finding", "t": t, "rule": rule, "severity": "medium", "impact": 0.1, "card": None,
                  "rank": None} for rule in ("input_bound", "straggler", "periodic_stall")]
        node.sink(recs)
        job = JobLedger(gpu_job=True)
        for r in range(8):
            job.ranks[1000 + r] = RankLedger(1000 + r, r, 1.0, {s: 1.0 / len(COUNTED_NAMES) for s in COUNTED_NAMES},
                                             {c: 0.02 for c in causes})
            job.cards[r] = CardLedger(r, 1000 + r, r, 1.0, 0.1, {s: 0.1 / len(COUNTED_NAMES) for s in COUNTED_NAMES},
                                      {c: 0.02 for c in causes})
        node.add_ledger([(int(t), job)])

    for _ in range(5):
        tick()
    server = MetricsServer(("127.0.0.1", 0), node)
    server.start()
    print(server.port, flush=True)
    # The exporter's node keeps changing, as a live one does (once a second).
    while True:
        time.sleep(1.0)
        tick()
""")


def cpu_s(p: psutil.Process) -> float:
    c = p.cpu_times()
    return c.user + c.system


def scrape(url: str) -> int:
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip",
                                               "Accept": "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return len(r.read())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0, help="length of each phase")
    ap.add_argument("--cycles", type=int, default=3, help="scraping/idle phase pairs")
    a = ap.parse_args()
    proc = subprocess.Popen([sys.executable, "-c", EXPORTER], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        url = f"http://127.0.0.1:{port}/metrics"
        p = psutil.Process(proc.pid)
        size = scrape(url)
        plain = len(urllib.request.urlopen(url, timeout=5).read())
        series = sum(1 for line in urllib.request.urlopen(url, timeout=5).read().decode().splitlines()
                     if line and not line.startswith("#"))
        print(f"exposition: {series} series, {plain} bytes ({size} gzipped); load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        scraping, idle = [], []
        for _ in range(a.cycles):
            for phase, out in (("scrape", scraping), ("idle", idle)):
                c0, t0 = cpu_s(p), time.monotonic()
                n = 0
                while time.monotonic() - t0 < a.seconds:
                    if phase == "scrape":
                        scrape(url)
                        n += 1
                    time.sleep(max(0.0, t0 + n - time.monotonic()) if phase == "scrape" else 1.0)
                dt = time.monotonic() - t0
                out.append(100.0 * (cpu_s(p) - c0) / dt)
        s, i = sum(scraping) / len(scraping), sum(idle) / len(idle)
        cost = s - i
        print(f"exporter CPU, % of one core: scraped 1/s {s:.3f}  idle {i:.3f}  (phases of {a.seconds:.0f} s, "
              f"{a.cycles} each)")
        print(f"scrape cost: {cost:.3f} % of a core  vs budget {BUDGET_PCT} %  -> ratio {cost / BUDGET_PCT:.2f} "
              f"of the budget; {cost * 10:.2f} ms CPU per scrape")
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
