"""Running a vendor tool: finding it, running it safely, naming its version.

Tools are run with an argument list (never a shell), a timeout, and the C locale, so a
hung tool costs one timeout, not a frozen screen, and its output is the English layout
the parsers know. The tool runs in its own process group: a timeout kills it and
anything it started (a grandchild holding stdout open would otherwise keep us waiting).

``Tool`` is one located tool: it runs argument lists and turns any parser failure into
one ``ParseError`` line naming the tool, its version and the command.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sattui.vendors.backend import BackendError, BackendUnavailable, ParseError, ToolError
from sattui.vendors.values import layout_error

DEFAULT_TOOL_TIMEOUT_S = 5.0
# A version probe is a nicety: it never waits longer than this.
VERSION_TIMEOUT_S = 3.0
# Any exit status: for calls whose output is read whatever the tool's exit code says.
ANY_EXIT = tuple(range(-64, 256))

# Where vendor tools live when they are not on PATH.
EXTRA_TOOL_DIRS = (
    "/opt/rocm/bin",
    "/opt/hyhal/bin",
    "/opt/dtk/bin",
    "/usr/local/Ascend/driver/tools",
    "/usr/local/neuware/bin",
    "/usr/local/xpu/bin",
    "/usr/local/musa/bin",
    "/usr/bin",
)


def find_tool(name: str, extra_dirs: Sequence[str] = EXTRA_TOOL_DIRS) -> str | None:
    """``name`` on PATH, else in the first of ``extra_dirs`` that holds it executable."""
    path = shutil.which(name)
    if path:
        return path
    for d in extra_dirs:
        cand = os.path.join(d, name)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def in_dir_named(path: str, names: Iterable[str]) -> bool:
    """True if a directory of ``path`` is one of ``names`` (or ``name-…``/``name_…``),
    through links or not: tells /opt/dtk-24.04/bin/rocm-smi from /opt/rocm/bin/rocm-smi
    without running either."""
    parts = os.path.normpath(os.path.dirname(os.path.realpath(path))).split(os.sep)
    parts += os.path.normpath(os.path.dirname(path)).split(os.sep)
    for p in parts:
        pl = p.lower()
        for n in names:
            if pl == n or pl.startswith(n + "-") or pl.startswith(n + "_"):
                return True
    return False


def _tool_env() -> dict[str, str]:
    env = dict(os.environ)
    env["LC_ALL"] = "C"
    env["LANG"] = "C"
    return env


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    try:
        proc.communicate(timeout=2)
    except subprocess.TimeoutExpired:
        pass


@dataclass
class ToolRun:
    stdout: str
    stderr: str
    returncode: int


def first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def run_tool(argv: Sequence[str], timeout_s: float = DEFAULT_TOOL_TIMEOUT_S, ok_codes: Sequence[int] = (0,)) -> ToolRun:
    """Run a vendor tool: argument list, timeout, C locale; its failures as one-line errors."""
    argv = [str(a) for a in argv]
    tool = os.path.basename(argv[0])
    try:
        # Its own process group, so a timeout kills the tool and anything it started.
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                env=_tool_env(), start_new_session=True)
    except FileNotFoundError:
        raise BackendUnavailable(f"{tool} not found") from None
    except PermissionError:
        raise BackendUnavailable(f"{tool}: permission denied") from None
    except OSError as e:
        raise ToolError(f"{tool} could not run: {e.strerror or e}") from None
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise ToolError(f"{tool} did not answer within {timeout_s:g} s") from None
    except BaseException:
        _kill_group(proc)
        raise
    out = stdout.decode("utf-8", errors="replace")
    err = stderr.decode("utf-8", errors="replace")
    if proc.returncode not in ok_codes:
        first = first_line(err + "\n" + out)
        how = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exited {proc.returncode}"
        raise ToolError(f"{tool} {how}" + (f": {first[:160]}" if first else ""))
    return ToolRun(out, err, proc.returncode)


# -- versions -----------------------------------------------------------------------------

_VERSION_RES = (
    # Tools whose --version names several components: the tool's own comes first here.
    re.compile(r"AMDSMI Tool:\s*([0-9][^\s|]*)"),
    re.compile(r"ROCM-SMI version:\s*([0-9][^\s|]*)", re.I),
    re.compile(r"version[^0-9\n]{0,24}(\d+(?:\.[0-9A-Za-z]+)+(?:[+~-][0-9A-Za-z.+~-]*)?)", re.I),
)
_BARE_VERSION_RE = re.compile(r"\s*v?(\d+\.\d+(?:\.\d+)*(?:[+~-][0-9A-Za-z.+~-]*)?)\s*")


def version_from(text: str) -> str | None:
    """The tool's version from its ``--version`` answer, or ``None``.

    Only a number labelled "version" (or an answer that is nothing but a number) counts:
    a tool that ignores ``--version`` and prints its table ("49.0C …") has no version.
    """
    if not isinstance(text, str):
        return None
    for rx in _VERSION_RES:
        m = rx.search(text)
        if m:
            return m.group(1)[:40]
    m = _BARE_VERSION_RE.fullmatch(text)
    return m.group(1)[:40] if m else None


def search_version(text: str, *patterns: str) -> str | None:
    """The first capture of the first pattern that matches the top of ``text`` (the
    version a tool prints in its own listing's header)."""
    head = "\n".join(text.splitlines()[:40])
    for p in patterns:
        m = re.search(p, head)
        if m:
            return m.group(1)[:40]
    return None


def version_probe(path: str, timeout_s: float = VERSION_TIMEOUT_S, args: Sequence[str] = ("--version",)) -> str | None:
    """``tool --version``, best effort: any failure is "version unknown", never an error."""
    try:
        run = run_tool([path, *args], timeout_s=timeout_s, ok_codes=ANY_EXIT)
    except BackendError:
        return None
    except Exception:  # a probe must never raise
        return None
    return version_from(run.stdout + "\n" + run.stderr)


# -- one located tool ---------------------------------------------------------------------

def guarded(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a pure parser; any stray exception (a parser bug) becomes a ``ParseError``.

    Parsers are written to raise only ``ParseError``, but a surprise input must still
    never reach the user as a traceback.
    """
    try:
        return fn(*args)
    except ParseError:
        raise
    except RecursionError:
        raise layout_error("output nested too deeply") from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as e:
        raise layout_error(f"unexpected layout ({type(e).__name__})") from None


class Tool:
    """One vendor tool: where it is, its version, and the safe way to run and parse it.

    A parse failure becomes one ``ParseError`` line: the tool, its version, the command
    in brackets ("npu-smi 25.5.1 [info -t usages -i 0]: <why>"), or, where the caller
    names the view instead, "rocm-smi 6.0.2: --json: <why>".

    The version comes from the output's own header when the tool prints one
    (``header_version``: the most accurate for the text that failed), else from what an
    earlier good output said, else from asking the tool (``version_args``, once, only
    when first needed, so a hung tool costs one timeout, not two).
    """

    def __init__(self, name: str, path: str, timeout_s: float = DEFAULT_TOOL_TIMEOUT_S, *,
                 version_args: Sequence[str] = ("--version",),
                 header_version: Callable[[str], str | None] | None = None) -> None:
        self.name = name
        self.path = path
        self.timeout_s = timeout_s
        self.version_args = tuple(version_args)
        self.header_version = header_version
        self.known_version: str | None = None
        self._asked: str | None = None
        self._did_ask = False

    def run(self, *args: str) -> str:
        return run_tool([self.path, *args], timeout_s=self.timeout_s).stdout

    def _from_header(self, text: str) -> str | None:
        if self.header_version is None or not text:
            return None
        try:
            return self.header_version(text)
        except Exception:  # a version is a nicety; it must not hide the real error
            return None

    def version(self, text: str = "") -> str | None:
        v = self._from_header(text) or self.known_version
        if v:
            return v
        if not self._did_ask:
            self._did_ask = True
            self._asked = version_probe(self.path, timeout_s=min(self.timeout_s, VERSION_TIMEOUT_S),
                                        args=self.version_args)
        return self._asked

    def parse(self, fn: Callable[..., Any], text: str, *extra: Any, args: Sequence[str] = (),
              view: str | None = None) -> Any:
        """``fn(text, *extra)``; a failure names the tool, its version and ``args`` (or ``view``)."""
        try:
            out = guarded(fn, text, *extra)
        except ParseError as e:
            where = f": {view}" if view is not None else (f" [{' '.join(args)}]" if args else "")
            raise ParseError(f"{self.name} {self.version(text) or '(version unknown)'}{where}: {e}") from None
        self.known_version = self._from_header(text) or self.known_version
        return out

    def run_parse(self, args: Sequence[str], fn: Callable[..., Any], *extra: Any, view: str | None = None) -> Any:
        return self.parse(fn, self.run(*args), *extra, args=args, view=view)
