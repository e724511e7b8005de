"""A fresh recording of the real demo trainer (PyTorch, py-spy, the SIMULATED card),
exported with `sattui export --perfetto`: a valid trace that says what the report says."""

from __future__ import annotations

import json

import pytest

from sattui.export_perfetto import CARD_PID_BASE
from sattui.recording import RecordingReader
from tests.e2e.conftest import need_trainer_tools, run_sattui
from tests.perfetto_check import check_events, load_trace, shares, state_seconds

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def _needs_torch_and_py_spy():
    need_trainer_tools()


def test_demo_recording_exports_to_a_trace_matching_the_report(starved_demo, tmp_path):
    rec = starved_demo  # the run test_demo.py judges (one run per scenario: conftest.py)
    out = tmp_path / "demo.trace.json"
    r = run_sattui("export", str(rec), "--perfetto", str(out))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"sattui: wrote {out}: ")
    ev = load_trace(str(out))["traceEvents"]
    check_events(ev, nested=False)

    rep = json.loads(run_sattui("report", str(rec), "--json").stdout)
    want = rep["trainer"]["states"]
    assert want, "the demo's main thread was sampled"
    pid = rep["trainer"]["pid"]
    got = shares(state_seconds(ev, pid))
    assert set(got) == set(want)
    for k, v in want.items():
        assert got[k] == pytest.approx(v, abs=0.005), (k, got, want)

    records = list(RecordingReader(str(rec)).records())
    util = sorted((round(c["t"] * 1e6, 3), c["util"]) for c in records if c["kind"] == "card" and c["util"] is not None)
    assert util and util == sorted((e["ts"], e["args"]["percent"]) for e in ev
                                   if e["ph"] == "C" and e["pid"] == CARD_PID_BASE and e["name"] == "utilization")
    # the DataLoader worker's CPU is drawn under the trainer (a worker's first sample has no CPU
    # figure yet: on a loaded box the worker may have started only in the last second)
    workers = sorted((round(r["t"] * 1e6, 3), r["cpu"]) for r in records
                     if r["kind"] == "proc" and r["role"] == "worker" and r["cpu"] is not None)
    assert workers == sorted((e["ts"], e["args"]["cores"]) for e in ev
                             if e["ph"] == "C" and e["pid"] == pid and e["name"].startswith("worker "))
