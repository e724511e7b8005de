"""Slowdown of a real PyTorch trainer while sattui is attached, and sattui's own cost.

One long-running trainer (the compute-bound example, logging the time of every step),
and sattui attached and detached in alternation: OFF, ON, OFF, ON, …, OFF. Comparing
phases of one process cancels what separate runs differ by (start-up, memory layout,
±5–10 % here) and slow machine drift: each ON phase is compared with the mean of the
two OFF phases around it. The figure is the median of those ratios with a bootstrap
95 % confidence interval.

    python bench/overhead.py                          # 2 trainers × 2 rates, 20 cycles of 5 s
    python bench/overhead.py --cycles 6 --phase 4     # a short run to see it work
    python bench/overhead.py --trainer small --rate 20
    python bench/overhead.py --pin                    # trainer on CPU 0, sattui and py-spy on CPU 1
    python bench/overhead.py --mode freeze --trainer small --rate default --minutes 20
    python bench/overhead.py --mode freeze --null ...  # the same phases, nothing attached (A/A)

``--mode freeze`` (for a narrow interval): sattui is attached ONCE and left to reach its
steady state; then it and its py-spy runs are frozen (SIGSTOP) for each OFF phase and
thawed (SIGCONT) for each ON phase, phases of ``--phase`` seconds (2 by default). A
stopped process takes no CPU and reads nothing of the trainer, so an OFF phase is the
trainer alone, and without a start-up per cycle the phases can be short: the trainer's
own rate wanders over seconds (the box, not sattui), so phases close in time cancel more
of it. Each phase is measured from ``--skip-s`` (0.5 s) after its switch: what a
thawed sattui owes for the time it was frozen (py-spy's catch-up samples, a chunk
boundary that fell due) is done then and left out, as the frozen time is — what is
measured is the steady state per second. Ratios of neighbouring cycles share an OFF
phase and the box drifts, so the interval is a moving-block bootstrap (blocks of 20
cycles), not one that takes cycles as independent. sattui is left ``--attach-s`` (50 s)
before the first phase: its sampler's chunks are 5 s long from 45 s on. ``--null`` runs the same phases with
nothing attached: its interval must hold 0 (the design has no bias of its own).

An ON phase: `sattui record --pid P --duration D` is started, measured from
``--attach-s`` (6 s) after its start until it ends — its own imports, py-spy's first
start and the first chunks, after which the sampler fits its rate to its 10 %-of-a-core
budget, are left out: a user attaches once for hours; the next OFF phase starts
``--settle-s`` after it exited. Steps/s of a phase = (steps − 1) / (last − first step
end) over the steps that ended inside it, from the trainer's own log of step times.

Rates: ``default`` is sattui's default py-spy rate (``DEFAULT_RATE_HZ``), ``20`` is 20 Hz.
Trainers: ``small`` (the main thread and a few helper threads), ``60-thread`` (56 idle
threads more, as CUDA/NCCL/OpenMP pools give a real trainer: py-spy reads every thread).
While ON, sattui's own CPU is split into the py-spy sampler (its reaped children) and
the rest (the sattui process), in cores.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sattui.trainer.stacks import DEFAULT_RATE_HZ  # noqa: E402

TRAINERS = {
    "small": ["--scenario", "compute_bound"],
    "60-thread": ["--scenario", "compute_bound", "--extra-threads", "56"],
}


def _on_cpus(cpus: set[int] | None):
    if not cpus:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def _step_times(path: Path) -> list[float]:
    try:
        text = path.read_text()
    except OSError:
        return []
    # the last line may be half-written
    return [float(x) for x in text.splitlines()[:-1] if x.strip()]


def steps_per_s(times: list[float], t0: float, t1: float) -> float | None:
    inside = [t for t in times if t0 <= t < t1]
    if len(inside) < 3 or inside[-1] <= inside[0]:
        return None
    return (len(inside) - 1) / (inside[-1] - inside[0])


def median_step_rate(times: list[float], t0: float, t1: float) -> float | None:
    """1 / the median duration of the steps that ended inside ``[t0, t1)`` (a step's
    duration: from the step end before it). Unlike :func:`steps_per_s` one slow step
    (the neighbours' burst, a GC pause) moves it by at most one rank."""
    inside = [b - a for a, b in zip(times, times[1:]) if t0 <= a and b < t1]
    if len(inside) < 3:
        return None
    med = statistics.median(inside)
    return 1.0 / med if med > 0 else None


def bootstrap_median_ci(xs: list[float], n: int = 10000, seed: int = 1) -> tuple[float, float]:
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def block_bootstrap_ci(xs: list[float], stat=statistics.median, block: int = 20, n: int = 4000,
                       seed: int = 1) -> tuple[float, float]:
    """95 % interval of ``stat`` of a series whose neighbours are correlated: resampled as
    moving blocks of ``block`` consecutive values (the series' own dependence kept;
    shorter blocks for a short series, at least ten of them)."""
    block = max(1, min(block, len(xs) // 10))
    rng = random.Random(seed)
    starts = len(xs) - block + 1
    k = -(-len(xs) // block)
    meds = []
    for _ in range(n):
        sample: list[float] = []
        for _b in range(k):
            i = rng.randrange(starts)
            sample.extend(xs[i:i + block])
        meds.append(stat(sample[:len(xs)]))
    meds.sort()
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def _signal_tree(root: psutil.Process, sig: int) -> None:
    """SIGSTOP: the root first (it then starts no new py-spy run), then every descendant;
    SIGCONT: the descendants first, then the root."""
    if sig == signal.SIGSTOP:
        root.send_signal(sig)
    try:
        kids = root.children(recursive=True)
    except psutil.Error:
        kids = []
    for k in kids:
        try:
            k.send_signal(sig)
        except psutil.Error:
            pass
    if sig == signal.SIGCONT:
        root.send_signal(sig)


def _tree_cpu_s(root: psutil.Process) -> float:
    """CPU seconds of ``root``, its reaped children and its live descendants."""
    total = 0.0
    try:
        t = root.cpu_times()
        total += t.user + t.system + t.children_user + t.children_system
        kids = root.children(recursive=True)
    except psutil.Error:
        return total
    for k in kids:
        try:
            c = k.cpu_times()
            total += c.user + c.system
        except psutil.Error:
            pass
    return total


def _start_trainer(name: str, seconds: float, times_file: Path, extra: tuple[str, ...] = (),
                   cpus: set[int] | None = None) -> subprocess.Popen:
    """The example trainer logging each step's time, once it has made its first steps."""
    tr = subprocess.Popen([sys.executable, "-m", "sattui.demo.trainer", *TRAINERS[name], "--seconds", str(seconds),
                           *extra, "--step-times", str(times_file)], cwd=REPO, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, preexec_fn=_on_cpus(cpus))
    end = time.monotonic() + 120
    while len(_step_times(times_file)) < 5:
        if tr.poll() is not None or time.monotonic() > end:
            _end(tr, signal.SIGTERM, 10)
            raise SystemExit(f"trainer {name} did not start")
        time.sleep(0.2)
    return tr


def _end(proc: subprocess.Popen, sig: int, wait_s: float) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _paired_ratios(rates_off: list[float | None], rates_on: list[float | None]) -> list[float]:
    """Each ON phase's rate over the mean of the two OFF phases around it."""
    return [on / ((a + b) / 2) for on, a, b in zip(rates_on, rates_off, rates_off[1:])
            if on is not None and a is not None and b is not None]


def run_freeze(name: str, rate_hz: float, args: argparse.Namespace, out_dir: Path) -> dict:
    """One trainer, sattui attached once, frozen and thawed in alternation (module doc)."""
    times_file = out_dir / f"steps-{name}-{rate_hz:g}-{time.monotonic_ns()}.txt"
    cycles = args.cycles if args.minutes is None else int(args.minutes * 60 / (2 * args.phase))
    total = args.warmup + args.attach_s + (cycles + 1) * 2 * args.phase + 60
    # Epochs of ~80 s, as a real job's are long: the demo's default ~5-s epoch puts a slow
    # step (new workers) in about one 1.5-s window in three, noise the short phases need not carry.
    tr = _start_trainer(name, total, times_file, ("--epoch-items", "65536"))
    sp = None
    rec = out_dir / f"rec-{time.monotonic_ns()}.jsonl"
    cost: dict = {}
    try:
        time.sleep(args.warmup)
        if not args.null:
            sp = subprocess.Popen([sys.executable, "-m", "sattui", "record", "--pid", str(tr.pid), "-o", str(rec),
                                   "--backend", "none", "--rate", str(rate_hz), "--duration", str(total)],
                                  cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(args.attach_s)
            if sp.poll() is not None:
                raise SystemExit(f"sattui record exited ({sp.returncode}) before the first phase")
        root = psutil.Process(sp.pid) if sp is not None else None
        cpu_at_first = _tree_cpu_s(root) if root is not None else 0.0
        rss = root.memory_info().rss if root is not None else 0
        offs: list[tuple[float, float]] = []
        ons: list[tuple[float, float]] = []
        thawed_s = 0.0
        for i in range(cycles + 1):
            if root is not None:
                _signal_tree(root, signal.SIGSTOP)
            a = time.monotonic()
            time.sleep(args.phase)
            offs.append((a + args.skip_s, a + args.phase))
            if i == cycles:
                break
            if root is not None:
                _signal_tree(root, signal.SIGCONT)
            a = time.monotonic()
            time.sleep(args.phase)
            ons.append((a + args.skip_s, a + args.phase))
            thawed_s += time.monotonic() - a
        if root is not None:
            cpu_at_last = _tree_cpu_s(root)
            rss = max(rss, root.memory_info().rss)
            _signal_tree(root, signal.SIGCONT)
            cost = {"tree_cores": (cpu_at_last - cpu_at_first) / thawed_s if thawed_s > 0 else None,
                    "rss_mb": rss / 1e6}
        time.sleep(0.5)
        times = _step_times(times_file)
    finally:
        if sp is not None and sp.poll() is None:
            try:
                _signal_tree(psutil.Process(sp.pid), signal.SIGCONT)
            except psutil.Error:
                pass
            _end(sp, signal.SIGINT, 20)
        _end(tr, signal.SIGTERM, 10)
        times_file.unlink(missing_ok=True)
        rec.unlink(missing_ok=True)
    off_rates = [steps_per_s(times, a, b) for a, b in offs]
    on_rates = [steps_per_s(times, a, b) for a, b in ons]
    ratios = _paired_ratios(off_rates, on_rates)
    return {"name": name, "rate": rate_hz, "ratios": ratios, "cost": cost,
            "off": [r for r in off_rates if r is not None], "on": [r for r in on_rates if r is not None],
            "phases": {"off": off_rates, "on": on_rates}}


def report_freeze(r: dict, args: argparse.Namespace) -> None:
    label = "nothing attached (A/A)" if args.null else f"{r['name']} @ {r['rate']:g} Hz"
    if args.dump:
        keep = {k: r[k] for k in ("name", "rate", "ratios", "off", "on", "cost", "phases")}
        Path(args.dump).write_text(json.dumps({**keep, "phase_s": args.phase, "skip_s": args.skip_s}) + "\n")
    if not r["ratios"]:
        print(f"{label}: no complete cycle (trainer too slow?)", flush=True)
        return
    # log ratios: under no effect they are symmetric about 0, where ON/OFF ratios are not
    # (a mean of x/y with noisy y is > 1 by about the noise's variance)
    logs = [math.log(x) for x in r["ratios"]]
    mean_log = statistics.fmean(logs)
    lo, hi = block_bootstrap_ci(logs, statistics.fmean)
    med = statistics.median(r["ratios"])
    mlo, mhi = block_bootstrap_ci(r["ratios"])
    c = r["cost"]
    cost = ""
    if c.get("tree_cores") is not None:
        cost = (f"; sattui + py-spy {c['tree_cores'] * 100:.1f} % of a core while thawed, "
                f"RSS {c['rss_mb']:.0f} MB")
    print(f"{label} (freeze, {args.phase:g}-s phases, {args.skip_s:g} s skipped after each switch): "
          f"slowdown by the mean log ratio of steps/s ON/OFF {(1 - math.exp(mean_log)) * 100:+.2f} % "
          f"(95 % CI {(1 - math.exp(hi)) * 100:+.2f} … {(1 - math.exp(lo)) * 100:+.2f} %, block bootstrap), "
          f"by the median ratio {(1 - med) * 100:+.2f} % (CI {(1 - mhi) * 100:+.2f} … {(1 - mlo) * 100:+.2f} %) "
          f"over {len(r['ratios'])} cycles; OFF {statistics.median(r['off']):.2f} steps/s "
          f"[{min(r['off']):.2f}–{max(r['off']):.2f}], ON {statistics.median(r['on']):.2f}{cost}; "
          f"load {os.getloadavg()[0]:.2f}", flush=True)


def sattui_phase(pid: int, rate_hz: float, attach_s: float, phase_s: float, out_dir: Path,
                 cpus: set[int] | None) -> tuple[float, float, dict]:
    """One ON phase: returns the measured window and sattui's own cost."""
    rec = out_dir / f"rec-{time.monotonic_ns()}.jsonl"
    start = time.monotonic()
    sp = subprocess.Popen([sys.executable, "-m", "sattui", "record", "--pid", str(pid), "-o", str(rec),
                           "--backend", "none", "--rate", str(rate_hz), "--duration", str(attach_s + phase_s)],
                          cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_on_cpus(cpus))
    ps = psutil.Process(sp.pid)
    rss = 0
    at_window: psutil._common.pcputimes | None = None
    last = None
    t0 = start + attach_s
    while sp.poll() is None:
        try:
            with ps.oneshot():
                rss = max(rss, ps.memory_info().rss)
                last = ps.cpu_times()
        except psutil.Error:
            break
        if at_window is None and time.monotonic() >= t0:
            at_window = last
        time.sleep(0.25)
    end = time.monotonic()
    sp.wait()
    cost: dict = {"rss_mb": rss / 1e6, "record_bytes": rec.stat().st_size if rec.exists() else 0}
    if at_window is not None and last is not None and end > t0:
        wall = end - t0  # CPU inside the measured window only (the imports before it left out)
        cost["sattui_cores"] = (last.user + last.system - at_window.user - at_window.system) / wall
        cost["sampler_cores"] = (last.children_user + last.children_system
                                 - at_window.children_user - at_window.children_system) / wall
    rec.unlink(missing_ok=True)
    return t0, start + attach_s + phase_s, cost


def run_config(name: str, rate_hz: float, args: argparse.Namespace, out_dir: Path,
               trainer_cpus: set[int] | None, sattui_cpus: set[int] | None) -> dict:
    times_file = out_dir / f"steps-{name}-{rate_hz:g}-{time.monotonic_ns()}.txt"
    per_cycle = 2 * args.phase + args.attach_s + 2 * args.settle_s + 1
    total = args.warmup + (args.cycles + 1) * per_cycle + 30
    tr = _start_trainer(name, total, times_file, cpus=trainer_cpus)
    try:
        time.sleep(args.warmup)
        offs: list[tuple[float, float]] = []
        ons: list[tuple[float, float, dict]] = []
        for i in range(args.cycles + 1):
            a = time.monotonic()
            time.sleep(args.phase)
            offs.append((a, a + args.phase))
            if i == args.cycles:
                break
            ons.append(sattui_phase(tr.pid, rate_hz, args.attach_s, args.phase, out_dir, sattui_cpus))
            time.sleep(args.settle_s)
        time.sleep(0.5)
        times = _step_times(times_file)
    finally:
        _end(tr, signal.SIGTERM, 10)
        times_file.unlink(missing_ok=True)
    off_rates = [steps_per_s(times, a, b) for a, b in offs]
    on_rates = [steps_per_s(times, a, b) for a, b, _cost in ons]
    ratios = _paired_ratios(off_rates, on_rates)
    # the same with each phase's median step (robust to one slow step)
    med_ratios = _paired_ratios([median_step_rate(times, a, b) for a, b in offs],
                                [median_step_rate(times, a, b) for a, b, _cost in ons])
    costs = [c for _a, _b, c in ons if "sattui_cores" in c]
    return {"name": name, "rate": rate_hz, "ratios": ratios, "med_ratios": med_ratios,
            "off": [r for r in off_rates if r is not None], "on": [r for r in on_rates if r is not None],
            "sattui_cores": statistics.median(c["sattui_cores"] for c in costs) if costs else None,
            "sampler_cores": statistics.median(c["sampler_cores"] for c in costs) if costs else None,
            "rss_mb": max((c["rss_mb"] for _a, _b, c in ons), default=None),
            "record_kBps": statistics.median(c["record_bytes"] for _a, _b, c in ons) / 1e3
            / (args.attach_s + args.phase) if ons else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=20, help="ON phases (there is one OFF phase more)")
    ap.add_argument("--phase", type=float, default=5.0, help="seconds measured per phase")
    ap.add_argument("--attach-s", type=float, default=6.0,
                    help="seconds after sattui starts before its phase is measured: its imports, py-spy's start, "
                         "and two 2 s chunks for the sampler to fit its rate to its CPU budget")
    ap.add_argument("--settle-s", type=float, default=1.0, help="seconds after sattui exits before an OFF phase")
    ap.add_argument("--warmup", type=float, default=8.0, help="seconds of training before the first phase")
    ap.add_argument("--trainer", choices=sorted(TRAINERS), action="append")
    ap.add_argument("--rate", choices=["default", "20"], action="append")
    ap.add_argument("--pin", action="store_true", help="trainer on CPU 0, sattui (and its py-spy) on CPU 1")
    ap.add_argument("--mode", choices=["attach", "freeze"], default="attach",
                    help="attach: sattui started and ended per ON phase; freeze: attached once, frozen per OFF "
                         "phase (module doc)")
    ap.add_argument("--minutes", type=float, default=None, help="freeze: run this long instead of --cycles")
    ap.add_argument("--skip-s", type=float, default=0.5,
                    help="freeze: seconds after each switch left out of the phase's measure")
    ap.add_argument("--null", action="store_true", help="freeze: nothing attached, the same phases (A/A)")
    ap.add_argument("--dump", default=None, metavar="FILE", help="freeze: write the phases' rates here (JSON)")
    ap.add_argument("--pool", nargs="+", default=None, metavar="FILE",
                    help="freeze: no run; the interval of the cycles of these --dump files together")
    args = ap.parse_args()
    if args.pool:
        runs = [json.loads(Path(f).read_text()) for f in args.pool]
        pooled = {**runs[0], "ratios": [x for r in runs for x in r["ratios"]],
                  "off": [x for r in runs for x in r["off"]], "on": [x for r in runs for x in r["on"]], "cost": {}}
        args.null, args.dump = False, None
        # dumps of the same phases only (written before they said theirs: 2 s, 0.5 s skipped)
        args.phase, args.skip_s = runs[0].get("phase_s", 2.0), runs[0].get("skip_s", 0.5)
        if any((r.get("phase_s", 2.0), r.get("skip_s", 0.5)) != (args.phase, args.skip_s) for r in runs):
            raise SystemExit("--pool: the runs' phases differ")
        print(f"{len(runs)} runs pooled: "
              + ", ".join(f"{f} ({len(r['ratios'])} cycles)" for f, r in zip(args.pool, runs)))
        report_freeze(pooled, args)
        return 0
    if args.mode == "freeze":
        if args.pin:
            raise SystemExit("--pin is for --mode attach")
        if "--phase" not in sys.argv:
            args.phase = 2.0
        if "--attach-s" not in sys.argv:
            # the sampler runs 2-s chunks for its first 45 s (STEADY_AFTER_S), then 5-s ones
            args.attach_s = 50.0
        rates = [DEFAULT_RATE_HZ if r == "default" else 20.0 for r in (args.rate or ["default"])]
        print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}; load {os.getloadavg()[0]:.2f}; "
              f"freeze mode, phases of {args.phase:g} s", flush=True)
        with tempfile.TemporaryDirectory(prefix="sattui-overhead-") as tmp:
            for name in args.trainer or ["small"]:
                for rate in rates:
                    report_freeze(run_freeze(name, rate, args, Path(tmp)), args)
                    if args.null:
                        return 0
        return 0
    cpus = sorted(os.sched_getaffinity(0))
    if args.pin and len(cpus) < 2:
        raise SystemExit("--pin needs two usable CPUs")
    trainer_cpus, sattui_cpus = ({cpus[0]}, {cpus[1]}) if args.pin else (None, None)
    rates = [DEFAULT_RATE_HZ if r == "default" else 20.0 for r in (args.rate or ["default", "20"])]
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}; load {os.getloadavg()[0]:.2f}; "
          f"{args.cycles} cycles of {args.phase:g} s ON / OFF"
          + (f"; trainer on CPU {cpus[0]}, sattui on CPU {cpus[1]}" if args.pin else ""), flush=True)
    with tempfile.TemporaryDirectory(prefix="sattui-overhead-") as tmp:
        for name in args.trainer or list(TRAINERS):
            for rate in rates:
                r = run_config(name, rate, args, Path(tmp), trainer_cpus, sattui_cpus)
                if not r["ratios"]:
                    print(f"{name} @ {rate:g} Hz: no complete cycle (trainer too slow?)", flush=True)
                    continue
                med = statistics.median(r["ratios"])
                lo, hi = bootstrap_median_ci(r["ratios"])
                cost = ""
                if r["sattui_cores"] is not None:
                    cost = (f"; sampler {r['sampler_cores'] * 100:.1f} % of a core, rest of sattui "
                            f"{r['sattui_cores'] * 100:.1f} %, RSS {r['rss_mb']:.0f} MB, "
                            f"recording {r['record_kBps']:.1f} kB/s")
                print(f"{name} @ {rate:g} Hz: steps/s ratio ON/OFF median {med:.4f} "
                      f"(slowdown {(1 - med) * 100:+.2f} %, 95 % CI {(1 - hi) * 100:+.2f} … {(1 - lo) * 100:+.2f} %) "
                      f"over {len(r['ratios'])} cycles; OFF {statistics.median(r['off']):.2f} steps/s "
                      f"[{min(r['off']):.2f}–{max(r['off']):.2f}], ON {statistics.median(r['on']):.2f} "
                      f"[{min(r['on']):.2f}–{max(r['on']):.2f}]{cost}; load {os.getloadavg()[0]:.2f}", flush=True)
                print("  ratios: " + " ".join(f"{x:.3f}" for x in r["ratios"]), flush=True)
                if r["med_ratios"]:
                    mm = statistics.median(r["med_ratios"])
                    mlo, mhi = bootstrap_median_ci(r["med_ratios"])
                    print(f"  by each phase's median step time: ratio ON/OFF median {mm:.4f} (slowdown "
                          f"{(1 - mm) * 100:+.2f} %, 95 % CI {(1 - mhi) * 100:+.2f} … {(1 - mlo) * 100:+.2f} %) "
                          f"over {len(r['med_ratios'])} cycles", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
