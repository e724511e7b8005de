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

The failures every text-tool backend must survive are written once here and called
from each vendor's test file, so a failing test still names the vendor:
``assert_hung_tool_times_out``, ``assert_crash_is_tool_error``,
``assert_unreadable_output`` and ``parser_fuzz_tests`` (hypothesis properties).
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sattui.vendors.backend import Backend, ParseError, ToolError

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


# -- failures every text-tool backend must survive ---------------------------------------

NewBackend = Callable[..., Backend]  # the test file's ``_backend(timeout_s=...)``


def _install_isolated(tmp_path: Path, monkeypatch, tool: str, output: str | os.PathLike[str] | None,
                      **behaviour: Any) -> Path:
    # PATH holds only the fake: a real tool on a developer machine must not answer instead.
    isolate_path(tmp_path, monkeypatch)
    if isinstance(output, os.PathLike):
        return install_tool(tmp_path, monkeypatch, tool, stdout_file=output, **behaviour)
    return install_tool(tmp_path, monkeypatch, tool, stdout_text=output, **behaviour)


def assert_hung_tool_times_out(tmp_path: Path, monkeypatch, tool: str, new_backend: NewBackend,
                               output: str | os.PathLike[str]) -> None:
    """A tool that hangs (30 s) before printing ``output``: discovery with a 0.5 s
    timeout is a ``ToolError`` naming the tool and the timeout, raised well before the
    tool would have answered (it is killed, not waited for)."""
    _install_isolated(tmp_path, monkeypatch, tool, output, sleep_s=30)
    t0 = time.monotonic()
    with pytest.raises(ToolError, match=re.escape(f"{tool} did not answer within 0.5 s")):
        new_backend(timeout_s=0.5).discover()
    assert time.monotonic() - t0 < 5


def assert_crash_is_tool_error(tmp_path: Path, monkeypatch, tool: str, new_backend: NewBackend, *,
                               exit_code: int, stderr_text: str) -> None:
    """A tool that prints ``stderr_text`` and exits ``exit_code``: discovery is a
    ``ToolError`` quoting the exit code and the first line the tool printed."""
    _install_isolated(tmp_path, monkeypatch, tool, None, exit_code=exit_code, stderr_text=stderr_text)
    first_line = stderr_text.strip().splitlines()[0]
    with pytest.raises(ToolError, match=re.escape(f"{tool} exited {exit_code}: {first_line}")):
        new_backend().discover()


def assert_unreadable_output(tmp_path: Path, monkeypatch, tool: str, new_backend: NewBackend,
                             output: str | os.PathLike[str], error_starts: str, *,
                             by_args: Mapping[str, str | os.PathLike[str]] | None = None) -> None:
    """A tool that prints ``output`` (and answers ``by_args``, say its version):
    discovery is a one-line ``ParseError`` starting ``error_starts`` (tool, version,
    what was not found), never readings guessed from it."""
    _install_isolated(tmp_path, monkeypatch, tool, output, by_args=by_args)
    with pytest.raises(ParseError) as ei:
        new_backend().discover()
    msg = str(ei.value)
    assert msg.startswith(error_starts), msg
    assert "\n" not in msg


# -- properties of a pure parser ---------------------------------------------------------

# What a character of a fixture is replaced with: the table's own punctuation, "no
# value" markers, a number too long for any field, a line break.
REPLACEMENTS = ("", "|", "/", "-", " ", "N/A", "9" * 30, "\n", "x", "%")


class ParserFuzzTests(NamedTuple):
    """Hypothesis tests; a test file assigns each to a ``test_*`` name of its own."""

    arbitrary_text: Callable[..., None]
    truncated: Callable[..., None]
    lines_dropped_or_doubled: Callable[..., None]
    characters_replaced: Callable[..., None]


def parser_fuzz_tests(parse: Callable[[str], dict[int, Any]], texts: Sequence[str], *,
                      never_raise: Sequence[Callable[[str], object]] = (),
                      replacements: Sequence[str] = REPLACEMENTS) -> ParserFuzzTests:
    """Tests that ``parse`` of any text, and of ``texts`` cut, with lines dropped or
    doubled, or characters replaced, either returns readings (a dict, utilisation in
    0–100 or unknown) or raises ``ParseError``: no other exception, no guessed
    percentage. Each of ``never_raise`` (a version regex, a tool identifier) must not
    raise at all on the same text."""

    def only_parse_errors(text: str) -> None:
        for fn in never_raise:
            fn(text)
        try:
            out = parse(text)
        except ParseError:
            return
        assert isinstance(out, dict)
        for r in out.values():
            assert r.util is None or 0.0 <= r.util <= 100.0

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.text(alphabet=st.characters(codec="utf-8"), max_size=400))
    def arbitrary_text(text: str) -> None:
        only_parse_errors(text)

    @settings(max_examples=300, deadline=None)
    @given(st.sampled_from(texts), st.floats(0, 1))
    def truncated(text: str, frac: float) -> None:
        only_parse_errors(text[: int(len(text) * frac)])

    @settings(max_examples=300, deadline=None)
    @given(st.sampled_from(texts), st.data())
    def lines_dropped_or_doubled(text: str, data: st.DataObject) -> None:
        lines = text.splitlines(keepends=True)
        drop = data.draw(st.sets(st.integers(0, len(lines) - 1), max_size=6))
        dup = data.draw(st.sets(st.integers(0, len(lines) - 1), max_size=3))
        out = []
        for i, ln in enumerate(lines):
            if i not in drop:
                out.append(ln)
                if i in dup:
                    out.append(ln)
        only_parse_errors("".join(out))

    @settings(max_examples=300, deadline=None)
    @given(st.sampled_from(texts), st.data())
    def characters_replaced(text: str, data: st.DataObject) -> None:
        pos = data.draw(st.lists(st.integers(0, len(text) - 1), max_size=8))
        repl = data.draw(st.sampled_from(list(replacements)))
        chars = list(text)
        for p in pos:
            chars[p] = repl
        only_parse_errors("".join(chars))

    return ParserFuzzTests(arbitrary_text, truncated, lines_dropped_or_doubled, characters_replaced)
