"""What the time ledger's signals cost sattui: the new per-tick reads, the worker dumps,
the USS reads.

    python bench/signals_cost.py                 # all parts, ~4 minutes on 2 cores
    python bench/signals_cost.py --parts ticks,record --window 30

Target: the demo trainer (``python -m sattui.demo.trainer --scenario input_bound
--workers 8 --persistent-workers``): one trainer and 8 DataLoader workers.

1. ``ticks``: sattui's own CPU per tick, in this process, ``ProcessTree.sample()`` alone
   as before (the new readers switched off) against ``sample()`` with them plus
   ``HostSampler.sample()``, each once a second as the monitor ticks, half a second
   apart so both see the same load; the USS reads come at their real rate. CPU is the
   sampling thread's (``time.thread_time``).
2. ``record``: the whole ``sattui record --pid`` process, before (the merge base with
   main, run from a ``git archive`` of it) and after (this tree), alternating: its own
   CPU in the steady state (after 4 s, so start-up imports are left out) and its py-spy
   children's (the trainer's chunks, and after: the worker dumps too), in cores.
3. ``dumps``: ``py-spy dump --nonblocking --json`` of the 8 workers through
   ``WorkerStackSampler``: CPU per dump (py-spy's own, from ``wait4``).
4. ``uss``: one ``smaps_rollup`` read (sattui's CPU, system time: the kernel walks the
   page tables) of a demo worker, and of processes holding 0.25 / 1 / 4 GiB touched, and
   of a forked child sharing 1 GiB of its parent's.

Other processes on the machine add noise: the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sattui.host_sampler import HostSampler  # noqa: E402
from sattui.trainer import procs as procs_mod  # noqa: E402
from sattui.trainer.procs import ProcessTree  # noqa: E402
from sattui.trainer.smaps import uss_bytes  # noqa: E402
from sattui.trainer.worker_stacks import WorkerStackSampler  # noqa: E402


def start_trainer(workers: int, seconds: float, cwd: Path = REPO) -> subprocess.Popen:
    # persistent workers: the same 8 pids for the whole run (parts 3 and 4 dump and read them)
    return subprocess.Popen([sys.executable, "-m", "sattui.demo.trainer", "--scenario", "input_bound",
                             "--workers", str(workers), "--seconds", str(seconds), "--persistent-workers"],
                            cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_workers(pid: int, n: int, timeout: float = 120) -> list[int]:
    tree = ProcessTree(pid, time.monotonic)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        workers = [s.pid for s in tree.sample()[0] if s.role == "worker" and s.name == "pt_data_worker"]
        if len(workers) >= n:
            return workers
        time.sleep(0.5)
    raise SystemExit(f"trainer did not start {n} workers")


def kill_tree(p: subprocess.Popen) -> None:
    try:
        kids = psutil.Process(p.pid).children(recursive=True)
    except psutil.Error:
        kids = []
    p.kill()
    p.wait()
    for k in kids:
        try:
            k.kill()
        except psutil.Error:
            pass


# --------------------------------------------------------------------------- 1. ticks


def part_ticks(pid: int, window: float) -> None:
    real = (procs_mod.thread_ticks, procs_mod.run_queue_ns, procs_mod.uss_bytes)
    off = (lambda *a: None,) * 3
    uss_cpu = [0.0, 0]

    def timed_uss(p: int):
        c = time.thread_time()
        try:
            return real[2](p)
        finally:
            uss_cpu[0] += time.thread_time() - c
            uss_cpu[1] += 1

    def use(readers) -> None:
        procs_mod.thread_ticks, procs_mod.run_queue_ns, procs_mod.uss_bytes = readers

    t0 = time.monotonic()
    clock = lambda: time.monotonic() - t0  # noqa: E731
    before_tree, after_tree = ProcessTree(pid, clock), ProcessTree(pid, clock)
    host = HostSampler(pid, clock)
    cost: dict[str, list[float]] = {"before": [], "after": [], "host": []}
    n_procs = 0
    end = time.monotonic() + window
    try:
        # both at the monitor's real cadence, one tick a second, half a second apart
        while time.monotonic() < end:
            use(off)
            c = time.thread_time()
            before_tree.sample()
            cost["before"].append(time.thread_time() - c)
            time.sleep(0.5)
            use((real[0], real[1], timed_uss))
            c = time.thread_time()
            samples, _ = after_tree.sample()
            c2 = time.thread_time()
            host.sample()
            c3 = time.thread_time()
            cost["after"].append(c3 - c)
            cost["host"].append(c3 - c2)
            n_procs = len(samples)
            time.sleep(0.5)
    finally:
        use(real)
    b, a = (statistics.fmean(cost[k]) * 1e3 for k in ("before", "after"))
    print(f"\n## 1. per tick (1 a second), {n_procs} processes (trainer, 8 workers, resource tracker), "
          f"{len(cost['before'])} ticks each\n")
    print("| | CPU per tick, mean (ms) | median (ms) | % of a core |")
    print("|---|---|---|---|")
    for name, key in (("before (the new readers off)", "before"),
                      ("after: + cpu_main, run_delay, uss, host record", "after"),
                      ("of which the host record", "host")):
        m, med = statistics.fmean(cost[key]) * 1e3, statistics.median(cost[key]) * 1e3
        print(f"| {name} | {m:.2f} | {med:.2f} | {m / 10:.2f} |")
    if uss_cpu[1]:
        print(f"| of which USS reads ({uss_cpu[1]}, {1e3 * uss_cpu[0] / uss_cpu[1]:.1f} ms each) "
              f"| {1e3 * uss_cpu[0] / len(cost['after']):.2f} | | {100 * uss_cpu[0] / window:.2f} |")
    print(f"\nratio after / before: {a / b:.2f} (+{a - b:.2f} ms per tick, +{(a - b) / 10:.2f} % of a core)")


# --------------------------------------------------------------------------- 2. record


def before_tree_dir(ref: str, into: Path) -> Path:
    data = subprocess.run(["git", "-C", str(REPO), "archive", ref], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def one_record(cwd: Path, pid: int, window: float, out: Path) -> tuple[float, float]:
    """(own CPU cores, children CPU cores) of ``sattui record`` in its steady state."""
    sp = subprocess.Popen([sys.executable, "-m", "sattui", "record", "--pid", str(pid), "-o", str(out),
                           "--duration", str(window + 6), "--backend", "none"],
                          cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ps = psutil.Process(sp.pid)
    time.sleep(4)
    a, ta = ps.cpu_times(), time.monotonic()
    time.sleep(window)
    b, tb = ps.cpu_times(), time.monotonic()
    _, err = sp.communicate(timeout=60)
    if sp.returncode != 0:
        raise SystemExit(f"sattui record failed: {err.decode()[-500:]}")
    wall = tb - ta
    own = (b.user + b.system - a.user - a.system) / wall
    kids = (b.children_user + b.children_system - a.children_user - a.children_system) / wall
    return own, kids


def part_record(pid: int, window: float, pairs: int, ref: str) -> None:
    with tempfile.TemporaryDirectory(prefix="sattui-bench-before-") as tmp:
        before = before_tree_dir(ref, Path(tmp) / "src")
        probe = subprocess.run([sys.executable, "-c", "import sattui.host_sampler"], cwd=before,
                               capture_output=True)
        assert probe.returncode != 0, "the 'before' tree already has the signals: wrong ref?"
        rows = {"before": [], "after": []}
        for i in range(pairs):
            for name, cwd in (("before", before), ("after", REPO)):
                rows[name].append(one_record(cwd, pid, window, Path(tmp) / f"{name}-{i}.jsonl"))
                print(f"  {name} run {i + 1}: sattui {100 * rows[name][-1][0]:.2f} % of a core, "
                      f"py-spy {100 * rows[name][-1][1]:.2f} %", flush=True)
    print(f"\n## 2. `sattui record --pid` (trainer + 8 workers), {window:g} s steady state, {pairs} runs each, "
          f"before = {ref}\n")
    print("| | sattui's own CPU (% of a core) | py-spy children (% of a core) |")
    print("|---|---|---|")
    med = {}
    for name in ("before", "after"):
        own = statistics.median(r[0] for r in rows[name])
        kids = statistics.median(r[1] for r in rows[name])
        med[name] = (own, kids)
        print(f"| {name} | {100 * own:.2f} | {100 * kids:.2f} |")
    print(f"\nratio after / before, sattui's own: {med['after'][0] / med['before'][0]:.2f}; "
          f"py-spy: {med['after'][1] / med['before'][1]:.2f}")


# --------------------------------------------------------------------------- 3. dumps


def part_dumps(workers: list[int], window: float) -> None:
    got = []
    s = WorkerStackSampler(time.monotonic, got.append, lambda e: None)
    per: list[float] = []
    orig = s._run

    def run(pid: int):
        r = orig(pid)
        if r is not None and r[3] is not None:
            per.append(r[3])
        return r

    s._run = run  # type: ignore[method-assign]
    s.set_workers(workers)
    s.start()
    t0 = time.monotonic()
    time.sleep(window)
    s.stop()
    wall = time.monotonic() - t0
    print(f"\n## 3. worker dumps: {len(workers)} workers, {window:g} s, period {s.period_s:g} s, "
          f"budget {100 * s.cpu_budget:.0f} % of a core\n")
    print(f"- dumps: {s.dumps} ({s.failures} failed), states: "
          + ", ".join(f"{k} {v}" for k, v in sorted(_count(w.state for w in got).items())))
    if per:
        print(f"- py-spy CPU per dump: median {1e3 * statistics.median(per):.1f} ms, "
              f"min {1e3 * min(per):.1f}, max {1e3 * max(per):.1f}")
    print(f"- py-spy CPU over the window: {100 * s.cpu_s / wall:.2f} % of a core; "
          f"each worker seen every {wall * len(workers) / max(1, s.dumps):.1f} s")


def _count(xs) -> dict:
    out: dict = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return out


# --------------------------------------------------------------------------- 4. uss


HOLD = """
import os, sys, time
n = int(sys.argv[1]) << 20
buf = bytearray(n)
buf[::4096] = b"x" * len(buf[::4096])
if len(sys.argv) > 2 and os.fork() == 0:
    time.sleep(3600)  # the child shares the parent's pages
print("ready", flush=True)
time.sleep(3600)
"""


def _uss_cost(pid: int, reps: int = 10) -> tuple[float, int | None]:
    c = time.thread_time()
    for _ in range(reps):
        u = uss_bytes(pid)
    return (time.thread_time() - c) / reps, u


def part_uss(workers: list[int]) -> None:
    print("\n## 4. one smaps_rollup read (sattui's CPU)\n")
    print("| process | RSS | USS | CPU per read (ms) | at one read per 10 s (% of a core) |")
    print("|---|---|---|---|---|")
    rows = [("demo DataLoader worker", workers[0])]
    held = []
    try:
        for mb, fork in ((256, False), (1024, False), (4096, False), (1024, True)):
            p = subprocess.Popen([sys.executable, "-c", HOLD, str(mb)] + (["fork"] if fork else []),
                                 stdout=subprocess.PIPE, text=True)
            held.append(p)
            assert p.stdout is not None
            p.stdout.readline()
            target = p.pid
            if fork:
                time.sleep(0.2)
                target = psutil.Process(p.pid).children()[0].pid
            rows.append((f"{'forked child sharing' if fork else 'holding'} {mb} MiB", target))
        for name, pid in rows:
            cost, uss = _uss_cost(pid)
            rss = psutil.Process(pid).memory_info().rss
            print(f"| {name} | {rss / 2**20:.0f} MiB | {(uss or 0) / 2**20:.0f} MiB | {1e3 * cost:.2f} "
                  f"| {100 * cost / 10:.3f} % |")
    finally:
        for p in held:
            kill_tree(p)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="ticks,record,dumps,uss")
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--before", default=None, help="git ref of the code before (default: merge base with main)")
    args = ap.parse_args()
    parts = args.parts.split(",")
    ref = args.before or subprocess.run(["git", "-C", str(REPO), "merge-base", "HEAD", "main"],
                                        capture_output=True, text=True, check=True).stdout.strip()[:12]
    print(f"# signals_cost: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
          f"load average at start {os.getloadavg()[0]:.2f}")
    print(f"# command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    tr = start_trainer(args.workers, 3600)  # killed at the end
    try:
        workers = wait_workers(tr.pid, args.workers)
        time.sleep(3)
        if "ticks" in parts:
            part_ticks(tr.pid, args.window)
        if "record" in parts:
            part_record(tr.pid, args.window, args.pairs, ref)
        if "dumps" in parts:
            part_dumps(workers, args.window)
        if "uss" in parts:
            part_uss(workers)
    finally:
        kill_tree(tr)
    print(f"\n# load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
