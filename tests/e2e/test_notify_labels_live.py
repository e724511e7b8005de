"""Issue 24 items 3 and 4 on a real trainer: ``sattui record --metrics … --webhook …`` on
the input-bound demo, started with SLURM_JOB_ID in its environment. One run, judged twice:
the job labels on the real exporter page and in the recording header; a POST for the
demo's data starvation on a real HTTP server on 127.0.0.1, and its ``notify_sent`` event
in the file. The advisor names the starvation by its cause where it can tell
(``worker_cpu_bound``: the one worker busy-loops), ``input_bound`` where it cannot: the
demo's own expectation (sattui/demo/launch.py, "starved") is any of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sattui.demo.launch import SCENARIOS
from tests.e2e.conftest import REPO, need_trainer_tools, sattui_cmd
from tests.prom import free_port

pytestmark = pytest.mark.e2e

TRAINER_S = 30
SLURM_JOB = "880011"
STARVED = SCENARIOS["starved"].expect


class _Hook:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                n = int(self.headers.get("Content-Length") or 0)
                outer.bodies.append(json.loads(self.rfile.read(n)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *a: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    need_trainer_tools()
    tmp = tmp_path_factory.mktemp("notify")
    hook = _Hook()
    port = free_port()
    out = tmp / "run.jsonl"
    env = {**os.environ, "SLURM_JOB_ID": SLURM_JOB, "SLURM_JOB_NAME": "demo-input", "SLURM_PROCID": "0"}
    log = open(tmp / "sattui.log", "wb")
    p = subprocess.Popen(sattui_cmd("record", "-o", str(out), "--duration", "90", "--metrics", f"127.0.0.1:{port}",
                                    "--webhook", hook.url, "--", sys.executable, "-m", "sattui.demo.trainer",
                                    "--scenario", "input_bound", "--seconds", str(TRAINER_S)),
                         cwd=REPO, stdout=log, stderr=log, env=env)
    page: dict[str, list] = {}
    try:
        deadline = time.monotonic() + TRAINER_S + 45
        while p.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    got = {f.name: f.samples for f in text_string_to_metric_families(r.read().decode())}
                if got.get("sattui_rank_state_seconds"):
                    page = got
            except OSError:
                pass
            time.sleep(1.0)
        code = p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
        log.close()
        hook.httpd.shutdown()
        hook.httpd.server_close()
    said = (tmp / "sattui.log").read_text(errors="replace")
    recs = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    return {"code": code, "said": said, "page": page, "recs": recs, "bodies": hook.bodies, "out": str(out)}


def test_the_slurm_job_is_on_every_series_of_a_real_page_and_in_the_header(run):
    assert run["code"] == 0 and "Traceback" not in run["said"], run["said"][-3000:]
    page = run["page"]
    assert page, "no page with rank series was scraped: " + run["said"][-2000:]
    n = 0
    for name, samples in page.items():
        for s in samples:
            assert s.labels.get("slurm_job_id") == SLURM_JOB, (name, s.labels)
            assert s.labels.get("pod", "") == "" and s.labels.get("namespace", "") == "", (name, s.labels)
            n += 1
    assert n > 20
    job = run["recs"][0]["labels"]
    assert (job["slurm_job_id"], job["slurm_job_name"], job["slurm_procid"]) == (SLURM_JOB, "demo-input", "0")
    assert job["pod"] == "" and job["pod_uid"] == ""  # unknown: empty, never a guess


def test_the_webhook_gets_the_data_starvation_and_the_recording_says_it_was_sent(run):
    assert run["code"] == 0, run["said"][-3000:]
    firing = [b for b in run["bodies"] if b["state"] == "firing"]
    starved = [b for b in firing if b["rule"] in STARVED]
    assert starved, run["bodies"]
    b = starved[0]
    assert b["severity"] in ("medium", "high") and b["recording"] == run["out"]
    assert b["text"].startswith("sattui on ") and b["rule"] in b["text"] and b["summary"] in b["text"]
    assert b["labels"]["slurm_job_id"] == SLURM_JOB
    # one message per finding: no repeat within the run
    keys = [(x["rule"], x["card"], x["rank"], x["state"]) for x in run["bodies"]]
    assert len(keys) == len(set(keys)), keys
    sent = [r for r in run["recs"] if r["kind"] == "event" and r["type"] == "notify_sent"]
    assert any(r.get("rule") == b["rule"] for r in sent), sent
