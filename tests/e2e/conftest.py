"""Real PyTorch trainers for end-to-end tests (torch is a test-only dependency)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]


def _have_torch() -> bool:
    try:
        import importlib.util

        return importlib.util.find_spec("torch") is not None
    except Exception:
        return False


def sattui_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "sattui", *args]


def run_sattui(*args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(sattui_cmd(*args), capture_output=True, text=True, timeout=timeout, cwd=REPO, **kw)


def py_spy_on(pid: int) -> list[psutil.Process]:
    """Every py-spy on the machine sampling ``pid``.

    Searched machine-wide, not among a process's children: sattui starts py-spy in a
    session of its own, so one left behind is re-parented to PID 1 and no longer a
    descendant of anything the test started.
    """
    out = []
    for p in psutil.process_iter(["name", "cmdline"]):
        try:
            cmd = p.info["cmdline"] or []
            if p.info["name"] == "py-spy" and str(pid) in cmd:
                out.append(p)
        except psutil.Error:
            pass
    return out


class Trainer:
    """A running ``sattui.demo.trainer`` with its own truth file."""

    def __init__(self, tmp: Path, scenario: str, seconds: float, *extra: str, env: dict | None = None) -> None:
        self.truth = tmp / f"truth-{scenario}-{time.monotonic_ns()}.jsonl"
        cmd = [sys.executable, "-m", "sattui.demo.trainer", "--scenario", scenario, "--seconds", str(seconds),
               "--truth", str(self.truth), *extra]
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})})
        self.pid = self.proc.pid

    def wait_training(self, timeout: float = 60) -> None:
        """Until the training loop has run a while (imports done, workers up)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.truth.exists() and len(self.truth.read_text().splitlines()) >= 2:
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"trainer died: {self.proc.stdout.read().decode()}")
            time.sleep(0.2)
        raise AssertionError("trainer did not start training in time")

    def truth_lines(self) -> list[dict]:
        return [json.loads(x) for x in self.truth.read_text().splitlines() if x.strip()]

    def wait_share(self, wall0: float, wall1: float) -> float:
        """The trainer's own share of wall time in next(loader) between two wall-clock times."""
        lines = self.truth_lines()
        a = min(lines, key=lambda r: abs(r["wall"] - wall0))
        b = min(lines, key=lambda r: abs(r["wall"] - wall1))
        assert b["elapsed_s"] - a["elapsed_s"] > 5, (a, b)
        return (b["wait_s"] - a["wait_s"]) / (b["elapsed_s"] - a["elapsed_s"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # DataLoader workers killed mid-start can outlive the trainer; leave nothing behind.
        for p in psutil.process_iter(["cmdline"]):
            try:
                if p.info["cmdline"] and str(self.truth) in " ".join(p.info["cmdline"]):
                    p.kill()
            except psutil.Error:
                pass


@pytest.fixture
def trainer_factory(tmp_path):
    if not _have_torch():
        pytest.skip("torch not installed (pip install torch==2.13.0)")
    if shutil.which("py-spy") is None and not (Path(sys.executable).parent / "py-spy").exists():
        pytest.skip("py-spy not installed")
    made: list[Trainer] = []

    def make(scenario: str, seconds: float, *extra: str, env: dict | None = None) -> Trainer:
        t = Trainer(tmp_path, scenario, seconds, *extra, env=env)
        made.append(t)
        return t

    yield make
    for t in made:
        t.stop()
