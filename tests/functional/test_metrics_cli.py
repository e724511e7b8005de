"""``--metrics HOST:PORT`` end to end: the real CLI serving a real scrape (cards from the
fake NVML), checked by ``promtool check metrics``; a port in use or a bad address is one
line and a non-zero exit; no flag, no listening socket."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.prom import free_port, promtool_check

REPO = Path(__file__).resolve().parents[2]
NVML_ENV = {**os.environ, "PYTHONPATH": f"{REPO / 'tests' / 'fixtures' / 'pynvml_shim'}{os.pathsep}{REPO}"}
SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def sattui(*args: str, **kw) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "sattui", *args], cwd=REPO, env=NVML_ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def scrape(port: int, timeout: float = 30, want: str = "sattui_card_utilization_ratio") -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                text = r.read().decode()
            if f"\n{want}{{" in text:  # a sample, not only its HELP line
                return text
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"no {want} at :{port} in {timeout} s: {text[:500]}")


def stop(p: subprocess.Popen[str]) -> tuple[str, str]:
    if p.poll() is None:
        p.send_signal(2)
    out, err = p.communicate(timeout=60)
    return out, err


def test_record_serves_the_contracts_metrics_and_promtool_accepts_them(tmp_path):
    port = free_port()
    p = sattui("record", "--backend", "nvml", "--no-stacks", "--metrics", f"127.0.0.1:{port}", "--host", "node-7",
               "-o", str(tmp_path / "r.jsonl"), "--", *SLEEPER)
    try:
        text = scrape(port)
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        info = fams["sattui_info"].samples[0].labels
        assert info["host"] == "node-7" and info["backend"] == "nvml"
        util = {s.labels["card"]: s.value for s in fams["sattui_card_utilization_ratio"].samples}
        assert util == {"0": pytest.approx(0.98), "1": pytest.approx(0.35)}  # the fake's H200 and A100
        assert {s.labels["host"] for f in fams.values() for s in f.samples if f.name.startswith("sattui_")} == \
            {"node-7"}
        dcgm = {s.labels["gpu"]: s.value for s in fams["DCGM_FI_DEV_GPU_UTIL"].samples}
        assert dcgm == {"0": 98.0, "1": 35.0}
        assert fams["DCGM_FI_DEV_GPU_UTIL"].samples[0].labels["Hostname"] == "node-7"
        # promtool: sattui's own names pass its lint; dcgm-exporter's `modelName` label is
        # camelCase by dcgm-exporter's choice, kept so dashboards work unchanged.
        problems = promtool_check(text)
        assert [x for x in problems if not (x.startswith("DCGM_FI_") and "camelCase" in x)] == []
        conns = [c for c in psutil.Process(p.pid).net_connections("inet") if c.status == psutil.CONN_LISTEN]
        assert [(c.laddr.ip, c.laddr.port) for c in conns] == [("127.0.0.1", port)]
    finally:
        _, err = stop(p)
    assert p.returncode == 0, err


def test_promtool_sees_a_bad_name(tmp_path):
    # The lint is real: a counter without _total, a name in camelCase.
    problems = promtool_check("# HELP fooBar_seconds x\n# TYPE fooBar_seconds counter\nfooBar_seconds 1\n")
    assert problems and any("_total" in x or "camelCase" in x for x in problems)


def test_no_listening_socket_without_the_flag(tmp_path):
    p = sattui("record", "--backend", "nvml", "--no-stacks", "-o", str(tmp_path / "r.jsonl"), "--", *SLEEPER)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "r.jsonl").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)
        proc = psutil.Process(p.pid)
        assert [c for c in proc.net_connections("all") if c.status == psutil.CONN_LISTEN] == []
    finally:
        stop(p)


def test_a_port_in_use_is_one_line_and_a_non_zero_exit(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        for args in (["record", "--backend", "nvml", "--no-stacks", "-o", str(tmp_path / "r.jsonl")],
                     ["--backend", "nvml"]):
            p = sattui(*args, "--metrics", f"127.0.0.1:{port}", "--", *SLEEPER) if args[0] == "record" else \
                sattui(*args, "--metrics", f"127.0.0.1:{port}", "--", *SLEEPER, stdin=subprocess.DEVNULL)
            out, err = p.communicate(timeout=60)
            assert p.returncode != 0
            assert err.strip().splitlines() == [f"sattui: error: cannot serve metrics on 127.0.0.1:{port}: "
                                                "the port is in use"], err
            assert "Traceback" not in err
        assert not (tmp_path / "r.jsonl").exists()  # nothing started


@pytest.mark.parametrize("bad", ["9400", "localhost", "127.0.0.1:99999", "::1:9400"])
def test_a_bad_address_is_one_line(tmp_path, bad):
    p = sattui("record", "--backend", "nvml", "-o", str(tmp_path / "r.jsonl"), "--metrics", bad, "--duration", "1")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2 and len(err.strip().splitlines()) == 1 and "--metrics" in err, err


def test_a_real_prometheus_scrapes_the_exporter(tmp_path):
    from tests.prom import Prometheus

    port = free_port()
    p = sattui("record", "--backend", "nvml", "--no-stacks", "--metrics", f"127.0.0.1:{port}", "--host", "node-9",
               "-o", str(tmp_path / "r.jsonl"), "--", *SLEEPER)
    try:
        scrape(port)
        with Prometheus([f"127.0.0.1:{port}"], job="wtc-scrape") as prom:
            got = prom.wait_for('sattui_card_utilization_ratio{host="node-9"}', n=2)
            assert {r["metric"]["card"]: float(r["value"][1]) for r in got} == {"0": pytest.approx(0.98),
                                                                         "1": pytest.approx(0.35)}
            assert all(r["metric"]["job"] == "wtc-scrape" for r in got)
            assert prom.query('up{job="wtc-scrape"}')[0]["value"][1] == "1"
    finally:
        stop(p)
