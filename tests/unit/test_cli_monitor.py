"""The monitor's entry points in sattui/cli.py (`sattui --pid`, `sattui -- CMD`, `replay`,
`demo`): the session each builds, and one-line errors for bad input. The screen itself is
replaced by a stand-in, so these run without a terminal."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from sattui import cli
from sattui.session import LiveSession, ReplaySession

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "recordings" / "replay_starved.jsonl"


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def fake_ui(monkeypatch):
    """Stands in for sattui.app.run_app; ``until`` decides when the "user" quits.

    ``met`` says, per session, whether ``until`` came true before the stand-in gave up
    (20 s): a test asserts it, so a feed that never delivers fails rather than times out
    into a pass.
    """
    seen: dict = {"sessions": [], "until": lambda s: True, "met": []}

    def run(session) -> int:
        seen["sessions"].append(session)
        end = time.monotonic() + 20
        while not (met := bool(seen["until"](session))) and time.monotonic() < end:
            time.sleep(0.05)
        seen["met"].append(met)
        session.stop()
        code = session.status().trainer_exit_code
        return code if isinstance(code, int) else 0

    monkeypatch.setattr(cli, "_run_ui", run)
    return seen


def test_replay_builds_a_replay_session(fake_ui):
    assert cli.main(["replay", str(FIXTURE)]) == 0
    (s,) = fake_ui["sessions"]
    assert isinstance(s, ReplaySession) and s.path == str(FIXTURE)


def test_bad_input_is_one_line(capsys, tmp_path, fake_ui):
    foreign = tmp_path / "x.jsonl"
    foreign.write_text('{"a": 1}\n')
    assert cli.main(["replay", str(foreign)]) == 2
    assert "not a sattui recording" in _one_line(capsys)
    dead = subprocess.Popen(["true"])
    dead.wait()
    assert cli.main(["--pid", str(dead.pid)]) == 2
    assert "no such process" in _one_line(capsys)
    assert cli.main(["demo", "--scenario", "bogus"]) == 2
    assert "unknown demo scenario 'bogus'" in _one_line(capsys)
    assert cli.main(["--pid", "1", "--", "sleep", "1"]) == 2
    assert "not both" in _one_line(capsys)
    assert cli.main(["--backend", "none"]) == 2
    assert "nothing to watch" in _one_line(capsys)
    assert cli.main(["--backend", "none", "--", str(tmp_path / "no-such-program")]) == 2
    assert "cannot start" in _one_line(capsys)
    assert cli.main(["report", "x", "--", "sleep", "1"]) == 2
    assert "not taken by `sattui report`" in _one_line(capsys)
    assert fake_ui["sessions"] == []


def test_demo_without_torch_says_how_to_install_it(capsys, monkeypatch, fake_ui):
    monkeypatch.setitem(sys.modules, "torch", None)  # find_spec("torch") is then None
    assert cli.main(["demo"]) == 2
    line = _one_line(capsys)
    assert "pip install torch==2.13.0" in line
    assert fake_ui["sessions"] == []


def test_monitor_a_pid(fake_ui, tmp_path):
    p = subprocess.Popen(["sleep", "30"])
    try:
        out = tmp_path / "rec.jsonl"
        fake_ui["until"] = lambda s: bool(s.processes(0.0, s.now() + 1))
        assert cli.main(["--pid", str(p.pid), "--backend", "none", "--interval", "0.2", "--record", str(out)]) == 0
        assert fake_ui["met"] == [True], "the live feed never showed the process"
        (s,) = fake_ui["sessions"]
        assert isinstance(s, LiveSession) and s.pid == p.pid and s.record_path == str(out)
        assert p.poll() is None  # not ours: left running
        assert out.exists()
    finally:
        p.kill()
        p.wait()
    assert not [t for t in threading.enumerate() if t.name.startswith("sattui-")]


def test_monitor_a_command_returns_its_exit_code(fake_ui, tmp_path, capsys):
    log = tmp_path / "t.log"
    fake_ui["until"] = lambda s: s.status().trainer_exit_code is not None
    code = cli.main(["--backend", "none", "--interval", "0.2", "--trainer-log", str(log), "--",
                     "sh", "-c", "echo out; exit 5"])
    assert fake_ui["met"] == [True], "the session never saw the command exit"
    assert code == 5
    assert "out" in log.read_text()
    assert str(log) in capsys.readouterr().err


def test_demo_starts_the_trainer_on_the_sim_card_and_stops_it(fake_ui):
    pytest.importorskip("torch")
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    fake_ui["until"] = lambda s: bool(s.header.get("cards")) and bool(s.processes(0.0, s.now() + 1))
    assert cli.main(["demo", "--scenario", "healthy", "--interval", "0.5"]) == 0
    assert fake_ui["met"] == [True], "the demo never showed the sim card and the trainer"
    (s,) = fake_ui["sessions"]
    assert s.simulated and s.header["backend"] == "sim"
    assert "--sim-card" in s.command and "compute_bound" in s.command
    assert {c.pid for c in psutil.Process().children(recursive=True)} - before == set()


def test_no_arguments_without_an_accelerator_points_at_the_demo_and_pid(capsys, fake_ui):
    from sattui.vendors.backend import probe_all

    if any(p.available for p in probe_all()):
        pytest.skip("this machine has an accelerator: `sattui` alone watches its cards")
    assert cli.main([]) == 2
    err = capsys.readouterr().err
    assert "sattui demo" in err and "sattui --pid PID" in err and "sattui doctor" in err, err
    # Where to go, not the list of every backend that found nothing (doctor has that).
    assert "nvml" not in err and "rocm" not in err and "error" not in err, err
    assert all(len(line) <= 80 for line in err.splitlines())
    assert fake_ui["sessions"] == []


def test_headless_demo_keeps_the_trainers_output_and_names_its_failure(capsys, monkeypatch, tmp_path):
    # The trainer's output goes to a log (stopping it may make torch's threads print), and a
    # trainer that dies on its own is a one-line error with the last line it printed.
    from sattui.demo import launch

    monkeypatch.setattr(launch, "require_torch", lambda: None)
    script = "import sys; print('loading'); sys.stderr.write('Traceback (most recent call last):\\n  x\\n" \
             "RuntimeError: \\x1b[31mdataset gone\\n'); sys.exit(3)"
    monkeypatch.setattr(launch, "trainer_command", lambda sc, card, seconds: [sys.executable, "-c", script])
    out = tmp_path / "d.jsonl"
    assert cli.main(["demo", "--headless", "--duration", "20", "-o", str(out), "--interval", "0.2"]) == 2
    err = capsys.readouterr().err
    line = _last_line_of(err)  # after the recorder's own "trainer exited with code 3"
    assert "demo trainer exited (3)" in line and "RuntimeError: \\x1b[31mdataset gone" in line, line
    assert "Traceback" not in err
    assert out.exists()  # what was recorded is kept


def _last_line_of(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert 1 <= len(lines) <= 2, lines
    return lines[-1]
