"""Plain dataclasses for everything sattui samples.

Field names follow the recording format (docs/format.md): units are in
the names where the contract puts them there (``power_w``, ``read_Bps``); ``rss`` and
``mem_used`` are bytes, ``cpu`` is cores (1.0 = one core busy). ``None`` always means
"the source did not say", never zero.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Frame:
    """One Python frame as py-spy reports it (``name`` may be qualified)."""

    name: str
    filename: str
    line: int | None = None

    def label(self) -> str:
        where = self.filename if self.line is None else f"{self.filename}:{self.line}"
        return f"{self.name} ({where})"


# The roles whose main thread is the training loop.
TRAINER_ROLES = ("main", "rank")


@dataclass(slots=True)
class ProcSample:
    """One process of the trainer's tree at one tick. ``role`` is one of main, rank,
    worker, pin, compile or other (a launcher or anything else in the tree)."""

    t: float
    pid: int
    ppid: int | None
    role: str
    rank: int | None
    name: str
    cpu: float | None
    state: str | None
    rss: int | None
    read_Bps: float | None
    write_Bps: float | None
    nspid: int | None = None  # pid inside the trainer's own PID namespace, if different
    threads: int | None = None
    # The process's main thread alone: its CPU (cores) and the share of the interval it
    # was runnable but waiting for a CPU (/proc/PID/schedstat run delay, 0–1).
    cpu_main: float | None = None
    run_delay: float | None = None
    # DataLoader workers only, every ~10 s (None between reads): bytes of memory only this
    # process maps (smaps_rollup Private_Clean + Private_Dirty); it grows in a worker that
    # touches the dataset's Python objects (copy-on-read).
    uss: int | None = None
    # On the first sample of a process born since the previous tick: when it started (on
    # this clock). Its figures are then over its own life, not the whole interval.
    started_t: float | None = None
    # The trainer's processes (roles main and rank) only: their start-up environment's
    # LOCAL_RANK, WORLD_SIZE and TORCHELASTIC_RUN_ID (the exporter's labels come from here).
    local_rank: int | None = None
    world_size: int | None = None
    run_id: str | None = None

    kind = "proc"

    def to_record(self) -> dict[str, Any]:
        rec = {"kind": "proc", **asdict(self)}
        for k in _PROC_OPTIONAL:  # optional fields: left out when unknown
            if rec[k] is None:
                del rec[k]
        return rec


_PROC_OPTIONAL = ("nspid", "cpu_main", "run_delay", "uss", "started_t", "local_rank", "world_size", "run_id")


@dataclass(slots=True)
class StackSample:
    """One thread holding one stack from ``t`` for ``dur`` seconds.

    py-spy's chrometrace output merges consecutive identical samples of a thread into
    one span, so a "sample" here is such a span: it stands for about ``dur * rate_hz``
    raw samples. Shares are weighted by ``dur``.
    """

    t: float
    dur: float
    pid: int
    tid: int
    thread_name: str | None
    is_main: bool
    frames: tuple[Frame, ...]
    state: str | None = None  # main thread only: a sattui.states.State name


@dataclass(slots=True)
class StackChunk:
    """What one py-spy run over ``[t, t_end)`` saw of one process."""

    t: float
    t_end: float
    pid: int
    rate_hz: float
    samples: list[StackSample]
    errors: int = 0  # samples py-spy itself failed to take (nonblocking reads can tear)


@dataclass(slots=True)
class WorkerStack:
    """One DataLoader worker's main-thread stack at one moment (a ``py-spy dump``).

    ``state`` is a ``sattui.trainer.worker_states`` state; ``frames`` the innermost frames
    below the worker loop, innermost first; ``active`` is py-spy's word on whether the
    thread was on a CPU (its ``R`` state), None where py-spy did not say.
    """

    t: float
    pid: int
    state: str
    frames: tuple[Frame, ...]
    active: bool | None = None

    kind = "worker_stack"

    def to_record(self) -> dict[str, Any]:
        return {"kind": "worker_stack", "t": round(self.t, 4), "pid": self.pid, "state": self.state,
                "active": self.active, "frames": [[f.name, f.filename, f.line] for f in self.frames]}


@dataclass(slots=True)
class HostSample:
    """The trainer's host at one tick: CPU busy, cgroup CPU throttling, CPU clocks, memory.

    Counters are deltas over the interval since the previous tick (None on the first).
    """

    t: float
    cpu_busy: float | None = None  # cores busy host-wide (/proc/stat: all but idle, iowait, steal)
    cpu_steal: float | None = None  # cores a hypervisor gave to someone else
    cpus: int | None = None  # CPUs /proc/stat counts
    cg_version: int | None = None  # 1 or 2; None: no cgroup CPU controller found
    cg_cpu_limit: float | None = None  # cores (quota / period); None: no quota
    cg_periods: int | None = None
    cg_throttled_periods: int | None = None
    cg_throttled_s: float | None = None
    freq_mhz: float | None = None  # mean current clock over the trainer's CPUs
    freq_max_mhz: float | None = None
    governor: str | None = None
    mem_total: int | None = None  # bytes (/proc/meminfo MemTotal)
    mem_available: int | None = None  # bytes (MemAvailable)

    kind = "host"

    def to_record(self) -> dict[str, Any]:
        return {"kind": "host", **asdict(self)}


@dataclass(slots=True)
class Event:
    """Something that happened once: trainer exited, sampler stopped, no permission."""

    t: float
    type: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"kind": "event", "t": self.t, "type": self.type, "message": self.message}
        rec.update(self.data)
        return rec


@dataclass(slots=True)
class CardInfo:
    """A card as discovered once (the header's ``cards`` entries)."""

    card: int
    vendor: str
    name: str | None
    uuid: str | None = None
    mem_total: int | None = None
    power_limit_w: float | None = None
    sm_clock_max_mhz: float | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    simulated: bool = False

    def to_record(self) -> dict[str, Any]:
        rec = asdict(self)
        if not rec["simulated"]:
            del rec["simulated"]
        return rec


@dataclass(slots=True)
class CardSample:
    """One card at one tick; every metric may be None (the source gave nothing)."""

    t: float
    card: int
    util: float | None = None
    sm_active: float | None = None
    sm_occupancy: float | None = None
    tensor_active: float | None = None
    dram_active: float | None = None
    mem_used: int | None = None
    mem_total: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    clock_reasons: int | None = None
    pcie_rx_Bps: float | None = None
    pcie_tx_Bps: float | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    procs: dict[str, int | None] | None = None

    def to_record(self) -> dict[str, Any]:
        return {"kind": "card", **asdict(self)}
