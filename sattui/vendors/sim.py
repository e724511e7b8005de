"""The demo's SIMULATED card: busy exactly when the demo trainer really computes.

There is no accelerator on a demo box, so this backend makes one up — but only its
*physics*, never its *story*. The story comes from the trainer: the bundled demo trainer
(``python -m sattui.demo.trainer --sim-card FILE``) appends to ``FILE`` the time
intervals in which it really runs forward + backward + optimizer (on the CPU). A real
card would be busy in those intervals and idle while the trainer waits for data, so a
starved DataLoader shows real utilization dips aligned with real data waits, and a
healthy trainer shows none. Nothing here is random.

The card file (text, appended by the trainer, one item per line; times are
``time.monotonic()`` seconds, which on Linux is one system-wide clock shared by every
process and immune to wall-clock steps):

==============  ===================================================================
``pid P``       the trainer's pid (it "owns" the card memory)
``mem B``       bytes the trainer's model, gradients and one batch need on the card
``b T``         a compute step began at ``T``
``e T``         the compute step that began last ended at ``T``
==============  ===================================================================

A torn last line (the trainer is writing it) is left for the next read; a file that
shrank (a new demo run truncated it) is read again from the start.

The model, per ``sample()`` over the interval ``[prev, now]`` since the previous sample
(the first sample looks back ``min_interval_s``):

* ``util`` = 100 × (share of ``[prev, now]`` covered by compute intervals); a step still
  running at ``now`` counts up to ``now``. No card file, or no steps: 0 % (an idle card
  is a real 0, not a missing value).
* ``power_w`` = ``IDLE_W + util/100 × (LIMIT_W − IDLE_W)``.
* ``temp_c`` follows power with a first-order lag: the steady temperature is
  ``AMBIENT_C + power × C_PER_W``, approached with time constant ``TEMP_TAU_S``
  (``T += (T_ss − T) × (1 − exp(−dt/τ))``).
* ``mem_used`` = ``CONTEXT_BYTES + mem`` once the trainer announced itself (a runtime
  context plus the steady model + batch allocation), 0 before; ``procs`` maps the
  trainer's pid to that memory.
* Everything a simulation cannot honestly claim (SM activity, tensor cores, clocks,
  PCIe) is ``None``.

The card is always labelled SIMULATED (``CardInfo.simulated``, its name). The backend is
registered as ``sim`` but is never picked by ``--backend auto``.

Where the card file is: ``SATTUI_SIM_CARD`` in the environment (``sattui demo`` sets it
and passes the same path to the trainer's ``--sim-card``), or ``set_card_file()``.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from collections.abc import Callable

from sattui.model import CardInfo, CardSample
from sattui.vendors.backend import Backend, Probe, register

ENV_VAR = "SATTUI_SIM_CARD"
CARD_NAME = "SIMULATED GPU (sattui demo)"
MEM_TOTAL = 16 * 1024**3
CONTEXT_BYTES = 512 * 1024**2  # what a CUDA context takes before any tensor
LIMIT_W = 300.0
IDLE_W = 60.0
AMBIENT_C = 35.0
C_PER_W = 0.15  # steady 80 °C at the 300 W limit
TEMP_TAU_S = 10.0
KEEP_S = 30.0  # intervals older than this can no longer fall into a sample window

_override: str | None = None


def set_card_file(path: str | None) -> None:
    """Point every later ``SimBackend`` at ``path`` (None: back to ``SATTUI_SIM_CARD``)."""
    global _override
    _override = path


def card_file() -> str | None:
    return _override if _override is not None else (os.environ.get(ENV_VAR) or None)


# -- the arithmetic (pure; unit-tested) ------------------------------------------------

def busy_share(intervals: list[tuple[float, float]], t0: float, t1: float) -> float:
    """Share (0-1) of ``[t0, t1]`` covered by the union of ``intervals``."""
    if t1 <= t0:
        return 0.0
    clipped = sorted((max(a, t0), min(b, t1)) for a, b in intervals if b > t0 and a < t1)
    covered = 0.0
    cur_a: float | None = None
    cur_b = 0.0
    for a, b in clipped:
        if b <= a:
            continue
        if cur_a is None or a > cur_b:
            if cur_a is not None:
                covered += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_a is not None:
        covered += cur_b - cur_a
    return min(1.0, covered / (t1 - t0))


def power_for(util_pct: float, idle_w: float = IDLE_W, limit_w: float = LIMIT_W) -> float:
    return idle_w + util_pct / 100.0 * (limit_w - idle_w)


def temp_step(temp_c: float, power_w: float, dt: float, tau_s: float = TEMP_TAU_S,
              ambient_c: float = AMBIENT_C, c_per_w: float = C_PER_W) -> float:
    """One step of the first-order lag towards the steady temperature of ``power_w``."""
    steady = ambient_c + power_w * c_per_w
    if dt <= 0:
        return temp_c
    return temp_c + (steady - temp_c) * (1.0 - math.exp(-dt / tau_s))


class CardFile:
    """Incremental reader of the card file: new complete lines only, recent intervals kept."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._offset = 0
        self._rest = b""
        self.intervals: deque[tuple[float, float]] = deque()
        self.open_since: float | None = None  # a step that began and has not ended yet
        self.pid: int | None = None
        self.mem: int | None = None

    def _reset(self) -> None:
        self._offset = 0
        self._rest = b""
        self.intervals.clear()
        self.open_since = None
        self.pid = None
        self.mem = None

    def read(self) -> None:
        if not self.path:
            return
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < self._offset:  # truncated: a new run writes it afresh
                    self._reset()
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return  # not there yet (the trainer is still importing torch): an idle card
        self._offset += len(data)
        data = self._rest + data
        lines = data.split(b"\n")
        self._rest = lines.pop()  # b"" after a complete last line, else a torn one
        for raw in lines:
            self._line(raw)

    def _line(self, raw: bytes) -> None:
        parts = raw.split()
        if len(parts) != 2:
            return
        key, val = parts
        try:
            if key == b"b":
                self.open_since = float(val)
            elif key == b"e":
                if self.open_since is not None:
                    self.intervals.append((self.open_since, float(val)))
                self.open_since = None
            elif key == b"pid":
                self.pid = int(val)
            elif key == b"mem":
                self.mem = int(val)
        except ValueError:
            return  # a line we do not understand is ignored, not fatal

    def busy(self, t0: float, t1: float) -> float:
        while self.intervals and self.intervals[0][1] < t1 - KEEP_S:
            self.intervals.popleft()
        spans = list(self.intervals)
        if self.open_since is not None:
            spans.append((self.open_since, t1))
        return busy_share(spans, t0, t1)


@register
class SimBackend(Backend):
    name = "sim"
    vendor = "sim"
    min_interval_s = 0.1

    def __init__(self, clock: Callable[[], float] = time.monotonic, path: str | None = None,
                 mono: Callable[[], float] = time.monotonic) -> None:
        super().__init__(clock)
        self.file = CardFile(path if path is not None else card_file())
        # The card file's clock (raw monotonic), apart from the session clock ``t``.
        self._mono = mono
        self._prev: float | None = None
        self.temp_c = AMBIENT_C + IDLE_W * C_PER_W

    @classmethod
    def probe(cls) -> Probe:
        path = card_file()
        return Probe(cls.name, True, f"simulated card fed by {path}" if path else
                     "simulated card (idle: no demo trainer feeds it)", verified=True)

    def info(self) -> CardInfo:
        return CardInfo(card=0, vendor="sim", name=CARD_NAME, uuid="SIM-0", mem_total=MEM_TOTAL,
                        power_limit_w=LIMIT_W, simulated=True)

    def discover(self) -> list[CardInfo]:
        return [self.info()]

    def sample(self) -> list[CardSample]:
        now = self._mono()
        t = self.clock()
        prev = self._prev if self._prev is not None else now - self.min_interval_s
        self._prev = now
        self.file.read()
        util = round(100.0 * self.file.busy(prev, now), 1)
        power = power_for(util)
        self.temp_c = temp_step(self.temp_c, power, now - prev)
        mem = CONTEXT_BYTES + (self.file.mem or 0) if self.file.pid is not None else 0
        procs: dict[str, int | None] = {str(self.file.pid): mem} if self.file.pid is not None else {}
        return [CardSample(t=t, card=0, util=util, mem_used=mem, mem_total=MEM_TOTAL,
                           power_w=round(power, 1), power_limit_w=LIMIT_W, temp_c=round(self.temp_c, 1),
                           procs=procs)]
