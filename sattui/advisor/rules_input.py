"""Input-pipeline rules: R01 input_bound and its sub-rules R02–R05, and R16 worker_respawn.

Each rule is ``rule(w, relax=1.0) -> list[Finding]``: a pure function of a Window.
``relax`` scales the rule's primary threshold towards "still holding" (the Advisor asks
with 0.8 to keep a raised finding up, advisor-rules.md §3.1 hysteresis).
"""

from __future__ import annotations

import math
import statistics

from sattui.advisor.base import Finding, pct, severity_for
from sattui.advisor.evidence import top_sites
from sattui.advisor.window import ProcStats, StackStats, Window

DATA = ("data_wait", "data_inline")

FIX_INPUT = ("Make the input pipeline produce batches faster than the model consumes them: more or faster "
             "DataLoader workers, prefetching (prefetch_factor), caching decoded samples.")
FIX_WORKER_CPU = (
    "Each worker is busy computing samples. If cores are free, add workers. Otherwise make samples cheaper: "
    "decode/resize once and cache (TF: 'preprocess the data OFFLINE'; tf.data: 'cache'), keep uint8 tensors and "
    "normalise on the GPU, move augmentation to the GPU (NVIDIA DALI, torchvision.transforms.v2 on CUDA tensors), "
    "and stop per-worker thread oversubscription (cv2.setNumThreads(0), OMP_NUM_THREADS=1).")
FIX_WORKER_IO = (
    "Workers spend their time waiting, not computing. Move data closer (local NVMe/RAM disk, warm page cache), "
    "read fewer, larger, sequential chunks (sharded WebDataset/TFRecord/LMDB/Parquet instead of many small "
    "files), raise I/O concurrency (more workers, larger prefetch_factor, threaded/async reads in the Dataset — "
    "waiting workers cost little CPU), cache decoded samples after epoch 1.")
FIX_INLINE = (
    "DataLoader(num_workers=0) loads every batch on the training thread (PyTorch tuning guide: 'the data loading "
    "is synchronous and done in the main process'). Set num_workers > 0 (start near {S}), pin_memory=True when "
    "training on a GPU, persistent_workers=True.")
FIX_RESPAWN = (
    "Consider setting `persistent_workers=True` on the DataLoader to speed up the worker initialization "
    "(PyTorch Lightning's advice); reduce per-worker start-up work (heavy imports, opening datasets in "
    "worker_init_fn).")


def _input(w: Window, pid: int) -> tuple[StackStats, float, float | None] | None:
    """(stacks, data share d, U of this process's cards) when the stacks can be judged."""
    if pid not in w.judged_pids:
        return None
    st = w.stack(pid)
    if st is None:
        return None
    u = w.util_of(w.cards_of(pid)) if w.gpu_job else None
    return st, st.share(*DATA), u


def _cap_for(u: float | None) -> str | None:
    """advisor-rules.md R01: on a GPU busy ≥ 90 % the waits overlap GPU work: at most low."""
    return "low" if u is not None and u >= 90.0 else None


def _worker_table(ws: list[ProcStats]) -> list[dict[str, object]]:
    return [{"pid": p.pid, "cpu": round(p.cpu, 2) if p.cpu is not None else None,
             "states": dict(sorted(p.states.items())), "read_Bps": round(p.read_Bps) if p.read_Bps else p.read_Bps}
            for p in sorted(ws, key=lambda p: p.pid)[:16]]


def _median_cpu(ws: list[ProcStats]) -> float | None:
    cpus = [p.cpu for p in ws if p.cpu is not None]
    return statistics.median(cpus) if cpus else None


def _pooled_state(ws: list[ProcStats], letters: str) -> float:
    n = sum(sum(p.states.values()) for p in ws)
    hit = sum(c for p in ws for s, c in p.states.items() if s in letters)
    return hit / n if n else 0.0


def _input_level(d: float) -> str:
    return "HIGHLY" if d >= 0.20 else "MODERATELY"


def input_bound(w: Window, relax: float = 1.0) -> list[Finding]:
    """R01 — training waits for the DataLoader.

    Anchor: TensorFlow Profiler ``kModeratelyInfeedBoundThresholdInPercent`` = 5 and
    ``kHighlyInfeedBoundThresholdInPercent`` = 20; torch-tb-profiler DataLoader > 5 %.
    Threshold: d = share(data_wait + data_inline) of the main thread ≥ 5 % (medium),
    ≥ 20 % (high); on a GPU busy ≥ 90 % at most low (the waits overlap GPU work).
    """
    out = []
    for pid in w.trainer_pids:
        got = _input(w, pid)
        if got is None:
            continue
        st, d, u = got
        if d < 0.05 * relax:
            continue
        ws = w.workers_for(pid)
        wait_sites = top_sites(st.pick(DATA), d)  # the user's line that asks for the batch
        ev = {"data_share": round(d, 4), "data_wait": round(st.share("data_wait"), 4),
              "data_inline": round(st.share("data_inline"), 4), "util": _r(u), "workers": len(ws),
              "worker_cpu_median": _r(_median_cpu(ws), 3), "pin_memory_thread": w.has_pin(pid),
              "top_wait": wait_sites, "sampled_s": round(st.total_s, 1)}
        where = "" if w.rank_of(pid) is None else f" (rank {w.rank_of(pid)})"
        out.append(Finding(
            "input_bound", severity_for(d, cap=_cap_for(u)), d,
            f"training waits for the DataLoader {pct(d)} of the time{where}: {_input_level(d)} input-bound",
            ev, FIX_INPUT, rank=w.rank_of(pid)))
    return out


def _r(x: float | None, digits: int = 1) -> float | None:
    return None if x is None else round(x, digits)


def _r01_medium(w: Window, pid: int) -> tuple[StackStats, float, float | None] | None:
    """R01 at ≥ medium for this process, the gate of R02–R04."""
    got = _input(w, pid)
    if got is None:
        return None
    _st, d, u = got
    if d < 0.05 or (u is not None and u >= 90.0):
        return None
    return got


def worker_cpu_bound(w: Window, relax: float = 1.0) -> list[Finding]:
    """R02 — the DataLoader workers are CPU-saturated.

    Anchor: [sattui proposal] (advisor-rules.md R02), calibrated on S01 (worker 77 % of a
    core, state R 100 %). Threshold: R01 ≥ medium, ≥ 1 worker, and either median worker
    CPU ≥ 0.8 cores with ≥ 70 % of worker state probes ``R``, or ≥ 90 % ``R`` with ≥ 0.5
    cores: ``R`` is also "runnable, waiting for a CPU", so on a busy host a worker that
    always wants the CPU gets less than 0.8 of one and is still CPU-bound (seen: 0.68
    cores at 100 % ``R`` on a loaded 2-core box). Impact: R01's data share.
    """
    out = []
    for pid in w.trainer_pids:
        got = _r01_medium(w, pid)
        ws = w.workers_for(pid)
        if got is None or not ws:
            continue
        _st, d, u = got
        cpu = _median_cpu(ws)
        running = _pooled_state(ws, "R")
        if cpu is None or not ((cpu >= 0.8 * relax and running >= 0.7) or (cpu >= 0.5 * relax and running >= 0.9)):
            continue
        busy = sum(p.cpu or 0.0 for p in w.procs.values())
        ev = {"workers": _worker_table(ws), "worker_cpu_median": round(cpu, 3), "worker_state_R": round(running, 3),
              "data_share": round(d, 4), "cpus_usable": w.ctx.cpu_count if w.ctx.cpu_count_known else None,
              "cpu_busy_cores": round(busy, 2)}
        out.append(Finding(
            "worker_cpu_bound", severity_for(d), d,
            f"{len(ws)} DataLoader worker(s) at {cpu:.0%} of a core each, running {running:.0%} of the time: "
            "they cannot produce batches fast enough", ev, FIX_WORKER_CPU, rank=w.rank_of(pid)))
    return out


def suggested_workers(w: Window) -> int:
    """Lightning's ``suggested_max_num_workers``: max(1, cpus // local_world_size − 1)."""
    lws = max(1, len(w.trainer_pids))
    try:
        lws = max(lws, int(w.ctx.env.get("LOCAL_WORLD_SIZE", "0")))
    except ValueError:
        pass
    return max(1, w.ctx.cpu_count // lws - 1)


def too_few_workers(w: Window, relax: float = 1.0) -> list[Finding]:
    """R03 — add DataLoader workers.

    Anchor: PyTorch Lightning ``_worker_check`` (``num_workers < 2 and upper_bound > 1``,
    upper_bound = ``suggested_max_num_workers`` = max(1, cpus // local_world_size − 1)).
    Threshold: R02 holds, ≥ 2 spare cores and n < S; or (medium at most) n ≤ 1 with
    S > 1 and R01 ≥ medium. Needs the trainer's usable CPU count.
    """
    if not w.ctx.cpu_count_known:
        return []
    out = []
    S = suggested_workers(w)
    for pid in w.trainer_pids:
        got = _r01_medium(w, pid)
        if got is None:
            continue
        _st, d, _u = got
        ws = w.workers_for(pid)
        n = len(ws)
        if n == 0:
            continue  # that is R05's case
        busy = sum(p.cpu or 0.0 for p in w.procs.values())
        spare = w.ctx.cpu_count - busy
        saturated = bool(worker_cpu_bound(w, relax)) if n else False
        cap = None
        if saturated and spare >= 2.0 * relax and n < S:
            why = f"{n} worker(s) near 100 % of a core and {spare:.1f} idle cores"
        elif n <= 1 and S > 1:
            why, cap = f"only {n} worker and {w.ctx.cpu_count} CPUs", "medium"
        else:
            continue
        target = min(S, max(n + 1, math.ceil(n / max(1e-6, 1.0 - d))))
        ev = {"workers": n, "suggested_max": S, "spare_cores": round(spare, 2), "cpus_usable": w.ctx.cpu_count,
              "data_share": round(d, 4), "try_num_workers": target}
        fix = (f"Increase DataLoader(num_workers) from {n} to ≈ {target} (estimate assuming linear scaling; "
               f"Lightning would suggest num_workers={S}) and set persistent_workers=True; keep prefetch_factor ≥ 2. "
               "PyTorch warns if num_workers exceeds the CPUs in your affinity mask.")
        out.append(Finding("too_few_workers", severity_for(d, cap=cap), d,
                           f"{why}: add DataLoader workers (try {target})", ev, fix, rank=w.rank_of(pid)))
    return out


def worker_io_bound(w: Window, relax: float = 1.0) -> list[Finding]:
    """R04 — the DataLoader workers are blocked on storage or network.

    Anchor: [sattui proposal] (advisor-rules.md R04), calibrated on S02 (workers ≈ 5 %
    CPU, state S ≥ 80 %). Threshold: R01 ≥ medium, ≥ 1 worker, median worker CPU < 0.5
    cores and ≥ 30 % of worker probes in ``S``/``D``. Sub-label *storage* if ``D`` ≥ 20 %
    of probes or the workers read ≥ 50 MB/s, else *latency*.
    """
    out = []
    for pid in w.trainer_pids:
        got = _r01_medium(w, pid)
        ws = w.workers_for(pid)
        if got is None or not ws:
            continue
        _st, d, _u = got
        cpu = _median_cpu(ws)
        waiting = _pooled_state(ws, "SD")
        if cpu is None or cpu >= 0.5 or waiting < 0.30 * relax:
            continue
        disk = _pooled_state(ws, "D")
        read = sum(p.read_Bps or 0.0 for p in ws)
        label = "storage" if disk >= 0.20 or read >= 50e6 else "latency"
        ev = {"workers": _worker_table(ws), "worker_cpu_median": round(cpu, 3), "worker_state_SD": round(waiting, 3),
              "worker_state_D": round(disk, 3), "read_Bps": round(read), "kind": label, "data_share": round(d, 4)}
        out.append(Finding(
            "worker_io_bound", severity_for(d), d,
            f"{len(ws)} DataLoader worker(s) wait {waiting:.0%} of the time at {cpu:.0%} CPU: "
            f"{'storage-bound' if label == 'storage' else 'latency-bound (remote data, sleeps, RPC)'}",
            ev, FIX_WORKER_IO, rank=w.rank_of(pid)))
    return out


def main_process_loading(w: Window, relax: float = 1.0) -> list[Finding]:
    """R05 — num_workers=0: loading runs on the training thread.

    Anchor: PyTorch tuning guide ("The default setting for DataLoader is num_workers=0,
    which means that the data loading is synchronous and done in the main process"),
    TF Profiler 5 % / 20 %. Threshold: no worker process and share(data_inline) ≥ 5 %
    (medium), ≥ 20 % (high). Impact: R01's data share (moving loading off the thread
    recovers all of it), so it ties with R01 and leads it by precedence.
    """
    out = []
    for pid in w.trainer_pids:
        got = _input(w, pid)
        if got is None or w.workers_for(pid):
            continue
        st, d, u = got
        inline = st.share("data_inline")
        if inline < 0.05 * relax:
            continue
        sites = top_sites(st.pick(("data_inline",)), inline)
        ev = {"data_inline": round(inline, 4), "data_share": round(d, 4), "workers": 0, "util": _r(u),
              "top_dataset_frames": sites}
        out.append(Finding(
            "main_process_loading", severity_for(d, cap=_cap_for(u)), d,
            f"num_workers=0: the training thread loads data itself {pct(inline)} of the time",
            ev, FIX_INLINE.format(S=suggested_workers(w)), rank=w.rank_of(pid)))
    return out


def _respawns(w: Window, pid: int) -> list[tuple[float, float]]:
    """(last seen of the old set, first seen of the new) for each time the whole worker
    set was replaced: workers are grouped into generations by when they first appeared
    (within 2 s), and a generation replaces the previous one when none of the previous
    is seen after it appeared."""
    gens: list[tuple[float, float]] = []  # (first_t, last_t of the generation)
    for p in sorted(w.workers_for(pid), key=lambda p: p.first_t):
        if gens and p.first_t - gens[-1][0] <= 2.0:
            gens[-1] = (gens[-1][0], max(gens[-1][1], p.last_t))
        else:
            gens.append((p.first_t, p.last_t))
    return [(prev[1], cur[0]) for prev, cur in zip(gens, gens[1:]) if prev[1] <= cur[0] + 0.5]


def worker_respawn(w: Window, relax: float = 1.0) -> list[Finding]:
    """R16 — DataLoader workers restart every epoch (long window).

    Anchor: PyTorch Lightning ("Consider setting `persistent_workers=True` … to speed up
    the dataloader worker initialization"). Threshold [sattui proposal]: ≥ 2 events in
    the long window where the whole worker pid set is replaced, each followed by ≥ 1 s
    of extra data wait on the main thread (with stacks; the GPU must dip to ≤ 10 % too in
    a GPU job) or of extra GPU time at ≤ 10 % (without stacks). "Extra": beyond the
    job's usual share outside the respawns, so an input-bound job whose workers also
    restart is not charged twice. Impact: the extra stall time over the long window.
    """
    out = []
    for pid in w.trainer_pids:
        respawns = _respawns(w, pid)
        if len(respawns) < 2:
            continue
        spans = []
        for i, (t_before, t) in enumerate(respawns):
            a, b = t_before - 1.0, t + 5.0
            if i + 1 < len(respawns):
                b = min(b, respawns[i + 1][0] - 1.0)  # windows must not overlap
            spans.append((t, a, max(a, b)))
        stalls = [{"t": round(t, 1), "stall_s": round(x, 1)} for t, x in zip((t for t, _, _ in spans),
                                                                            _respawn_stalls(w, pid, spans))
                  if x >= 1.0]
        if len(stalls) < 2:
            continue
        lost = sum(s["stall_s"] for s in stalls) / max(w.length_s, 1.0)
        ev = {"respawns": stalls, "lost_share": round(lost, 4), "event_times": [s["t"] for s in stalls]}
        out.append(Finding(
            "worker_respawn", severity_for(lost, floor="low"), lost,
            f"DataLoader workers were replaced {len(stalls)} times, each costing ~"
            f"{statistics.mean(s['stall_s'] for s in stalls):.1f} s of extra waiting", ev, FIX_RESPAWN,
            rank=w.rank_of(pid)))
    return out


def _excess(per: list[tuple[float, float]], total: tuple[float, float]) -> list[float]:
    """Per window (hit seconds, seen seconds): the hit time beyond the share seen outside
    all windows, or beyond the job's overall share when too little is seen outside to
    tell (short epochs: the windows cover nearly the whole run, and a baseline of 0
    charged every ordinary data wait to the restarts)."""
    out_hit = total[0] - sum(h for h, _ in per)
    out_seen = total[1] - sum(n for _, n in per)
    if out_seen >= 10.0:
        base = out_hit / out_seen
    else:
        base = total[0] / total[1] if total[1] > 0 else 0.0
    return [max(0.0, h - base * n) for h, n in per]


def _respawn_stalls(w: Window, pid: int, spans: list[tuple[float, float, float]]) -> list[float]:
    gpu: list[float] | None = None
    if w.gpu_job and w.cards_of(pid):
        cs = w.cards[w.cards_of(pid)[0]]
        per = []
        for _t, a, b in spans:
            got = [s for s in cs.samples if a <= s.t < b and s.util is not None]
            per.append((sum(1 for s in got if s.util <= 10.0) * cs.dt, len(got) * cs.dt))
        total = (sum(1 for u in cs.utils if u <= 10.0) * cs.dt, len(cs.utils) * cs.dt)
        gpu = [h for h, _ in per] if w.has_stacks else _excess(per, total)
    if not w.has_stacks:
        return gpu or [0.0] * len(spans)
    per = []
    for _t, a, b in spans:
        hit = seen = 0.0
        for s in w.stack_samples(pid, a - 2.0, b):
            if s.state == "startup":
                continue
            ov = min(s.t + s.dur, b) - max(s.t, a)
            if ov > 0:
                seen += ov
                if s.state == "data_wait":
                    hit += ov
        per.append((hit, seen))
    all_hit = all_seen = 0.0
    for s in w.stack_samples(pid, w.t0, w.t1):
        if s.state != "startup":
            all_seen += s.dur
            if s.state == "data_wait":
                all_hit += s.dur
    stalls = _excess(per, (all_hit, all_seen))
    if gpu is not None:  # a GPU job: the card must have idled in the window too
        stalls = [x if g > 0.0 else 0.0 for x, g in zip(stalls, gpu)]
    return stalls
