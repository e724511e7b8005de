"""A real two-node torchrun job on this one machine (issue 11): two agents (``--nnodes 2``,
one rank each, rendezvous on 127.0.0.1), DistributedDataParallel over gloo with rank 1
sleeping 0.1 s a step; one ``sattui record --metrics … --host nK -- torchrun …`` per
node; a real Prometheus scraping both. ``report --prometheus --json`` names the slow
rank and its host; ``sattui cluster`` (Pilot, 80×24) shows both hosts and drills into one."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time

import pytest

from sattui.cluster.view import ClusterPoller
from sattui.cluster_app import ClusterApp
from sattui.screens.cluster import ClusterScreen
from sattui.screens.main import MainScreen
from sattui.widgets.timechart import TimeChart
from tests.e2e.conftest import REPO, run_sattui, sattui_cmd
from tests.e2e.test_scenarios import _torchrun
from tests.functional.test_grafana_dashboard import RULES, dashboard, query, targets
from tests.prom import Prometheus, free_port

pytestmark = pytest.mark.e2e
JOB = "wtl-live"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cluster-live")
    master, ports = free_port(), [free_port(), free_port()]
    procs: list[subprocess.Popen[bytes]] = []
    logs = []
    for k, port in enumerate(ports):
        log = open(tmp / f"n{k}.log", "wb")
        logs.append(log)
        procs.append(subprocess.Popen(sattui_cmd(
            "record", "-o", str(tmp / f"n{k}.jsonl"), "--duration", "240", "--metrics", f"127.0.0.1:{port}",
            "--host", f"n{k}", "--", *_torchrun(), "--nnodes", "2", "--node_rank", str(k), "--nproc_per_node", "1",
            "--master_addr", "127.0.0.1", "--master_port", str(master),
            "-m", "sattui.demo.ddp_trainer", "--ddp", "--steps", "100000"), cwd=REPO, stdout=log, stderr=log))
    try:
        with Prometheus({JOB: [f"127.0.0.1:{p}" for p in ports]}, rule_files=[RULES]) as prom:
            prom.wait_for(f'count by (host) (sattui_rank_state_seconds_total{{job="{JOB}"}} > 0)', n=2, timeout=120)
            yield prom
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        for log in logs:
            log.close()
        for k in range(2):
            print(f"--- n{k}.log\n" + (tmp / f"n{k}.log").read_text(errors="replace")[-1500:])


def test_report_names_the_slow_rank_and_its_host(job):
    deadline = time.monotonic() + 150
    rep: dict = {}
    while time.monotonic() < deadline:
        r = run_sattui("report", "--prometheus", job.url, "--job", JOB, "--since", "40s", "--json")
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        rep = json.loads(r.stdout)
        strag = [f for f in rep["findings"] if f["rule"] == "straggler"]
        if strag and strag[0].get("rank") == 1:
            break
        time.sleep(5)
    strag = [f for f in rep["findings"] if f["rule"] == "straggler"]
    assert strag, json.dumps(rep, indent=1)[:3000]
    assert strag[0]["rank"] == 1 and strag[0]["host"] == "n1", strag[0]
    assert {(x["host"], x["rank"]) for x in rep["trainer"]["ranks"]} == {("n0", 0), ("n1", 1)}, rep["trainer"]


def chart(app) -> list[str]:
    return [s.text for s in app.screen.query_one(TimeChart)._strips]


def test_cluster_view_shows_both_hosts_and_drills_into_one(job):
    # The e2e suite has no async runner (tests/functional/conftest.py's is for that suite).
    asyncio.run(_view(job))


async def _view(job) -> None:
    poller = ClusterPoller(job.url, JOB, window_s=60.0)
    app = ClusterApp(poller, show_clock=False)
    async with app.run_test(size=(80, 24)) as pilot:
        end = time.monotonic() + 90
        while time.monotonic() < end:
            await pilot.pause(0.5)
            app.redraw(True)
            lines = chart(app)
            if all(any(x.lstrip(" ▸").startswith(h) for x in lines) for h in ("n0", "n1")) \
                    and any("rank 1" in x for x in lines):
                break
        lines = chart(app)
        assert isinstance(app.screen, ClusterScreen)
        assert any(x.lstrip(" ▸").startswith("n0") for x in lines) and any("rank 1" in x for x in lines), lines
        assert "2 host(s)" in lines[1], lines
        await pilot.press("down")
        await pilot.pause(0.5)
        app.redraw(True)
        assert any(x.startswith("▸n1") for x in chart(app)), chart(app)
        await pilot.press("enter")
        assert isinstance(app.screen, MainScreen)
        end = time.monotonic() + 30
        while time.monotonic() < end and not any(x.startswith("rank1") or x.startswith("rank 1") for x in chart(app)):
            await pilot.pause(0.5)
            app.redraw(True)
        assert app.session.header["host"] == "n1"
        assert any(x.startswith(("rank1", "rank 1")) for x in chart(app)), chart(app)


def test_the_dashboards_rank_panels_and_the_alerting_rules_on_real_trainers(job):
    """deploy/: the dashboard's rank panels read both real nodes' ranks, and every rule of
    sattui-rules.yml evaluates without error on their series (this box has no cards:
    the card panels are tested on scripted exporters, tests/functional/test_grafana_dashboard.py)."""
    by_title = dict(targets(dashboard()))
    for title in ("Each rank's main-thread time by state", "Lost time by cause"):
        expr = by_title[title]["expr"].replace("$__rate_interval", "20s").replace("$job", JOB).replace("$host", ".*")
        deadline = time.monotonic() + 60
        while True:
            got = {(s["metric"]["host"], s["metric"]["rank"]) for s in query(job, expr)}
            if got == {("n0", "0"), ("n1", "1")} or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert got == {("n0", "0"), ("n1", "1")}, (title, got)
    rules = [r for g in job.api("rules")["groups"] for r in g["rules"]]
    assert len(rules) == 6 and all(r["health"] == "ok" and r["lastEvaluation"] > "2000" for r in rules), \
        [(r["name"], r["health"], r.get("lastError")) for r in rules]
