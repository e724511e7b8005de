"""Card rules: R08 util_high_sm_low, R09 low_tensor_core_use, R10 allocator_thrash,
R11 memory_near_full, R12 throttled, R13 pcie_bound, R13b link_degraded, card_imbalance.

Pure functions ``rule(w, relax=1.0) -> list[Finding]``, one finding per card. A card
that does not report a signal (SM activity, clocks, PCIe) is skipped, never guessed:
the Advisor lists such rules under "cannot judge".
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass

from sattui.advisor.context import Finding, severity_for, share_text
from sattui.clock_events import GPU_IDLE, HW_SLOWDOWN, SW_POWER_CAP, known_clock_reasons
from sattui.findings import Severity
from sattui.ledger.window import CardStats, Window, link_bw_Bps, mean
from sattui.model import CardSample

FIX_SM_LOW = (
    "nvidia-smi's GPU-Util only says *some* kernel was running. Most SMs are idle: kernels launch fewer blocks "
    "than the GPU has SMs (tb-profiler: blocks per SM < 1) or run one after another. Increase batch/hidden "
    "sizes, fuse small ops (torch.compile), avoid per-sample loops on the GPU; if DRAM is the limit, use AMP and "
    "fused kernels.")
FIX_TENSOR = ("Enable AMP (torch.autocast with bf16/fp16) or TF32 (torch.set_float32_matmul_precision('high')); "
              "keep matmul dimensions multiples of 8.")
FIX_ALLOC = (
    "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (shapes that change between steps), or "
    "max_split_size_mb / garbage_collection_threshold:0.8; pad/bucket variable-length batches or pre-allocate "
    "with the largest shape (PyTorch tuning guide); remove torch.cuda.empty_cache() from the loop; if memory is "
    "at the limit reduce the batch or use activation checkpointing.")
FIX_MEM_FULL = (
    "To get better value of your GPU or to use larger batch size for training, please refer to Gradient "
    "Checkpoint or Automatic Mixed Precision (torch-tb-profiler). Stop other processes sharing this GPU.")
FIX_THROTTLE = (
    "The GPU lowers its clocks (HW slowdown: 'reducing the core clocks by a factor of 2 or more'). Check cooling, "
    "fans, airflow and ambient temperature; HW power brake points to power delivery; sustained power-cap "
    "throttling is expected at full load on some boards — an administrator can review the power limit. A "
    "throttled GPU also slows every other rank.")
FIX_PCIE = (
    "Host-to-device copies limit the GPU (Nsight cuda_memcpy_async: pageable memory 'causes asynchronous CUDA "
    "memcpy operations to block … use PINNED memory instead'): DataLoader(pin_memory=True) + "
    "tensor.to(device, non_blocking=True); send compact dtypes (uint8) and convert/normalise on the GPU; keep the "
    "dataset resident on the GPU if it fits; prefetch the next batch on a side stream; decode on the GPU (DALI).")
FIX_LINK = ("The PCIe link trained down: check the slot/riser seating, BIOS PCIe settings and ASPM; an "
            "administrator can confirm with nvidia-smi -q (GPU Link Info).")
FIX_IMBALANCE = (
    "The cards are not equally busy. In data-parallel training every step waits for the slowest rank: balance the "
    "work per rank (equal batch shares, bucket by sequence length), check that each rank has its own card and "
    "its own DataLoader workers, and look at the busy card's rank for a straggler.")


def _cards(w: Window) -> list[CardStats]:
    return [w.cards[c] for c in w.job_cards if w.card_ok(c)]


def _r(x: float | None, d: int = 1) -> float | None:
    return None if x is None else round(x, d)


def util_high_sm_low(w: Window, relax: float = 1.0) -> list[Finding]:
    """R08 — GPU-Util is high but few SMs are working.

    Anchor: DCGM ``SM_ACTIVE`` guidance ("A value less than 0.5 likely indicates
    ineffective GPU usage"; ≥ 0.8 necessary); KempnerPulse "busy, low SM use" (SM < 25 %).
    Threshold: U ≥ 80 % and SM < 50 %; high only when SM < 25 %, else at most medium.
    Impact = (1 − SM/80) × U/100: the busy time that would vanish at the 80 % SM level.
    """
    out = []
    for cs in _cards(w):
        if cs.sm is None or cs.util is None or cs.util < 80.0 or cs.sm >= 50.0 / relax:
            continue
        impact = max(0.0, 1.0 - cs.sm / 80.0) * cs.util / 100.0
        rx = mean((s.pcie_rx_Bps or 0.0) + (s.pcie_tx_Bps or 0.0) for s in cs.samples
                  if s.pcie_rx_Bps is not None or s.pcie_tx_Bps is not None)
        labels = []
        if cs.dram is not None and cs.dram >= 50.0:
            labels.append("memory-bound")
        if rx is not None and rx >= 1e9 and cs.sm < 30.0:
            labels.append("transfer-bound")
        ev = {"util": _r(cs.util), "sm_active": _r(cs.sm), "sm_occupancy": _r(cs.occupancy),
              "tensor_active": _r(cs.tensor), "dram_active": _r(cs.dram), "labels": labels,
              "note": "GPU-Util = time any kernel ran (NVML); SM activity = share of SMs with a warp (DCGM)"}
        out.append(Finding("util_high_sm_low", severity_for(impact, cap=None if cs.sm < 25.0 else "medium"), impact,
                           f"card {cs.card}: GPU-Util {cs.util:.0f}% but only {cs.sm:.0f}% SM activity"
                           + (f" ({', '.join(labels)})" if labels else ""), ev, FIX_SM_LOW, card=cs.card))
    return out


def low_tensor_core_use(w: Window, relax: float = 1.0) -> list[Finding]:
    """R09 — the SMs compute but the tensor cores are idle.

    Anchor: TF Profiler overview ``kLowPrecisionPercentThreshold`` = 10 (< 10 % 16-bit
    compute → suggest 16-bit); torch-tb-profiler (TC-eligible but 0 % on tensor cores).
    Threshold: SM ≥ 50 % and tensor activity < 10 % (info), < 1 % (medium). A modifier:
    it never blocks "healthy". Impact is not measurable from outside (0).
    """
    out = []
    for cs in _cards(w):
        if cs.sm is None or cs.tensor is None or cs.sm < 50.0 or cs.tensor >= 10.0 / relax:
            continue
        sev = Severity.MEDIUM if cs.tensor < 1.0 else Severity.INFO
        ev = {"sm_active": _r(cs.sm), "tensor_active": _r(cs.tensor, 2)}
        out.append(Finding("low_tensor_core_use", sev, 0.0,
                           f"card {cs.card}: SMs {cs.sm:.0f}% active but tensor cores only {cs.tensor:.1f}%",
                           ev, FIX_TENSOR, card=cs.card))
    return out


def _trainer_mem(w: Window, cs: CardStats) -> tuple[list[tuple[float, float]], str]:
    """The trainer's device memory over time: per-process (NVML) when the card lists the
    trainer's pids with sizes, else the card's used memory."""
    aliases = w.proc_alias_pids()
    series = []
    if cs.pids & aliases:
        for s in cs.samples:
            if s.procs:
                vals = [v for k, v in s.procs.items() if k in aliases and v is not None]
                if vals:
                    series.append((s.t, float(sum(vals))))
        if len(series) >= max(4, cs.n // 2):
            return series, "process"
    return [(s.t, float(s.mem_used)) for s in cs.samples if s.mem_used is not None], "card"


def _drops(series: list[tuple[float, float]], total: float) -> list[dict[str, float]]:
    """Falls of ≥ 10 % of the recent peak within 3 s, from a peak ≥ 85 % of the card,
    followed by regrowth (half of the fall regained before the next drop)."""
    drops: list[dict[str, float]] = []
    recent: deque[tuple[float, float]] = deque()
    last_drop_t = -1e9
    for t, m in series:
        while recent and recent[0][0] < t - 3.0:
            recent.popleft()
        ref = max((v for _, v in recent), default=None)
        if ref is not None and m <= 0.9 * ref and ref >= 0.85 * total and t - last_drop_t > 3.0:
            drops.append({"t": t, "from": ref, "to": m, "regrown": 0.0})
            last_drop_t = t
            recent.clear()
        recent.append((t, m))
        if drops and m >= drops[-1]["to"] + 0.5 * (drops[-1]["from"] - drops[-1]["to"]):
            drops[-1]["regrown"] = 1.0
    return [d for d in drops if d["regrown"]]


def _dip_seconds(cs: CardStats, t_drop: float, base: float) -> float:
    """Length of the util dip (< half the usual util) that starts near a drop."""
    secs = 0.0
    started = False
    for s in cs.samples:
        if s.t < t_drop - 1.0 or s.util is None:
            continue
        low = s.util < 0.5 * base
        if not started:
            if s.t > t_drop + 2.0:
                break
            if low:
                started = True
                secs += cs.dt
        elif low:
            secs += cs.dt
        else:
            break
    return secs


def allocator_thrash(w: Window, relax: float = 1.0) -> list[Finding]:
    """R10 — the CUDA caching allocator flushes and re-allocates (long window).

    Anchor: ``torch.cuda.memory_stats`` "num_alloc_retries: number of failed cudaMalloc
    calls that result in a cache flush and retry". Threshold [sattui proposal]: ≥ 2 drops
    of the trainer's device memory by ≥ 10 % of its peak, from a peak ≥ 85 % of the card,
    each followed by regrowth. Also the seeds' signature: memory ≥ 90 % with util near 0
    (< 10 %) while memory churns (allocator trouble, not compute). Impact: util dips
    around the drops over the window (sawtooth); 1 − U/100 (seeds' signature).
    """
    out = []
    for cs in _cards(w):
        total = cs.mem_total
        if not total:
            continue
        if cs.mem_used_max is None or cs.mem_used_max < 0.85 * relax * total:
            continue  # neither a flush from ≥ 85 % nor the ≥ 90 % signature can be there
        series, source = _trainer_mem(w, cs)
        if len(series) < 4:
            continue
        drops = _drops(series, float(total))
        recent = [s for s in cs.samples if s.t >= w.t1 - 30.0]
        r_util = mean(s.util for s in recent)
        r_mem = [s.mem_used for s in recent if s.mem_used is not None]
        churn = sum(1 for a, b in zip(r_mem, r_mem[1:]) if abs(b - a) >= 0.05 * total)
        seed = (r_util is not None and r_util < 10.0 and r_mem and max(r_mem) >= 0.9 * relax * total and churn >= 3)
        if len(drops) < 2 and not seed:
            continue
        base = statistics.median(cs.utils) if cs.utils else 0.0
        if seed and len(drops) < 2:
            impact = 1.0 - (r_util or 0.0) / 100.0
            kind = "memory ≥ 90% full and churning while the GPU computes almost nothing"
        else:
            dips = sum(_dip_seconds(cs, d["t"], base) for d in drops) if base > 0 else 0.0
            impact = dips / max(w.length_s, 1.0)
            kind = f"{len(drops)} cache flushes (memory sawtooth)"
        ev = {"source": source, "drops": [{"t": round(d["t"], 1), "from_frac": round(d["from"] / total, 3),
                                            "to_frac": round(d["to"] / total, 3)} for d in drops[:20]],
              "event_times": [round(d["t"], 1) for d in drops], "mem_total": total,
              "alloc_conf": w.ctx.env.get("PYTORCH_CUDA_ALLOC_CONF"), "recent_util": _r(r_util),
              "recent_churn_steps": churn}
        out.append(Finding("allocator_thrash", severity_for(impact, floor="low"), impact,
                           f"card {cs.card}: {kind} — allocator trouble, not compute", ev, FIX_ALLOC, card=cs.card))
    return out


def memory_near_full(w: Window, relax: float = 1.0) -> list[Finding]:
    """R11 — device memory near full.

    Anchor: torch-tb-profiler ``peak_mem > totalGlobalMem * 0.9`` ("Device memory usage is
    at the limit of device memory capacity"). Threshold: peak ≥ 90 % info, ≥ 95 % low
    (a risk of OOM and allocator retries, not time lost: impact 0).
    """
    out = []
    aliases = w.proc_alias_pids()
    for cs in _cards(w):
        frac = cs.mem_frac(cs.mem_used_max)
        if frac is None or frac < 0.90 * relax:
            continue
        last = next((s.procs for s in reversed(cs.samples) if s.procs), None) or {}
        foreign = {k: v for k, v in last.items() if k not in aliases} if w.ctx.pid is not None else {}
        ev = {"mem_used_max": cs.mem_used_max, "mem_total": cs.mem_total, "peak_frac": round(frac, 4),
              "foreign_processes": foreign,
              "note": "PyTorch's caching allocator keeps freed blocks: used ≥ live tensors"}
        out.append(Finding("memory_near_full", Severity.LOW if frac >= 0.95 else Severity.INFO, 0.0,
                           f"card {cs.card}: device memory {share_text(frac)} full at peak", ev, FIX_MEM_FULL,
                           card=cs.card))
    return out


def throttled(w: Window, relax: float = 1.0) -> list[Finding]:
    """R12 — the card throttles (thermal / power).

    Anchor: NVML clock-event reasons (HwSlowdown 0x8 "reducing the core clocks by a
    factor of 2 or more", SwThermal 0x20, HwThermal 0x40, HwPowerBrake 0x80, SwPowerCap
    0x4). Threshold (over samples with U ≥ 50 %): HW reasons in ≥ 10 % → at least
    medium; SwPowerCap in ≥ 50 % with mean SM clock ≤ 85 % of max → at most medium.
    Impact = 1 − mean SM clock / max SM clock.
    """
    out = []
    for cs in _cards(w):
        busy = [s for s in cs.samples if s.util is not None and s.util >= 50.0]
        masks = [s.clock_reasons for s in busy if s.clock_reasons is not None]
        if len(masks) < 4:
            continue
        hw = sum(1 for m in masks if m & HW_SLOWDOWN) / len(masks)
        sw = sum(1 for m in masks if m & SW_POWER_CAP) / len(masks)
        clk = mean(s.sm_clock_mhz for s in busy)
        ratio = clk / cs.clock_max if clk is not None and cs.clock_max else None
        union = 0
        for m in masks:
            union |= m
        if hw >= 0.10 * relax:
            impact = (1.0 - ratio) if ratio is not None else 0.5 * hw
            sev = severity_for(impact, floor="medium")
            why = "hardware slowdown"
        elif sw >= 0.5 * relax and ratio is not None and ratio <= 0.85 / relax:
            impact = 1.0 - ratio
            sev = severity_for(impact, cap="medium")
            why = "power cap"
        else:
            continue
        reasons = known_clock_reasons(union & ~GPU_IDLE)
        ev = {"hw_slowdown_share": round(hw, 3), "sw_power_cap_share": round(sw, 3),
              "reasons": reasons, "sm_clock_mean_mhz": _r(clk, 0),
              "sm_clock_max_mhz": cs.clock_max, "clock_ratio": _r(ratio, 3), "temp_c": _r(cs.temp),
              "power_w": _r(cs.power), "power_limit_w": cs.power_limit}
        clk_txt = f" at {clk:.0f} of {cs.clock_max:.0f} MHz" if ratio is not None else ""
        out.append(Finding("throttled", sev, impact,
                           f"card {cs.card} throttles ({why}: {', '.join(reasons) or '?'}){clk_txt}",
                           ev, FIX_THROTTLE, card=cs.card))
    return out


def _link_bw(cs: CardStats, s: CardSample) -> float | None:
    gmax, wmax = cs.link_max()
    return link_bw_Bps(s.pcie_gen or gmax, s.pcie_width or wmax)


@dataclass(frozen=True)
class _Pcie:
    rx_hi_share: float        # share of samples with RX ≥ 50 % of the current link
    rx_Bps: float
    tx_Bps: float
    link_Bps: float | None    # the link's per-direction bandwidth; None where unknown


def _pcie_state(w: Window, cs: CardStats) -> _Pcie | None:
    """RX share of samples at ≥ 50 % of the current link, mean RX/TX."""
    rows = [(s.pcie_rx_Bps, _link_bw(cs, s), s.pcie_tx_Bps) for s in cs.samples if s.pcie_rx_Bps is not None]
    if not rows:
        return None
    hi = sum(1 for rx, bw, _ in rows if bw and rx >= 0.5 * bw) / len(rows)
    bws = [bw for _, bw, _ in rows if bw]
    return _Pcie(hi, sum(rx for rx, _, _ in rows) / len(rows), mean(tx for _, _, tx in rows) or 0.0,
                 statistics.median(bws) if bws else None)


def _h2d_share(w: Window, card: int) -> float:
    best = 0.0
    for pid in w.judged_pids:
        if card in w.cards_of(pid):
            best = max(best, w.judged_stack(pid).share("h2d_copy"))
    return best


def pcie_bound(w: Window, relax: float = 1.0) -> list[Finding]:
    """R13 — host-to-device transfers limit the GPU.

    Anchor: DCGM "985 MB/s per lane" (Gen3) for the link bandwidth; KempnerPulse "I/O or
    data-loading" (PCIe ≥ 1 GB/s and SM < 30 %); Nsight ``cuda_memcpy_async``. Threshold:
    U < 80 % and the link busy against its capacity: RX ≥ 50 % of the link's per-direction
    bandwidth in ≥ 30 % of samples, or share(h2d_copy) ≥ 20 %. Only where the link's
    capacity is unknown does KempnerPulse's PCIe ≥ 1 GB/s with SM < 30 % stand in (1.4 GB/s
    over a 63 GB/s link is not a busy link). Impact = 1 − U/100 of that card (the Advisor
    scales it to the job).
    """
    out = []
    for cs in _cards(w):
        if cs.util is None or cs.util >= 80.0:
            continue
        p = _pcie_state(w, cs)
        h2d = _h2d_share(w, cs.card)
        why = None
        if p is not None and p.rx_hi_share >= 0.30 * relax:
            why = f"host→device traffic ≥ 50% of the link in {share_text(p.rx_hi_share)} of samples"
        elif (p is not None and not p.link_Bps and cs.sm is not None and p.rx_Bps + p.tx_Bps >= 1e9 / relax
              and cs.sm < 30.0):
            why = f"{(p.rx_Bps + p.tx_Bps) / 1e9:.1f} GB/s over PCIe with SM activity {cs.sm:.0f}%"
        elif h2d >= 0.20 * relax:
            why = f"the training thread copies to the device {share_text(h2d)} of the time"
        if why is None:
            continue
        impact = 1.0 - cs.util / 100.0
        gmax, wmax = cs.link_max()
        ev = {"util": _r(cs.util), "sm_active": _r(cs.sm), "h2d_copy_share": round(h2d, 4),
              "rx_GBps": _r(p.rx_Bps / 1e9, 2) if p else None, "tx_GBps": _r(p.tx_Bps / 1e9, 2) if p else None,
              "link_GBps": _r(p.link_Bps / 1e9, 1) if p and p.link_Bps else None,
              "rx_hi_share": _r(p.rx_hi_share, 3) if p else None, "link_max": [gmax, wmax],
              "pin_memory_thread": any(w.has_pin(pid) for pid in w.trainer_pids)}
        out.append(Finding("pcie_bound", severity_for(impact), impact,
                           f"card {cs.card}: {why} while it is busy only {cs.util:.0f}%", ev, FIX_PCIE, card=cs.card))
    return out


def link_degraded(w: Window, relax: float = 1.0) -> list[Finding]:
    """R13b — the PCIe link runs below its maximum generation or width.

    Anchor: [sattui proposal] (docs/rules.md, R13b); links drop to a lower generation
    when idle to save power, hence only samples with U ≥ 30 % count. Threshold: current
    gen or width below the maximum in ≥ 80 % of them. Impact: (1 − U/100) × the bandwidth
    lost when the card is PCIe-bound (R13's traffic condition), else 0 (low: a fault to
    fix, not yet a bottleneck).
    """
    out = []
    for cs in _cards(w):
        gmax, wmax = cs.link_max()
        if not gmax or not wmax:
            continue
        busy = [s for s in cs.samples if s.util is not None and s.util >= 30.0 and (s.pcie_gen or s.pcie_width)]
        if len(busy) < 4:
            continue
        down = [s for s in busy if (s.pcie_gen and s.pcie_gen < gmax) or (s.pcie_width and s.pcie_width < wmax)]
        share = len(down) / len(busy)
        if share < 0.80 * relax:
            continue
        gen = statistics.mode([s.pcie_gen or gmax for s in down]) if down else gmax
        width = statistics.mode([s.pcie_width or wmax for s in down]) if down else wmax
        cur, full = link_bw_Bps(gen, width), link_bw_Bps(gmax, wmax)
        lost = 1.0 - cur / full if cur and full else 0.0
        p = _pcie_state(w, cs)
        limited = p is not None and cs.util is not None and cs.util < 80.0 and p.rx_hi_share >= 0.30
        impact = (1.0 - (cs.util or 0.0) / 100.0) * lost if limited else 0.0
        ev = {"pcie_gen": gen, "pcie_gen_max": gmax, "pcie_width": width, "pcie_width_max": wmax,
              "degraded_share": round(share, 3), "bandwidth_lost": round(lost, 3), "pcie_limited": limited,
              "link_GBps": _r(cur / 1e9 if cur else None, 1), "link_max_GBps": _r(full / 1e9 if full else None, 1)}
        out.append(Finding("link_degraded", severity_for(impact, floor="low"), impact,
                           f"card {cs.card}: PCIe link at Gen{gen} x{width} of Gen{gmax} x{wmax} "
                           f"({share_text(lost)} of its bandwidth lost)"
                           + (" and the card is PCIe-bound" if limited else ""),
                           ev, FIX_LINK, card=cs.card))
    return out


def card_imbalance(w: Window, relax: float = 1.0) -> list[Finding]:
    """card_imbalance — the job's cards are unequally busy.

    Anchor: the seeds ("utilization spread over 15 points"); torch-tb-profiler's
    distributed view ("if the computation + overlapping time of one worker is much larger
    than others, there may be a problem of loading balance"). Threshold: max − min of the
    cards' mean util > 15 points. Impact = Σ (max − U_c) / (n × 100), the cards' idle
    share relative to the busiest.
    """
    utils = {cs.card: cs.util for cs in _cards(w) if cs.util is not None}
    cards = [cs for cs in _cards(w) if cs.card in utils]
    if len(cards) < 2:
        return []
    hi = max(utils.values())
    lo_cs = min(cards, key=lambda cs: utils[cs.card])
    spread = hi - utils[lo_cs.card]
    if spread <= 15.0 * relax:
        return []
    impact = sum(hi - u for u in utils.values()) / (len(cards) * 100.0)
    ev = {"util": {str(c): round(u, 1) for c, u in utils.items()}, "spread": round(spread, 1),
          "power_w": {str(cs.card): _r(cs.power) for cs in cards},
          "sm_active": {str(cs.card): _r(cs.sm) for cs in cards}}
    rank = next((w.rank_of(p) for p in w.trainer_pids if len(w.trainer_pids) > 1 and lo_cs.card in w.cards_of(p)),
                None)
    return [Finding("card_imbalance", severity_for(impact, floor="low"), impact,
                    f"{len(cards)} cards differ by {spread:.0f} points of utilization "
                    f"({hi:.0f}% vs {utils[lo_cs.card]:.0f}% on card {lo_cs.card})", ev, FIX_IMBALANCE, card=lo_cs.card,
                    rank=rank)]


FIX_STRAGGLER_GPU = (
    "Rank {rank} arrives late and every other rank waits for it in the collective ('all devices wait for the "
    "worker which finishes last' — PyTorch tuning guide); NCCL kernels spin on the waiting cards, so they look busy. "
    "Fix that rank's own bottleneck, balance work per rank (bucket/pack by sequence length), make rank-0-only "
    "logging/checkpointing asynchronous.")


def gpu_straggler(w: Window, relax: float = 1.0) -> list[Finding]:
    """The cards' view of a straggler (NCCL waits on the card, not the host): one card works
    while the others show ~100 % util with low SM activity (power), NCCL kernels spinning."""
    cards = [w.cards[c] for c in w.job_cards if w.card_ok(c)]
    if len(cards) < 2:
        return []
    use_sm = all(cs.sm is not None for cs in cards)
    metric = "sm" if use_sm else "power"
    got = {cs.card: (cs.sm if use_sm else cs.power) for cs in cards}
    vals = {c: v for c, v in got.items() if v is not None}
    if len(vals) < len(got):
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
                waits.append(w.judged_stack(pid).share("sync", "collective"))
        if waits and min(waits) < 0.20:
            return []
        if waits:
            confirm = f"their ranks wait in sync/collective {share_text(min(waits))}+ of the time"
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
                    FIX_STRAGGLER_GPU.format(rank=rank if rank is not None else f"on card {out_card}"),
                    card=out_card, rank=rank)]
