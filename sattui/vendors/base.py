"""The Backend ABC, the registry, auto-detection, and the safe way to run a vendor tool.

A backend reads the cards of one vendor and normalises them to ``CardInfo`` /
``CardSample`` (``sattui.model``): units in the names, percentages 0–100, bytes,
watts, and ``None`` wherever the source gives nothing — never a made-up 0.

Tools are run with an argument list (never a shell), a timeout, and the C locale, so
a hung tool costs one timeout, not a frozen screen, and its output is the English
layout the parsers know.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from sattui.errors import SattuiError
from sattui.model import CardInfo, CardSample, Event

DEFAULT_TOOL_TIMEOUT_S = 5.0


class BackendError(SattuiError):
    """A backend cannot give cards; the message is one line naming the cause."""


class BackendUnavailable(BackendError):
    """The backend cannot run here: library or tool missing, no permission, no cards."""


class ToolError(BackendError):
    """The vendor tool failed this time: it hung, crashed or exited non-zero."""


class ParseError(BackendError):
    """The tool printed something no known layout matches. Names the tool and its version."""


@dataclass
class Probe:
    """What ``doctor`` says of a backend, cheaply found (no card sampled)."""

    name: str
    available: bool
    reason: str | None = None  # why not, or a note ("unverified: no public output seen")
    version: str | None = None
    path: str | None = None
    verified: bool = True


class Backend(ABC):
    """One vendor's cards. ``discover`` once, ``sample`` per tick, ``close`` at the end.

    ``sample`` returns one ``CardSample`` per card it could read. A field the tool did
    not give is ``None``. A failure of the whole tool raises ``ToolError`` or
    ``ParseError``; the caller marks the cards stale and logs an event. Events a
    backend notices itself (a card lost) go to ``self.events``; the caller drains them
    with ``take_events``.
    """

    name: ClassVar[str]
    vendor: ClassVar[str]
    verified: ClassVar[bool] = True
    # The least time between two samples: a tool that takes ~0.5 s a call (npu-smi)
    # is not run at 10 Hz.
    min_interval_s: ClassVar[float] = 0.5

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.events: list[Event] = []

    @classmethod
    @abstractmethod
    def probe(cls) -> Probe:
        """Is this backend usable here, and why not? Must be cheap and never raise."""

    @abstractmethod
    def discover(self) -> list[CardInfo]:
        """The cards, once. Raises ``BackendUnavailable`` / ``ToolError`` / ``ParseError``."""

    @abstractmethod
    def sample(self) -> list[CardSample]:
        """One sample per readable card at ``self.clock()``."""

    def close(self) -> None:
        """Release what the backend holds (a library handle, a child process)."""

    def take_events(self) -> list[Event]:
        ev, self.events = self.events, []
        return ev


REGISTRY: dict[str, type[Backend]] = {}
# --backend auto tries these in order: NVML first, then vendor tools, then Linux DRM.
AUTO_ORDER = ("nvml", "rocm", "hygon", "ascend", "cambricon", "kunlun", "mthreads", "biren", "intel", "drm")
BACKEND_NAMES = ("auto", *AUTO_ORDER, "sim", "none")


def register(cls: type[Backend]) -> type[Backend]:
    REGISTRY[cls.name] = cls
    return cls


def load_all() -> None:
    """Import every backend module so the registry is full (import errors stay local)."""
    import importlib

    # sim is registered too (``--backend sim``), but AUTO_ORDER leaves it out of auto.
    for mod in ("nvml", "rocm", "hygon", "ascend", "cambricon", "kunlun", "mthreads", "biren", "intel", "drm", "sim"):
        try:
            importlib.import_module(f"sattui.vendors.{mod}")
        except ModuleNotFoundError as e:
            if e.name != f"sattui.vendors.{mod}":
                raise


def probe_all() -> list[Probe]:
    load_all()
    out = []
    for name in AUTO_ORDER:
        cls = REGISTRY.get(name)
        if cls is None:
            continue
        try:
            out.append(cls.probe())
        except Exception as e:  # a probe must never take doctor down
            out.append(Probe(name, False, f"probe failed: {type(e).__name__}: {e}"))
    return out


def open_backend(name: str, clock: Callable[[], float] = time.monotonic) -> tuple[Backend | None, list[CardInfo], list[str]]:
    """The backend to use and its cards, plus why others were passed over (``auto``).

    ``none`` gives no backend. A forced backend that cannot start raises its error.
    """
    if name == "none":
        return None, [], []
    load_all()
    if name != "auto":
        cls = REGISTRY.get(name)
        if cls is None:
            raise BackendError(f"unknown backend {name!r}; one of: {', '.join(BACKEND_NAMES)}")
        backend = cls(clock)
        try:
            cards = backend.discover()
        except BaseException:
            backend.close()
            raise
        return backend, cards, []
    skipped = []
    for n in AUTO_ORDER:
        cls = REGISTRY.get(n)
        if cls is None:
            continue
        p = cls.probe()
        if not p.available:
            skipped.append(f"{n}: {p.reason}")
            continue
        backend = cls(clock)
        try:
            cards = backend.discover()
        except BackendError as e:
            backend.close()
            skipped.append(f"{n}: {e}")
            continue
        if cards:
            return backend, cards, skipped
        backend.close()
        skipped.append(f"{n}: no cards found")
    return None, [], skipped


# -- running vendor tools -------------------------------------------------------------

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
    path = shutil.which(name)
    if path:
        return path
    for d in extra_dirs:
        cand = os.path.join(d, name)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


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
    argv: list[str]
    stdout: str
    stderr: str
    returncode: int
    seconds: float = field(default=0.0)


def run_tool(argv: Sequence[str], timeout_s: float = DEFAULT_TOOL_TIMEOUT_S, ok_codes: Sequence[int] = (0,)) -> ToolRun:
    """Run a vendor tool: argument list, timeout, C locale; its failures as one-line errors."""
    argv = [str(a) for a in argv]
    tool = os.path.basename(argv[0])
    t0 = time.monotonic()
    try:
        # Its own process group, so a timeout kills the tool and anything it started:
        # a grandchild holding stdout open would otherwise block us past the timeout.
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
    cp = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
    out = cp.stdout.decode("utf-8", errors="replace")
    err = cp.stderr.decode("utf-8", errors="replace")
    if cp.returncode not in ok_codes:
        first = next((ln.strip() for ln in (err + "\n" + out).splitlines() if ln.strip()), "")
        how = f"killed by signal {-cp.returncode}" if cp.returncode < 0 else f"exited {cp.returncode}"
        raise ToolError(f"{tool} {how}" + (f": {first[:160]}" if first else ""))
    return ToolRun(argv, out, err, cp.returncode, time.monotonic() - t0)
