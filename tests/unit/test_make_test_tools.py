"""`make test` installs the Debian packages its tests run for real (issue 21): the
Makefile's `test-tools` rule (scripts/test_tools.sh), run by the real make in a copy of
the repository's Makefile and script, with PATH holding only what each case needs. A fake
`apt-get` records how it was called and "installs" by placing the programs on PATH; a
fake `id` plays a user who is not root."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")

pytestmark = pytest.mark.skipif(MAKE is None, reason="make not installed (the README's commands need it)")


def _tool(bin_dir: Path, name: str, body: str = "exit 0") -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _copy(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A repository copy with the Makefile and the script; an empty bin folder; a log."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "Makefile", repo / "Makefile")
    shutil.copy(REPO / "scripts" / "test_tools.sh", repo / "scripts" / "test_tools.sh")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    return repo, bin_dir, tmp_path / "apt.log"


def _fake_apt(bin_dir: Path, log: Path) -> None:
    # Installs by placing each program of the named packages on PATH, as Debian's would.
    _tool(bin_dir, "apt-get", f"""echo "$*" >> {log}
for p in "$@"; do
  case "$p" in
    prometheus) printf '#!/bin/sh\\n' > {bin_dir}/prometheus; printf '#!/bin/sh\\n' > {bin_dir}/promtool
                /bin/chmod +x {bin_dir}/prometheus {bin_dir}/promtool;;
    tmux) printf '#!/bin/sh\\n' > {bin_dir}/tmux; /bin/chmod +x {bin_dir}/tmux;;
  esac
done""")


def _make(repo: Path, bin_dir: Path) -> subprocess.CompletedProcess[str]:
    assert MAKE is not None
    return subprocess.run([MAKE, "-s", "test-tools"], cwd=repo, capture_output=True, text=True, timeout=60,
                          env={"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "/root")})


def test_root_with_apt_installs_prometheus_and_tmux_where_missing(tmp_path):
    repo, bin_dir, log = _copy(tmp_path)
    _fake_apt(bin_dir, log)
    _tool(bin_dir, "id", 'echo 0')
    r = _make(repo, bin_dir)
    assert r.returncode == 0, r.stderr
    assert log.read_text().splitlines() == ["update -qq", "install -y -qq prometheus tmux"]
    assert "installing Debian's prometheus tmux" in r.stderr
    # A second run finds them and installs nothing.
    assert _make(repo, bin_dir).returncode == 0
    assert len(log.read_text().splitlines()) == 2


def test_only_what_is_missing_is_installed(tmp_path):
    repo, bin_dir, log = _copy(tmp_path)
    _fake_apt(bin_dir, log)
    _tool(bin_dir, "id", 'echo 0')
    _tool(bin_dir, "tmux")
    _tool(bin_dir, "prometheus")  # promtool missing: the package brings both
    r = _make(repo, bin_dir)
    assert r.returncode == 0, r.stderr
    assert log.read_text().splitlines()[-1] == "install -y -qq prometheus"


def test_nothing_missing_calls_no_apt(tmp_path):
    repo, bin_dir, log = _copy(tmp_path)
    _fake_apt(bin_dir, log)
    for name in ("prometheus", "promtool", "tmux"):
        _tool(bin_dir, name)
    r = _make(repo, bin_dir)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert not log.exists()


def test_not_root_stops_at_once_with_one_line_naming_package_and_command(tmp_path):
    repo, bin_dir, log = _copy(tmp_path)
    _fake_apt(bin_dir, log)
    _tool(bin_dir, "id", 'echo 1000')
    _tool(bin_dir, "tmux")
    r = _make(repo, bin_dir)
    assert r.returncode != 0
    lines = [x for x in r.stderr.splitlines() if not x.startswith("make: ")]
    assert lines == ["make test: the tests need Debian's prometheus: run 'sudo apt-get install -y prometheus' "
                     "(or install prometheus another way), then make test again"], r.stderr
    assert not log.exists()


def test_no_apt_get_stops_with_the_same_line(tmp_path):
    repo, bin_dir, log = _copy(tmp_path)
    _tool(bin_dir, "id", 'echo 0')
    r = _make(repo, bin_dir)
    assert r.returncode != 0
    assert "the tests need Debian's prometheus tmux: run 'sudo apt-get install -y prometheus tmux'" in r.stderr


def test_make_test_runs_the_rule_before_pytest():
    # `make -n` prints the recipes in the order make would run them.
    assert MAKE is not None
    r = subprocess.run([MAKE, "-n", "-W", "pyproject.toml", "test"], cwd=REPO, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    tools = next(i for i, x in enumerate(lines) if "scripts/test_tools.sh" in x)
    # pytest runs inside scripts/run_tests.sh (its three parts: tests/unit/test_run_tests_script.py)
    pytest_line = next(i for i, x in enumerate(lines) if "scripts/run_tests.sh" in x)
    assert tools < pytest_line
