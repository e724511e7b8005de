"""What one node's sattui publishes to Prometheus, kept as plain numbers (no Prometheus
library here): the latest card sample, each rank's main-thread seconds per state and
lost seconds per cause, each card's idle seconds by the state and cause of its rank
(the advisor's time ledger, sattui/ledger/bins.py), the DataLoader workers, and the
current findings.

It is fed from the sampling thread: :meth:`NodeMetrics.sink` takes the engine's records
exactly as a recording does (``Engine.add_sink``), :meth:`NodeMetrics.add_ledger` the
ledger's newly settled one-second bins after each advisor evaluation, and
:meth:`NodeMetrics.set_findings` the evaluation's findings. A scrape (the exporter's
HTTP thread) takes a :meth:`snapshot` under the lock; nothing is computed then.

Labels: ``rank`` / ``local_rank`` / ``run_id`` come from each rank's start-up
environment (``RANK``, ``LOCAL_RANK``, ``TORCHELASTIC_RUN_ID``), which the engine reads
through its allow-list and writes in the trainer's ``proc`` records (``rank``,
``local_rank``, ``run_id``; the exporter reads no process itself); a single-process trainer has empty
``rank`` and ``local_rank`` (docs/cluster.md, "One sattui per node"). ``slurm_job_id`` /
``pod`` / ``namespace``, on every series, are the trainer's (the header's ``job``,
sattui/trainer/identity.py).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sattui.job import JobIdentity
from sattui.model import TRAINER_ROLES

# A worker whose pid has not been seen for this long has exited; its last tick no longer
# counts as live (ticks are ~1 s apart).
WORKER_STALE_S = 3.0


@dataclass(frozen=True)
class RankLabels:
    rank: str
    local_rank: str
    run_id: str


@dataclass
class CardState:
    info: dict[str, Any]
    sample: dict[str, Any] | None = None
    ledger_s: float = 0.0
    idle_by_state_s: dict[str, float] = field(default_factory=dict)
    idle_by_cause_s: dict[str, float] = field(default_factory=dict)


@dataclass
class RankState:
    labels: RankLabels
    states_s: dict[str, float] = field(default_factory=dict)
    causes_s: dict[str, float] = field(default_factory=dict)
    worker_cpu_s: float = 0.0
    workers: int = 0


@dataclass
class Snapshot:
    host: str
    version: str
    backend: str | None
    cards: list[CardState]
    ranks: list[RankState]
    findings: list[dict[str, Any]]
    # The values of the job labels of every series (sattui.job.LABELS).
    job: tuple[str, ...] = ("", "", "")


def _add(d: dict[str, float], k: str, v: float) -> None:
    if v > 0:
        d[k] = d.get(k, 0.0) + v


def default_host() -> str:
    return socket.gethostname()


class NodeMetrics:
    """The node's published facts. Thread-safe: fed by the sampling thread, read by the
    exporter's HTTP thread."""

    def __init__(self, host: str | None = None) -> None:
        from sattui import __version__

        self.host = host or default_host()
        self.version = __version__
        self.backend: str | None = None
        self._lock = threading.Lock()
        self._cards: dict[int, CardState] = {}
        self._ranks: dict[RankLabels, RankState] = {}
        self._pid_labels: dict[int, RankLabels] = {}
        self._worker_last: dict[int, tuple[float, int | None]] = {}  # pid -> (t, rank)
        self._findings: list[dict[str, Any]] = []
        self._ledger_done: int | None = None
        self._main_env: dict[str, str] = {}
        self.job = JobIdentity()
        # The job's WORLD_SIZE from its ranks' environment (None: not seen): the advisor's
        # ledger needs it when this node runs one rank of many (sattui/metrics/advised.py).
        self.world_size: int | None = None

    # -- feeding (the sampling thread)

    def set_header(self, header: dict[str, Any]) -> None:
        with self._lock:
            self.backend = header.get("backend")
            for c in header.get("cards") or []:
                if isinstance(c.get("card"), int):
                    self._cards.setdefault(c["card"], CardState(dict(c))).info = dict(c)
            self._main_env = dict(header.get("env") or {})
            self.job = JobIdentity.from_record(header.get("labels"))

    def sink(self, records: list[dict[str, Any]]) -> None:
        """An engine sink (sattui/engine.py): records in time order, as recorded."""
        with self._lock:
            # Ranks first, so their workers of the same tick get the rank's full labels.
            for r in records:
                if r.get("kind") == "proc" and r.get("role") in TRAINER_ROLES and isinstance(r.get("pid"), int):
                    rank = r.get("rank") if isinstance(r.get("rank"), int) else None
                    self._rank(self._labels_for(r["pid"], rank, r))
            t_last = None
            for r in records:
                kind = r.get("kind")
                if kind == "card":
                    self._on_card(r)
                elif kind == "proc":
                    self._on_proc(r)
                    t_last = float(r.get("t") or 0.0)
                elif kind == "finding":
                    self._on_finding(r)
            if t_last is not None:
                self._count_workers(t_last)

    def set_findings(self, records: Iterable[dict[str, Any]]) -> None:
        """The findings of one evaluation replace the previous ones (a cleared finding's
        series disappears)."""
        with self._lock:
            self._findings = [self._finding_row(r) for r in records]

    def add_ledger(self, bins: Iterable[tuple[int, Any]]) -> None:
        """Newly settled ledger bins ``(bin, JobLedger)``; a bin already counted is skipped,
        so the counters never count a second twice."""
        with self._lock:
            for b, job in sorted(bins, key=lambda kv: kv[0]):
                if self._ledger_done is not None and b < self._ledger_done:
                    continue
                self._ledger_done = b + 1
                for r in job.ranks.values():
                    rs = self._rank(self._labels_for(r.pid, r.rank))
                    for k, v in r.states_s.items():
                        _add(rs.states_s, str(k), v)
                    for k, v in r.causes_s.items():
                        _add(rs.causes_s, str(k), v)
                for c, cl in job.cards.items():
                    cs = self._cards.setdefault(c, CardState({"card": c}))
                    cs.ledger_s += cl.wall_s
                    for k, v in cl.by_state_s.items():
                        _add(cs.idle_by_state_s, str(k), v)
                    for k, v in cl.by_cause_s.items():
                        _add(cs.idle_by_cause_s, str(k), v)

    @property
    def ledger_done(self) -> int | None:
        """The first ledger bin not counted yet (None: none counted)."""
        with self._lock:
            return self._ledger_done

    # -- reading (a scrape)

    def snapshot(self) -> Snapshot:
        with self._lock:
            cards = [CardState(dict(c.info), dict(c.sample) if c.sample else None, c.ledger_s,
                               dict(c.idle_by_state_s), dict(c.idle_by_cause_s))
                     for _, c in sorted(self._cards.items())]
            ranks = [RankState(r.labels, dict(r.states_s), dict(r.causes_s), r.worker_cpu_s, r.workers)
                     for r in self._ranks.values()]
            return Snapshot(self.host, self.version, self.backend, cards, ranks, list(self._findings),
                            self.job.label_values())

    # -- internals (lock held)

    def _on_card(self, r: dict[str, Any]) -> None:
        c = r.get("card")
        if isinstance(c, int):
            self._cards.setdefault(c, CardState({"card": c})).sample = r

    def _on_proc(self, r: dict[str, Any]) -> None:
        pid, role, t = r.get("pid"), r.get("role"), float(r.get("t") or 0.0)
        if not isinstance(pid, int):
            return
        if role != "worker":
            return
        rank = r.get("rank") if isinstance(r.get("rank"), int) else None
        prev = self._worker_last.get(pid)
        self._worker_last[pid] = (t, rank)
        cpu = r.get("cpu")
        if prev is not None and isinstance(cpu, (int, float)) and t > prev[0]:
            # ``cpu`` is in cores over the interval since the previous tick.
            self._rank(self._labels_for_rank(rank)).worker_cpu_s += max(0.0, float(cpu)) * (t - prev[0])

    def _count_workers(self, t: float) -> None:
        """Live workers per rank: those seen within the last few ticks."""
        for p, (tp, _) in list(self._worker_last.items()):
            if t - tp > WORKER_STALE_S:
                del self._worker_last[p]
        counts: dict[int | None, int] = {}
        for _, rk in self._worker_last.values():
            counts[rk] = counts.get(rk, 0) + 1
        for rs in self._ranks.values():
            rs.workers = 0
        for rk, n in counts.items():
            self._rank(self._labels_for_rank(rk)).workers = n

    def _on_finding(self, r: dict[str, Any]) -> None:
        # Records of one evaluation share their ``t``: a newer t starts a new set.
        row = self._finding_row(r)
        if self._findings and self._findings[0]["t"] != row["t"]:
            self._findings = []
        self._findings.append(row)

    @staticmethod
    def _finding_row(r: dict[str, Any]) -> dict[str, Any]:
        ci = r.get("impact_ci")
        bounds = None
        if (isinstance(ci, (list, tuple)) and len(ci) == 2
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in ci)):
            bounds = (float(ci[0]), float(ci[1]))
        return {"t": r.get("t"), "rule": str(r.get("rule")), "severity": str(r.get("severity")),
                "impact": float(r.get("impact") or 0.0),
                "impact_ci": bounds,
                "card": "" if r.get("card") is None else str(r.get("card")),
                "rank": "" if r.get("rank") is None else str(r.get("rank"))}

    def _rank(self, labels: RankLabels) -> RankState:
        rs = self._ranks.get(labels)
        if rs is None:
            rs = self._ranks[labels] = RankState(labels)
        return rs

    def _labels_for(self, pid: int, rank: int | None, rec: dict[str, Any] | None = None) -> RankLabels:
        """A trainer process's labels, from its ``proc`` records (the engine read its
        start-up environment: ``local_rank``, ``world_size``, ``run_id``); without a record
        (a ledger bin), what its records said last."""
        got = self._pid_labels.get(pid)
        if rec is None and got is not None:
            return got
        main_run_id = self._main_env.get("TORCHELASTIC_RUN_ID", "")
        if rec is None:
            labels = RankLabels("" if rank is None else str(rank), "", main_run_id)
        else:
            local, world, run_id = rec.get("local_rank"), rec.get("world_size"), rec.get("run_id")
            if isinstance(world, int):
                self.world_size = max(self.world_size or 0, world)
            labels = RankLabels("" if rank is None else str(rank),
                                str(local) if isinstance(local, int) and rank is not None else "",
                                run_id if isinstance(run_id, str) and run_id else main_run_id)
        if got == labels:
            return got
        self._pid_labels[pid] = labels
        old = self._ranks.get(got) if got is not None else None
        if old is not None and not (old.states_s or old.causes_s or old.worker_cpu_s):
            del self._ranks[old.labels]  # labels known too early: no series of its own
        return labels

    def _labels_for_rank(self, rank: int | None) -> RankLabels:
        key = "" if rank is None else str(rank)
        for labels in self._pid_labels.values():
            if labels.rank == key:
                return labels
        run_id = self._main_env.get("TORCHELASTIC_RUN_ID", "")
        return RankLabels(key, "", run_id)
