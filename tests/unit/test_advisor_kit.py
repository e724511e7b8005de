"""Builders for hand-made Timelines that the advisor tests share (and tests of them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sattui.advisor import AdvisorContext, Window
from sattui.model import CardSample, Event, Frame, HostSample, ProcSample, StackSample
from sattui.timeline import Timeline

PID = 100
H200 = {"card": 0, "vendor": "nvidia", "name": "NVIDIA H200", "mem_total": 150_000_000_000,
        "power_limit_w": 700.0, "sm_clock_max_mhz": 1980, "pcie_gen_max": 5, "pcie_width_max": 16}
TOTAL = H200["mem_total"]

SP = "/x/site-packages/"
USER = Frame("main", "/home/u/train.py", 42)
FRAMES: dict[str, tuple[Frame, ...]] = {
    "startup": (Frame("_find_and_load", "<frozen importlib._bootstrap>", 1176), USER),
    "data_wait": (Frame("_MultiProcessingDataLoaderIter._next_data", SP + "torch/utils/data/dataloader.py", 1505),
                  USER),
    "data_inline": (Frame("__getitem__", "/home/u/data.py", 12), Frame("fetch", SP + "torch/utils/data/_utils/fetch.py",
                                                                        52), USER),
    "forward": (Frame("Module._call_impl", SP + "torch/nn/modules/module.py", 1775), USER),
    "backward": (Frame("_engine_run_backward", SP + "torch/autograd/graph.py", 825), USER),
    "optimizer": (Frame("SGD.step", SP + "torch/optim/sgd.py", 120), USER),
    "sync": (Frame("train_step", "/home/u/train.py", 57), USER),
    "h2d_copy": (Frame("train_step", "/home/u/train.py", 50), USER),
    "collective": (Frame("all_reduce", SP + "torch/distributed/distributed_c10d.py", 2500), USER),
    "checkpoint": (Frame("_save", SP + "torch/serialization.py", 900), USER),
    "eval": (Frame("evaluate", "/home/u/train.py", 80), USER),
    "logging": (Frame("log", SP + "wandb/sdk/wandb_run.py", 10), USER),
    "other": (Frame("helper", "/home/u/train.py", 90), USER),
    "idle": (Frame("select", "/usr/lib/python3.11/selectors.py", 415), USER),
}


def ctx(**kw: Any) -> AdvisorContext:
    base: dict[str, Any] = {"cards": [dict(H200)], "env": {}, "has_stacks": None, "cpu_count": 8, "pid": PID,
                            "cpu_count_known": True, "stack_rate_hz": 20.0}
    base.update(kw)
    return AdvisorContext(**base)


class TL:
    """A Timeline filled by small builder calls; ``window()`` gives the rules' view."""

    def __init__(self, history_s: float = 900.0) -> None:
        self.tl = Timeline(history_s=history_s)

    def cards(self, t0: float = 0.0, t1: float = 60.0, dt: float = 0.5, card: int = 0,
              fn: Callable[[float], dict[str, Any]] | None = None, **fields: Any) -> TL:
        """Card samples from t0 to t1; ``fields`` are constant, ``fn(t)`` overrides per sample.
        A card lists the trainer (``procs``) unless told otherwise."""
        t = t0
        while t < t1 - 1e-9:
            f = {"mem_total": TOTAL, "power_limit_w": 700.0, "sm_clock_max_mhz": 1980,
                 "procs": {str(PID): 10_000_000_000}}
            f.update(fields)
            if fn is not None:
                f.update(fn(t))
            self.tl.add("card", card, t, CardSample(t=round(t, 3), card=card, **f))
            t += dt
        return self

    def proc(self, pid: int, role: str, cpu: float | None, state: str = "R", t0: float = 0.0, t1: float = 60.0,
             ppid: int = PID, rank: int | None = None, name: str | None = None, dt: float = 1.0,
             write_Bps: float = 0.0, read_Bps: float = 0.0, run_delay: float | None = None,
             cpu_main: float | None = None, rss: int | Callable[[float], int] = 1000,
             uss: Callable[[float], int | None] | None = None) -> TL:
        """Process samples every ``dt``; ``rss`` may be a function of t, ``uss(t)`` None
        where no USS was read at that tick."""
        t = t0
        while t < t1 - 1e-9:
            nm = name or {"worker": "pt_data_worker", "pin": "pt_data_pin"}.get(role, "python")
            self.tl.add("proc", pid, t, ProcSample(t, pid, ppid, role, rank, nm, cpu, state,
                                                   rss(t) if callable(rss) else rss, read_Bps, write_Bps,
                                                   run_delay=run_delay, cpu_main=cpu_main,
                                                   uss=uss(t) if uss is not None else None))
            t += dt
        return self

    def host(self, t0: float = 0.0, t1: float = 60.0, dt: float = 1.0, **fields: Any) -> TL:
        """Host samples (CPU clocks, cgroup throttling) every ``dt``, constant fields."""
        t = t0
        while t < t1 - 1e-9:
            self.tl.add("host", 0, t, HostSample(t=t, **fields))
            t += dt
        return self

    def main(self, cpu: float = 0.5, state: str = "S", **kw: Any) -> TL:
        return self.proc(PID, "main", cpu, state, ppid=1, **kw)

    def stacks(self, shares: dict[str, float], t0: float = 0.0, t1: float = 60.0, pid: int = PID,
               step: float = 0.5, frames: dict[str, tuple[Frame, ...]] | None = None) -> TL:
        """Main-thread spans: every ``step`` seconds, each activity holds its share of it."""
        fr = {**FRAMES, **(frames or {})}
        t = t0
        while t < t1 - 1e-9:
            u = t
            for act, share in shares.items():
                d = step * share
                if d > 0:
                    self.tl.add("stack", pid, u, StackSample(round(u, 4), d, pid, pid, "MainThread", True,
                                                             fr[act], state=act))
                    u += d
            t += step
        return self

    def event(self, t: float, type_: str, message: str = "") -> TL:
        self.tl.add("event", 0, t, Event(t, type_, message))
        return self

    def window(self, c: AdvisorContext | None = None, t0: float = 10.0, t1: float = 40.0) -> Window:
        return Window(self.tl, c or ctx(), t0, t1)


def rules_of(findings: list[Any]) -> list[str]:
    return [f.rule for f in findings]


# -- the kit itself ------------------------------------------------------------------------

def test_window_reads_shares_cards_and_job_structure():
    k = TL().cards(util=50.0, sm_active=40.0).main().proc(201, "worker", 0.9)
    k.stacks({"startup": 0.1, "data_wait": 0.45, "forward": 0.45})
    w = k.window()
    st = w.stack(PID)
    assert abs(st.share("data_wait") - 0.5) < 1e-6  # startup is left out of shares
    assert w.job_cards == [0] and w.gpu_job and w.cards[0].util == 50.0 and w.cards[0].sm == 40.0
    assert [p.pid for p in w.workers_for(PID)] == [201]
    assert w.judged_pids == [PID] and w.has_stacks is True


def test_a_card_that_does_not_list_the_trainer_makes_a_cpu_job():
    w = TL().cards(util=50.0, procs={"999": 5}).main().window()
    assert w.job_cards == [] and not w.gpu_job
    w = TL().cards(util=50.0, procs=None).main().window()
    assert w.job_cards == [0]  # no process list at all: a card in use is assumed the trainer's
    w = TL().cards(util=0.0, mem_used=0, procs={}).main().window()
    assert w.job_cards == [] and not w.gpu_job  # an idle card beside a CPU trainer


def test_minimum_evidence():
    k = TL().cards(t0=0, t1=8, util=50.0).main()
    assert not k.window(t0=0, t1=30).cards_ok  # 8 s of card samples in a 30 s window (10 needed)
    k.stacks({"forward": 1.0}, t0=0, t1=2.5)
    assert k.window(t0=0, t1=30).judged_pids == []  # 2.5 s at 20 Hz = 50 samples < 60
