"""Findings from the time ledger: one per cause of lost time, its impact the share of the
job's wall time that cause took (sattui/ledger/bins.py says how each second is given
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

import math
from collections.abc import Callable, Iterable

from sattui.advisor.context import Finding, severity_for, share_text
from sattui.advisor.intervals.batch_means import Interval, difference_interval
from sattui.advisor.rules_gpu import gpu_straggler
from sattui.advisor.rules_system import FIX_STARVED_NSIGHT, gaps, no_stacks_fix, waiting_signature
from sattui.ledger.bins import JobLedger, RankLedger
from sattui.ledger.causes import (  # noqa: F401  (the fixes and words, re-exported for the rules' readers)
    CAUSE_WORDS,
    COMM_BOUND,
    CPU_CONTENTION,
    FIX_COMM,
    FIX_CONTENTION,
    FIX_CONTENTION_OWN,
    FIX_INLINE,
    FIX_INPUT,
    FIX_OVERHEAD,
    FIX_RESPAWN,
    FIX_STALL,
    FIX_STRAGGLER,
    FIX_SYNC,
    FIX_TOO_FEW,
    FIX_WORKER_CPU,
    FIX_WORKER_IO,
    HOST_OVERHEAD,
    HOST_SYNC_STALL,
    IDLE,
    PERIODIC_STALL,
    RULE_CAUSE,
    STRAGGLER,
    UNKNOWN,
    WORKER_BUSY,
    WORKER_RESPAWN,
)
from sattui.ledger.window import DEFAULT_STACK_RATE_HZ, Window

SHOWN_FROM = 0.03
# A busy card has short gaps between kernels (launches, the step's edges): host overhead
# is news from TF Profiler's 5 %; idle time nothing explains from Nsight's gpu_time_util
# spirit, a tenth of the cards' time, not the last few percent of a 97 % card.
OVERHEAD_SHOWN_FROM = 0.05
UNATTRIBUTED_SHOWN_FROM = 0.10

def _job(w: Window) -> JobLedger | None:
    return w.ledger


def _finding(rule: str, job: JobLedger, share: float, summary: str, ev: dict[str, object], fix: str,
             relax: float, rank: int | None = None, card: int | None = None,
             shown_from: float = SHOWN_FROM, impact_ci: tuple[float, float] | None = None) -> list[Finding]:
    if share < shown_from * relax:
        return []
    ev = {"share": round(share, 4), **_per_rank(job, RULE_CAUSE.get(rule, rule)), **ev}
    return [Finding(rule, severity_for(share), share, summary, ev, fix, rank=rank, card=card, impact_ci=impact_ci)]


def _per_rank(job: JobLedger, cause: str) -> dict[str, object]:
    ranks = [r for r in job.ranks.values() if r.wall_s > 0]
    if len(ranks) <= 1:
        return {}
    return {"rank_shares": {_rank_name(r): round(r.share(cause), 3) for r in ranks}}


def _rank_name(r: RankLedger) -> str:
    return f"rank {r.rank}" if r.rank is not None else f"pid {r.pid}"


def _share(job: JobLedger, cause: str) -> float:
    return job.cause_shares().get(cause, 0.0)


def _busy_workers(w: Window, job: JobLedger) -> tuple[float, bool, float | None]:
    """The share lost to workers busy computing, whether more workers would help (cores
    were free, ≥ 1 on average over those seconds, and the ranks run fewer workers than
    Lightning's suggested maximum), and the mean free cores over those seconds (None where
    the usable cores are not known)."""
    d = _share(job, WORKER_BUSY)
    free = known = 0.0
    for r in job.ranks.values():
        det = r.detail.get(WORKER_BUSY, {})
        free += det.get("free_core_s", 0.0)
        known += det.get("known_s", 0.0)
    free_mean = free / known if known > 0 else None
    more = free_mean is not None and free_mean >= 1.0 and not _at_suggested_max(w)
    return d, more, free_mean


def _at_suggested_max(w: Window) -> bool:
    return w.workers_at_once / max(1, len(w.trainer_pids)) >= suggested_workers(w)


def _why_not_more(w: Window, free_mean: float | None) -> str:
    """Why worker_cpu_bound does not say "add workers", from the same figures that decided it."""
    if free_mean is None:
        return "the host's usable cores are unknown"
    if free_mean < 1.0:
        # the figure itself: "0.98 free" beside "no free core" read as a contradiction
        return f"only {free_mean:.2f} cores free on average: less than another worker needs"
    n = w.workers_at_once
    return (f"{n} worker{'s' if n != 1 else ''} already, Lightning's suggested maximum "
            f"for {w.ctx.cpu_count} usable cores")


def _data_rule(rule: str, summary: str, fix: str | Callable[[Window], str],
               doc: str) -> Callable[[Window, float], list[Finding]]:
    def rule_fn(w: Window, relax: float = 1.0) -> list[Finding]:
        job = _job(w)
        if job is None:
            return []
        free_mean: float | None = None
        if rule in ("worker_cpu_bound", "too_few_workers"):
            d, more, free_mean = _busy_workers(w, job)
            if more != (rule == "too_few_workers"):
                return []
        else:
            d = _share(job, RULE_CAUSE.get(rule, rule))
        if d < SHOWN_FROM * relax:
            return []  # what _finding would say, before the evidence is gathered
        wait = sum(r.states_s.get("data_wait", 0.0) + r.states_s.get("data_inline", 0.0) for r in job.ranks.values())
        wall = sum(r.wall_s for r in job.ranks.values()) or 1.0
        ev: dict[str, object] = {"data_wait_share": round(wait / wall, 4), "workers": w.workers_at_once}
        # per worker and tick: a worker that lived two seconds weighs two ticks, not one worker
        cpus = [c for p in w.workers for c in p.cpus]
        if cpus:
            ev["worker_cpu_mean"] = round(sum(cpus) / len(cpus), 2)
        if w.ctx.cpu_count_known:
            ev["cpus_usable"] = w.ctx.cpu_count
        if free_mean is not None:
            ev["free_cores_mean"] = round(free_mean, 2)  # over the seconds the workers computed
        if rule == "worker_respawn":
            ev.update(_restarts(job))
        text = fix(w) if callable(fix) else fix
        why = _why_not_more(w, free_mean) if rule == "worker_cpu_bound" else ""
        return _finding(rule, job, d, summary.format(P=share_text(d), WHY=why), ev, text, relax)
    rule_fn.__name__ = rule
    rule_fn.__doc__ = doc
    return rule_fn


def _restarts(job: JobLedger) -> dict[str, object]:
    """How many worker generations were seen to start, and their mean start time (birth of
    the new workers to the first batch seen reaching the main thread), over the ranks."""
    n = secs = 0.0
    for r in job.ranks.values():
        det = r.detail.get(WORKER_RESPAWN, {})
        n += det.get("restarts", 0.0)
        secs += det.get("start_s", 0.0)
    if n < 0.5:
        return {}
    return {"restarts": round(n), "start_s_per_epoch": round(secs / n, 2)}


def _too_few_fix(w: Window) -> str:
    return FIX_TOO_FEW.replace("{S}", str(suggested_workers(w)))


def _inline_fix(w: Window) -> str:
    return FIX_INLINE.replace("{S}", str(suggested_workers(w)))


_DATA_ANCHOR = ("Anchor: TensorFlow Profiler input-pipeline analyzer (5 % / 20 % of step time waiting for "
                "input); torch-tb-profiler DataLoader > 5 %. Threshold: the cause's share of the job's wall "
                "time ≥ 5 % medium, ≥ 20 % high (shown from 3 %).")

worker_cpu_bound = _data_rule(
    "worker_cpu_bound", "training waits {P} of the time for DataLoader workers that are busy computing samples "
    "({WHY})", FIX_WORKER_CPU,
    "R02 — data-wait seconds in which the rank's workers ran on a CPU (≥ 0.6 cores, or R), where "
    "more workers would not help (no core free on average, or already Lightning's suggested "
    "maximum).\n\n" + _DATA_ANCHOR)
too_few_workers = _data_rule(
    "too_few_workers", "training waits {P} of the time for DataLoader workers that are all busy while cores are "
    "free: too few workers", _too_few_fix,
    "R03 — data-wait seconds in which the workers ran on a CPU while ≥ 1 usable core was free on "
    "average and the ranks run fewer workers than Lightning's suggested maximum "
    "(cpus // local_world_size − 1).\n\n" + _DATA_ANCHOR)
worker_io_bound = _data_rule(
    "worker_io_bound", "training waits {P} of the time for DataLoader workers that are reading or waiting on "
    "their data source, not computing", FIX_WORKER_IO,
    "R04 — data-wait seconds in which the workers were in D, reading (≥ 1 MB/s), or all asleep "
    "(waiting on their data source).\n\n" + _DATA_ANCHOR)
worker_respawn = _data_rule(
    "worker_respawn", "training waits {P} of the time while its DataLoader workers (re)start (no live worker, "
    "or new workers that have not delivered their first batch)", FIX_RESPAWN,
    "R16 — data-wait seconds while a new worker generation starts: from its birth until the first "
    "batch is seen reaching the main thread (its stacks leaving the wait, or unpickling the batch) "
    "or a worker of it is seen "
    "in its fetch loop, less what the rank's batches usually take to show up (the 90th percentile "
    "of its waits); and seconds with no live worker (where the rank had some). "
    "persistent_workers=False restarts them every epoch. Evidence: restarts, "
    "start_s_per_epoch.\n\n" + _DATA_ANCHOR)
input_bound = _data_rule(
    "input_bound", "training waits for the DataLoader {P} of the time; the workers' figures do not say why",
    FIX_INPUT,
    "R01 — data-wait seconds the workers' figures could not narrow down (no tick for that second, "
    "or no worker seen at all).\n\n" + _DATA_ANCHOR)
main_process_loading = _data_rule(
    "main_process_loading", "the training thread loads the data itself {P} of the time (num_workers=0)",
    _inline_fix,
    "R05 — seconds the main thread spent in the DataLoader's fetch itself (num_workers=0).\n\n"
    + _DATA_ANCHOR)


def cpu_contention(w: Window, relax: float = 1.0) -> list[Finding]:
    """R17 — runnable but not running: the workers' or the main thread's run delay.

    Anchor: PyTorch ``check_worker_number_rationality`` (more workers than CPUs "might get
    DataLoader running slow"); the kernel's run-queue delay (``/proc/PID/schedstat``) says
    it directly. Threshold: seconds lost while a worker (or the main thread, in its
    compute) waited ≥ 25 % of a bin for a CPU; share of the job's wall time ≥ 5 % medium,
    ≥ 20 % high.
    """
    job = _job(w)
    if job is None:
        return []
    d = _share(job, CPU_CONTENTION)
    if d < SHOWN_FROM * relax:
        return []  # what _finding would say, before the evidence is gathered
    parts: dict[str, float] = {}
    for r in job.ranks.values():
        for k, v in r.detail.get(CPU_CONTENTION, {}).items():
            parts[k] = parts.get(k, 0.0) + v
    ev: dict[str, object] = {"waiting_for_a_cpu": "its DataLoader workers" if parts.get("data_wait", 0) >= parts.get(
        "main_thread", 0) else "the training thread"}
    if w.ctx.cpu_count_known:
        ev["cpus_usable"] = w.ctx.cpu_count
    delays = [s.run_delay for p in w.procs.values() for s in p.samples if s.run_delay is not None]
    if delays:
        ev["run_delay_max_share"] = round(max(delays), 2)
    holders = _core_holders(w)
    ev.update({k: round(v, 2) for k, v in holders.items() if v is not None})
    who, own = _who_holds(w, holders)
    return _finding("cpu_contention", job, d, f"the trainer waits for a CPU {share_text(d)} of the time (runnable, "
                    f"not running): {who}", ev, FIX_CONTENTION_OWN if own else FIX_CONTENTION, relax)


def _per_tick_mean(samples: Iterable[tuple[float, float]]) -> float | None:
    """The mean over ticks of the figures summed at each tick (a worker restarted every
    epoch is a new pid, not another worker beside the old one)."""
    per_tick: dict[float, float] = {}
    for t, v in samples:
        per_tick[t] = per_tick.get(t, 0.0) + v
    return sum(per_tick.values()) / len(per_tick) if per_tick else None


def _core_holders(w: Window) -> dict[str, float | None]:
    """Who used the cores over the window, in cores: the trainer's whole tree, its
    DataLoader workers, and the rest of the host (host-wide busy minus the tree), each
    None where not measured."""
    if not w.procs:  # no process figures (the cluster view reads the ledger alone)
        return {"trainer_cores": None, "workers_cores": None, "other_cores": None}
    procs = [p for p in w.procs.values() if p.role != "pin"]  # a pin thread is counted in its process
    tree = _per_tick_mean((s.t, s.cpu) for p in procs for s in p.samples if s.cpu is not None)
    workers = _per_tick_mean((s.t, s.cpu) for p in procs if p.role == "worker" for s in p.samples
                             if s.cpu is not None)
    hosts = [h.cpu_busy for h in w.timeline.window("host", 0, w.t0, w.t1) if h.cpu_busy is not None]
    others = max(0.0, sum(hosts) / len(hosts) - tree) if hosts and tree is not None else None
    return {"trainer_cores": tree, "workers_cores": workers, "other_cores": others}


def _who_holds(w: Window, h: dict[str, float | None]) -> tuple[str, bool]:
    """Whose work holds the cores, from the figures measured (and whether it is the
    trainer's own): the trainer's own tree when it fills most of the usable cores, else the
    rest of the host when that keeps half a core or more busy."""
    tree, workers, others = h["trainer_cores"], h["workers_cores"], h["other_cores"]
    cpus = w.ctx.cpu_count if w.ctx.cpu_count_known else None
    # The tree first: the usable cores are the trainer's affinity and CPU quota, while the
    # host-wide figure also counts cores (or other containers) the trainer cannot use.
    if tree is not None and cpus and tree >= 0.8 * cpus:
        own = f"its own processes fill the {cpus} usable cores ({tree:.1f} busy"
        n = w.workers_at_once
        if workers is not None and n:
            own += f", {workers:.1f} of them in {n} DataLoader worker{'s' if n != 1 else ''}"
        return own + ")", True
    if others is None:
        return "other work holds the cores (the host's busy cores are not known)", False
    if others >= 0.5:
        return f"other processes on the host keep {others:.1f} cores busy", False
    return "other work holds the cores", False


def periodic_stall(w: Window, relax: float = 1.0) -> list[Finding]:
    """R15 — the loop stops for checkpoints, evaluation or logging.

    Anchor: Nsight Systems ``gpu_gaps`` (idle > 500 ms); TF Profiler's "all other time".
    Threshold: main-thread seconds in the checkpoint/eval/logging phases (by their stacks)
    as a share of the job's wall time ≥ 5 % medium, ≥ 20 % high; the phase is named.
    """
    job = _job(w)
    if job is None:
        return []
    d = _share(job, PERIODIC_STALL)
    if d < SHOWN_FROM * relax:
        return []  # what _finding would say, before the evidence is gathered
    phases: dict[str, float] = {}
    for r in job.ranks.values():
        for k, v in r.detail.get(PERIODIC_STALL, {}).items():
            phases[k] = phases.get(k, 0.0) + v
    if not phases:
        return []
    top = max(phases, key=lambda k: phases[k])
    wall = sum(r.wall_s for r in job.ranks.values()) or 1.0
    ev: dict[str, object] = {"phase": top, "phase_shares": {
        k: round(v / wall, 4) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])}}
    names = {"checkpoint": "checkpointing", "eval": "evaluation", "logging": "logging"}
    fix = " ".join(FIX_STALL[p] for p in sorted(phases, key=lambda k: -phases[k]) if p in FIX_STALL)
    return _finding("periodic_stall", job, d, f"training stops for {names.get(top, top)} {share_text(d)} of the time",
                    ev, fix, relax)


def _rank_waits(job: JobLedger) -> tuple[list[RankLedger], dict[int, float]]:
    ranks = [r for r in job.ranks.values() if r.wall_s > 0]
    return ranks, {r.pid: r.share(STRAGGLER) for r in ranks}


def _keyed_waits(r: RankLedger, width: int) -> dict[int, tuple[float, float]]:
    """A rank's per-bin waits on a grid of ``width`` bins (ranks of a run's ledger may have
    coarsened theirs at different times)."""
    if r.wait_bin_width == width:
        return r.wait_bins
    out: dict[int, tuple[float, float]] = {}
    for b, (wall, wait) in r.wait_bins.items():
        k = b - b % width
        w0, x0 = out.get(k, (0.0, 0.0))
        out[k] = (w0 + wall, x0 + wait)
    return out


def wait_asymmetry(ranks: list[RankLedger], slow: RankLedger) -> Interval | None:
    """How much more of their time the other ranks wait than ``slow`` does: the others'
    waiting share (pooled over them) minus ``slow``'s, over the bins both were watched,
    with its paired batch-means interval (sattui/advisor/intervals/batch_means.py; None without
    per-bin waits)."""
    width = max(r.wait_bin_width for r in ranks)
    mine = _keyed_waits(slow, width)
    pooled: dict[int, tuple[float, float]] = {}
    for r in ranks:
        if r is slow:
            continue
        for k, (wall, wait) in _keyed_waits(r, width).items():
            w0, x0 = pooled.get(k, (0.0, 0.0))
            pooled[k] = (w0 + wall, x0 + wait)
    keys = sorted(set(mine) & set(pooled))
    return difference_interval([pooled[k] for k in keys], [mine[k] for k in keys])


def _straggler(job: JobLedger, relax: float) -> tuple[RankLedger, Interval, list[RankLedger], dict[int, float]] | None:
    """The slow rank and its asymmetric part of the job's wall time, when the interval of
    that part clears the threshold."""
    ranks, waits = _rank_waits(job)
    if len(ranks) < 2:
        return None
    slow = min(ranks, key=lambda r: (waits[r.pid], r.rank if r.rank is not None else r.pid))
    gap = wait_asymmetry(ranks, slow)
    if gap is None:
        return None
    asym = gap.scaled((len(ranks) - 1) / len(ranks))  # the job's wall time: the waiting ranks' part of it
    if asym.low < SHOWN_FROM * relax:
        return None
    return slow, gap, ranks, waits


def straggler(w: Window, relax: float = 1.0) -> list[Finding]:
    """R14 — one rank arrives late; the others wait for it.

    Anchor: PyTorch tuning guide ("all devices wait for the worker which finishes last");
    torch-tb-profiler communication > 10 %. Threshold: the asymmetry of the ranks' waits
    (collectives, or ``backward`` with their own CPU idle in a CPU job): the other ranks'
    waiting share minus the least waiting rank's, over the job's ranks ((N − 1)/N of it),
    with its 95 % interval from batch means over the ledger's one-second bins
    (sattui/advisor/intervals/batch_means.py): its low end ≥ 3 % of the job's wall time. Ranks that wait
    for each other about equally (every healthy multi-rank job, in its collectives) are
    ``comm_bound`` or nothing, never a straggler. That rank is the straggler and its own
    ledger names its cause. Impact: the asymmetric part (its estimate), as a share of the
    job's wall time. With no stacks on a GPU job, the cards' view (NCCL kernels spinning on
    the waiting cards).
    """
    job = _job(w)
    if job is None:
        return gpu_straggler(w, relax) if w.gpu_job and w.has_stacks is False else []
    found = _straggler(job, relax)
    if found is None:
        return gpu_straggler(w, relax) if job.gpu_job else []
    slow, gap, ranks, waits = found
    asym = gap.scaled((len(ranks) - 1) / len(ranks))
    own = {k: v for k, v in slow.causes_s.items() if k != STRAGGLER}
    own_cause = max(own, key=lambda k: own[k]) if own else None
    own_words = CAUSE_WORDS.get(own_cause, own_cause) if own_cause else "computing (no lost time of its own)"
    ev: dict[str, object] = {
        "slow": _rank_name(slow), "wait_shares": {_rank_name(r): round(waits[r.pid], 3) for r in ranks},
        "slow_rank_own": own_words, "slow_rank_own_share": round(slow.share(own_cause), 3) if own_cause else 0.0,
        "collective_shares": {_rank_name(r): round(r.states_s.get("collective", 0.0) / r.wall_s, 3) for r in ranks},
        "wait_gap": round(gap.estimate, 3), "wait_gap_interval": [round(gap.low, 3), round(gap.high, 3)],
        "asymmetric_interval": [round(asym.low, 4), round(asym.high, 4)],
        "effective_bins": round(gap.effective_bins, 1) if gap.effective_bins is not None else None}
    fix = FIX_STRAGGLER.replace("{R}", str(slow.rank if slow.rank is not None else slow.pid)).replace(
        "{CAUSE}", own_words)
    return _finding("straggler", job, asym.estimate,
                    f"the other ranks wait for {_rank_name(slow)} {share_text(gap.estimate)} of their time "
                    f"more than it waits for them ({share_text(gap.low)}–{share_text(gap.high)}, 95 %); "
                    f"its own time goes to {own_words}",
                    ev, fix, relax, rank=slow.rank, impact_ci=(max(0.0, asym.low), min(1.0, asym.high)))


def comm_bound(w: Window, relax: float = 1.0) -> list[Finding]:
    """R14b — the ranks wait in collectives, and no one rank is late.

    Anchor: torch-tb-profiler communication > 10 % of the step; TF Profiler device
    collectives 3 % / 15 %. Threshold: collective seconds (one rank watched), or, when no
    rank is a straggler (their waits symmetric, within their interval), every rank's
    waiting seconds, as a share of the job's wall time ≥ 5 % medium, ≥ 20 % high.
    """
    job = _job(w)
    if job is None:
        return []
    d = _share(job, COMM_BOUND)
    ranks, waits = _rank_waits(job)
    # Beside a straggler the waits are its: the little the slow rank itself waits (its
    # share of the sync) is no finding of its own (the DDP demo's 7 % would stand at medium).
    if len(ranks) >= 2 and _straggler(job, 1.0) is None and not (job.gpu_job and gpu_straggler(w, 1.0)):
        d += sum(waits.values()) / len(ranks)
    return _finding("comm_bound", job, d, f"the ranks wait in collectives {share_text(d)} of the time", {}, FIX_COMM,
                    relax)


def host_sync_stall(w: Window, relax: float = 1.0) -> list[Finding]:
    """R06 — the training loop keeps waiting for the device.

    Anchor: PyTorch tuning guide "Avoid unnecessary CPU-GPU synchronization"; Nsight
    ``cuda_api_sync``. Threshold: main-thread seconds in sync/h2d_copy (``.item()``,
    ``.cpu()``, pageable copies) as a share of the job's wall time ≥ 5 % medium, ≥ 20 % high.
    """
    job = _job(w)
    if job is None:
        return []
    d = _share(job, HOST_SYNC_STALL)
    return _finding("host_sync_stall", job, d, f"the training loop waits for the device {share_text(d)} of the time",
                    {}, FIX_SYNC, relax)


def host_overhead_bound(w: Window, relax: float = 1.0) -> list[Finding]:
    """R07 — the cards idle while their rank computes: launch or host overhead.

    Anchor: TF Profiler kernel-launch share 3 % / 15 %; HTA "short GPU kernels". Threshold:
    the cards' not-busy seconds while their rank is in forward/backward/optimizer, as a
    share of the job's wall time (over its cards) ≥ 5 % medium, ≥ 20 % high (shown from
    5 %: a busy card's gaps between kernels are normal); never more than the cards' idle
    share beyond their ranks' time in states that give a card no work, over the window
    (``_idle_beyond_waits``).
    """
    job = _job(w)
    if job is None or not job.gpu_job:
        return []
    d = _share(job, HOST_OVERHEAD)
    ev: dict[str, object] = {}
    beyond = _idle_beyond_waits(job)
    if beyond is not None:
        error = max(_wait_share_error(job, w.ctx.stack_rate_hz or DEFAULT_STACK_RATE_HZ), _gap_error(job))
        if beyond < d:
            # Each second's split rests on a few stack sightings, whose noise alone leaves
            # idle time beside compute sightings; over the window they add up to the rank's
            # true waiting share, and idle time those waits account for is no host overhead.
            ev = {"card_idle_share": round(_attributed_idle_share(job), 4),
                  "rank_wait_share": round(_rank_wait_share(job), 4), "wait_share_error": round(error, 4)}
            d = beyond
        if beyond - 2.0 * error < OVERHEAD_SHOWN_FROM * relax:
            # The waiting share is itself a count of samples: idle time beyond it by less than
            # two standard errors is within what sampling alone gives (a 20-s demo at 10 Hz:
            # ±2.4 points), not evidence of host overhead.
            return []
    return _finding("host_overhead_bound", job, d, f"the cards idle {share_text(d)} of the time while the host runs "
                    "forward/backward/optimizer: the host cannot feed them work fast enough", ev, FIX_OVERHEAD,
                    relax, shown_from=OVERHEAD_SHOWN_FROM)


def _gap_error(job: JobLedger) -> float:
    """The standard error of the cards' idle share beyond their ranks' waiting share, from
    how it varies second by second (a paired comparison: each second's card idle time
    against its rank's sightings). A py-spy starved of CPU stretches the sightings it
    took before each pause, most of all while the trainer computes (the io_bound demo on a
    loaded 2-core box: a rank sighted computing 57 % of a second in which its card, busy
    exactly while it computes, idled 88 %); the binomial error at the nominal rate does
    not see that, the spread of the seconds does."""
    w = sum(c.gap_w for c in job.cards.values())
    if w < 3.0:
        return 0.0
    mean = sum(c.gap_wx for c in job.cards.values()) / w
    var = sum(c.gap_wxx for c in job.cards.values()) / w - mean * mean
    return math.sqrt(var / (w - 1.0)) if var > 0 else 0.0


def _attributed_idle_share(job: JobLedger) -> float:
    """The cards' not-busy share of their time with the rank's state known (no-stacks time left out)."""
    wall = sum(c.wall_s for c in job.cards.values())
    idle = sum(c.known_idle_s for c in job.cards.values())
    return idle / wall if wall > 0 else 0.0


def _rank_wait_share(job: JobLedger) -> float:
    """The ranks' mean share of their time in states that give their cards no work."""
    ranks = [r for r in job.ranks.values() if r.wall_s > 0]
    return sum(r.starving_s / r.wall_s for r in ranks) / len(ranks) if ranks \
        else 0.0


def _wait_share_error(job: JobLedger, rate_hz: float) -> float:
    """The standard error of the ranks' waiting share as the sampler measured it: each of
    its ``wall × rate`` samples is waiting or not, a binomial count (samples of one long
    phase are not independent, so this is the least the error can be)."""
    n = sum(r.wall_s for r in job.ranks.values() if r.wall_s > 0) * rate_hz
    if n <= 0:
        return 0.0
    p = min(1.0, max(0.0, _rank_wait_share(job)))
    return math.sqrt(p * (1.0 - p) / n)


def _idle_beyond_waits(job: JobLedger) -> float | None:
    """The share of the cards' time they were not busy beyond what their ranks' time in
    starving states (data waits, checkpoint, logging, idle) over the whole window accounts
    for: the host overhead the window requires, however its seconds fell (None: no rank
    or card to weigh)."""
    if not any(r.wall_s > 0 for r in job.ranks.values()) or not any(c.wall_s > 0 for c in job.cards.values()):
        return None
    return max(0.0, _attributed_idle_share(job) - _rank_wait_share(job))


def starved_unattributed(w: Window, relax: float = 1.0) -> list[Finding]:
    """R19 — the cards idle and nothing says why.

    Anchor: Nsight Systems ``gpu_time_util`` (< 50 % over a chunk) and ``gpu_gaps`` (idle
    > 500 ms). Threshold: the cards' not-busy seconds with no main-thread state at those
    moments (no stacks), as a share of the job's wall time, shown from 10 % (≥ 20 % high);
    the Advisor drops it when a card rule explains the idle time.
    """
    job = _job(w)
    if job is None or not job.gpu_job:
        return []
    d = _share(job, UNKNOWN)
    if d < UNATTRIBUTED_SHOWN_FROM * relax:
        return []  # what _finding would say, before the evidence is gathered
    per_card: dict[str, object] = {}
    for c in w.job_cards:
        cs = w.cards.get(c)
        if cs is None or cs.util is None:
            continue
        g = gaps(cs)
        per_card[f"card {c}"] = {"util": round(cs.util, 1), "gap_count": len(g),
                                 "signature": "waiting for data (util swinging, power low, memory occupied)"
                                 if waiting_signature(cs) else None}
    ev: dict[str, object] = {"cards": per_card,
                             "stacks": "none at those moments" if w.has_stacks else
                             f"not available: {w.ctx.no_stacks_reason or 'none sampled'}"}
    fix = (FIX_STARVED_NSIGHT[0].upper() + FIX_STARVED_NSIGHT[1:]) if w.has_stacks else no_stacks_fix(w)
    return _finding("starved_unattributed", job, d, f"the cards idle {share_text(d)} of the time and nothing says why",
                    ev, fix, relax, shown_from=UNATTRIBUTED_SHOWN_FROM)


def suggested_workers(w: Window) -> int:
    """Lightning's ``suggested_max_num_workers``: max(1, cpus // local_world_size − 1)."""
    lws = max(1, len(w.trainer_pids))
    try:
        lws = max(lws, int(w.ctx.env.get("LOCAL_WORLD_SIZE", "0")))
    except ValueError:
        pass
    return max(1, w.ctx.cpu_count // lws - 1)
