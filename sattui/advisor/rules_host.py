"""Host-side rules: R06 host_sync_stall, R07 host_overhead_bound, R14 straggler /
comm_bound, R15 periodic_stall. Pure functions ``rule(w, relax=1.0) -> list[Finding]``."""

from __future__ import annotations

import statistics

from sattui.advisor.base import Finding, pct, severity_for
from sattui.advisor.evidence import top_sites
from sattui.advisor.window import CardStats, Window, pstdev

FIX_SYNC = (
    "Avoid unnecessary CPU-GPU synchronization (PyTorch tuning guide): no print(cuda_tensor), "
    "cuda_tensor.item(), .cpu()/.to('cpu'), nonzero() or Python control flow on CUDA results inside the step; "
    "accumulate metrics on the GPU and read them every N steps; use torch.cuda.set_sync_debug_mode('warn') to "
    "find hidden syncs (Nsight cuda_api_sync: 'Avoid excessive use of synchronization'). GradScaler's one "
    ".item() per step is expected.")
FIX_OVERHEAD = (
    "Kernels are too small or too many for Python to keep up: increase the batch size; fuse ops with "
    "torch.compile; use CUDA graphs (torch.compile(mode='reduce-overhead')); use foreach/fused optimizers "
    "(torch.optim.AdamW(..., fused=True)); remove per-step Python work (logging, metric objects).")
FIX_STRAGGLER = (
    "Rank {rank} arrives late and every other rank waits for it in the collective ('all devices wait for the "
    "worker which finishes last' — PyTorch tuning guide). Fix that rank's own bottleneck, balance work per rank "
    "(bucket/pack by sequence length), make rank-0-only logging/checkpointing asynchronous.")
FIX_COMM = (
    "Communication takes a large share of every step: try gradient compression or gradient accumulation, or "
    "increase the batch size (torch-tb-profiler); use DDP no_sync() during accumulation; check NCCL_* settings "
    "in the environment (e.g. disabled P2P/IB).")
FIX_STALL = {
    "checkpoint": ("Save asynchronously (torch.distributed.checkpoint.async_save) or less often, write locally and "
                   "upload in the background, save once per node/sharded."),
    "eval": ("Evaluate less often or on a subset, with a larger eval batch and torch.inference_mode(); "
             "persistent_workers=True for the validation loader."),
    "logging": "Aggregate metrics on the GPU and log every N steps.",
    "unknown": ("Something stops the training loop at a fixed interval; look at what runs every ~{period:.0f} s "
                "(checkpoint, evaluation, logging) and make it asynchronous or less frequent."),
}


def _sites(st, activities, share) -> list[dict[str, object]]:
    return top_sites(st.pick(activities), share, source=True)


def host_sync_stall(w: Window, relax: float = 1.0) -> list[Finding]:
    """R06 — the training loop keeps synchronizing with the GPU.

    Anchor: PyTorch tuning guide "Avoid unnecessary CPU-GPU synchronization"; Nsight
    ``cuda_api_sync``. Threshold [sattui proposal]: s = share(sync) ≥ 10 % with U < 85 %
    (suppressed at U ≥ 95 %: waiting at a sync is then just waiting for a busy GPU —
    HTA: the CPU would stall anyway once 1024 launches are queued).
    Impact = min(s, 1 − U/100).
    """
    out = []
    if not w.gpu_job:
        return out
    for pid in w.judged_pids:
        st = w.stack(pid)
        u = w.util_of(w.cards_of(pid))
        if st is None or u is None or u >= 85.0:
            continue
        s = st.share("sync")
        if s < 0.10 * relax:
            continue
        impact = min(s, 1.0 - u / 100.0)
        sites = _sites(st, ("sync",), s)
        ev = {"sync_share": round(s, 4), "util": round(u, 1), "sites": sites, "repeated": len(sites) >= 2}
        top = sites[0]["site"] if sites else "?"
        out.append(Finding("host_sync_stall", severity_for(impact), impact,
                           f"the training thread waits for the GPU at syncs {pct(s)} of the time (top: {top}) "
                           f"while the GPU is busy only {u:.0f}%", ev, FIX_SYNC, rank=w.rank_of(pid)))
    return out


def host_overhead_bound(w: Window, relax: float = 1.0) -> list[Finding]:
    """R07 — the CPU cannot launch GPU work fast enough (kernel-launch bound).

    Anchor: TF Profiler kernel-launch share 3 % / 15 %; HTA "short GPU kernels" (launch
    5–20 µs). Threshold [sattui proposal]: U < 90 % (or SM < 50 %), data < 5 %, sync
    < 10 %, no collective, and the launching process saturated: CPU ≥ 0.85 cores and
    state ``R`` ≥ 80 % of probes (process CPU: the per-thread split is not recorded).
    Impact = 1 − U/100 (or 0.5 − SM/100 when only SM is low).
    """
    out = []
    if not w.gpu_job:
        return out
    for pid in w.judged_pids:
        st = w.stack(pid)
        cards = w.cards_of(pid)
        u, sm = w.util_of(cards), w.sm_of(cards)
        if st is None or u is None:
            continue
        if u < 90.0:
            impact = 1.0 - u / 100.0
        elif sm is not None and sm < 50.0:
            impact = 0.5 - sm / 100.0
        else:
            continue
        if st.share("data_wait", "data_inline") >= 0.05 or st.share("sync") >= 0.10 or st.share("collective") >= 0.02:
            continue
        p = w.procs.get(pid)
        if p is None or p.cpu is None or p.cpu < 0.85 * relax or p.state_share("R") < 0.8:
            continue
        ev = {"util": round(u, 1), "sm": None if sm is None else round(sm, 1), "main_cpu": round(p.cpu, 3),
              "main_state_R": round(p.state_share("R"), 3),
              "compute_share": round(st.share("forward", "backward", "optimizer"), 4),
              "shares": st.shares()}
        out.append(Finding("host_overhead_bound", severity_for(impact), impact,
                           f"the training process is {p.cpu:.0%} busy on the CPU launching work while the GPU "
                           f"is busy only {u:.0f}%: kernel-launch / Python-overhead bound", ev, FIX_OVERHEAD,
                           rank=w.rank_of(pid)))
    return out


def _collective_shares(w: Window) -> dict[int, float]:
    return {pid: w.stack(pid).share("collective") for pid in w.judged_pids if w.stack(pid) is not None}


def _stack_straggler(w: Window, relax: float) -> tuple[int, float, dict[int, float]] | None:
    c = _collective_shares(w)
    if len(c) < 2:
        return None
    med = statistics.median(c.values())
    if med < 0.20 * relax:
        return None
    slow = min(c, key=c.__getitem__)
    if c[slow] > 0.5 * med:
        return None
    others = [v for p, v in c.items() if p != slow]
    return slow, sum(others) / len(others), c


def straggler(w: Window, relax: float = 1.0) -> list[Finding]:
    """R14a — one rank arrives late; the others wait for it.

    Anchor: PyTorch tuning guide ("all devices wait for the worker which finishes
    last"); NCCL kernels spin while they wait (NVIDIA/nccl#146, #403).
    Threshold [sattui proposal], stack path: median collective share ≥ 20 % and one rank
    at ≤ 0.5 × the median. GPU path: (max − min)/mean of SM (else power) ≥ 20 %, and most
    other cards at U ≥ 90 % with SM ≤ 0.5 × (power ≤ 0.6 ×) the outlier's; with stacks,
    their ranks must sit in sync/collective. Impact: the waiting ranks' share.
    """
    got = _stack_straggler(w, relax)
    if got is not None:
        slow, impact, c = got
        st = w.stack(slow)
        rank = w.rank_of(slow)
        cards = w.cards_of(slow)
        top = max(st.by_state, key=st.by_state.__getitem__) if st and st.by_state else None
        ev = {"path": "stacks", "collective_share": {str(w.rank_of(p) if w.rank_of(p) is not None else p): round(v, 4)
                                                     for p, v in c.items()},
              "straggler_pid": slow, "straggler_top_activity": top,
              "straggler_shares": st.shares() if st else {}}
        return [Finding("straggler", severity_for(impact), impact,
                        f"rank {rank if rank is not None else slow} is the straggler: the other ranks wait in "
                        f"collectives {pct(impact)} of the time while it is mostly in {top}",
                        ev, FIX_STRAGGLER.format(rank=rank if rank is not None else slow),
                        card=cards[0] if len(cards) == 1 else None, rank=rank)]
    return _gpu_straggler(w, relax)


def _gpu_straggler(w: Window, relax: float) -> list[Finding]:
    cards = [w.cards[c] for c in w.job_cards if w.card_ok(c)]
    if len(cards) < 2:
        return []
    use_sm = all(cs.sm is not None for cs in cards)
    metric = "sm" if use_sm else "power"
    vals = {cs.card: (cs.sm if use_sm else cs.power) for cs in cards}
    if any(v is None for v in vals.values()):
        return []
    m = sum(vals.values()) / len(vals)
    if m <= 0 or (max(vals.values()) - min(vals.values())) / m < 0.20 * relax:
        return []
    out_card = max(vals, key=vals.__getitem__)
    ratio = 0.5 if use_sm else 0.6
    waiting = [cs for cs in cards if cs.card != out_card and (cs.util or 0.0) >= 90.0
               and vals[cs.card] <= ratio * vals[out_card]]
    if len(waiting) < max(1, len(cards) // 2):
        return []
    confirm = "unconfirmed (no stacks)"
    if w.has_stacks:
        waits = []
        for pid in w.judged_pids:
            if set(w.cards_of(pid)) & {cs.card for cs in waiting}:
                waits.append(w.stack(pid).share("sync", "collective"))
        if waits and min(waits) < 0.20:
            return []
        if waits:
            confirm = f"their ranks wait in sync/collective {pct(min(waits))}+ of the time"
    impact = sum(1.0 - vals[cs.card] / vals[out_card] for cs in waiting) / len(cards)
    rank = None
    for pid in w.trainer_pids:
        if out_card in w.cards_of(pid) and len(w.trainer_pids) > 1:
            rank = w.rank_of(pid)
    ev = {"path": "gpu", "metric": metric, "per_card": {str(c): round(v, 1) for c, v in vals.items()},
          "util": {str(cs.card): round(cs.util or 0.0, 1) for cs in cards},
          "waiting_cards": [cs.card for cs in waiting], "straggler_card": out_card, "confirmation": confirm}
    who = f"rank {rank} on card {out_card}" if rank is not None else f"card {out_card}"
    return [Finding("straggler", severity_for(impact), impact,
                    f"{who} is the straggler: {len(waiting)} other card(s) show ~100% util with low {metric} "
                    "(NCCL kernels spinning while they wait)", ev,
                    FIX_STRAGGLER.format(rank=rank if rank is not None else f"on card {out_card}"),
                    card=out_card, rank=rank)]


def comm_bound(w: Window, relax: float = 1.0) -> list[Finding]:
    """R14b — every rank spends much of its time in collectives, no straggler.

    Anchor: torch-tb-profiler communication > 10 % of the step; TF Profiler device
    collectives 3 % / 15 %. Threshold: ≥ 2 ranks, every collective share ≥ 10 %, and no
    stack-path straggler. Impact: the smallest collective share.
    """
    c = _collective_shares(w)
    if len(c) < 2 or min(c.values()) < 0.10 * relax or _stack_straggler(w, 1.0) is not None:
        return []
    impact = min(c.values())
    ev = {"collective_share": {str(w.rank_of(p) if w.rank_of(p) is not None else p): round(v, 4)
                               for p, v in c.items()}}
    return [Finding("comm_bound", severity_for(impact), impact,
                    f"all {len(c)} ranks spend ≥ {pct(impact)} of their time in collectives", ev, FIX_COMM)]


# -- R15 ------------------------------------------------------------------------------

def _gpu_episodes(cs: CardStats) -> list[tuple[float, float]]:
    """Runs of samples with util ≤ 10 % lasting ≥ 1 s: (start, duration)."""
    eps: list[tuple[float, float]] = []
    start = None
    n = 0
    for s in cs.samples:
        if s.util is not None and s.util <= 10.0:
            if start is None:
                start, n = s.t, 0
            n += 1
        elif start is not None:
            if n * cs.dt >= 1.0:
                eps.append((start, n * cs.dt))
            start = None
    if start is not None and n * cs.dt >= 1.0:
        eps.append((start, n * cs.dt))
    return eps


MIN_PERIOD_S = 5.0


def _stack_episodes(bins: dict[int, dict[str, float]]) -> list[tuple[float, float]]:
    """Runs of 1-s bins where ≥ 50 % of main-thread time is checkpoint/eval."""
    eps: list[tuple[float, float]] = []
    if not any("checkpoint" in d or "eval" in d for d in bins.values()):
        return eps
    start = None
    prev = None
    for b in sorted(bins):
        d = bins[b]
        ctx = d.get("checkpoint", 0.0) + d.get("eval", 0.0)
        hit = ctx >= 0.25 and ctx >= 0.5 * sum(d.values())
        if hit and start is not None and prev is not None and b == prev + 1:
            prev = b
            continue
        if start is not None:
            eps.append((float(start), float(prev - start + 1)))
            start = None
        if hit:
            start = prev = b
    if start is not None:
        eps.append((float(start), float(prev - start + 1)))
    return eps


def _kind(w: Window, episodes: list[tuple[float, float]]) -> tuple[str, dict[str, float]]:
    """The main thread's majority activity inside the episodes: checkpoint, eval,
    logging, data (waiting for batches), or unknown (no stacks, or nothing dominant)."""
    secs: dict[str, float] = {}
    for pid in w.trainer_pids:
        if not w.has_stacks:
            break
        bins = w.stack_bins(pid)
        for t, dur in episodes:
            for b in range(int(t), int(t + dur) + 1):
                for a, v in bins.get(b, {}).items():
                    key = "data" if a in ("data_wait", "data_inline") else a
                    secs[key] = secs.get(key, 0.0) + v
    named = {k: v for k, v in secs.items() if k in ("checkpoint", "eval", "logging", "data")}
    total = sum(secs.values())
    if not named or total <= 0:
        return "unknown", named
    best = max(named, key=named.__getitem__)
    return (best if named[best] >= 0.3 * total else "unknown"), named


def _write_burst(w: Window, episodes: list[tuple[float, float]]) -> float:
    """Bytes the trainer's tree wrote around the episodes, per episode on average."""
    total = 0.0
    for p in w.procs.values():
        ts = [s.t for s in p.samples]
        dt = statistics.median([b - a for a, b in zip(ts, ts[1:])]) if len(ts) > 1 else 1.0
        for s in p.samples:
            if s.write_Bps and any(t - 2.0 <= s.t <= t + d + 2.0 for t, d in episodes):
                total += s.write_Bps * dt
    return total / max(1, len(episodes))


def periodic_stall(w: Window, relax: float = 1.0) -> list[Finding]:
    """R15 — the GPU (or the loop) stops at a regular interval: checkpoint, eval, logging.

    Anchor: Nsight Systems ``gpu_gaps`` (idle > 500 ms). Threshold [sattui proposal]:
    episodes ≥ 1 s with U ≤ 10 % (GPU job) or ≥ 50 % of main-thread time in
    checkpoint/eval; ≥ 3 episodes with spacing CV ≤ 0.3 in the long window. Impact: lost
    share L = Σ episode time / window (≥ 20 % high, ≥ 5 % medium; fires from 2 %).
    """
    episodes: list[tuple[float, float]] = []
    card = None
    source = "gpu"
    if w.gpu_job:
        for c in w.job_cards:
            eps = _gpu_episodes(w.cards[c])
            if sum(d for _, d in eps) > sum(d for _, d in episodes):
                episodes, card = eps, c
    if len(episodes) < 3 and w.has_stacks:
        for pid in w.trainer_pids:
            eps = _stack_episodes(w.stack_bins(pid))
            if len(eps) >= 3 and sum(d for _, d in eps) > sum(d for _, d in episodes):
                episodes, card, source = eps, None, "stacks"
    if len(episodes) < 3:
        return []
    starts = [t for t, _ in episodes]
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    period = statistics.mean(gaps)
    cv = pstdev(gaps) / period if period > 0 else 1.0
    dur = statistics.mean(d for _, d in episodes)
    # A stall is an interruption of work: short, regular idles every step or two are the
    # duty cycle of a starved card (R01/R19), not a checkpoint or an evaluation.
    if cv > 0.3 / relax or period < MIN_PERIOD_S or period < 3.0 * dur:
        return []
    lost = sum(d for _, d in episodes) / max(w.length_s, 1.0)
    if lost < 0.02 * relax:
        return []
    kind, secs = _kind(w, episodes)
    if kind == "data":
        return []  # the loop waits for batches in the gaps: the input rules say so
    burst = _write_burst(w, episodes)
    if kind == "unknown" and burst >= 50e6:
        kind = "checkpoint"
    ev = {"source": source, "episodes": len(episodes), "period_s": round(period, 1), "period_cv": round(cv, 3),
          "stall_s": round(dur, 1), "lost_share": round(lost, 4), "kind": kind,
          "context_s": {k: round(v, 1) for k, v in secs.items()}, "write_per_episode_bytes": round(burst),
          "event_times": [round(t, 1) for t in starts]}
    what = {"checkpoint": "saving a checkpoint", "eval": "evaluating", "logging": "logging"}.get(kind, "stopped")
    return [Finding("periodic_stall", severity_for(lost, floor="low"), lost,
                    f"every ~{period:.0f} s the {'GPU idles' if source == 'gpu' else 'training loop stops'} "
                    f"for ~{dur:.1f} s ({pct(lost)} of wall time), {what}",
                    ev, FIX_STALL[kind].format(period=period), card=card)]
