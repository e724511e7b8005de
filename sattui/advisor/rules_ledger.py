"""Findings from the time ledger: one per cause of lost time, its impact the share of the
job's wall time that cause took (sattui/advisor/ledger.py says how each second is given
its cause).

Thresholds are TensorFlow Profiler's input-pipeline cut-offs applied to every cause, as
the ledger puts them on one scale: ≥ 5 % of the job's wall time is medium
(``kModeratelyInfeedBoundThresholdInPercent``), ≥ 20 % high
(``kHighlyInfeedBoundThresholdInPercent``); a cause is shown from 3 %. Each rule is
``rule(w, relax) -> list[Finding]`` over a Window whose ``ledger`` the Advisor has set
(rules without one say nothing): the same shape as every other rule, so hysteresis,
suppression and precedence treat them alike.
"""

from __future__ import annotations

from collections.abc import Callable

from sattui.advisor.base import Finding, pct, severity_for
from sattui.advisor.ledger import IDLE, UNKNOWN, JobLedger, RankLedger
from sattui.advisor.rules_input import (FIX_INLINE, FIX_INPUT, FIX_RESPAWN, FIX_WORKER_CPU, FIX_WORKER_IO,
                                        suggested_workers)
from sattui.advisor.window import Window

SHOWN_FROM = 0.03

FIX_TOO_FEW = ("Every DataLoader worker is busy computing samples and cores are free: raise num_workers "
               "(to about {S}), then make samples cheaper if the wait stays (decode/resize once and cache).")
FIX_CONTENTION = (
    "Other processes take the trainer's CPUs: its threads are runnable but wait for a core. Give the job its "
    "own cores (taskset/cgroups, no other busy jobs on the box), keep num_workers + intra-op threads within the "
    "usable CPUs (OMP_NUM_THREADS, torch.set_num_threads), and check the container's CPU quota.")
FIX_PERIODIC = {
    "checkpoint": "Checkpoint less often or asynchronously (torch.distributed.checkpoint.async_save, a "
                  "background thread writing a copy of the state on the CPU); write to fast local disk.",
    "eval": "Evaluate less often, on a subset, or on another device/process; keep its DataLoader's workers "
            "persistent so each pass does not start them again.",
    "logging": "Log less often and asynchronously; avoid per-step .item() and synchronous uploads.",
}
FIX_STRAGGLER = ("The other ranks wait for rank {R} at every gradient all-reduce. Look at what rank {R} does "
                 "that the others do not: its own time goes to {CAUSE}. Balance the data (equal-sized shards, "
                 "a bucketing sampler) and the work per rank; a slow rank that changes from epoch to epoch "
                 "points to data.")
FIX_COMM = ("The rank waits in collectives: overlap communication with compute (DDP bucket_cap_mb, "
            "gradient accumulation with no_sync), use a faster backend/interconnect.")
FIX_SYNC = ("The loop keeps waiting for the device: remove per-step .item()/.cpu()/print of tensors, keep "
            "metrics on the device and read them every N steps; use pinned memory and non_blocking copies.")
FIX_OVERHEAD = ("The card idles while the host is in forward/backward/optimizer: the CPU cannot launch work "
                "fast enough. Use CUDA graphs or torch.compile(mode='reduce-overhead'), larger batches, fused "
                "optimizers (foreach/fused=True), fewer small kernels.")
FIX_UNKNOWN = ("The card idles and no main-thread stacks say why: grant py-spy ptrace access (run sattui as "
               "root or with CAP_SYS_PTRACE) so each idle second can be given its cause.")

CAUSE_WORDS = {
    "worker_cpu_bound": "data wait, workers busy computing",
    "too_few_workers": "data wait, workers busy and cores free",
    "worker_io_bound": "data wait, workers reading or waiting on their data source",
    "worker_respawn": "data wait while DataLoader workers restart",
    "cpu_contention": "waiting for a CPU (other processes on its cores)",
    "input_bound": "data wait",
    "main_process_loading": "loading data on the training thread",
    "periodic_stall": "checkpoint/eval/logging",
    "straggler": "waiting for another rank",
    "comm_bound": "collectives",
    "host_sync_stall": "waiting for the device",
    "host_overhead_bound": "host overhead",
    IDLE: "sleeping / waiting on something unknown",
    UNKNOWN: "unknown (no stacks)",
}


def _job(w: Window) -> JobLedger | None:
    return w.ledger


def _finding(rule: str, job: JobLedger, share: float, summary: str, ev: dict[str, object], fix: str,
             relax: float, rank: int | None = None) -> list[Finding]:
    if share < SHOWN_FROM * relax:
        return []
    ev = {"share": round(share, 4), **_per_rank(job, rule), **ev}
    return [Finding(rule, severity_for(share), share, summary, ev, fix, rank=rank)]


def _per_rank(job: JobLedger, cause: str) -> dict[str, object]:
    ranks = [r for r in job.ranks.values() if r.wall_s > 0]
    if len(ranks) <= 1:
        return {}
    return {"rank_shares": {_rank_name(r): round(r.share(cause), 3) for r in ranks}}


def _rank_name(r: RankLedger) -> str:
    return f"rank {r.rank}" if r.rank is not None else f"pid {r.pid}"


def _share(job: JobLedger, cause: str) -> float:
    return job.cause_shares().get(cause, 0.0)


def _data_rule(rule: str, summary: str, fix: str | Callable[[Window], str]) -> Callable[[Window, float], list[Finding]]:
    def rule_fn(w: Window, relax: float = 1.0) -> list[Finding]:
        job = _job(w)
        if job is None:
            return []
        d = _share(job, rule)
        wait = sum(r.states_s.get("data_wait", 0.0) for r in job.ranks.values())
        wall = sum(r.wall_s for r in job.ranks.values()) or 1.0
        ev: dict[str, object] = {"data_wait_share": round(wait / wall, 4), "workers": len(w.workers)}
        cpus = [p.cpu for p in w.workers if p.cpu is not None]
        if cpus:
            ev["worker_cpu_mean"] = round(sum(cpus) / len(cpus), 2)
        if w.ctx.cpu_count_known:
            ev["cpus_usable"] = w.ctx.cpu_count
        text = fix(w) if callable(fix) else fix
        return _finding(rule, job, d, summary.format(P=pct(d)), ev, text, relax)
    rule_fn.__name__ = rule
    rule_fn.__doc__ = f"{rule}: the ledger's lost time of this cause (see the module docstring)."
    return rule_fn


def _too_few_fix(w: Window) -> str:
    return FIX_TOO_FEW.replace("{S}", str(suggested_workers(w)))


def _inline_fix(w: Window) -> str:
    return FIX_INLINE.replace("{S}", str(suggested_workers(w)))


worker_cpu_bound = _data_rule(
    "worker_cpu_bound", "training waits {P} of the time for DataLoader workers that are busy computing samples "
    "(no free cores for more)", FIX_WORKER_CPU)
too_few_workers = _data_rule(
    "too_few_workers", "training waits {P} of the time for DataLoader workers that are all busy while cores are "
    "free: too few workers", _too_few_fix)
worker_io_bound = _data_rule(
    "worker_io_bound", "training waits {P} of the time for DataLoader workers that are reading or waiting on "
    "their data source, not computing", FIX_WORKER_IO)
worker_respawn = _data_rule(
    "worker_respawn", "training waits {P} of the time while its DataLoader workers (re)start (no live worker, "
    "or workers still starting)", FIX_RESPAWN)
input_bound = _data_rule(
    "input_bound", "training waits for the DataLoader {P} of the time; the workers' figures do not say why",
    FIX_INPUT)
main_process_loading = _data_rule(
    "main_process_loading", "the training thread loads the data itself {P} of the time (num_workers=0)",
    _inline_fix)


def cpu_contention(w: Window, relax: float = 1.0) -> list[Finding]:
    """cpu_contention: runnable but not running — the workers' or the main thread's run
    delay (``/proc/PID/schedstat``) in the bins where it was lost."""
    job = _job(w)
    if job is None:
        return []
    d = _share(job, "cpu_contention")
    parts: dict[str, float] = {}
    for r in job.ranks.values():
        for k, v in r.detail.get("cpu_contention", {}).items():
            parts[k] = parts.get(k, 0.0) + v
    ev: dict[str, object] = {"where": "workers waiting for a CPU" if parts.get("data_wait", 0) >= parts.get(
        "main_thread", 0) else "the training thread waiting for a CPU"}
    if w.ctx.cpu_count_known:
        ev["cpus_usable"] = w.ctx.cpu_count
    delays = [s.run_delay for p in w.procs.values() for s in p.samples if s.run_delay is not None]
    if delays:
        ev["run_delay_max"] = round(max(delays), 2)
    return _finding("cpu_contention", job, d, f"the trainer waits for a CPU {pct(d)} of the time: its "
                    "processes are runnable but other work holds the cores", ev, FIX_CONTENTION, relax)


def periodic_stall(w: Window, relax: float = 1.0) -> list[Finding]:
    """periodic_stall: checkpoint, eval and logging phases, by their stacks."""
    job = _job(w)
    if job is None:
        return []
    d = _share(job, "periodic_stall")
    phases: dict[str, float] = {}
    for r in job.ranks.values():
        for k, v in r.detail.get("periodic_stall", {}).items():
            phases[k] = phases.get(k, 0.0) + v
    if not phases:
        return []
    top = max(phases, key=lambda k: phases[k])
    wall = sum(r.wall_s for r in job.ranks.values()) or 1.0
    ev: dict[str, object] = {"phase": top, "phase_shares": {k: round(v / wall, 4) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])}}
    names = {"checkpoint": "checkpointing", "eval": "evaluation", "logging": "logging"}
    fix = " ".join(FIX_PERIODIC[p] for p in sorted(phases, key=lambda k: -phases[k]) if p in FIX_PERIODIC)
    return _finding("periodic_stall", job, d, f"training stops for {names.get(top, top)} {pct(d)} of the time",
                    ev, fix, relax)


def straggler(w: Window, relax: float = 1.0) -> list[Finding]:
    """straggler: the ranks wait (collectives, or backward with their own CPU idle) for
    the one rank that waits least; that rank's own top cause is the lead."""
    job = _job(w)
    if job is None:
        return []
    ranks = [r for r in job.ranks.values() if r.wall_s > 0]
    if len(ranks) < 2:
        return []
    waits = {r.pid: r.share("straggler") for r in ranks}
    slow = min(ranks, key=lambda r: (waits[r.pid], r.rank if r.rank is not None else r.pid))
    waiting = [r for r in ranks if r is not slow]
    wait = sum(waits[r.pid] for r in waiting) / len(waiting)
    if wait - waits[slow.pid] < SHOWN_FROM * relax:
        return []
    own = {k: v for k, v in slow.causes_s.items() if k != "straggler"}
    own_cause = max(own, key=lambda k: own[k]) if own else None
    own_words = CAUSE_WORDS.get(own_cause, own_cause) if own_cause else "computing (no lost time of its own)"
    share = wait * len(waiting) / len(ranks)  # the job's wall time: the waiting ranks' part of it
    ev = {"slow": _rank_name(slow), "wait_shares": {_rank_name(r): round(waits[r.pid], 3) for r in ranks},
          "slow_rank_own": own_words,
          "slow_rank_own_share": round(slow.share(own_cause), 3) if own_cause else 0.0,
          "collective_shares": {_rank_name(r): round(r.states_s.get("collective", 0.0) / r.wall_s, 3)
                               for r in ranks}}
    fix = FIX_STRAGGLER.replace("{R}", str(slow.rank if slow.rank is not None else slow.pid)).replace(
        "{CAUSE}", own_words)
    return _finding("straggler", job, share, f"the other ranks wait for {_rank_name(slow)} {pct(wait)} of their "
                    f"time; its own time goes to {own_words}", ev, fix, relax, rank=slow.rank)


def comm_bound(w: Window, relax: float = 1.0) -> list[Finding]:
    """comm_bound: collectives in a single-rank view (the other ranks are not watched)."""
    job = _job(w)
    if job is None:
        return []
    d = _share(job, "comm_bound")
    return _finding("comm_bound", job, d, f"the rank waits in collectives {pct(d)} of the time", {}, FIX_COMM,
                    relax)


def host_sync_stall(w: Window, relax: float = 1.0) -> list[Finding]:
    """host_sync_stall: the main thread waiting for the device (.item(), .cpu(), copies)."""
    job = _job(w)
    if job is None:
        return []
    d = _share(job, "host_sync_stall")
    return _finding("host_sync_stall", job, d, f"the training loop waits for the device {pct(d)} of the time",
                    {}, FIX_SYNC, relax)


def host_overhead_bound(w: Window, relax: float = 1.0) -> list[Finding]:
    """host_overhead_bound: the card idles while its rank computes (launch/host overhead)."""
    job = _job(w)
    if job is None or not job.gpu_job:
        return []
    d = _share(job, "host_overhead_bound")
    return _finding("host_overhead_bound", job, d, f"the cards idle {pct(d)} of the time while the host runs "
                    "forward/backward/optimizer: the host cannot feed them work fast enough", {}, FIX_OVERHEAD,
                    relax)


def starved_unattributed(w: Window, relax: float = 1.0) -> list[Finding]:
    """starved_unattributed: card idle time with no stacks to say why."""
    job = _job(w)
    if job is None or not job.gpu_job:
        return []
    d = _share(job, UNKNOWN)
    return _finding("starved_unattributed", job, d, f"the cards idle {pct(d)} of the time and no stacks say why",
                    {}, FIX_UNKNOWN, relax)

