"""Job-wide rules: R00 healthy, R18 debug_settings, no_data, and the card-idle helpers the
ledger's starved_unattributed reads (gaps, the "waiting for data" signature).

``healthy`` depends on what else fired ("no other cause ≥ medium"): its function computes
the condition over the window, and the Advisor's decision step (verdict.py) applies the
"nothing else" part.
"""

from __future__ import annotations

from sattui.advisor.context import Finding, share_text
from sattui.findings import Severity
from sattui.ledger.bins import CONTENDED_RUN_DELAY
from sattui.ledger.window import CardStats, Window, pstdev, quantile
from sattui.sampler_status import PTRACE_FIX

FIX_HEALTHY = ("No host-side bottleneck. Further speed-ups are inside the model: mixed precision/TF32, larger "
               "batch, torch.compile fusion, better kernels.")
FIX_DEBUG = ("Disable debugging APIs for training runs (PyTorch tuning guide: anomaly detection, profiler, "
             "gradcheck); unset {flags}.")
FIX_STARVED_NSIGHT = ("Use CPU sampling data … to understand if a sluggish or blocked CPU is causing the gaps "
                      "(Nsight Systems gpu_gaps).")

DEBUG_FLAGS = {
    # name: (severity in a GPU job, why) — docs/rules.md, debug_settings (R18)
    "CUDA_LAUNCH_BLOCKING": ("high", "every kernel launch waits for the kernel (CUDA guide: 'provided for "
                                     "debugging purposes only')"),
    "PYTORCH_NO_CUDA_MEMORY_CACHING": ("high", "every allocation becomes a cudaMalloc/cudaFree"),
    "TORCH_NCCL_BLOCKING_WAIT": ("info", "collectives block the host thread"),
}
DEBUG_FRAMES = ("torch/profiler/", "torch/autograd/anomaly_mode.py", "torch/autograd/profiler.py")


def _truthy(v: str | None) -> bool:
    return v is not None and v.strip().lower() not in ("", "0", "false", "no", "off")


def debug_settings(w: Window, relax: float = 1.0) -> list[Finding]:
    """R18 — debugging switches left on.

    Anchor: CUDA C++ Programming Guide (``CUDA_LAUNCH_BLOCKING`` "provided for debugging
    purposes only"); PyTorch tuning guide "Disable debugging APIs". Threshold:
    ``CUDA_LAUNCH_BLOCKING=1`` or ``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` in a GPU job → high
    (impact = max(0.2, 1 − U/100)); ``TORCH_NCCL_BLOCKING_WAIT=1``, or profiler/anomaly
    frames in ≥ 50 % of main-thread samples → info.
    """
    flags: dict[str, str] = {}
    sev = "info"
    for name, (gpu_sev, why) in DEBUG_FLAGS.items():
        if _truthy(w.ctx.env.get(name)):
            flags[name] = why
            if w.gpu_job and gpu_sev == "high":
                sev = "high"
    frames = _debug_frame_share(w)
    if frames >= 0.5:
        flags["profiler/anomaly detection"] = f"in {share_text(frames)} of main-thread samples"
    if not flags:
        return []
    impact = 0.0
    if sev == "high":
        u = w.job_util
        impact = max(0.20, 1.0 - u / 100.0) if u is not None else 0.20
    names = ", ".join(k for k in flags if k.isupper())
    return [Finding("debug_settings", Severity(sev), impact, "debug settings are on: " + ", ".join(flags),
                    {"flags": flags}, FIX_DEBUG.format(flags=names or "them"))]


def _debug_frame_share(w: Window) -> float:
    best = 0.0
    for pid in w.judged_pids:
        st = w.judged_stack(pid)
        picked = st.samples[:: max(1, len(st.samples) // 20)]  # spaced samples: continuous use shows anyway
        if not picked:
            continue
        hit = sum(1 for s in picked if any(_is_debug_file(f.filename) for f in s.frames))
        best = max(best, hit / len(picked))
    return best


def _is_debug_file(filename: str) -> bool:
    """A profiler's or anomaly mode's file; the answer kept per file name (the rule reads
    ~20 stacks each evaluation, of the same few files: ~5,000 look-ups an hour). Bounded:
    a recording with ever new file names only empties it now and then."""
    got = _DEBUG_FILE.get(filename)
    if got is None:
        if len(_DEBUG_FILE) >= _DEBUG_FILE_MAX:
            _DEBUG_FILE.clear()
        path = filename.replace("\\", "/")
        got = _DEBUG_FILE[filename] = any(m in path for m in DEBUG_FRAMES)
    return got


_DEBUG_FILE: dict[str, bool] = {}
_DEBUG_FILE_MAX = 4096


def card_in_use(w: Window, cs: CardStats) -> bool:
    """A card some job uses (a listed process, ≥ 5 % memory, or any utilization): an idle
    card with nothing on it is not "starved"."""
    return cs.in_use


def gaps(cs: CardStats) -> list[tuple[float, float]]:
    """GPU-idle gaps: runs of samples at ≤ 10 % util lasting ≥ 0.5 s (Nsight ``gpu_gaps``
    default 500 ms; one 2 Hz NVML sample at ≤ 10 % means ≥ ~0.45 s without kernels)."""
    out: list[tuple[float, float]] = []
    start, n = None, 0
    for s in cs.samples:
        if s.util is not None and s.util <= 10.0:
            if start is None:
                start, n = s.t, 0
            n += 1
        elif start is not None:
            out.append((start, n * cs.dt))
            start = None
    if start is not None:
        out.append((start, n * cs.dt))
    return [g for g in out if g[1] >= 0.5]


def waiting_signature(cs: CardStats) -> bool:
    """The seeds' "waiting for data": util swinging (std ≥ 20 points) with power low
    (< 50 % of the limit) while memory stays occupied (≥ 10 %, within 10 % of the card)
    [sattui proposal for the numbers]."""
    if len(cs.utils) < 4 or cs.power_frac is None or cs.mem_total is None or cs.mem_used_mean is None:
        return False
    swing = pstdev(cs.utils)
    steady = cs.mem_swing is not None and cs.mem_swing <= 0.10
    return swing >= 20.0 and cs.power_frac < 0.5 and cs.mem_used_mean >= 0.10 * cs.mem_total and steady


def no_stacks_fix(w: Window) -> str:
    """What to do so stacks can say what the cards wait for."""
    reason = w.ctx.no_stacks_reason or ""
    if w.ctx.pid is None:
        return ("Record the trainer too (sattui record --pid PID, or sattui record -- CMD) so its stacks show what "
                "the card waits for. " + FIX_STARVED_NSIGHT)
    if "no-stacks" in reason:
        return "Record without --no-stacks so the trainer's stacks can attribute the cause. " + FIX_STARVED_NSIGHT
    if reason.startswith("not_python"):
        return "The trainer is not a Python process; profile it with Nsight Systems. " + FIX_STARVED_NSIGHT
    if reason.startswith("sampler_missing"):
        return "Install py-spy (pip install py-spy) so the trainer's stacks can attribute the cause."
    return PTRACE_FIX[0].upper() + PTRACE_FIX[1:] + ", so the cause can be attributed."


def healthy(w: Window) -> Finding | None:
    """R00 — saturated: the GPU (or the CPU compute) is the bottleneck, as it should be.

    Anchor: DCGM ``SM_ACTIVE`` ≥ 0.8 "necessary, but not sufficient". Condition (every
    job card): U ≥ 90 % and SM ≥ 80 % where reported; or the seeds' saturation: util
    steadily ≥ 80 % (10th percentile), power ≥ 70 % of the limit, memory steady (within
    5 % of the card). CPU job: forward + backward + optimizer ≥ 70 % of the main thread, which waits
    for a CPU less than 25 % of the time (run delay) where that is known.
    The Advisor adds "no other cause ≥ medium".
    """
    if w.gpu_job:
        cards = [w.cards[c] for c in w.job_cards if w.card_ok(c)]
        if not cards:
            return None
        per = {}
        for cs in cards:
            if cs.util is None:
                return None
            p10 = quantile(cs.utils, 0.1) or 0.0
            steady = cs.mem_swing is not None and cs.mem_swing <= 0.05
            if cs.util >= 90.0 and (cs.sm is None or cs.sm >= 80.0):
                per[str(cs.card)] = {"path": "util+sm", "util": round(cs.util, 1),
                                     "sm_active": None if cs.sm is None else round(cs.sm, 1)}
            elif p10 >= 80.0 and cs.power_frac is not None and cs.power_frac >= 0.70 and steady:
                per[str(cs.card)] = {"path": "util+power+memory", "util_p10": p10,
                                     "power_frac": round(cs.power_frac, 3)}
            else:
                return None
        u = w.job_util or 0.0
        return Finding("healthy", Severity.INFO, 0.0,
                       f"saturated: {len(cards)} card(s) busy ({u:.0f}% util), the host keeps up",
                       {"cards": per}, FIX_HEALTHY)
    pids = w.judged_pids
    if not pids:
        return None
    def name(pid: int) -> str:
        rank = w.rank_of(pid)
        return f"rank {rank}" if rank is not None else str(pid)

    shares = {name(p): round(w.judged_stack(p).share("forward", "backward", "optimizer"), 4) for p in pids}
    if min(shares.values()) < 0.70:
        return None
    # A stack in forward/backward says where the thread is, not that it runs: one that waits
    # for a CPU (more busy workers than cores) shows the same stacks. Not healthy then, even
    # before the ledger has the seconds to name cpu_contention.
    delays = [s.run_delay for p in pids if p in w.procs for s in w.procs[p].samples if s.run_delay is not None]
    if delays and sum(delays) / len(delays) >= CONTENDED_RUN_DELAY:
        return None
    who = "the main thread computes" if len(shares) == 1 else "each rank's main thread computes at least"
    return Finding("healthy", Severity.INFO, 0.0,
                   f"CPU compute-bound: {who} {share_text(min(shares.values()))} of the time",
                   {"compute_share": shares}, FIX_HEALTHY)


def no_data(t: float, summary: str, evidence: dict[str, object] | None = None) -> Finding:
    """no_data — too little data to judge (warm-up, too few samples, nothing conclusive)."""
    return Finding("no_data", Severity.INFO, 0.0, summary, evidence or {},
                   "Record for longer: past the warm-up (1 s live, 10 s in a report), the advisor needs ≥ 10 s of "
                   "card samples or ≥ 60 stack samples in its 30 s window, and a cause is named once its interval "
                   "clears the threshold (seconds for a clear cause, longer for a close one).", t=t)
