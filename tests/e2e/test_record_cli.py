"""`sattui record` + `sattui report` on real PyTorch training processes with real py-spy.

Each trainer measures its own truth inside the process (time in ``next(loader)``);
sattui's figure from outside must agree with it.
"""

from __future__ import annotations

import json
import secrets
import sys
import time

import pytest

from tests.e2e.conftest import run_sattui

pytestmark = pytest.mark.e2e


def _record(pid: int, out, seconds: float) -> tuple[float, float]:
    w0 = time.time()
    r = run_sattui("record", "--pid", str(pid), "-o", str(out), "--duration", str(seconds))
    w1 = time.time()
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return w0, w1


def _report(path) -> dict:
    r = run_sattui("report", str(path), "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_input_bound_data_wait_matches_the_trainers_own_figure(trainer_factory, tmp_path):
    secret = secrets.token_hex(16)
    tr = trainer_factory("input_bound", 45, env={"WANDB_API_KEY": secret, "NCCL_DEBUG": "WARN"})
    tr.wait_training()
    out = tmp_path / "run.jsonl"
    w0, w1 = _record(tr.pid, out, 20)
    rep = _report(out)
    truth = tr.wait_share(w0, w1)
    states = rep["trainer"]["states"]
    assert rep["format"] == "sattui.report/1"
    assert 19 <= rep["duration_s"] <= 25
    assert truth > 0.5, f"scenario is not input bound: truth {truth:.2f}"
    assert abs(states["data_wait"] - truth) <= 0.10, (states, truth)
    assert rep["trainer"]["pid"] == tr.pid
    assert rep["trainer"]["workers"] == 1
    roles = {p["role"] for p in rep["processes"]}
    assert {"main", "worker"} <= roles
    worker = next(p for p in rep["processes"] if p["role"] == "worker")
    assert worker["name"] == "pt_data_worker"
    assert worker["cpu_mean"] > 0.3  # the busy-looping worker really works
    assert rep["top_stacks"][0]["state"] == "data_wait"
    # Secrets: allow-listed variables only; the key's value appears nowhere.
    raw = out.read_text()
    assert secret not in raw and "WANDB_API_KEY" not in raw
    header = json.loads(raw.splitlines()[0])
    assert header["env"].get("NCCL_DEBUG") == "WARN"
    text = run_sattui("report", str(out))
    assert text.returncode == 0 and "data_wait" in text.stdout and "pt_data_worker" in text.stdout
    assert secret not in text.stdout


def test_compute_bound_shows_little_data_wait(trainer_factory, tmp_path):
    tr = trainer_factory("compute_bound", 30)
    tr.wait_training()
    out = tmp_path / "run.jsonl"
    w0, w1 = _record(tr.pid, out, 12)
    states = _report(out)["trainer"]["states"]
    truth = tr.wait_share(w0, w1)
    assert truth <= 0.10
    # within 0.10 of the trainer's own small figure, as the input-bound test's tolerance:
    # on a loaded 2-core box sampled shares stray that far (CI saw 0.13 once)
    assert states.get("data_wait", 0.0) <= truth + 0.10, (states, truth)
    assert states.get("forward", 0) + states.get("backward", 0) + states.get("optimizer", 0) >= 0.6, states


def test_num_workers_0_is_data_inline(trainer_factory, tmp_path):
    tr = trainer_factory("inline", 30)
    tr.wait_training()
    out = tmp_path / "run.jsonl"
    _record(tr.pid, out, 12)
    rep = _report(out)
    states = rep["trainer"]["states"]
    assert max(states, key=states.get) == "data_inline", states
    assert rep["trainer"]["workers"] == 0
    assert not [p for p in rep["processes"] if p["role"] == "worker"]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_record_command_finds_workers_and_pin_thread(trainer_factory, tmp_path, method):
    """`record -- CMD`: sattui starts the trainer, follows its workers, keeps its exit."""
    out = tmp_path / f"{method}.jsonl"
    r = run_sattui("record", "-o", str(out), "--duration", "60", "--",
                   sys.executable, "-m", "sattui.demo.trainer", "--scenario", "input_bound", "--seconds", "14",
                   "--workers", "2", "--pin-memory", "--start-method", method, "--persistent-workers")
    assert r.returncode == 0, r.stderr
    # The trainer itself ran to the end (a `python` on PATH without torch would die at once).
    assert "trainer exit code 0" in r.stderr, r.stderr
    rep = _report(out)
    by_role: dict[str, set] = {}
    for p in rep["processes"]:
        by_role.setdefault(p["role"], set()).add(p["name"])
    assert rep["trainer"]["workers"] == 2, rep["processes"]
    assert by_role.get("worker") == {"pt_data_worker"}
    assert by_role.get("pin") == {"pt_data_pin"}
    ev = [e for e in rep["events"] if e["type"] == "trainer_exited"]
    assert ev and ev[0]["exit_code"] == 0
    assert rep["trainer"]["states"].get("data_wait", 0) > 0.3
