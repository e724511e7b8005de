"""Issue 24 items 3 and 4 on a real trainer: ``sattui record --metrics … --webhook …`` on
the input-bound demo, started with SLURM_JOB_ID in its environment. One run, judged twice:
the job labels on the real exporter page and in the recording header; a POST for the
demo's data starvation on a real HTTP server on 127.0.0.1, and its ``notify_sent`` event
in the file. The advisor names the starvation by its cause where it can tell
(``worker_cpu_bound``: the one worker busy-loops), ``input_bound`` where it cannot: the
demo's own expectation (sattui/demo/launch.py, "starved") is any of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sattui.demo.launch import SCENARIOS
from tests.e2e.conftest import EXPORTER_SLURM_JOB as SLURM_JOB
from tests.e2e.conftest import ExporterRun

pytestmark = pytest.mark.e2e

STARVED = SCENARIOS["starved"].expect


@pytest.fixture(scope="module")
def run(exporter_run: ExporterRun) -> dict:
    """The exporter's one run (conftest.py: test_metrics_first_scrape.py judges it too);
    the page is the last one scraped that had the rank's series."""
    pages = [pg for _wall, pg in exporter_run.pages if pg.get("sattui_rank_state_seconds")]
    recs = [json.loads(x) for x in Path(exporter_run.out).read_text().splitlines() if x.strip()]
    return {"code": exporter_run.code, "said": exporter_run.said, "page": pages[-1] if pages else {},
            "recs": recs, "bodies": exporter_run.bodies, "out": str(exporter_run.out)}


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
