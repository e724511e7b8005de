"""Stack sampling of the trainer with py-spy, from outside, in consecutive chunks.

``py-spy record`` writes its output only when it ends, so the sampler runs it in chunks
and reads each chunk's chrometrace file (per-thread spans of identical stacks, with
times) after the run. Always ``--nonblocking`` (blocking mode stops the trainer for every
sample, see docs/sampling.md), ``--idle`` (otherwise DataLoader waits vanish) and
``--threads`` (gives each thread's OS id and name).

py-spy samples at exponentially distributed intervals (to avoid aliasing), so a run of
``--duration N`` lasts a random time (``-d 1 -r 10`` measured 0.5-2.1 s). The sampler
therefore ends each chunk itself: it starts the next py-spy shortly before the boundary,
waits until that one has attached, and then sends SIGINT to the current one, which makes
py-spy write its file and exit 0. ``--duration`` is only a backstop for a sattui that
died without stopping its children.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psutil

from sattui.model import Event, Frame, StackChunk, StackSample
from sattui.sampler_status import PTRACE_FIX, SamplerStatus

log = logging.getLogger(__name__)

# Measured with bench/sampler_cost.py (docs/sampling.md), 2 cores, py-spy 0.4.3: on the
# 58-thread example trainer py-spy costs 8-10 % of a core at 10 Hz in 2 s chunks and
# 15-16 % at 20 Hz; on the 2-thread trainer 2-3 % at either. Chunks shorter than 2 s pay
# py-spy's attach more often; longer ones make the stacks reach the screen later.
DEFAULT_RATE_HZ = 10.0
DEFAULT_CHUNK_S = 2.0
# Once the first answer is in (every bundled scenario is named within ~30 s of attaching),
# the chunks grow to this: each run pays py-spy's attach once and, while the next one
# attaches, two py-spys sample the same threads (the lead below). On a 112-thread trainer
# at 5 Hz that made the sampler cost 1.7x `py-spy top --idle` in 2-s chunks, 1.25x in 5-s
# ones; on a 2-thread one at 10 Hz +0.008 cores above top against +0.003 (issue 25,
# docs/sampling.md). The price: from then on the stacks reach the screen up to this late.
DEFAULT_STEADY_CHUNK_S = 5.0
STEADY_AFTER_S = 45.0

# A Python process that has just started may not have initialised its interpreter yet,
# and py-spy then says "Failed to find python version"; only a target at least this old
# is called "not a Python process".
NOT_PYTHON_GRACE_S = 5.0
# py-spy's CPU grows with threads x rate (~0.1 ms of CPU per thread per sample, mostly
# system time reading the target's memory), so a fixed rate cannot bound it: a trainer
# with 200 threads would cost a third of a core at 10 Hz. Above this many cores the
# sampler lowers its rate, and raises it back towards the rate asked for when there is
# clear room again.
DEFAULT_CPU_BUDGET = 0.10
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
MIN_RATE_HZ = 1
MAX_CONSECUTIVE_FAILURES = 8
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 8.0

_TERMINAL = frozenset(s for s in SamplerStatus if s.terminal)

_THREAD_FRAME = re.compile(r"^thread \((0x[0-9a-fA-F]+|\d+)\)(?:: (.*))?$", re.S)
_PROCESS_FRAME = re.compile(r"^process \d+:")
_SAMPLES_ERRORS = re.compile(r"Samples: (\d+) Errors: (\d+)")


def find_py_spy() -> str | None:
    """Path of the py-spy executable: ``PATH`` first, then next to ``sys.executable``."""
    found = shutil.which("py-spy")
    beside = Path(sys.executable).parent / "py-spy"
    beside_ok = beside.is_file() and os.access(beside, os.X_OK)
    # pyenv/asdf shims are shell scripts that re-resolve the tool on every start: ~65 ms
    # of CPU per chunk measured. The real binary next to the interpreter does the same job.
    if found and beside_ok and _is_script(found) and not _is_script(str(beside)):
        return str(beside)
    if found:
        return found
    return str(beside) if beside_ok else None


def _is_script(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def py_spy_version(path: str) -> str | None:
    """``"0.4.3"`` for ``py-spy 0.4.3``; None when it cannot be run."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=5,
                             env=_py_spy_env())
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    m = re.search(r"(\d+(?:\.\d+)+\S*)", out.stdout)
    return m.group(1) if m else None


# --------------------------------------------------------------------------- parsing


@dataclass(slots=True)
class _ThreadState:
    pid: int
    stack: list[Frame] = field(default_factory=list)  # outermost first, as the B events nest
    since: int = 0  # ts (µs) at which the current stack was first seen


def _frame_of(ev: dict[str, Any]) -> Frame:
    name = ev["name"]
    args = ev.get("args")
    args = args if isinstance(args, dict) else {}
    filename = args.get("filename")
    line = args.get("line")
    return Frame(name, filename if isinstance(filename, str) else "",
                 line if isinstance(line, int) and not isinstance(line, bool) else None)


def _is_pseudo(frame: Frame) -> bool:
    return frame.filename == "" and bool(_THREAD_FRAME.match(frame.name) or _PROCESS_FRAME.match(frame.name))


def _thread_of(stack: list[Frame], chrome_tid: int, meta: dict[tuple[int, int], tuple[int, str | None]],
               pid: int) -> tuple[int, str | None, tuple[Frame, ...]]:
    """(OS tid, thread name, frames innermost first without pseudo-frames)."""
    tid: int | None = None
    name: str | None = None
    real: list[Frame] = []
    for fr in stack:
        m = _THREAD_FRAME.match(fr.name) if fr.filename == "" else None
        if m:
            text = m.group(1)
            # py-spy prints the OS thread id in decimal; the hex form is a pthread id,
            # used only when it could not find the OS id.
            if not text.startswith("0x"):
                tid = int(text)
            name = m.group(2)
        elif not _is_pseudo(fr):
            real.append(fr)
    if tid is None and (pid, chrome_tid) in meta:
        tid, meta_name = meta[(pid, chrome_tid)]
        name = name or meta_name
    if tid is None:
        tid = chrome_tid
    return tid, name, tuple(reversed(real))


def parse_chrometrace(data: list[dict], *, t0: float, pid_filter: int | None = None) -> list[StackSample]:
    """Spans of ``py-spy record --threads -f chrometrace`` output as StackSamples.

    py-spy emits, per thread, B events for the frames that appear and E events for the
    frames that go whenever the thread's stack changes between two samples, all at the
    sample's ``ts`` (µs since py-spy started); each distinct stack becomes one sample from
    its first ``ts`` to the next change. Spans still open at the end are closed at the
    last ``ts`` seen. Entries that are not well-formed B/E events are skipped.
    """
    if not isinstance(data, list):
        return []
    events: list[tuple[int, int, int, str, dict]] = []
    meta: dict[tuple[int, int], tuple[int, str | None]] = {}
    for i, ev in enumerate(data):
        if not isinstance(ev, dict):
            continue
        ph, ts, pid, ctid = ev.get("ph"), ev.get("ts"), ev.get("pid"), ev.get("tid")
        if not (isinstance(pid, int) and isinstance(ctid, int)) or isinstance(pid, bool):
            continue
        if pid_filter is not None and pid != pid_filter:
            continue
        if ph == "M":
            # Newer py-spy also names threads in metadata: args.name = "<os tid>: <name>".
            args = ev.get("args")
            label = args.get("name") if isinstance(args, dict) else None
            if ev.get("name") == "thread_name" and isinstance(label, str):
                head, _, rest = label.partition(": ")
                if head.isdigit():
                    meta[(pid, ctid)] = (int(head), rest or None)
            continue
        if ph not in ("B", "E") or not isinstance(ts, (int, float)) or isinstance(ts, bool):
            continue
        if not math.isfinite(ts) or ts < 0 or not isinstance(ev.get("name"), str):
            continue
        events.append((int(ts), i, pid, ph, ev))
    if not events:
        return []
    events.sort(key=lambda e: (e[0], e[1]))

    threads: dict[tuple[int, int], _ThreadState] = {}
    spans: list[tuple[int, int, int, int, tuple[Frame, ...]]] = []  # (start, end, pid, chrome tid, stack)

    def close(key: tuple[int, int], st: _ThreadState, ts: int) -> None:
        if st.stack and ts > st.since:
            spans.append((st.since, ts, key[0], key[1], tuple(st.stack)))

    for ts, _, pid, ph, ev in events:
        key = (pid, ev["tid"])
        st = threads.get(key)
        if st is None:
            st = threads[key] = _ThreadState(pid=pid, since=ts)
        if ts != st.since:
            close(key, st, ts)
            st.since = ts
        frame = _frame_of(ev)
        if ph == "B":
            st.stack.append(frame)
        else:
            for j in range(len(st.stack) - 1, -1, -1):
                if st.stack[j].name == frame.name and st.stack[j].filename == frame.filename:
                    del st.stack[j:]
                    break
    last_ts = events[-1][0]
    for key, st in threads.items():
        close(key, st, last_ts)

    out: list[StackSample] = []
    for start, end, pid, ctid, stack in sorted(spans, key=lambda s: (s[0], s[2], s[3])):
        tid, name, frames = _thread_of(list(stack), ctid, meta, pid)
        out.append(StackSample(
            t=t0 + start / 1e6, dur=(end - start) / 1e6, pid=pid, tid=tid, thread_name=name,
            is_main=(tid == pid), frames=frames,
        ))
    return out


def parse_summary(stdout: str) -> tuple[int | None, int | None]:
    """(samples, errors) from py-spy's closing line ``... Samples: N Errors: M``."""
    found = list(_SAMPLES_ERRORS.finditer(stdout))
    m = found[-1] if found else None
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def classify_failure(stderr: str) -> str:
    """``"denied"``, ``"not_python"``, ``"gone"`` or ``"other"`` from py-spy's stderr."""
    low = stderr.lower()
    if "permission denied" in low or "os error 13" in low or "operation not permitted" in low \
            or "os error 1)" in low:
        return "denied"
    if "failed to find python version" in low or "failed to find a python interpreter" in low \
            or "not a python" in low or "failed to get python version" in low:
        return "not_python"
    if "no such process" in low or "os error 3)" in low or "no such file or directory" in low:
        return "gone"
    return "other"


def _first_error_line(stderr: str) -> str:
    for line in stderr.splitlines():
        line = line.strip()
        if line and not line.startswith(("Stack backtrace", "For more information")):
            return line[:200]
    return "no message"


def _py_spy_env() -> dict[str, str]:
    env = dict(os.environ)
    # With RUST_BACKTRACE=1 inherited (common in dev shells), every error py-spy meets
    # captures a backtrace and its stderr grows a 20-line trace: keep both off.
    env["RUST_BACKTRACE"] = "0"
    env["RUST_LIB_BACKTRACE"] = "0"
    env.pop("RUST_LOG", None)
    return env


# --------------------------------------------------------------------------- sampler


@dataclass(slots=True)
class _Run:
    proc: subprocess.Popen
    out: Path
    stdout: Path
    stderr: Path
    t_spawn: float
    rate: int = 0
    t_ready: float | None = None
    interrupted: bool = False
    cpu_s: float | None = None  # py-spy's CPU time: all of it, read from the zombie before it is reaped
    t_cpu: float | None = None
    t_exit: float | None = None
    pidfd: int | None = None  # readable when py-spy exits: its exit time to the millisecond


def _exited_unreaped(pid: int) -> bool:
    """True once our child ``pid`` has exited, without reaping it (WNOWAIT)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except (ChildProcessError, OSError, AttributeError):
        return False


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU of ``pid`` from /proc/PID/stat (a zombie still has its final figure)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
        rest = text[text.rindex(")") + 2:].split()
        return (int(rest[11]) + int(rest[12])) / _CLK_TCK
    except (OSError, ValueError, IndexError):
        return None


@dataclass(slots=True)
class RunInfo:
    """One py-spy run, for benchmarks and diagnostics."""

    t_spawn: float
    t_ready: float | None
    t_first: float | None  # first sample, session clock
    t_exit: float
    rc: int | None
    samples: int | None
    errors: int | None
    rate_hz: int = 0
    cpu_cores: float | None = None  # py-spy's CPU over its run, in cores
    t0_start: float | None = None  # py-spy's clock origin as bounded from its start ...
    t0_end: float | None = None  # ... and from its exit


class StackSampler:
    """Samples one process's Python stacks with py-spy, chunk after chunk, in a thread.

    ``on_chunk`` and ``on_event`` are called from the sampler's thread. Chunks do not
    overlap: where two py-spy runs both saw the same moment, the earlier chunk keeps it.
    """

    def __init__(self, pid: int, clock: Callable[[], float], on_chunk: Callable[[StackChunk], None],
                 on_event: Callable[[Event], None], rate_hz: float = DEFAULT_RATE_HZ,
                 chunk_s: float = DEFAULT_CHUNK_S, py_spy: str | None = None,
                 steady_chunk_s: float | None = DEFAULT_STEADY_CHUNK_S,
                 steady_after_s: float = STEADY_AFTER_S) -> None:
        self.pid = pid
        self.clock = clock
        self.on_chunk = on_chunk
        self.on_event = on_event
        # py-spy takes an integer rate.
        self.requested_rate_hz = float(max(MIN_RATE_HZ, round(rate_hz)))
        self.rate_hz = self.requested_rate_hz
        self.chunk_s = max(0.2, float(chunk_s))
        # chunk_s at first, then (from steady_after_s after the first run) steady_chunk_s
        # where that is longer; None: chunk_s throughout
        self.steady_chunk_s = steady_chunk_s
        self.steady_after_s = steady_after_s
        self._t_first_spawn: float | None = None
        self.py_spy = py_spy if py_spy is not None else find_py_spy()
        self.status: SamplerStatus = SamplerStatus.STARTING
        self.status_message: str | None = None
        # Start each run before the previous one ends, so that py-spy's attach (~30-100 ms)
        # leaves no gap between chunks; False runs them one after another (the benchmark
        # compares both: 92-97 % of the time covered instead of 100 %).
        self.overlap = True
        # How long both runs sample before the current one is ended (None: 2/rate, at
        # least 50 ms): at 1/rate and less, gaps of 100-260 ms still showed under load.
        self.lead_s: float | None = None
        self.cpu_budget: float | None = DEFAULT_CPU_BUDGET
        self.runs: deque[RunInfo] = deque(maxlen=512)
        self._attach_est = 0.05
        self._stop = threading.Event()
        # Written once by stop(): the waits on a py-spy's pidfd also wake on it, so they
        # need no timeout to notice a stop (they polled every 50 ms: 20 wake-ups a second
        # for nothing, issue 25).
        self._wake: tuple[int, int] | None = None
        self._lock = threading.Lock()
        self._live: list[_Run] = []
        self._thread: threading.Thread | None = None
        self._tmp: Path | None = None
        self._covered_until: float | None = None
        self._seq = 0
        self._create_time: float | None = None
        self._started_at: float | None = None
        self._late_reported = False
        self._cpu_per_interval: float | None = None
        self._last_error = ""
        self._last_rc: int | None = None

    # -- public

    def start(self) -> None:
        if self._thread is not None:
            return
        if not self.py_spy or not os.access(self.py_spy, os.X_OK):
            self._set_status("missing", "py-spy not found: install it (`pip install py-spy`) to see "
                             "what the trainer is waiting for")
            self._emit("sampler_missing", self.status_message or "")
            return
        try:
            self._create_time = psutil.Process(self.pid).create_time()
        except (psutil.Error, OSError):
            self._create_time = None
        self._started_at = time.time()
        self._wake = os.pipe()
        self._thread = threading.Thread(target=self._main, name=f"sattui-stacks-{self.pid}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        with self._lock:
            self._stop.set()
            live = list(self._live)
            if self._wake is not None:
                try:
                    os.write(self._wake[1], b"x")
                except OSError:
                    pass
        for run in live:
            self._interrupt(run)
        th = self._thread
        if th is not None:
            th.join(max(0.0, deadline - time.monotonic() - 0.5))
        # The loop normally reaps its runs; whatever is left (a wedged py-spy) is killed here.
        with self._lock:
            live = list(self._live)
        for run in live:
            self._kill(run)
        if th is not None:
            th.join(max(0.1, deadline - time.monotonic()))
        if self.status not in _TERMINAL:
            self._set_status("stopped", None)

    # -- loop

    def _main(self) -> None:
        try:
            self._tmp = Path(tempfile.mkdtemp(prefix=f"sattui-pyspy-{self.pid}-"))
            self._loop()
        except Exception as exc:  # a bug here must not take the whole monitor down
            log.exception("stack sampler crashed")
            self._set_status("failing", f"stack sampler crashed: {exc}")
            self._emit("sampler_failing", self.status_message or "")
        finally:
            with self._lock:
                live = list(self._live)
            for run in live:
                self._kill(run)
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
            with self._lock:
                wake, self._wake = self._wake, None
            for fd in wake or ():
                os.close(fd)

    def _loop(self) -> None:
        failures = 0
        cur: _Run | None = None
        nxt: _Run | None = None
        while not self._stop.is_set():
            # The next run must have sampled once before the current one is ended, or the
            # chunks leave a gap; py-spy's first sample comes an exponential wait (mean
            # 1/rate) after it attaches.
            lead = self.lead_s if self.lead_s is not None else max(0.05, 2.0 / self.rate_hz)
            if cur is None:
                cur = self._spawn()
                if cur is None:
                    return
            nxt = None
            chunk = self.chunk_now()
            self._wait_ready(cur, until=cur.t_spawn + max(10.0, 2 * chunk))
            boundary = (cur.t_ready if cur.t_ready is not None else cur.t_spawn + self._attach_est) + chunk
            exited = False
            if self.overlap:
                exited = self._wait_exit(cur, until=boundary - self._attach_est - lead)
                if not exited and not self._stop.is_set():
                    nxt = self._spawn()
                    if nxt is not None:
                        self._wait_ready(nxt, until=boundary + 2.0)
                        if nxt.t_ready is not None:
                            boundary = max(boundary, nxt.t_ready + lead)
            if not exited:
                exited = self._wait_exit(cur, until=boundary)
            if not exited:
                self._read_cpu(cur)
                self._interrupt(cur)
                self._wait_exit(cur, until=self.clock() + 2.0 + 2.0 / self.rate_hz, ignore_stop=True)
            outcome = self._finish(cur)
            if outcome == "ok":
                failures = 0
                if self._stop.is_set() or self.status in _TERMINAL:
                    break
                cur = nxt
                continue
            if nxt is not None:
                self._kill(nxt)
                self._reap(nxt)
                nxt = None
            cur = None
            if outcome == "stop" or self._stop.is_set():
                break
            if outcome == "retry_quiet":
                self._stop.wait(0.25)
                continue
            failures += 1
            if failures >= MAX_CONSECUTIVE_FAILURES:
                self._set_status("failing", f"py-spy failed {failures} times in a row: {self._last_error}")
                self._emit("sampler_failing", self.status_message or "", failures=failures)
                break
            delay = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** (failures - 1))
            self._emit("sampler_restart", f"py-spy failed ({self._last_error}); restarting in {delay:g} s",
                       attempt=failures, rc=self._last_rc)
            self._stop.wait(delay)
        if nxt is not None:
            self._kill(nxt)
            self._reap(nxt)
        if cur is not None and cur.proc.poll() is None:
            self._kill(cur)
            self._reap(cur)

    def chunk_now(self) -> float:
        """How long the chunk starting now runs: ``chunk_s`` until ``steady_after_s`` after
        the first run's start, then ``steady_chunk_s`` where that is longer."""
        steady = self.steady_chunk_s
        if steady is None or steady <= self.chunk_s or self._t_first_spawn is None:
            return self.chunk_s
        return steady if self.clock() - self._t_first_spawn >= self.steady_after_s else self.chunk_s

    def _spawn(self) -> _Run | None:
        assert self._tmp is not None
        self._seq += 1
        base = self._tmp / f"chunk-{self._seq}"
        out, so, se = base.with_suffix(".json"), base.with_suffix(".out"), base.with_suffix(".err")
        # --duration is only the backstop: normally the run is ended by SIGINT at its boundary.
        backstop = int(math.ceil(max(self.chunk_s, self.steady_chunk_s or 0.0))) * 2 + 5
        rate = int(self.rate_hz)
        cmd = [self.py_spy or "py-spy", "record", "--pid", str(self.pid), "--nonblocking", "--idle",
               "--threads", "--rate", str(rate), "--duration", str(backstop),
               "--format", "chrometrace", "--output", str(out)]
        with self._lock:
            if self._stop.is_set():
                return None
            try:
                with open(so, "wb") as fo, open(se, "wb") as fe:
                    # Own session: a Ctrl-C in sattui's terminal must not end the chunk
                    # early; stop() decides when py-spy ends.
                    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe,
                                            env=_py_spy_env(), start_new_session=True, close_fds=True)
            except OSError as exc:
                self._set_status("missing", f"cannot run py-spy ({self.py_spy}): {exc}")
                self._emit("sampler_missing", self.status_message or "")
                return None
            run = _Run(proc=proc, out=out, stdout=so, stderr=se, t_spawn=self.clock(), rate=rate)
            if self._t_first_spawn is None:
                self._t_first_spawn = run.t_spawn
            try:
                run.pidfd = os.pidfd_open(proc.pid)
            except (AttributeError, OSError):
                run.pidfd = None
            self._live.append(run)
        return run

    def _wait_ready(self, run: _Run, until: float) -> None:
        """Wait until py-spy has attached: it prints its "Sampling process" line then."""
        if run.t_ready is not None:
            return
        while run.proc.poll() is None and not self._stop.is_set():
            try:
                if run.stdout.stat().st_size > 0:
                    run.t_ready = self.clock()
                    self._attach_est = 0.7 * self._attach_est + 0.3 * (run.t_ready - run.t_spawn)
                    return
            except OSError:
                pass
            if self.clock() >= until:
                return
            time.sleep(0.01)

    def _wait_exit(self, run: _Run, until: float, ignore_stop: bool = False) -> bool:
        while True:
            if self._poll(run):
                return True
            left = until - self.clock()
            if left <= 0 or (self._stop.is_set() and not ignore_stop):
                return False
            if run.pidfd is not None:
                # Asleep until py-spy exits, the deadline, or stop() (unless ignored: the
                # wake pipe stays readable once written).
                fds = [run.pidfd]
                wake = self._wake
                if wake is not None and not ignore_stop:
                    fds.append(wake[0])
                else:
                    left = min(left, 0.05)
                try:
                    select.select(fds, [], [], left)
                except (OSError, ValueError):
                    run.pidfd = None
            else:
                time.sleep(min(left, 0.005))

    def _poll(self, run: _Run) -> bool:
        if run.proc.returncode is None and _exited_unreaped(run.proc.pid):
            # Its whole CPU time, read before poll() reaps it: what py-spy spends after
            # SIGINT (the last sample, writing a chrometrace of every thread) counts too.
            # Read only before SIGINT, a 58-thread run looked 10 % of a core and was 13 %.
            self._read_cpu(run)
        if run.proc.poll() is None:
            return False
        if run.t_exit is None:
            run.t_exit = self.clock()
        return True

    def _read_cpu(self, run: _Run) -> None:
        cpu = _cpu_seconds(run.proc.pid)
        if cpu is None:
            return
        run.cpu_s = cpu
        run.t_cpu = self.clock()

    def _adapt_rate(self, run: _Run, n_samples: int | None, n_threads: int) -> None:
        if self.cpu_budget is None or run.cpu_s is None or run.t_cpu is None or not n_samples or not n_threads:
            return
        intervals = n_samples / n_threads
        if intervals < 3 or run.t_cpu - run.t_spawn < 0.5:
            return
        # Steer by CPU per sampling interval, not CPU per second: py-spy's sample count
        # in a run is Poisson (+-22 % in 2 s at 10 Hz), which made a per-second rule
        # swing between 9 and 15 Hz on a steady target.
        per = run.cpu_s / intervals
        prev = self._cpu_per_interval
        self._cpu_per_interval = per if prev is None else 0.5 * (prev + per)
        per = self._cpu_per_interval
        cost_now = per * self.rate_hz
        # CPU times come in 10 ms ticks: a cheap run can read 0.
        fit = self.requested_rate_hz if per <= 0 else \
            min(self.requested_rate_hz, max(float(MIN_RATE_HZ), float(math.floor(0.9 * self.cpu_budget / per))))
        if cost_now > self.cpu_budget and fit < self.rate_hz:
            rate = fit
        elif fit >= self.rate_hz + max(1.0, 0.25 * self.rate_hz):
            rate = fit
        else:
            return
        old, self.rate_hz = self.rate_hz, rate
        self._emit("sampler_rate", f"py-spy costs about {100 * cost_now:.0f} % of a core at {old:g} Hz on "
                   f"{n_threads} threads; sampling at {rate:g} Hz (budget {100 * self.cpu_budget:.0f} %)",
                   rate_hz=rate, previous_rate_hz=old, cpu_cores=round(cost_now, 4))

    def _interrupt(self, run: _Run) -> None:
        if run.proc.poll() is None and not run.interrupted:
            run.interrupted = True
            # py-spy installs its Ctrl-C handler only once attached. Before that, SIGINT
            # kills it without output, or is lost if sattui was started with SIGINT
            # ignored (a background job of a script): either way only SIGKILL is useful.
            attached = run.t_ready is not None or _size(run.stdout) > 0
            try:
                run.proc.send_signal(signal.SIGINT if attached else signal.SIGKILL)
            except OSError:
                pass

    def _kill(self, run: _Run) -> None:
        if run.proc.poll() is None:
            self._interrupt(run)
            try:
                run.proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                try:
                    run.proc.kill()
                except OSError:
                    pass
        self._reap(run)

    def _reap(self, run: _Run) -> None:
        try:
            run.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            log.warning("py-spy pid %s did not exit after SIGKILL", run.proc.pid)
            return
        if run.pidfd is not None:
            try:
                os.close(run.pidfd)
            except OSError:
                pass
            run.pidfd = None
        with self._lock:
            if run in self._live:
                self._live.remove(run)
        for p in (run.out, run.stdout, run.stderr):
            try:
                p.unlink()
            except OSError:
                pass

    def _finish(self, run: _Run) -> str:
        """Deliver a finished run; return "ok", "retry", "retry_quiet" or "stop"."""
        if run.proc.poll() is None:
            self._kill(run)
        self._poll(run)
        rc = run.proc.returncode
        t_exit = run.t_exit if run.t_exit is not None else self.clock()
        stdout = _read_text(run.stdout)
        stderr = _read_text(run.stderr)
        data = None
        if run.out.exists():
            try:
                data = _load_trace(run.out.read_bytes())
            except (OSError, ValueError):
                data = None
        self._reap(run)
        n_samples, n_errors = parse_summary(stdout)
        samples: list[StackSample] = []
        t0_end = None
        if isinstance(data, list):
            last_ts = max((e["ts"] for e in data if isinstance(e, dict) and isinstance(e.get("ts"), (int, float))),
                          default=None)
            if last_ts is not None:
                t0_end = t_exit - last_ts / 1e6
            samples = parse_chrometrace(data, t0=_clock_origin(run.t_spawn, t0_end), pid_filter=None)
        t_first = min((s.t for s in samples), default=None)
        cpu = run.cpu_s / (run.t_cpu - run.t_spawn) if run.cpu_s is not None and run.t_cpu and \
            run.t_cpu > run.t_spawn else None
        self.runs.append(RunInfo(run.t_spawn, run.t_ready, t_first, t_exit, rc, n_samples, n_errors,
                                 run.rate, cpu, run.t_spawn, t0_end))

        if rc == 0 and data is not None:
            if "behind in sampling" in stdout and not self._late_reported:
                self._late_reported = True
                self._emit("sampler_late", f"py-spy cannot keep up with {run.rate} Hz on this "
                           "process; stack times are approximate (lower the rate)")
            self._deliver(samples, run, n_errors)
            self._adapt_rate(run, n_samples, len({(s.pid, s.tid) for s in samples}))
            if not self._target_alive():
                self._gone()
                return "stop"
            return "ok"
        if self._stop.is_set() and run.interrupted:
            return "stop"
        if not self._target_alive():
            self._gone()
            return "stop"
        kind = classify_failure(stderr)
        self._last_error = _first_error_line(stderr) if stderr.strip() else f"exit status {rc}"
        self._last_rc = rc
        if kind == "denied":
            msg = f"no permission to read the stacks of pid {self.pid}: {PTRACE_FIX}"
            self._set_status("denied", msg)
            self._emit("permission_denied", msg, hint=PTRACE_FIX, error=self._last_error)
            return "stop"
        if kind == "not_python":
            if self._target_age() < NOT_PYTHON_GRACE_S:
                return "retry_quiet"
            self._set_status("not_python", f"pid {self.pid} is not a Python process ({self._last_error})")
            self._emit("not_python", "not a Python process", error=self._last_error)
            return "stop"
        # Anything else, including "gone" while psutil still sees the target (it is
        # exiting): try again after the backoff, which checks the target once more.
        return "retry"

    def _deliver(self, samples: list[StackSample], run: _Run, errors: int | None) -> None:
        cut = self._covered_until
        kept: list[StackSample] = []
        for s in samples:
            end = s.t + s.dur
            if cut is not None and end <= cut:
                continue
            if cut is not None and s.t < cut:
                s.dur = end - cut
                s.t = cut
            kept.append(s)
        if kept:
            t = min(s.t for s in kept)
            t_end = max(s.t + s.dur for s in kept)
        else:
            t = t_end = max(run.t_spawn, cut or run.t_spawn)
        if cut is None or t_end > cut:
            self._covered_until = t_end
        chunk = StackChunk(t=t, t_end=t_end, pid=self.pid, rate_hz=float(run.rate), samples=kept,
                           errors=errors or 0)
        if self.status not in _TERMINAL:
            self._set_status("sampling", None)
        try:
            self.on_chunk(chunk)
        except Exception:
            log.exception("on_chunk callback failed")

    def _gone(self) -> None:
        self._set_status("target_gone", f"pid {self.pid} exited")
        self._emit("sampler_stopped", f"pid {self.pid} exited; stack sampling stopped", reason="target_gone")

    def _target_alive(self) -> bool:
        try:
            p = psutil.Process(self.pid)
            if self._create_time is not None and abs(p.create_time() - self._create_time) > 0.01:
                return False  # the pid was reused
            # An exited child of ours stays a zombie until reaped; py-spy cannot read it.
            return p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
        except (psutil.Error, OSError):
            return psutil.pid_exists(self.pid)

    def _target_age(self) -> float:
        if self._create_time is not None:
            return time.time() - self._create_time
        return time.time() - (self._started_at or time.time())

    def _set_status(self, status: SamplerStatus | str, message: str | None) -> None:
        self.status = SamplerStatus(status)
        self.status_message = message

    def _emit(self, type_: str, message: str, **data: Any) -> None:
        try:
            self.on_event(Event(t=self.clock(), type=type_, message=message, data={"pid": self.pid, **data}))
        except Exception:
            log.exception("on_event callback failed")


def _clock_origin(t_spawn: float, t0_end: float | None) -> float:
    """Session time of py-spy's ts 0, from its start and its exit.

    ``t_spawn`` (read right after the process started) is late by at most our own
    scheduling delay; ``t0_end`` (exit seen minus the ts of the closing events, written
    just before exit) can only be late. py-spy itself may start late on a loaded machine
    (a chunk 79 ms early was measured before this), which only the exit shows; normally
    the two agree within 0-15 ms.
    """
    if t0_end is None:
        return t_spawn
    if t0_end <= t_spawn:
        return t0_end
    return 0.5 * (t_spawn + t0_end)


def _load_trace(raw: bytes) -> Any:
    """A chunk's chrometrace JSON. orjson reads it several times faster than json (its
    parse was a seventh of sattui's own CPU beside a 112-thread trainer, issue 25); text
    that is not valid UTF-8 (a frame's name as the target wrote it) goes through json
    with the bad bytes replaced, as before."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw.decode("utf-8", errors="replace"))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
