"""The job's judgments across hosts, from what each node's sattui published.

Each node's ledger (sattui/ledger/bins.py) gave every second of its ranks a state and
every lost second a cause; Prometheus holds them as counters. Summed over a window they
make one :class:`JobLedger` for the whole job, and the advisor's own ledger rules
(sattui/advisor/rules_ledger.py) judge it as they judge one node: the straggler is the
rank the others wait for, whichever host it runs on. Beside them, what only a view over
hosts can say:

* ``straggler`` gets the slow rank's ``host``;
* a host whose input pipeline is the bottleneck while the others are fine: the data-wait
  cause of that host's ranks, with ``host`` set and the other hosts' shares as evidence;
* ``card_imbalance`` across hosts: the seeds' 15-point spread of mean utilization over
  every card of the job (rules_gpu.card_imbalance's threshold and fix).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sattui.advisor.context import AdvisorContext, severity_for
from sattui.advisor.rules_gpu import FIX_IMBALANCE
from sattui.advisor.verdict import RULES, rank_key
from sattui.cluster.source import JobData, RankData
from sattui.findings import Finding
from sattui.ledger import causes
from sattui.ledger.bins import CardLedger, JobLedger, RankLedger

# A host's input pipeline is "the" bottleneck when its ranks wait for data at least this
# share of their time (TF Profiler's moderate cut-off) …
HOST_DATA_FROM = 0.05
# … and every other host waits at most this share, or a third of it.
OTHERS_FINE = 0.03
IMBALANCE_POINTS = 15.0  # rules_gpu.card_imbalance


# The rules that judge from the ledger alone: the same list as a node's advisor's.
LEDGER_RULES: list[Callable[..., list[Finding]]] = [r.fn for r in RULES if r.across_hosts and r.fn is not None]


@dataclass
class LedgerOnly:
    """What the ledger rules read of a Window, for a ledger summed from Prometheus: no
    process or card samples (the nodes judged those), only the ledger."""

    ledger: JobLedger
    trainer_pids: list[int]
    ctx: AdvisorContext = field(default_factory=lambda: AdvisorContext(cpu_count_known=False))
    has_stacks: bool = True
    workers: list[Any] = field(default_factory=list)
    workers_at_once: int = 0
    procs: dict[int, Any] = field(default_factory=dict)
    job_cards: list[int] = field(default_factory=list)
    cards: dict[int, Any] = field(default_factory=dict)

    @property
    def gpu_job(self) -> bool:
        return self.ledger.gpu_job

    def card_ok(self, card: int) -> bool:
        return False

    def rank_of(self, pid: int) -> int | None:
        r = self.ledger.ranks.get(pid)
        return r.rank if r is not None else None


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def job_ledger(data: JobData, hosts: set[str] | None = None) -> tuple[JobLedger, dict[int, RankData]]:
    """One JobLedger of the job's (or these hosts') ranks and cards; ranks keyed by an
    index (there is no pid across hosts), mapped back to their RankData."""
    job = JobLedger()
    who: dict[int, RankData] = {}
    for i, r in enumerate(data.ranks):
        if (hosts is not None and r.host not in hosts) or r.wall_s <= 0:
            continue
        phases = {k: r.states_s[k] for k in ("checkpoint", "eval", "logging") if r.states_s.get(k)}
        detail = {causes.PERIODIC_STALL: phases} if phases else {}
        job.ranks[i] = RankLedger(i, _int(r.rank), r.wall_s, dict(r.states_s), dict(r.causes_s), detail,
                                  wait_bins=dict(r.wait_bins))
        who[i] = r
    for j, c in enumerate(data.cards):
        if (hosts is not None and c.host not in hosts) or c.ledger_s <= 0:
            continue
        job.cards[j] = CardLedger(j, None, None, c.ledger_s, sum(c.idle_by_state_s.values()),
                                  dict(c.idle_by_state_s), dict(c.idle_by_cause_s))
        job.gpu_job = True
    return job, who


def judge(data: JobData) -> tuple[Finding | None, list[Finding]]:
    """The headline and the findings of a job over its window."""
    job, who = job_ledger(data)
    found: list[Finding] = []
    if job.ranks or job.cards:
        w = LedgerOnly(job, list(job.ranks))
        for rule in LEDGER_RULES:
            found += rule(w, 1.0)
    out = []
    for f in found:
        if f.rule == "straggler" and f.rank is not None:
            slow = next((r for r in who.values() if _int(r.rank) == f.rank), None)
            if slow is not None:
                f = _on_host(f, slow.host)
        out.append(f)
    for hf in host_input_bottleneck(data):
        out = [f for f in out if f.rule != hf.rule or f.evidence.get("host")] + [hf]
    out += card_imbalance(data)
    out.sort(key=rank_key)
    blocking = [f for f in out if f.severity.at_least("medium")]
    head = blocking[0] if blocking else None
    if head is None and (job.ranks or any(c.util_mean is not None for c in data.cards)):
        head = Finding("healthy", severity_for(0.0), 0.0,
                       f"no cause of lost time of 5 % or more across {len(data.hosts)} host(s)",
                       {"lost_share": round(job.lost_share(), 4)} if job.ranks else {})
        out = [f for f in out if f.rule != "healthy"] + [head]
    return head, out


def _on_host(f: Finding, host: str) -> Finding:
    return dataclasses.replace(f, evidence={**f.evidence, "host": host})


def host_input_bottleneck(data: JobData) -> list[Finding]:
    """A host whose ranks wait for their data while the other hosts' do not."""
    hosts = sorted({r.host for r in data.ranks if r.wall_s > 0})
    if len(hosts) < 2:
        return []
    shares: dict[str, dict[str, float]] = {}
    for h in hosts:
        led, _ = job_ledger(data, {h})
        cs = led.cause_shares() if not led.gpu_job else JobLedger(ranks=led.ranks).cause_shares()
        shares[h] = {c: cs.get(c, 0.0) for c in causes.INPUT_PIPELINE_CAUSES}
    total = {h: sum(v.values()) for h, v in shares.items()}
    worst = max(hosts, key=lambda h: total[h])
    d = total[worst]
    others = [total[h] for h in hosts if h != worst]
    if d < HOST_DATA_FROM or max(others) > max(OTHERS_FINE, d / 3):
        return []
    cause = max(shares[worst], key=lambda c: shares[worst][c])
    n_ranks = sum(1 for r in data.ranks if r.wall_s > 0)
    host_ranks = sum(1 for r in data.ranks if r.wall_s > 0 and r.host == worst)
    impact = d * host_ranks / n_ranks  # the job's wall time: that host's ranks' part of it
    named = causes.BY_ID[cause]
    rule = named.rule or cause
    ev: dict[str, object] = {"host": worst, "data_wait_shares": {h: round(total[h], 3) for h in hosts},
                             "cause": named.words}
    return [Finding(rule, severity_for(impact), impact,
                    f"host {worst}'s input pipeline is the bottleneck: its ranks wait for data {d * 100:.0f}% of "
                    f"the time ({named.words}); the other hosts at most "
                    f"{max(others) * 100:.0f}%", ev, f"On {worst}: {named.fix}")]


def card_imbalance(data: JobData) -> list[Finding]:
    cards = [c for c in data.cards if c.util_mean is not None]
    if len({c.host for c in cards}) < 2:
        return []  # within one host the node's own card_imbalance says it
    hi = max(c.util_mean for c in cards if c.util_mean is not None)
    lo = min(cards, key=lambda c: c.util_mean if c.util_mean is not None else 0.0)
    assert lo.util_mean is not None
    spread = hi - lo.util_mean
    if spread <= IMBALANCE_POINTS:
        return []
    impact = sum(hi - (c.util_mean or 0.0) for c in cards) / (len(cards) * 100.0)
    by_host: dict[str, list[float]] = {}
    for c in cards:
        by_host.setdefault(c.host, []).append(c.util_mean or 0.0)
    ev = {"host": lo.host, "spread": round(spread, 1),
          "host_util_mean": {h: round(sum(v) / len(v), 1) for h, v in sorted(by_host.items())}}
    return [Finding("card_imbalance", severity_for(impact, floor="low"), impact,
                    f"{len(cards)} cards on {len(by_host)} hosts differ by {spread:.0f} points of utilization "
                    f"({hi:.0f}% vs {lo.util_mean:.0f}% on {lo.host} card {lo.card})", ev, FIX_IMBALANCE,
                    card=_int(lo.card))]


def finding_dict(f: Finding) -> dict[str, Any]:
    """A finding as the report writes it, with ``host`` (docs/format.md: when the report spans
    hosts)."""
    rec = f.to_record()
    rec.pop("kind", None)
    rec.pop("t", None)
    rec["host"] = f.evidence.get("host") if isinstance(f.evidence.get("host"), str) else None
    return rec
