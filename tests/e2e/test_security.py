"""sattui runs as root (issue 12): nothing it writes follows a planted link or replaces a
file unasked, and nothing it shows carries a terminal escape.

The hostile side is real: ``tests/e2e/hostile_trainer.py`` is a PyTorch CPU trainer
whose argv, process name (``prctl(PR_SET_NAME)``), thread name and stack frames carry
OSC/CSI escape sequences and newlines, watched by the real ``sattui`` in a real tmux
pane; the card name comes from the fake NVML library (tests/fixtures/pynvml_shim_hostile).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from tests.e2e import hostile_trainer as H
from tests.e2e.conftest import REPO, _have_torch, run_sattui

pytestmark = [pytest.mark.e2e, pytest.mark.beside]

HOSTILE_SHIM = REPO / "tests" / "fixtures" / "pynvml_shim_hostile"
CARD_NAME = "NVIDIA \x1b]0;CARDPWN\x07H200\x1b[31m\nX"  # tests/fixtures/pynvml_shim_hostile/pynvml.py
# The trainer's hostile arguments: an OSC title (BEL- and ST-terminated), colour and a
# newline and a tab, an OSC 52 clipboard write.
ARGS = ["\x1b]0;PWNED\x07", "\x1b[31mred\nline2\tTab", "\x1b]2;PWNED2\x1b\\", "\x1b]52;c;cGF5bG9hZA==\x07"]
TITLE = "sattui-title-ok"
# Any of these in what sattui prints means an escape got through.
CONTROLS = {chr(c) for c in range(0x20) if c not in (0x0A,)} | {chr(0x7F)} | {chr(c) for c in range(0x80, 0xA0)}


# A tmux server of this test's own: other tests' sessions and options never meet it.
SOCKET = f"sattui-sec-{uuid.uuid4().hex[:8]}"


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, timeout=10).stdout


def _raw_controls(text: str) -> list[str]:
    return sorted({repr(c) for c in text if c in CONTROLS})


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{HOSTILE_SHIM}{os.pathsep}{REPO}", **extra}


class _Pane:
    """One tmux pane running a script; its title is set to ``TITLE`` before sattui starts."""

    def __init__(self, script: Path, cols: int = 200, rows: int = 50) -> None:
        self.name = f"sattui-sec-{uuid.uuid4().hex[:8]}"
        _tmux("-f", "/dev/null", "new-session", "-d", "-s", self.name, "-x", str(cols), "-y", str(rows),
              f"bash {shlex.quote(str(script))}")
        _tmux("resize-window", "-t", self.name, "-x", str(cols), "-y", str(rows))

    def screen(self) -> str:
        return _tmux("capture-pane", "-p", "-t", self.name)

    def title(self) -> str:
        return _tmux("display-message", "-p", "-t", self.name, "#{pane_title}").rstrip("\n")

    def keys(self, *keys: str) -> None:
        _tmux("send-keys", "-t", self.name, *keys)

    def wait_for(self, *needles: str, timeout: float = 90.0) -> str:
        """Until the pane shows every needle; the pane's title must stay ``TITLE`` all along."""
        screen = ""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            screen = self.screen()
            title = self.title()
            assert title == TITLE, f"the pane's title was changed to {title!r}; the pane:\n{screen}"
            if all(n in screen for n in needles):
                return screen
            time.sleep(1.0)
        raise AssertionError(f"never showed {needles!r}; the pane:\n{screen}")

    def wait_gone(self, needle: str, timeout: float = 30.0) -> None:
        """Until the pane no longer shows ``needle`` (a screen was left)."""
        end = time.monotonic() + timeout
        while needle in (screen := self.screen()):
            assert time.monotonic() < end, f"still showing {needle!r}; the pane:\n{screen}"
            time.sleep(0.2)

    def family(self) -> list[psutil.Process]:
        pid = _tmux("display-message", "-p", "-t", self.name, "#{pane_pid}").strip()
        try:
            return psutil.Process(int(pid)).children(recursive=True)
        except (ValueError, psutil.Error):
            return []

    def kill(self) -> None:
        for p in self.family():
            try:
                p.kill()
            except psutil.Error:
                pass
        _tmux("kill-server")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_hostile_names_reach_the_tui_and_report_escaped_and_the_pane_title_stays(tmp_path):
    if not _have_torch():
        pytest.skip("torch not installed")
    rec, log, ready = tmp_path / "rec.jsonl", tmp_path / "trainer.log", tmp_path / "ready"
    rec.write_text("an older recording\n")  # both replaced: --force
    log.write_text("an older log\n")
    old_inodes = (os.lstat(rec).st_ino, os.lstat(log).st_ino)
    cmd = [sys.executable, "-m", "sattui", "--backend", "nvml", "--record", str(rec), "--trainer-log", str(log),
           "--force", "--", sys.executable, str(Path(H.__file__).relative_to(REPO)), *ARGS]
    script = tmp_path / "run.sh"
    # The pane names itself first, the way any program may (OSC 2): sattui must leave it so.
    # COLUMNS/LINES from the test's environment would override the pane's real size.
    script.write_text(f"unset COLUMNS LINES\nprintf '\\033]2;%s\\033\\\\' {TITLE}\ncd {shlex.quote(str(REPO))}\n"
                      f"export PYTHONPATH={shlex.quote(str(HOSTILE_SHIM) + os.pathsep + str(REPO))}\n"
                      f"export HOSTILE_READY={shlex.quote(str(ready))}\n"
                      f"{shlex.join(cmd)}\nsleep 60\n")  # the pane stays: its title is read after sattui exits
    pane = _Pane(script)
    try:
        deadline = time.monotonic() + 30
        while pane.title() != TITLE and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pane.title() == TITLE
        # Main screen: the command line in the header, the card's label, both escaped.
        main = pane.wait_for("'\\x1b]0;PWNED\\x07' '\\x1b[31mred\\nline2\\tTab'", "0 \\x1b]0;CARDPWN", "py-spy 10 Hz")
        assert "'\\x1b]52;c;cGF5bG9hZA==\\x07'" in main
        assert pane.title() == TITLE
        pane.keys("w")
        pane.wait_for("\\x1b]0;PWN\\x07\\nX · ")  # the process name (comm) on the workers screen
        assert pane.title() == TITLE
        pane.keys("s")
        pane.wait_for("\\x1b]0;FUNCPWN\\x07step\\nfn (", "/\\x1b[31mred\\x1b[0m\\nfile.py:")  # a stack frame
        assert pane.title() == TITLE
        pane.keys("Escape")
        # Enter only once the main screen is back: sent while the app (busy on a loaded box)
        # has not read the Escape yet, both bytes arrive in one read and parse as Alt+Enter.
        pane.wait_gone("/\\x1b[31mred\\x1b[0m\\nfile.py:")
        pane.wait_for("0 \\x1b]0;CARDPWN")
        pane.keys("Enter")  # the card screen's title: the whole name
        pane.wait_for("card 0 · NVIDIA \\x1b]0;CARDPWN\\x07H200\\x1b[31m\\nX")
        assert pane.title() == TITLE
        ours = [p for p in pane.family() if p.name() != "sleep"]  # sattui, the trainer, py-spy
        pane.keys("q")
        gone, alive = psutil.wait_procs(ours, timeout=30)
        assert not alive, f"left running after q: {[p.pid for p in alive]}"
        pane.wait_for(f"sattui: recorded to {rec}")
        assert pane.title() == TITLE
    finally:
        pane.kill()

    # --record and --trainer-log replaced the older files with new ones, mode 0600.
    assert (os.lstat(rec).st_ino, os.lstat(log).st_ino) != old_inodes
    assert _mode(rec) == 0o600 and _mode(log) == 0o600
    assert H.STDOUT_LINE in log.read_text()  # the trainer's own output, as it wrote it
    # The recording keeps every name exactly (JSON escapes it).
    lines = [json.loads(x) for x in rec.read_text().splitlines()]
    header = lines[0]
    assert header["cmdline"][2:] == ARGS and header["cards"][0]["name"] == CARD_NAME
    names = {r["name"] for r in lines if r["kind"] == "proc" and r["pid"] == header["pid"]}
    assert H.PROC_NAME.decode() in names
    frames = {(f[0], f[1]) for r in lines if r["kind"] == "stacks" for f in r["frames"]}
    assert (H.FUNC_NAME, H.FILE_NAME) in frames
    threads = {n for r in lines if r["kind"] == "stacks" for n in r["threads"].values()}
    assert H.THREAD_NAME in threads

    # `sattui report`: not one control character, the names shown escaped.
    r = run_sattui("report", str(rec))
    assert r.returncode == 0, r.stderr
    assert _raw_controls(r.stdout + r.stderr) == []
    assert "'\\x1b]0;PWNED\\x07' '\\x1b[31mred\\nline2\\tTab'" in r.stdout
    assert "NVIDIA \\x1b]0;CARDPWN\\x07H200\\x1b[31m\\nX: util mean" in r.stdout
    assert "\\x1b]0;FUNCPWN\\x07step\\nfn (" in r.stdout and "/\\x1b[31mred\\x1b[0m\\nfile.py:" in r.stdout
    assert "\\x1b]0;PWN\\x07…" in r.stdout  # the process name, cut to its 16-column cell
    # `report --json` keeps the exact text (escaped by JSON, so the bytes are still safe).
    j = run_sattui("report", str(rec), "--json")
    assert j.returncode == 0 and "\x1b" not in j.stdout
    rep = json.loads(j.stdout)
    assert rep["trainer"]["cmdline"][2:] == ARGS
    assert any(p["name"] == H.PROC_NAME.decode() for p in rep["processes"])


def test_doctor_prints_a_hostile_card_name_escaped():
    r = run_sattui("doctor", env=_env())
    assert r.returncode == 0, r.stderr
    assert _raw_controls(r.stdout + r.stderr) == []
    assert "2 card(s): NVIDIA \\x1b]0;CARDPWN\\x07H200\\x1b[31m\\nX, NVIDIA A100" in r.stdout
    j = run_sattui("doctor", "--json", env=_env())
    nvml = next(b for b in json.loads(j.stdout)["backends"] if b["name"] == "nvml")
    assert nvml["cards"][0]["name"] == CARD_NAME


# -- output files: each path sattui writes --------------------------------------------------

def _cli_for(flag: str, path: Path, marker: Path, force: bool = False) -> list[str]:
    """A sattui command writing ``path`` through ``flag``; its trainer creates ``marker``
    (so a refusal can be seen to come before anything starts)."""
    trainer = ["--", sys.executable, "-c", f"open({str(marker)!r}, 'w'); import time; time.sleep(30)"]
    own = ["--force"] if force else []
    if flag == "record -o":
        return ["record", "-o", str(path), "--duration", "1", "--backend", "none", "--no-stacks", *own, *trainer]
    return ["--backend", "none", flag, str(path), *own, *trainer]


OUTPUTS = ["record -o", "--record", "--trainer-log"]


@pytest.mark.parametrize("flag", OUTPUTS)
@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
def test_a_planted_symlink_is_refused_even_with_force(tmp_path, flag, force):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    os.chmod(victim, 0o644)
    link, marker = tmp_path / "out", tmp_path / "trainer-started"
    link.symlink_to(victim)
    r = run_sattui(*_cli_for(flag, link, marker, force), timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"sattui: error: cannot write {link}: it is a symbolic link; sattui never "
                                     "writes through one, not even with --force: remove it or choose another path"]
    assert victim.read_text() == "precious\n" and _mode(victim) == 0o644
    assert link.is_symlink() and os.readlink(link) == str(victim)
    assert not marker.exists()  # refused before the trainer was started


@pytest.mark.parametrize("flag", OUTPUTS)
def test_an_existing_file_is_refused_naming_the_flag(tmp_path, flag):
    out, marker = tmp_path / "out", tmp_path / "trainer-started"
    out.write_text("keep me\n")
    r = run_sattui(*_cli_for(flag, out, marker), timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"sattui: error: cannot write {out}: the file exists; "
                                     "pass --force to replace it"]
    assert out.read_text() == "keep me\n"
    assert not marker.exists()


def test_record_force_replaces_an_existing_file_with_a_new_0600_recording(tmp_path):
    out, marker = tmp_path / "out", tmp_path / "trainer-started"
    out.write_text("keep me\n")
    os.chmod(out, 0o644)
    ino = os.lstat(out).st_ino
    r = run_sattui(*_cli_for("record -o", out, marker, force=True), timeout=60)
    assert r.returncode == 0, r.stderr
    assert os.lstat(out).st_ino != ino and _mode(out) == 0o600
    assert json.loads(out.read_text().splitlines()[0])["kind"] == "header"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "trainer-started"]  # no temporary left


# -- error messages quote paths and arguments escaped ----------------------------------------

def test_error_messages_quote_hostile_paths_and_arguments_escaped(tmp_path):
    evil = tmp_path / "\x1b]0;PWNED\x07\ndir"
    runs = [
        run_sattui("record", "-o", str(evil / "r.jsonl"), "--pid", str(os.getpid())),  # no such directory
        run_sattui("report", str(evil)),  # cannot read
        run_sattui("record", "-o", str(tmp_path / "r.jsonl"), "--bogus", "\x1b]0;PWNED\x07"),  # argparse
    ]
    for r in runs:
        assert r.returncode == 2
        assert _raw_controls(r.stderr) == [], r.stderr
        assert len(r.stderr.splitlines()) == 1, r.stderr
        assert "\\x1b]0;PWNED\\x07" in r.stderr
