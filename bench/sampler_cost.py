"""What the py-spy stack sampler costs, and how well it covers time.

    python bench/sampler_cost.py            # full grid, ~9 minutes on 2 cores
    python bench/sampler_cost.py --quick    # default rate/chunk only, ~2 minutes
    python bench/sampler_cost.py --vs-top   # sattui record against py-spy top --idle, ~7 minutes
    python bench/sampler_cost.py --vs-top --against /tmp/old   # and another checkout's, ~10 minutes

For each target (the example trainer ``python -m sattui.demo.trainer --scenario
input_bound`` as is (~4 threads) and with ``--extra-threads 56`` (~60 threads)), rate and
chunk length, it runs sattui's StackSampler for a window and prints:

- py-spy CPU: CPU time of the py-spy processes (reaped children of this process) over
  the window, in cores (1.0 = one core busy);
- parse CPU: this process's own CPU (the sampler thread: spawning, reading, parsing);
- coverage: share of the steady-state span [first chunk start, last chunk end] covered
  by main-thread samples, the gaps between chunks, and the attach-to-first-sample time;
- errors: py-spy's own "Errors" count per sample taken.

Then timestamp accuracy on a probe process whose main thread switches between two
functions at times it logs itself: the error of each switch as seen in the samples.

``--vs-top`` (issue 25): the whole of ``sattui record --pid P`` (itself and the py-spy
runs it starts) against ``py-spy top --idle --nonblocking`` alone at the same rate, on the
same trainer (the compute-bound example, ``--top-threads`` threads in all and a small
one), in alternating runs of ``--window`` seconds; CPU of each from /proc (this
process's reaped children: the runs and their own reaped children), in cores, and the
ratio and difference of the medians. Target: ratio ≤ 1.5 on the big trainer, difference
≤ 0.015 cores on the small one.

Other processes on the machine add noise: the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pty import open_terminal  # noqa: E402

from sattui.model import StackChunk  # noqa: E402
from sattui.trainer.stacks import (  # noqa: E402
    DEFAULT_CHUNK_S,
    DEFAULT_RATE_HZ,
    StackSampler,
    find_py_spy,
    py_spy_version,
)

T0 = time.monotonic()


def clock() -> float:
    return time.monotonic() - T0


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


@dataclass
class Row:
    threads: int
    rate: int
    chunk: float
    mode: str
    window_s: float
    pyspy_cores: float
    parse_cores: float
    coverage: float
    gap_mean_ms: float
    gap_max_ms: float
    first_sample_ms: float
    chunks: int
    err_per_sample: float
    main_spans_per_s: float


def measure(pid: int, n_threads: int, rate: int, chunk: float, window: float, overlap: bool,
            budget: bool = False) -> Row:
    chunks: list[StackChunk] = []
    lock = threading.Lock()

    def on_chunk(c: StackChunk) -> None:
        with lock:
            chunks.append(c)

    events = []
    sampler = StackSampler(pid, clock, on_chunk, events.append, rate_hz=rate, chunk_s=chunk)
    sampler.overlap = overlap
    if not budget:
        sampler.cpu_budget = None  # measure the rate asked for, not an adapted one
    cpu0, self0, w0 = children_cpu(), time.process_time(), clock()
    sampler.start()
    time.sleep(window)
    sampler.stop()
    cpu1, self1, w1 = children_cpu(), time.process_time(), clock()
    if sampler.status != "stopped" or [e for e in events if e.type != "sampler_rate"]:
        print(f"  ! sampler status {sampler.status}: {[e.message for e in events]}", file=sys.stderr)
    wall = w1 - w0
    gaps = [max(0.0, b.t - a.t_end) for a, b in zip(chunks, chunks[1:])]
    if chunks:
        span = chunks[-1].t_end - chunks[0].t
        covered = sum(s.dur for c in chunks for s in c.samples if s.is_main)
        n_main = sum(1 for c in chunks for s in c.samples if s.is_main)
    else:
        span, covered, n_main = 0.0, 0.0, 0
    firsts = [r.t_first - r.t_spawn for r in sampler.runs if r.t_first is not None]
    taken = sum(r.samples or 0 for r in sampler.runs)
    errs = sum(r.errors or 0 for r in sampler.runs)
    return Row(
        threads=n_threads, rate=rate, chunk=chunk,
        mode=("overlap" if overlap else "sequential") if not budget else
        "budget " + "→".join(str(r) for r in dict.fromkeys(r.rate_hz for r in sampler.runs)) + " Hz",
        window_s=wall, pyspy_cores=(cpu1 - cpu0) / wall, parse_cores=(self1 - self0) / wall,
        coverage=covered / span if span else 0.0,
        gap_mean_ms=1000 * statistics.fmean(gaps) if gaps else 0.0,
        gap_max_ms=1000 * max(gaps) if gaps else 0.0,
        first_sample_ms=1000 * statistics.median(firsts) if firsts else float("nan"),
        chunks=len(chunks), err_per_sample=errs / taken if taken else 0.0,
        main_spans_per_s=n_main / span if span else 0.0,
    )


def start_trainer(extra_threads: int, seconds: float) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "sattui.demo.trainer", "--scenario", "input_bound",
           "--seconds", str(seconds), "--extra-threads", str(extra_threads)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=Path(__file__).resolve().parents[1])


def thread_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return -1


def run_grid(extra: int, rates: list[int], chunks: list[float], window: float, warmup: float,
             overlap: bool, budget: bool = False) -> list[Row]:
    rows = []
    for rate in rates:
        need = warmup + len(chunks) * (window + 2.5) + 3
        tr = start_trainer(extra, max(60.0, need))
        try:
            time.sleep(warmup)
            n = thread_count(tr.pid)
            for chunk in chunks:
                row = measure(tr.pid, n, rate, chunk, window, overlap, budget)
                rows.append(row)
                print_row(row)
                time.sleep(0.5)
        finally:
            tr.kill()
            tr.wait()
    return rows


HEADER = ("| threads | rate Hz | chunk s | mode | py-spy CPU (cores) | parse CPU | coverage "
          "| gap mean / max ms | attach→1st sample ms | errors/sample |")


def print_row(r: Row) -> None:
    print(f"| {r.threads} | {r.rate} | {r.chunk:g} | {r.mode} | {r.pyspy_cores:.3f} | {r.parse_cores:.3f} "
          f"| {100 * r.coverage:.1f} % | {r.gap_mean_ms:.0f} / {r.gap_max_ms:.0f} | {r.first_sample_ms:.0f} "
          f"| {r.err_per_sample:.4f} |", flush=True)


PROBE = textwrap.dedent("""
    import random, sys, threading, time
    stop = threading.Event()
    for i in range(3):
        threading.Thread(target=stop.wait, daemon=True).start()
    log = open(sys.argv[1], "w", buffering=1)
    def phase_a(d): time.sleep(d)
    def phase_b(d): time.sleep(d)
    rng = random.Random(1)
    end = time.monotonic() + float(sys.argv[2])
    print("ready", flush=True)
    while time.monotonic() < end:
        for name, fn in (("a", phase_a), ("b", phase_b)):
            d = rng.uniform(0.15, 0.35)
            log.write(f"{name} {time.monotonic()!r}\\n")
            fn(d)
""")


def timestamp_accuracy(rate: int, chunk: float, seconds: float) -> dict[str, float]:
    """Sampled phase switches vs the switch times the probe logged (CLOCK_MONOTONIC).

    The example trainer runs alongside, so both cores are busy as on a real training
    machine: py-spy's own start-up then gets delayed now and then, which is what the
    clock-origin estimate has to survive.
    """
    load = start_trainer(0, seconds + 15)
    time.sleep(5)
    try:
        return _probe(rate, chunk, seconds)
    finally:
        load.kill()
        load.wait()


def _probe(rate: int, chunk: float, seconds: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        truth_path = Path(tmp) / "truth.txt"
        probe = subprocess.Popen([sys.executable, "-c", PROBE, str(truth_path), str(seconds + 4)],
                                 stdout=subprocess.PIPE, text=True)
        assert probe.stdout is not None
        probe.stdout.readline()
        chunks: list[StackChunk] = []
        sampler = StackSampler(probe.pid, clock, chunks.append, lambda e: None, rate_hz=rate, chunk_s=chunk)
        sampler.start()
        time.sleep(seconds)
        sampler.stop()
        probe.kill()
        probe.wait()
        truth = []
        for line in truth_path.read_text().splitlines():
            name, mono = line.split()
            truth.append((float(mono) - T0, name))
    seen = []  # (t, phase) where the main thread's phase changed in the samples
    prev = None
    for c in chunks:
        for s in sorted((s for s in c.samples if s.is_main), key=lambda s: s.t):
            names = [f.name for f in s.frames]
            phase = "a" if "phase_a" in names else "b" if "phase_b" in names else None
            if phase and phase != prev:
                seen.append((s.t, phase))
            prev = phase or prev
    errors = []
    for t, phase in seen[1:]:
        cands = [ts for ts, name in truth if name == phase and ts <= t + 0.1]
        if cands:
            errors.append(t - cands[-1])
    errors.sort()
    if not errors:
        return {"n": 0}
    q = lambda p: errors[min(len(errors) - 1, int(p * len(errors)))]  # noqa: E731
    return {"n": len(errors), "min_ms": 1000 * errors[0], "median_ms": 1000 * q(0.5),
            "p90_ms": 1000 * q(0.9), "max_ms": 1000 * errors[-1],
            "expected_mean_ms": 1000 / rate}


def _tree_cpu(pid: int) -> float | None:
    """CPU seconds of ``pid`` and of the children it has reaped (utime + stime + cutime
    + cstime of /proc/PID/stat); None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return sum(int(x) for x in rest[11:15]) / os.sysconf("SC_CLK_TCK")


def _run_cpu(cmd: list[str], seconds: float, settle: float, tty: bool,
             root: str | None = None) -> tuple[float, float | None]:
    """Cores used by ``cmd`` and the children it reaps: over its whole run of ``seconds``
    (start-up included), and in its steady state (from ``settle`` s after its start until
    just before the end; a child still running at either end is not counted, one at each
    end). SIGINT ends it (``py-spy top`` runs until then; ``sattui record`` ends itself).
    ``tty``: in an 80x24 pty, as a user runs ``py-spy top`` (without a terminal it
    behaves differently: here it exited early or spun at up to half a core)."""
    master = slave = None
    if tty:
        master, slave = open_terminal(80, 24)
        io: dict[str, Any] = {"stdin": slave, "stdout": slave, "stderr": slave}
    else:
        io = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    cpu0, t0 = children_cpu(), time.monotonic()
    root = root or str(Path(__file__).resolve().parents[1])
    proc = subprocess.Popen(cmd, cwd=root, env=dict(os.environ, PYTHONPATH=root), **io)
    if slave is not None:
        os.close(slave)
    steady: float | None = None
    try:
        time.sleep(settle)
        a, ta = _tree_cpu(proc.pid), time.monotonic()
        time.sleep(max(0.0, seconds - settle - 0.5))
        b, tb = _tree_cpu(proc.pid), time.monotonic()
        if a is not None and b is not None and tb > ta:
            steady = (b - a) / (tb - ta)
        if tty:
            time.sleep(0.5)
            proc.send_signal(2)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    finally:
        if master is not None:
            os.close(master)
    return (children_cpu() - cpu0) / (time.monotonic() - t0), steady


def _stack_rates(path: str) -> list[float]:
    """The py-spy rate of each stacks chunk of a recording (the CPU budget may lower it)."""
    out: list[float] = []
    if not os.path.exists(path):
        return out  # the run failed (the bench's trainer gone?): its CPU still counts
    with open(path, encoding="utf-8") as f:
        for line in f:
            if '"kind":"stacks"' in line.replace(" ", ""):
                out.append(float(json.loads(line)["rate_hz"]))
    return out


def vs_top(py_spy: str, threads: int, rate: int, window: float, rounds: int, warmup: float, settle: float,
           against: str | None = None) -> None:
    """sattui record against py-spy top --idle, alternating on one trainer (and the
    sattui of the checkout ``against``, in the same rounds)."""
    extra = max(0, threads - 2)  # the example has 2 threads of its own (main and one of torch)
    cmd = [sys.executable, "-m", "sattui.demo.trainer", "--scenario", "compute_bound",
           "--seconds", str(warmup + rounds * (3 if against else 2) * (window + 4) + 60), "--extra-threads", str(extra)]
    tr = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          cwd=Path(__file__).resolve().parents[1])
    tmp = tempfile.mkdtemp(prefix="sattui-vs-top-")
    top_cores: list[float] = []
    rec_cores: list[float] = []
    rates: list[float] = []  # sattui's py-spy rate, chunk by chunk
    top_rates: list[int] = []
    top_steady: list[float | None] = []
    rec_steady: list[float | None] = []
    other_cores: list[float] = []
    other_steady: list[float | None] = []
    try:
        time.sleep(warmup)
        n = thread_count(tr.pid)
        for i in range(rounds):
            out = os.path.join(tmp, f"rec{i}.jsonl")
            rec = [sys.executable, "-m", "sattui", "record", "--pid", str(tr.pid), "--rate", str(rate),
                   "--duration", str(window), "-o", out]
            # Alternate which goes first (a drift of the machine's load favours neither);
            # sattui first in the first round: py-spy top runs at the rate sattui's CPU
            # budget let it keep (the chunks' median so far), the same rate.
            order = ["rec", "top"] + (["other"] if against else [])
            for name in order if i % 2 == 0 else order[::-1]:
                if name == "other":
                    whole, steady = _run_cpu(rec, window, settle, tty=False, root=against)
                    other_cores.append(whole)
                    other_steady.append(steady)
                    if os.path.exists(out):
                        os.remove(out)
                elif name == "rec":
                    whole, steady = _run_cpu(rec, window, settle, tty=False)
                    rec_cores.append(whole)
                    rec_steady.append(steady)
                    rates += _stack_rates(out)
                    if os.path.exists(out):
                        os.remove(out)
                else:
                    top_rate = max(1, round(statistics.median(rates))) if rates else rate
                    top_rates.append(top_rate)
                    top = [py_spy, "top", "--pid", str(tr.pid), "--idle", "--nonblocking", "--rate", str(top_rate)]
                    whole, steady = _run_cpu(top, window, settle, tty=True)
                    top_cores.append(whole)
                    top_steady.append(steady)
                time.sleep(1.0)
    finally:
        tr.kill()
        tr.wait()
        for f in os.listdir(tmp):
            os.remove(os.path.join(tmp, f))
        os.rmdir(tmp)
    used = f"{statistics.median(rates):g}" if rates else "-"
    rows = [("this checkout", top_cores, rec_cores, top_steady, rec_steady)]
    if against:
        rows.append((against, top_cores, other_cores, top_steady, other_steady))
    for who, tops_all, recs_all, tops_st, recs_st in rows:
        for what, tops, recs in (("whole run", tops_all, recs_all),
                                 (f"after {settle:g} s", [x for x in tops_st if x is not None],
                                  [x for x in recs_st if x is not None])):
            if not tops or not recs:
                print(f"| {n} | {who} | {what} | - | - | - | - | - | - | - |")
                continue
            mt, mr = statistics.median(tops), statistics.median(recs)
            print(f"| {n} | {who} | {what} | {rate}: {used} / {statistics.median(top_rates):g} | {rounds} | "
                  f"{mt:.3f} | {mr:.3f} | {mr / mt:.2f}x | {mr - mt:+.3f} | "
                  f"{' '.join(f'{x:.3f}' for x in tops)} / {' '.join(f'{x:.3f}' for x in recs)} |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="10,20,50")
    ap.add_argument("--chunks", default="1,2,5")
    ap.add_argument("--extra-threads", default="0,56", help="targets: extra idle threads in the trainer")
    ap.add_argument("--window", type=float, default=15.0, help="seconds sampled per configuration")
    ap.add_argument("--warmup", type=float, default=8.0, help="trainer start-up left out")
    ap.add_argument("--no-sequential", action="store_true",
                    help="skip the comparison with chunks run one after another")
    ap.add_argument("--no-accuracy", action="store_true")
    ap.add_argument("--accuracy-only", action="store_true")
    ap.add_argument("--quick", action="store_true", help="default rate and chunk only")
    ap.add_argument("--vs-top", action="store_true",
                    help="sattui record (all of it) against py-spy top --idle at the same rate")
    ap.add_argument("--top-threads", default="112,2", help="with --vs-top: the trainers' thread counts")
    ap.add_argument("--rounds", type=int, default=3, help="with --vs-top: alternating runs of each")
    ap.add_argument("--against", metavar="CHECKOUT",
                    help="with --vs-top: also the sattui of another checkout, in the same rounds")
    ap.add_argument("--settle", type=float, default=6.0,
                    help="with --vs-top: seconds after each start left out of the steady-state figure")
    args = ap.parse_args()
    rates = [int(x) for x in args.rates.split(",")]
    chunks = [float(x) for x in args.chunks.split(",")]
    if args.quick:
        rates, chunks = [int(DEFAULT_RATE_HZ)], [DEFAULT_CHUNK_S]
    py_spy = find_py_spy()
    if py_spy is None:
        print("py-spy not found", file=sys.stderr)
        return 2
    try:
        # Not imported: this process's own CPU is measured, and a torch import would
        # make every fork of it (one per chunk) dearer.
        torch_v = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        print("torch is needed for the example trainer", file=sys.stderr)
        return 2
    print(f"# sampler_cost: py-spy {py_spy_version(py_spy)} ({py_spy}), torch {torch_v}, "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"load average at start {os.getloadavg()[0]:.2f}")
    print(f"# command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    if args.vs_top:
        window = args.window if args.window != 15.0 else 30.0
        print(f"# sattui record (itself + its py-spy runs) against py-spy top --idle --nonblocking, "
              f"alternating runs of {window:g} s; CPU from /proc, reaped children included; "
              "whole run (sattui's start-up included) and steady state")
        print("\n| threads | sattui | measured | rate Hz asked: sattui's / top's | runs each "
              "| py-spy top (cores, median) | sattui record (cores, median) | ratio | difference "
              "| each run: top / record |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for n in (int(x) for x in args.top_threads.split(",")):
            vs_top(py_spy, n, int(DEFAULT_RATE_HZ), window, args.rounds, args.warmup, args.settle,
                   os.path.abspath(args.against) if args.against else None)
        print(f"\n# load average at end {os.getloadavg()[0]:.2f}")
        return 0
    print(f"# defaults: {DEFAULT_RATE_HZ:g} Hz, {DEFAULT_CHUNK_S:g} s chunks; window {args.window:g} s each")
    print()
    print(HEADER)
    print("|---" * (HEADER.count("|") - 1) + "|")
    rows: list[Row] = []
    for extra in (int(x) for x in args.extra_threads.split(",") if not args.accuracy_only):
        rows += run_grid(extra, rates, chunks, args.window, args.warmup, overlap=True)
        if not args.no_sequential:
            rows += run_grid(extra, [int(DEFAULT_RATE_HZ)], chunks, args.window, args.warmup, overlap=False)
        # The sampler as sattui runs it (default rate and chunk, CPU budget on), and asked
        # for twice the rate, which the budget has to pull down on the big target.
        rows += run_grid(extra, [int(DEFAULT_RATE_HZ), int(2 * DEFAULT_RATE_HZ)], [DEFAULT_CHUNK_S],
                         2 * args.window, args.warmup, overlap=True, budget=True)
    print(f"\n# load average at end {os.getloadavg()[0]:.2f}")
    if not args.no_accuracy:
        print("\nTimestamp accuracy (probe switching functions every 150-350 ms, trainer alongside):")
        print("\n| rate Hz | switches | error min / median / p90 / max ms | mean sample interval ms |")
        print("|---|---|---|---|")
        for rate in rates:
            acc = timestamp_accuracy(rate, DEFAULT_CHUNK_S, args.window)
            if acc.get("n"):
                print(f"| {rate} | {acc['n']:.0f} | {acc['min_ms']:.0f} / {acc['median_ms']:.0f} / "
                      f"{acc['p90_ms']:.0f} / {acc['max_ms']:.0f} | {acc['expected_mean_ms']:.0f} |", flush=True)
            else:
                print(f"| {rate} | 0 | - | - |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
