"""The monitor's output files through the CLI (`sattui --record F --trainer-log L -- CMD`):
the default trainer log lives where nobody can plant a link beforehand, and --force
replaces existing files with new ones. The screen is a stand-in (no terminal needed);
the session, its trainer and its files are real."""

from __future__ import annotations

import os
import re
import stat
import tempfile
from pathlib import Path

import pytest

from sattui import cli


@pytest.fixture
def fake_ui(monkeypatch):
    """Stands in for sattui.app.run_app: waits for the trainer to exit, as a user would."""
    import time

    def run(session) -> int:
        end = time.monotonic() + 20
        while session.status().trainer_exit_code is None and time.monotonic() < end:
            time.sleep(0.05)
        session.stop()
        code = session.status().trainer_exit_code
        return code if isinstance(code, int) else 0

    monkeypatch.setattr(cli, "_run_ui", run)


def _said_log(err: str) -> Path:
    m = re.search(r"trainer output: (\S+)", err)
    assert m, err
    return Path(m.group(1))


def test_the_default_trainer_log_is_in_a_fresh_private_directory(fake_ui, capsys):
    logs = []
    for _ in range(2):
        assert cli.main(["--backend", "none", "--interval", "0.2", "--", "sh", "-c", "echo hello; exit 3"]) == 3
        logs.append(_said_log(capsys.readouterr().err))
    try:
        for log in logs:
            # A name made by mkdtemp: unguessable, so no link can wait for it; only root reads it.
            assert log.name == "trainer.log" and log.parent.name.startswith("sattui-trainer-")
            assert str(log.parent.parent) == tempfile.gettempdir()
            assert stat.S_IMODE(os.stat(log.parent).st_mode) == 0o700
            assert stat.S_IMODE(os.stat(log).st_mode) == 0o600
            assert log.read_text() == "hello\n"
        assert logs[0].parent != logs[1].parent
    finally:
        for log in logs:
            log.unlink()
            log.parent.rmdir()


def test_force_replaces_the_recording_and_the_trainer_log(fake_ui, tmp_path, capsys):
    rec, log = tmp_path / "rec.jsonl", tmp_path / "t.log"
    rec.write_text("older recording\n")
    log.write_text("older log\n")
    args = ["--backend", "none", "--interval", "0.2", "--record", str(rec), "--trainer-log", str(log)]
    cmd = ["--", "sh", "-c", "echo new; sleep 1.5"]  # lives past the session's first tick
    assert cli.main([*args, *cmd]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"sattui: error: cannot write {rec}: the file exists; pass --force to replace it"]
    assert rec.read_text() == "older recording\n" and log.read_text() == "older log\n"
    assert cli.main([*args, "--force", *cmd]) == 0
    assert log.read_text() == "new\n" and rec.read_text().startswith('{"kind":"header"')
    assert stat.S_IMODE(os.stat(rec).st_mode) == 0o600 and stat.S_IMODE(os.stat(log).st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.jsonl", "t.log"]
