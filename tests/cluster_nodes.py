"""Nodes for cluster tests: sattui's real exporter (NodeMetrics + MetricsServer) fed once
a second with the records and ledger bins a node's sattui would produce for a scripted
job, so a real Prometheus scrapes what the cross-node judgments must read. The two-node
test with real trainers is tests/e2e/test_cluster_live.py; this one fixes the figures."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sattui.ledger.bins import CardLedger, JobLedger, RankLedger
from sattui.metrics.node import NodeMetrics
from sattui.metrics.server import MetricsServer


@dataclass
class RankScript:
    rank: int
    states: dict[str, float]             # seconds per second of wall time
    causes: dict[str, float] = field(default_factory=dict)
    workers: int = 2
    worker_cpu: float = 0.5


@dataclass
class CardScript:
    card: int
    util: float                          # percent
    idle_state: str = "data_wait"
    idle_cause: str = "worker_busy"
    sm_active: float | None = None       # percent; None: the card does not give it
    vendor: str = "nvidia"               # only NVIDIA cards are also published under dcgm's names
    model: str = "NVIDIA H200"


class ScriptedNode:
    """One host's sattui exporter, ticking once a second in a thread."""

    def __init__(self, host: str, ranks: list[RankScript], cards: list[CardScript] | None = None,
                 run_id: str = "run-1", slurm_job: str | None = None,
                 findings: list[dict] | None = None) -> None:
        self.host = host
        self.ranks = ranks
        self.cards = cards or []
        # the node advisor's standing findings (finding records: rule, severity, impact, card, rank)
        self.findings = findings or []
        self.run_id = run_id
        self.node = NodeMetrics(host)
        self.node.set_header({"backend": "nvml" if self.cards else None, "env": {},
                              "labels": {"slurm_job_id": slurm_job or ""},
                              "cards": [{"card": c.card, "vendor": c.vendor, "name": c.model,
                                         "uuid": f"GPU-{host}-{c.card}", "mem_total": 150 << 30} for c in self.cards]})
        self.server = MetricsServer(("127.0.0.1", 0), self.node)
        self.t = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def tick(self) -> None:
        self.t += 1
        t = float(self.t)
        recs: list[dict] = []
        for r in self.ranks:
            # the engine's rank records carry the start-up environment's labels
            recs.append({"kind": "proc", "t": t, "pid": 1000 + r.rank, "role": "rank", "rank": r.rank, "cpu": 0.5,
                         "local_rank": 0, "world_size": 2, "run_id": self.run_id})
            for w in range(r.workers):
                recs.append({"kind": "proc", "t": t, "pid": 5000 + 10 * r.rank + w, "role": "worker",
                             "rank": r.rank, "cpu": r.worker_cpu})
        for c in self.cards:
            rec = {"kind": "card", "t": t, "card": c.card, "util": c.util, "mem_used": 10 << 30, "power_w": 300.0}
            if c.sm_active is not None:
                rec["sm_active"] = c.sm_active
            recs.append(rec)
        self.node.sink(recs)
        job = JobLedger(gpu_job=bool(self.cards))
        for r in self.ranks:
            job.ranks[1000 + r.rank] = RankLedger(1000 + r.rank, r.rank, sum(r.states.values()), dict(r.states),
                                                  dict(r.causes))
        for c in self.cards:
            idle = 1.0 - c.util / 100.0
            job.cards[c.card] = CardLedger(c.card, None, None, 1.0, idle, {c.idle_state: idle}, {c.idle_cause: idle})
        self.node.add_ledger([(self.t, job)])
        if self.findings:
            self.node.set_findings([{"t": t, **f} for f in self.findings])

    def _run(self) -> None:
        # On a fixed one-second grid, catching up after a late wake-up: each tick adds one
        # second of the scripted shares, so the ticks must keep pace with the wall clock
        # that Prometheus's rate() divides by. Waiting 1 s after each tick lost the tick's
        # own time and every delay of a busy box (the suite runs its CPU-bound tests in
        # parallel): an 8-s rate of a 0.4 share read 0.29.
        due = time.monotonic() + 1.0
        while not self._stop.wait(max(0.0, due - time.monotonic())):
            self.tick()
            due += 1.0

    def __enter__(self) -> ScriptedNode:
        self.tick()
        self.server.start()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.server.stop()


def straggler_job() -> list[ScriptedNode]:
    """DESIGN.md "Beyond one node": rank 0 in backward 90 % (waiting for rank 1 there),
    rank 1 asleep 71 %, in backward 19 %."""
    return [ScriptedNode("n0", [RankScript(0, {"backward": 0.9, "forward": 0.1}, {"straggler": 0.86})]),
            ScriptedNode("n1", [RankScript(1, {"idle": 0.71, "backward": 0.19, "forward": 0.1}, {"idle": 0.71})])]


def input_job() -> list[ScriptedNode]:
    """Host b0's workers cannot keep up (its rank waits for data 40 %, its cards idle);
    host b1 is fine. Ranks 2 and 3, so both jobs together are one job of four ranks."""
    return [ScriptedNode("b0", [RankScript(2, {"data_wait": 0.4, "forward": 0.3, "backward": 0.3},
                                           {"worker_busy": 0.4}, worker_cpu=0.98)],
                         [CardScript(0, 55.0)], run_id="run-b", slurm_job="4242"),
            ScriptedNode("b1", [RankScript(3, {"forward": 0.5, "backward": 0.45, "optimizer": 0.05})],
                         [CardScript(0, 95.0, idle_state="forward", idle_cause="host_overhead_bound")],
                         run_id="run-b", slurm_job="4242")]


def all_nodes(*jobs: Callable[[], list[ScriptedNode]]) -> list[ScriptedNode]:
    return [n for j in jobs for n in j()]
