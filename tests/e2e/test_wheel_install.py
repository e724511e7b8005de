"""The route for people who add sattui to their own training environment: a built wheel
installs into a clean virtual environment without the test extra (no torch, no pytest)
and its commands run from there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.beside]


def _run(cmd: list[str], timeout: float = 600, **kw) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return r


@pytest.mark.long
def test_wheel_installs_without_the_test_extra_and_doctor_runs(tmp_path):
    # Build from a copy: setuptools writes build/ and *.egg-info beside the sources,
    # and other tests read this checkout meanwhile.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "sattui", src / "sattui", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(src)])
    (wheel,) = dist.glob("sattui-*.whl")

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    py = env_dir / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "-q", str(wheel)])

    # Only the run-time dependencies came along.
    missing = _run([str(py), "-c", "import importlib.util as u; "
                    "print([m for m in ('torch', 'pytest', 'hypothesis') if u.find_spec(m) is None])"], cwd=tmp_path)
    assert missing.stdout.strip() == "['torch', 'pytest', 'hypothesis']"

    # As a user of that environment runs it: its bin first, none of this checkout's.
    env = {**os.environ, "PATH": os.pathsep.join([str(env_dir / "bin"), "/usr/bin", "/bin"])}
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    sattui = env_dir / "bin" / "sattui"
    ver = _run([str(sattui), "--version"], cwd=tmp_path, env=env)
    assert ver.stdout.startswith("sattui ")
    text = _run([str(sattui), "doctor"], cwd=tmp_path, env=env)
    assert "ptrace" in text.stdout and "card backends" in text.stdout, text.stdout
    d = json.loads(_run([str(sattui), "doctor", "--json"], cwd=tmp_path, env=env).stdout)
    assert d["format"] == "sattui.doctor/1"
    # py-spy is a run-time dependency: the wheel brings its own, found beside that Python.
    assert d["py_spy"]["ok"] is True and str(env_dir) in d["py_spy"]["path"], d["py_spy"]
    # The monitor's package data (its stylesheet) is in the wheel: the app module loads.
    _run([str(py), "-c", "import sattui.app, pathlib; assert pathlib.Path(sattui.app.SattuiApp.CSS_PATH).is_file()"],
         cwd=tmp_path, env=env)
