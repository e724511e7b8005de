"""`sattui demo` in a real terminal (tmux, 80x24), read back as a person would see it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from tests.e2e.conftest import REPO, _have_torch

pytestmark = [pytest.mark.e2e, pytest.mark.beside]


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=10).stdout


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_demo_in_an_80x24_tmux_pane_shows_cards_workers_and_the_simulated_label():
    if not _have_torch():
        pytest.skip("torch not installed")
    name = f"sattui-test-{uuid.uuid4().hex[:8]}"
    cmd = f"cd {REPO} && {sys.executable} -m sattui demo --scenario starved"
    _tmux("new-session", "-d", "-s", name, "-x", "80", "-y", "24", cmd)
    try:
        screen = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(2)
            screen = _tmux("capture-pane", "-p", "-t", name)
            # wait for what is asserted below: a worker's own process line (the word alone
            # matched elsewhere at 3 s, before the worker was listed, and failed on CI)
            if "SIMULATED" in screen and any(x.startswith("worker ") for x in screen.splitlines()) \
                    and "W" in screen.split("main thread", 1)[-1][:60] and "data_wait" in screen:
                break
        lines = screen.splitlines()
        assert len(lines) <= 24 and all(len(x) <= 80 for x in lines)
        assert "SIMULATED" in screen, screen
        assert "main thread" in screen and "data_wait" in screen, screen
        assert any(x.startswith("worker ") for x in lines), screen
        assert "q quit" in screen, screen
        assert "Traceback" not in screen
        pane_pid = int(_tmux("display-message", "-p", "-t", name, "#{pane_pid}").strip())
        family = psutil.Process(pane_pid).children(recursive=True)
        _tmux("send-keys", "-t", name, "q")
        gone, alive = psutil.wait_procs(family, timeout=20)
        assert not alive, f"left running after q: {[p.cmdline() for p in alive]}"
    finally:
        _tmux("kill-session", "-t", name)
