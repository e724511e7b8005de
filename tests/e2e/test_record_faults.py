"""Bad input and faults around `sattui record`: one line, the right exit, a readable file."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import psutil
import pytest

from sattui.recording import RecordingReader
from tests.e2e.conftest import REPO, py_spy_on, run_sattui, sattui_cmd


def _one_line_error(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_no_such_pid(tmp_path):
    line = _one_line_error(run_sattui("record", "--pid", str(_dead_pid()), "-o", str(tmp_path / "f.jsonl"),
                                      "--duration", "2"))
    assert "no such process" in line
    assert not (tmp_path / "f.jsonl").exists()


def test_output_not_writable(tmp_path):
    line = _one_line_error(run_sattui("record", "--pid", str(psutil.Process().pid), "-o",
                                      str(tmp_path / "missing" / "f.jsonl"), "--duration", "1"))
    assert "cannot write" in line


def test_record_needs_a_target(tmp_path):
    line = _one_line_error(run_sattui("record", "-o", str(tmp_path / "f.jsonl"), "--backend", "none"))
    assert "--pid" in line
    # auto with no accelerator here and no trainer: nothing to record, said why.
    line = _one_line_error(run_sattui("record", "-o", str(tmp_path / "f.jsonl"), "--backend", "auto",
                                      "--duration", "1"))
    assert "no accelerator found" in line
    line = _one_line_error(run_sattui("record", "-o", str(tmp_path / "f.jsonl"), "--backend", "bogus"))
    assert "unknown backend 'bogus'" in line


def test_report_of_a_foreign_file(tmp_path):
    f = tmp_path / "foreign.jsonl"
    f.write_text('{"hello": "world"}\n')
    assert "not a sattui" in _one_line_error(run_sattui("report", str(f)))
    assert "cannot read" in _one_line_error(run_sattui("report", str(tmp_path / "nope.jsonl")))


def test_help_lists_only_built_commands():
    r = run_sattui("--help")
    assert r.returncode == 0
    for cmd in ("record", "report", "doctor", "replay", "demo"):
        assert cmd in r.stdout
    v = run_sattui("--version")
    assert v.returncode == 0 and v.stdout.startswith("sattui ")


def test_doctor_json_says_ptrace_and_py_spy():
    r = run_sattui("doctor", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["py_spy"]["ok"] is True and d["py_spy"]["version"]
    if psutil.Process().uids().effective == 0:
        assert d["ptrace"]["ok"] is True
    assert "ptrace" in run_sattui("doctor").stdout


def test_not_a_python_process_records_processes_and_says_why(tmp_path):
    target = subprocess.Popen(["sleep", "60"])
    try:
        out = tmp_path / "f.jsonl"
        r = run_sattui("record", "--pid", str(target.pid), "-o", str(out), "--duration", "6")
        assert r.returncode == 0, r.stderr
        assert "not a Python process" in r.stderr
        rep = json.loads(run_sattui("report", str(out), "--json").stdout)
        assert [p["name"] for p in rep["processes"] if p["role"] == "main"] == ["sleep"]
        # not Python, so maybe a launcher: sattui looked below it for a trainer, found none
        assert rep["trainer"]["sampler"]["problem"] == "not a Python process (sleep), and no trainer was found below it"
        assert rep["trainer"]["launcher"] == "sleep" and rep["trainer"]["found"] == []
        assert rep["trainer"]["states"] == {}
    finally:
        target.kill()
        target.wait()


@pytest.mark.e2e
@pytest.mark.beside  # it judges the file's end, not a timing
def test_trainer_exits_mid_recording(trainer_factory, tmp_path):
    tr = trainer_factory("compute_bound", 6)
    out = tmp_path / "f.jsonl"
    t0 = time.monotonic()
    r = run_sattui("record", "--pid", str(tr.pid), "-o", str(out), "--duration", "120")
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 < 60
    reader = RecordingReader(str(out))
    recs = list(reader.records())
    assert reader.warnings == []
    types = [x.get("type") for x in recs if x["kind"] == "event"]
    assert "trainer_exited" in types and types[-1] == "recording_ended"
    assert recs[-1]["ended_by"] == "trainer_exited"


@pytest.mark.e2e
@pytest.mark.beside  # the file's end, the trainer alive, no py-spy left: no timing
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_recording_leaving_a_readable_file(trainer_factory, tmp_path, sig):
    tr = trainer_factory("input_bound", 60)
    tr.wait_training()
    out = tmp_path / "f.jsonl"
    p = subprocess.Popen(sattui_cmd("record", "--pid", str(tr.pid), "-o", str(out)), cwd=REPO,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(6)
    p.send_signal(sig)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert "Traceback" not in err
    recs = list(RecordingReader(str(out)).records())
    assert recs[-1]["ended_by"] == sig.name
    assert any(x["kind"] == "stacks" for x in recs)
    assert tr.proc.poll() is None, "sattui must not stop a trainer it only attached to"
    # Machine-wide: a py-spy left behind is no child of this test (its own session).
    left = py_spy_on(tr.pid)
    for x in left:
        x.kill()
    assert left == [], "py-spy outlived sattui"
