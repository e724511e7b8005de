"""Put a fake vendor tool on PATH for a test.

Backends run their tool through ``run_tool`` (a real subprocess), so the honest way to
test them without the hardware is an executable with the tool's name that prints a
fixture captured from a real machine. ``install_tool`` writes one.

    isolate_path(tmp_path, monkeypatch)          # only the fake tools are found
    install_tool(tmp_path, monkeypatch, "amd-smi",
                 stdout_file=FIX / "default-view.txt",  # any other argv
                 by_args={"--version": "AMDSMI Tool: 26.2.1", "process --json": FIX / "process.json"})

Each call appends the tool's argv (one JSON list a line) to ``<script>.calls`` so a test
can check the argument lists and how often the tool ran (``calls(path)``).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

_SCRIPT = '''#!{python}
# Fake {name!r} written by tests/vendor_tools.py.
import json, os, sys, time
DATA = json.loads({data!r})
argv = sys.argv[1:]
with open(__file__ + ".calls", "a", encoding="utf-8") as f:
    f.write(json.dumps(argv) + "\\n")
joined = " ".join(argv)
out = None
by = DATA["by_args"]
if joined in by:
    out = by[joined]
else:
    # The longest key the argv starts with ("stats -d" matches "stats -d 0 -j").
    best = None
    for k in by:
        if k and (joined == k or joined.startswith(k + " ")) and (best is None or len(k) > len(best)):
            best = k
    if best is not None:
        out = by[best]
if out is None:
    out = DATA["default"]
if DATA["sleep_s"]:
    time.sleep(DATA["sleep_s"])
if out is not None:
    sys.stdout.buffer.write(out.encode("latin-1"))
    sys.stdout.flush()
if DATA["stderr"]:
    sys.stderr.write(DATA["stderr"])
sys.exit(DATA["exit_code"])
'''


def _text_of(value: str | os.PathLike[str]) -> str:
    """A fixture's bytes as a latin-1 string (round-trips any bytes through JSON).

    A ``Path`` is always read; a ``str`` is read if it names an existing file, else it
    is the output itself.
    """
    if isinstance(value, os.PathLike):
        return Path(value).read_bytes().decode("latin-1")
    if "\n" not in value and len(value) < 4096:
        try:
            if os.path.isfile(value):
                return Path(value).read_bytes().decode("latin-1")
        except (OSError, ValueError):
            pass
    return value.encode("utf-8").decode("latin-1")


def install_tool(
    tmp_path: Path,
    monkeypatch,  # pytest.MonkeyPatch
    name: str,
    stdout_file: str | os.PathLike[str] | None = None,
    stdout_text: str | None = None,
    exit_code: int = 0,
    sleep_s: float = 0,
    by_args: Mapping[str, str | os.PathLike[str]] | None = None,
    *,
    stderr_text: str = "",
) -> Path:
    """Write an executable ``tmp_path/bin/<name>`` and put that folder first on PATH.

    Output: ``by_args[" ".join(argv[1:])]`` if that key exists, else the longest key the
    joined argv starts with (word-wise), else ``stdout_file`` / ``stdout_text``, else
    nothing. ``by_args`` values are file paths (``Path``, or a ``str`` naming an
    existing file) or literal text. The tool sleeps ``sleep_s`` first, then prints, then
    exits with ``exit_code``. Returns the script path.
    """
    bindir = Path(tmp_path) / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    default: str | None = None
    if stdout_file is not None:
        default = _text_of(Path(stdout_file))
    elif stdout_text is not None:
        default = stdout_text.encode("utf-8").decode("latin-1")
    data = {
        "by_args": {k: _text_of(v) for k, v in (by_args or {}).items()},
        "default": default,
        "exit_code": int(exit_code),
        "sleep_s": float(sleep_s),
        "stderr": stderr_text,
    }
    script = bindir / name
    script.write_text(_SCRIPT.format(python=sys.executable, name=name, data=json.dumps(data)), encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    calls_file = Path(str(script) + ".calls")
    if calls_file.exists():
        calls_file.unlink()
    path = os.environ.get("PATH", "")
    parts = path.split(os.pathsep) if path else []
    if str(bindir) not in parts:
        monkeypatch.setenv("PATH", os.pathsep.join([str(bindir), *parts]))
    return script


def calls(script: Path) -> list[list[str]]:
    """The argv lists (without the program) the fake tool was run with, in order."""
    f = Path(str(script) + ".calls")
    if not f.exists():
        return []
    return [json.loads(ln) for ln in f.read_text(encoding="utf-8").splitlines() if ln.strip()]


def isolate_path(tmp_path: Path, monkeypatch) -> None:
    """PATH = one empty folder, so only tools a test installs are found.

    A developer machine with a real ``rocm-smi`` or ``xpu-smi`` must not change what a
    test sees. The fake tools need no PATH themselves (their shebang is absolute).
    """
    empty = Path(tmp_path) / "empty-path"
    empty.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("PATH", str(empty))
