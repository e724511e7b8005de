"""What ``sattui cluster`` costs: the view's own CPU over a job of 16 hosts × 8 cards.

    python bench/cluster_view.py                  # 16 hosts, 8 cards and 8 ranks each, 30 s per phase
    python bench/cluster_view.py --seconds 15     # quicker, noisier

Fed as the tests feed it (tests/cluster_nodes.py, tests/prom.py): this process runs 16
scripted nodes, each sattui's real exporter (8 NVIDIA cards, 8 ranks with their
main-thread state seconds and idle ledger), and a real Prometheus scraping them every
second. The view runs in a child process: ``ClusterApp`` under Textual's headless driver
at 80×24 (it lays out and renders every frame as in a terminal; only the write to a tty
is missing), reading Prometheus in its thread worker as ``sattui cluster`` does. After a
warm-up (every host's ranks on screen), the child's CPU time is taken over two phases:
on the hosts screen, then drilled into one host (its 8 cards and 8 ranks, the one-node
main screen). Printed: % of one core per phase, the reads done and their mean wall time,
and the share of the CPU spent in the reading thread.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CHILD = textwrap.dedent("""
    import asyncio, json, sys, threading, time
    from sattui.cluster.view import ClusterPoller
    from sattui.cluster_app import ClusterApp
    from sattui.screens.main import MainScreen
    from sattui.widgets.timechart import TimeChart

    url, seconds, hosts = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    poller = ClusterPoller(url, "bench", window_s=120.0)
    read_cpu = [0.0]
    read_wall = []
    real = poller.poll_once

    def timed():
        c, w = time.thread_time(), time.monotonic()
        real()
        read_cpu[0] += time.thread_time() - c
        read_wall.append(time.monotonic() - w)
    poller.poll_once = timed

    def lines(app):
        return [s.text for s in app.screen.query_one(TimeChart)._strips]

    async def phase(app, pilot):
        reads, rc, red = len(read_wall), read_cpu[0], app.redraws
        c, w = time.process_time(), time.monotonic()
        await pilot.pause(seconds)
        c, w = time.process_time() - c, time.monotonic() - w
        walls = read_wall[reads:]
        return {"cpu_pct": 100 * c / w, "reads": len(walls), "read_wall_ms": 1000 * sum(walls) / max(1, len(walls)),
                "read_cpu_pct": 100 * (read_cpu[0] - rc) / w, "redraws": app.redraws - red}

    async def main():
        app = ClusterApp(poller, show_clock=False)
        async with app.run_test(size=(80, 24)) as pilot:
            end = time.monotonic() + 120
            while time.monotonic() < end:
                await pilot.pause(0.5)
                s = poller.snapshot()
                if s.data is not None and len(s.data.hosts) == hosts and all(h.ranks for h in s.data.hosts.values()):
                    break
            else:
                raise SystemExit(f"warm-up: not every host has ranks: {lines(app)}")
            await pilot.pause(3)
            out = {"hosts": await phase(app, pilot)}
            await pilot.press("enter")
            assert isinstance(app.screen, MainScreen)
            await pilot.pause(3)
            out["host"] = await phase(app, pilot)
            out["screen"] = lines(app)[:6]
        print(json.dumps(out))

    asyncio.run(main())
""")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=16)
    ap.add_argument("--cards", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args()

    from tests.cluster_nodes import CardScript, RankScript, ScriptedNode
    from tests.prom import Prometheus

    states = {"forward": 0.35, "backward": 0.45, "optimizer": 0.05, "data_wait": 0.15}
    nodes = [ScriptedNode(f"node{h:02d}",
                          [RankScript(h * args.cards + r, states, {"worker_busy": 0.15}) for r in range(args.cards)],
                          [CardScript(c, 60.0 + (h + c) % 40) for c in range(args.cards)], run_id="bench")
             for h in range(args.hosts)]
    for n in nodes:
        n.__enter__()
    try:
        with Prometheus({"bench": [n.target for n in nodes]}) as prom:
            prom.wait_for('sattui_card_utilization_ratio{job="bench"}', n=args.hosts * args.cards, timeout=120)
            env = {**os.environ, "PYTHONPATH": str(REPO)}
            p = subprocess.run([sys.executable, "-c", CHILD, prom.url, str(args.seconds), str(args.hosts)],
                               capture_output=True, text=True, env=env, timeout=args.seconds * 2 + 300)
            if p.returncode != 0:
                print(p.stderr[-3000:], file=sys.stderr)
                return 1
            out = json.loads(p.stdout.strip().splitlines()[-1])
    finally:
        for n in nodes:
            n.__exit__(None, None, None)

    print(f"sattui cluster over {args.hosts} hosts × {args.cards} cards, {args.cards} ranks each "
          f"(a real Prometheus, 1 s scrape), {args.seconds:g} s per phase, 80×24 headless")
    for name, what in (("hosts", "hosts screen"), ("host", "one host open")):
        f = out[name]
        print(f"  {what:14s} {f['cpu_pct']:5.1f} % of a core  (reading thread {f['read_cpu_pct']:4.1f} %; "
              f"{f['reads']} reads, {f['read_wall_ms']:.0f} ms each; {f['redraws']} redraws)")
    print("  the open host's screen:", *out["screen"][:3], sep="\n    ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
