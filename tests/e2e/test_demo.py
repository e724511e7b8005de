"""`sattui demo --headless`: the real demo trainer (PyTorch) feeding the SIMULATED card,
recorded with real py-spy. The card's utilization must follow what the trainer really
does: low while its main thread waits for data, high while it computes."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

import pytest

from sattui.demo.launch import SCENARIOS
from sattui.recording import RecordingReader, samples_from_record
from tests.e2e.conftest import need_trainer_tools, run_sattui

pytestmark = pytest.mark.e2e

COMPUTE = ("forward", "backward", "optimizer")


@pytest.fixture(autouse=True)
def _needs_torch_and_py_spy():
    need_trainer_tools()


def _demo(tmp_path: Path, scenario: str, seconds: float = 15) -> tuple[dict, list[dict]]:
    out = tmp_path / f"{scenario}.jsonl"
    r = run_sattui("demo", "--headless", "--scenario", scenario, "--duration", str(seconds), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return _read(out)


def _read(path: Path) -> tuple[dict, list[dict]]:
    reader = RecordingReader(str(path))
    return reader.header, list(reader.records())


def _main_spans(header: dict, recs: list[dict]) -> list[tuple[float, float, str | None]]:
    pid = header["pid"]
    return [(s.t, s.t + s.dur, s.state) for r in recs if r["kind"] == "stacks" and r["pid"] == pid
            for s in samples_from_record(r) if s.tid == pid]


def _card_windows(recs: list[dict]) -> list[tuple[float, float, float]]:
    """(t0, t1, util) per card sample: the sim card's util is the busy share of the
    interval since its previous sample."""
    cards = sorted((r for r in recs if r["kind"] == "card"), key=lambda r: r["t"])
    return [(a["t"], b["t"], b["util"]) for a, b in zip(cards, cards[1:])]


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def _util_during(spans, windows, activities) -> tuple[float, float]:
    """Mean card util weighted by how long the main thread was in ``activities`` in
    each card window; also the seconds that weight covers."""
    num = den = 0.0
    for c0, c1, util in windows:
        w = sum(_overlap(c0, c1, s0, s1) for s0, s1, act in spans if act in activities)
        num += w * util
        den += w
    return (num / den if den else float("nan")), den


def test_starved_demo_util_dips_while_the_trainer_waits_for_data(starved_demo):
    # the run test_export_demo.py exports too (one run per scenario: conftest.py)
    header, recs = _read(starved_demo)
    (card,) = header["cards"]
    assert card["simulated"] is True and "SIMULATED" in card["name"]
    assert header["backend"] == "sim"
    cards = [r for r in recs if r["kind"] == "card"]
    assert len(cards) >= 20 and all(r["sm_active"] is None for r in cards)
    spans = _main_spans(header, recs)
    windows = _card_windows(recs)
    wait_util, wait_s = _util_during(spans, windows, ("data_wait",))
    compute_util, compute_s = _util_during(spans, windows, COMPUTE)
    assert wait_s > 3 and compute_s > 1.5, (wait_s, compute_s)
    # Measured (2 cores): ~12 % while waiting against ~70 % while computing.
    assert wait_util < 40 < compute_util, (wait_util, compute_util)
    assert compute_util - wait_util > 30, (wait_util, compute_util)
    # and the recording reads back through `sattui report`, input-bound
    rep = _report(starved_demo)
    assert rep["trainer"]["states"]["data_wait"] > 0.3
    assert rep["verdict"]["rule"] in SCENARIOS["starved"].expect, rep["verdict"]


def _report(path: Path) -> dict:
    r = run_sattui("report", str(path), "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_io_bound_demo_waits_on_its_workers_data_not_on_restarts(tmp_path):
    # Two forked workers that sleep on (simulated) storage, restarted every ~5-s epoch
    # (persistent_workers=False): a new worker is in its fetch loop within milliseconds, so
    # the wait is the workers' data, not their restarts (it read as HIGH worker_respawn
    # 40 % when every worker's first 3 s counted as "starting").
    _demo(tmp_path, "io_bound", seconds=22)
    rep = _report(tmp_path / "io_bound.jsonl")
    assert rep["verdict"]["rule"] in SCENARIOS["io_bound"].expect, rep["verdict"]
    (rank,) = rep["trainer"]["ranks"]
    assert rank["lost"].get("worker_respawn", 0.0) < 0.10, rank["lost"]
    assert rank["lost"]["worker_io_bound"] > 0.5, rank["lost"]
    medium = {f["rule"] for f in rep["findings"] if f["severity"] in ("medium", "high")}
    assert medium == {"worker_io_bound"}, rep["findings"]


def test_healthy_demo_keeps_the_card_busy(tmp_path):
    header, recs = _demo(tmp_path, "healthy")
    assert header["cards"][0]["simulated"] is True
    spans = _main_spans(header, recs)
    # Judge from the first step on: before it the trainer is importing torch.
    first_step = min(s0 for s0, _s1, act in spans if act in COMPUTE)
    utils = [u for _c0, c1, u in _card_windows(recs) if c1 > first_step + 1.0]
    assert len(utils) >= 10
    mean = sum(utils) / len(utils)
    assert mean > 70, utils
    compute_util, compute_s = _util_during(spans, _card_windows(recs), COMPUTE)
    # Seconds of compute after torch's import: 4.2 s of the 15 on a loaded 2-core CI run.
    assert compute_util > 80 and compute_s > 3, (compute_util, compute_s)



def test_slow_worker_start_demo_waits_on_its_workers_restarts(tmp_path):
    # Two workers whose worker_init_fn sleeps 1.5 s, restarted every ~2-s epoch
    # (persistent_workers=False). Asleep while starting, they look like workers waiting on
    # their data (it read as HIGH input_bound, MEDIUM worker_io_bound, no worker_respawn);
    # by timing, each new generation's start (birth to first batch) is the restart's.
    out, truth = tmp_path / "slow.jsonl", tmp_path / "truth.jsonl"
    r = run_sattui("record", "-o", str(out), "--rate", "20", "--duration", "90", "--",
                   sys.executable, "-m", "sattui.demo.trainer", "--scenario", "slow_worker_start",
                   "--seconds", "22", "--truth", str(truth), timeout=150)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    last = [json.loads(x) for x in truth.read_text().splitlines() if x.strip()][-1]
    assert last["restarts"] >= 4, last  # the scenario is what it claims
    true_start_s = last["restart_s"] / last["restarts"]
    rep = _report(out)
    assert rep["verdict"]["rule"] in SCENARIOS["slow_worker_start"].expect, rep["verdict"]
    f = next(f for f in rep["findings"] if f["rule"] == "worker_respawn")
    assert f["severity"] == "high", f
    ev = f["evidence"]
    # Measured (2 loaded cores): 1.62 s a start seen, its truth 1.59 s; 7 restarts seen of 7.
    # With both cores also busy, 1.60 s of 1.54: a start whose compute fell between samples
    # ends where the main thread is seen unpickling its first batch (1.93 s before, and 1.87
    # on a CI machine, read to the end of the next start).
    assert abs(ev["start_s_per_epoch"] - true_start_s) <= 0.3, (ev, true_start_s)
    # The report judges from its 10-s warm-up on: the restarts the trainer made after it.
    started = datetime.fromisoformat(_read(out)[0]["started_at"]).timestamp()
    lines = [json.loads(x) for x in truth.read_text().splitlines() if x.strip()]
    before = [x["restarts"] for x in lines if x["wall"] <= started + rep["advisor"]["warmup_s"]]
    judged = last["restarts"] - (before[-1] if before else 0)
    assert judged - 2 <= ev["restarts"] <= last["restarts"], (ev, judged, last)
