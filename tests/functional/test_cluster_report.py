"""``sattui report --prometheus``: a real Prometheus scraping sattui's real exporters
(scripted nodes, tests/cluster_nodes.py) and a captured dcgm-exporter page; the report
names the straggler rank and its host, the host whose input pipeline is the bottleneck,
the card imbalance across hosts, and shows the dcgm-only host's cards. Prometheus down,
slow or answering garbage: one line, no traceback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sattui.cluster.prom import PromClient, PromError
from tests.cluster_nodes import ScriptedNode, input_job, straggler_job
from tests.prom import Prometheus, StaticExporter

REPO = Path(__file__).resolve().parents[2]
DCGM_PAGE = REPO / "tests" / "fixtures" / "vendors" / "dcgm-exporter" / \
    "dcgm-exporter-metrics_a100-mig-1g.5gb_full-gpu-and-gi_nvidia-docs.prom"


def sattui(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sattui", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def prom():
    nodes: list[ScriptedNode] = [*straggler_job(), *input_job()]
    with StaticExporter(DCGM_PAGE.read_text()) as dcgm:
        for n in nodes:
            n.__enter__()
        try:
            jobs = {"wtc-strag": [n.target for n in nodes[:2]],
                    "wtc-input": [n.target for n in nodes[2:]] + [f"127.0.0.1:{dcgm.port}"]}
            with Prometheus(jobs) as p:
                # Enough scrapes for rates: increase() needs two points of each series.
                p.wait_for('sattui_rank_state_seconds_total{job="wtc-strag"} > 0', n=5)
                p.wait_for('DCGM_FI_DEV_GPU_TEMP{job="wtc-input"}', n=1)
                time.sleep(8)
                yield p
        finally:
            for n in nodes:
                n.__exit__(None, None, None)


def report(prom: Prometheus, *args: str) -> dict:
    got = sattui("report", "--prometheus", prom.url, *args, "--since", "5m", "--json")
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


def test_the_report_names_the_straggler_rank_and_its_host(prom):
    rep = report(prom, "--job", "wtc-strag")
    assert rep["format"] == "sattui.report/1"
    assert {h["host"] for h in rep["hosts"]} == {"n0", "n1"}
    ranks = {r["rank"]: r for r in rep["trainer"]["ranks"]}
    assert ranks[0]["host"] == "n0" and ranks[1]["host"] == "n1"
    assert ranks[0]["states"]["backward"] == pytest.approx(0.9, abs=0.02)
    assert ranks[1]["states"]["idle"] == pytest.approx(0.71, abs=0.02)
    assert ranks[0]["run_id"] == "run-1" and ranks[0]["local_rank"] == 0
    v = rep["verdict"]
    assert (v["rule"], v["rank"], v["host"]) == ("straggler", 1, "n1"), v
    s = next(f for f in rep["findings"] if f["rule"] == "straggler")
    assert s["evidence"]["slow"] == "rank 1" and "sleeping" in s["evidence"]["slow_rank_own"]
    assert s["impact"] == pytest.approx(0.86 / 2, abs=0.03)  # rank 0's wait over the job's two ranks


def test_a_hosts_input_pipeline_and_card_imbalance_across_hosts_and_a_dcgm_only_host(prom):
    rep = report(prom, "--job", "wtc-input")
    hosts = {h["host"]: h for h in rep["hosts"]}
    assert set(hosts) == {"b0", "b1", "ub20-a100-k8s"}
    assert hosts["ub20-a100-k8s"]["sattui"] is False and hosts["ub20-a100-k8s"]["ranks"] == 0
    dcgm_cards = [c for c in rep["cards"] if c["host"] == "ub20-a100-k8s"]
    # The MIG instance's series are not a second card; GR_ENGINE_ACTIVE stands in for the util.
    assert len(dcgm_cards) == 1 and dcgm_cards[0]["source"] == "dcgm-exporter"
    assert dcgm_cards[0]["util_mean"] == pytest.approx(99.56, abs=0.004)  # the whole GPU (not the instance: 99.57)
    assert dcgm_cards[0]["mem_used_max"] == 4845 * 1024 * 1024
    found = {f["rule"]: f for f in rep["findings"]}
    wc = found["worker_cpu_bound"]
    assert wc["host"] == "b0" and wc["impact"] == pytest.approx(0.2, abs=0.02)
    assert wc["evidence"]["data_wait_shares"] == {"b0": pytest.approx(0.4, abs=0.02), "b1": 0.0}
    ci = found["card_imbalance"]
    assert ci["host"] == "b0" and ci["card"] == 0 and ci["evidence"]["spread"] == pytest.approx(44.6, abs=1.0)
    b0 = next(c for c in rep["cards"] if c["host"] == "b0")
    assert b0["idle"]["by_state"] == {"data_wait": pytest.approx(0.45, abs=0.02)}
    assert rep["verdict"]["rule"] == "worker_cpu_bound" and rep["verdict"]["host"] == "b0"


def test_the_run_filter_keeps_the_runs_hosts(prom):
    rep = report(prom, "--run", "run-b")
    assert {h["host"] for h in rep["hosts"]} == {"b0", "b1"}
    assert {r["run_id"] for r in rep["trainer"]["ranks"]} == {"run-b"}


def test_the_slurm_job_filter_keeps_the_jobs_hosts(prom):
    """``--slurm-job``: a matcher on the ``slurm_job_id`` label every sattui series carries
    (the input job's nodes run Slurm job 4242; the straggler job's and the dcgm-only host
    have none)."""
    rep = report(prom, "--slurm-job", "4242")
    assert {h["host"] for h in rep["hosts"]} == {"b0", "b1"}
    assert {r["rank"] for r in rep["trainer"]["ranks"]} == {2, 3}
    assert rep["source"]["slurm_job_id"] == "4242"
    got = sattui("report", "--prometheus", prom.url, "--slurm-job", "999", "--since", "5m")
    assert got.returncode != 0 and got.stderr.count("\n") == 1 and "Slurm job 999" in got.stderr


def test_text_report(prom):
    got = sattui("report", "--prometheus", prom.url, "--job", "wtc-strag", "--since", "5m")
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines()[0].startswith("verdict     HIGH straggler") and "n1" in got.stdout.splitlines()[0]


def test_an_unknown_job_is_one_line(prom):
    got = sattui("report", "--prometheus", prom.url, "--job", "no-such-job", "--since", "5m")
    assert got.returncode != 0 and len(got.stderr.strip().splitlines()) == 1
    assert "no sattui or dcgm-exporter series for job no-such-job" in got.stderr


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_prometheus_down_or_garbage_is_one_line():
    port = _closed_port()
    got = sattui("report", "--prometheus", f"http://127.0.0.1:{port}", "--json")
    assert got.returncode != 0 and "Traceback" not in got.stderr
    assert got.stderr.strip().splitlines() == [
        f"sattui: error: Prometheus at http://127.0.0.1:{port} is not reachable: Connection refused"]
    with StaticExporter("<html>\x1b[31mnot prometheus</html>") as junk:
        got = sattui("report", "--prometheus", f"http://127.0.0.1:{junk.port}")
    assert got.returncode != 0 and len(got.stderr.strip().splitlines()) == 1
    assert "answered something that is not its API's JSON" in got.stderr and "\x1b" not in got.stderr
    for bad in ("ftp://x", "127.0.0.1:9090", "http://h:1/?q=1"):
        got = sattui("report", "--prometheus", bad)
        assert got.returncode != 0 and len(got.stderr.strip().splitlines()) == 1, got.stderr
    got = sattui("report", "--prometheus", "http://127.0.0.1:1", "--since", "yesterday")
    assert got.returncode != 0 and "not a duration" in got.stderr


def test_a_slow_prometheus_is_one_line():
    # Accepts the connection and never answers.
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    held: list[socket.socket] = []
    t = threading.Thread(target=lambda: held.append(srv.accept()[0]), daemon=True)
    t.start()
    try:
        with pytest.raises(PromError, match=r"did not answer within 1 s$"):
            PromClient(f"http://127.0.0.1:{srv.getsockname()[1]}", timeout_s=1.0).query("up")
    finally:
        for c in held:
            c.close()
        srv.close()
