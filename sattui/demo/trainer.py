"""A small, real PyTorch training job to watch: the bundled example and test subject.

Run it as ``python -m sattui.demo.trainer --scenario input_bound``. It needs torch
(a test and demo dependency only; sattui itself never imports this module).

It measures its own truth from the inside: with ``--truth FILE`` it appends, about
once a second, the wall clock and the cumulative seconds spent in ``next(loader)``,
so a test can compute the true data-wait share over exactly the window sattui saw.

With ``--sim-card FILE`` it also feeds the demo's simulated card
(``sattui.vendors.sim``): it appends its pid, the bytes its model and one batch would
hold on a card, and, for every step, when forward + backward + optimizer began and
ended (``time.monotonic()``). The simulated card is busy exactly in those intervals.

Scenarios (S-numbers: the rule catalogue's test scenarios, tests/e2e/test_scenarios.py):
  input_bound    1 worker whose __getitem__ busy-loops ~1 ms, batch 64, small MLP (S01)
  compute_bound  cheap data (index a tensor), a larger MLP (S00)
  inline         num_workers=0, __getitem__ busy-loops 0.5 ms (S03)
  io_bound       2 workers, __getitem__ sleeps 2 ms (S02)
  slow_worker_start  2 workers whose worker_init_fn sleeps 1.5 s, restarted every ~2-s epoch
                 (persistent_workers=False, 6144 items): the trainer waits for every new
                 generation's start (worker_respawn); its truth lines add ``restarts`` and
                 ``restart_s`` (from each later epoch's iter(loader) to its first batch)
  healthy        alias of compute_bound
  starved        alias of input_bound
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import threading
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SCENARIOS = {
    # name: (num_workers, busy_ms, sleep_ms, width, depth)
    "input_bound": (1, 1.0, 0.0, 512, 3),
    "compute_bound": (1, 0.0, 0.0, 2048, 4),
    "healthy": (1, 0.0, 0.0, 2048, 4),
    "starved": (1, 0.0, 0.0, 1024, 4),
    "inline": (0, 0.5, 0.0, 512, 3),
    "io_bound": (2, 0.0, 2.0, 512, 3),
    "slow_worker_start": (2, 0.0, 0.0, 512, 3),
}
# name: (worker_init_fn's sleep in ms, items per epoch): a slow worker start (opening a
# dataset, heavy imports) paid again by every epoch's new workers.
SLOW_START = {
    "slow_worker_start": (1500.0, 6144),
}
# name: (items per shard, ms to open a shard): the first item of every shard a worker
# serves pays for the whole shard, as a tar/record shard or a cold cache would.
SHARDS = {
    "starved": (32 * 64, 1500.0),
}


class SyntheticDataset(Dataset):
    """Random features; each item costs ``busy_ms`` of CPU and ``sleep_ms`` of waiting."""

    def __init__(self, n: int, dim: int, busy_ms: float, sleep_ms: float,
                 shard_items: int = 0, shard_ms: float = 0.0) -> None:
        self.n, self.dim = n, dim
        self.busy_s, self.sleep_s = busy_ms / 1000.0, sleep_ms / 1000.0
        self.shard_items, self.shard_s = shard_items, shard_ms / 1000.0
        self.served = 0  # per worker process: each has its own copy
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, dim, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if self.shard_items:
            if self.served % self.shard_items == 0:
                self._busy(self.shard_s)
            self.served += 1
        if self.busy_s:
            end = time.perf_counter() + self.busy_s
            while time.perf_counter() < end:
                pass
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return self.x[i], self.y[i]

    @staticmethod
    def _busy(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass


def _slow_worker_init(seconds: float, worker_id: int) -> None:
    """A worker_init_fn that takes ``seconds`` (asleep: opening a remote dataset, say)."""
    time.sleep(seconds)


def make_model(dim: int, width: int, depth: int) -> nn.Module:
    layers: list[nn.Module] = [nn.Linear(dim, width), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, 10))
    return nn.Sequential(*layers)


def _idle_threads(n: int, stop: threading.Event) -> None:
    """Extra sleeping threads, as CUDA/NCCL/OpenMP pools give real trainers."""
    for i in range(n):
        threading.Thread(target=stop.wait, name=f"idle-{i}", daemon=True).start()


class CpuPinStage:
    """A stand-in for torch's pin-memory thread on a machine without an accelerator.

    torch starts its real ``pt_data_pin`` thread only when an accelerator is present
    (``DataLoader`` drops ``pin_memory`` with a warning otherwise), so a CPU-only test
    box never shows one. This thread takes the same name through torch's own
    ``_set_thread_name`` and copies every batch handed to it, the CPU part of what
    pinning does, so the process tree looks like a GPU job's. It sits beside the data
    path, not in it: the main thread still waits inside torch's DataLoader.
    """

    def __init__(self) -> None:
        import queue

        self.q: queue.Queue = queue.Queue(maxsize=4)
        self.thread = threading.Thread(target=self._run, name="pt_data_pin", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import torch.multiprocessing as tmp

        tmp._set_thread_name("pt_data_pin")
        while True:
            batch = self.q.get()
            if batch is None:
                return
            for t in batch:
                t.clone()

    def offer(self, batch) -> None:
        try:
            self.q.put_nowait(batch)
        except Exception:
            pass  # full: the stand-in never slows the trainer

    def close(self) -> None:
        try:
            self.q.put_nowait(None)
        except Exception:
            pass


class SimCardFeed:
    """Tells the simulated card (sattui.vendors.sim) when this trainer computes.

    Line-buffered appends of a few bytes per step: cheap next to any step, and each
    line reaches the file whole, so the reader sees complete lines or a torn tail.
    """

    def __init__(self, path: str, model: nn.Module, batch: int, dim: int) -> None:
        self.f = open(path, "a", buffering=1)
        params = sum(p.numel() * p.element_size() for p in model.parameters())
        widths = sum(m.out_features for m in model.modules() if isinstance(m, nn.Linear))
        # weights + gradients, one batch of inputs, and the activations kept for backward
        mem = 2 * params + batch * dim * 4 + 2 * batch * widths * 4
        self.f.write(f"pid {os.getpid()}\nmem {mem}\n")

    def begin(self) -> None:
        self.f.write(f"b {time.monotonic():.6f}\n")

    def end(self) -> None:
        self.f.write(f"e {time.monotonic():.6f}\n")

    def close(self) -> None:
        self.f.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m sattui.demo.trainer", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default="input_bound")
    p.add_argument("--seconds", type=float, default=30.0, help="train this long, then exit 0")
    p.add_argument("--workers", type=int, default=None, help="override num_workers")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--start-method", choices=["fork", "spawn", "forkserver"], default=None)
    p.add_argument("--pin-memory", action="store_true",
                   help="pin_memory=True (torch starts pt_data_pin; without an accelerator a CPU stand-in "
                        "thread of that name runs instead, see CpuPinStage)")
    p.add_argument("--persistent-workers", action="store_true")
    p.add_argument("--epoch-items", type=int, default=None,
                   help="dataset length (one epoch; default 4096, or the scenario's own)")
    p.add_argument("--extra-threads", type=int, default=0, help="extra idle threads")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--truth", default=None, help="append per-second truth JSON lines here")
    p.add_argument("--steps-file", default=None, help="write steps/s at exit here (benchmarks)")
    p.add_argument("--step-times", default=None, metavar="FILE",
                   help="append the time.monotonic() of every step's end here, one a line (benchmarks)")
    p.add_argument("--sim-card", default=None, metavar="FILE",
                   help="append compute intervals here for sattui's simulated card (sattui demo)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workers, busy_ms, sleep_ms, width, depth = SCENARIOS[args.scenario]
    if args.workers is not None:
        workers = args.workers
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(0)
    dim = 128
    shard_items, shard_ms = SHARDS.get(args.scenario, (0, 0.0))
    init_ms, scenario_items = SLOW_START.get(args.scenario, (0.0, 4096))
    epoch_items = args.epoch_items if args.epoch_items is not None else scenario_items
    ds = SyntheticDataset(epoch_items, dim, busy_ms, sleep_ms, shard_items, shard_ms)
    has_accel = torch.accelerator.is_available()
    loader_kw: dict = dict(batch_size=args.batch, shuffle=True, num_workers=workers,
                           pin_memory=args.pin_memory and has_accel)
    if workers > 0:
        loader_kw["persistent_workers"] = args.persistent_workers
        if args.start_method:
            loader_kw["multiprocessing_context"] = args.start_method
        if init_ms:
            loader_kw["worker_init_fn"] = functools.partial(_slow_worker_init, init_ms / 1000.0)
    loader = DataLoader(ds, **loader_kw)
    pin_stage = None
    if args.pin_memory and workers > 0 and not has_accel:
        pin_stage = CpuPinStage()
    model = make_model(dim, width, depth)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    stop = threading.Event()
    _idle_threads(args.extra_threads, stop)

    truth = open(args.truth, "a", buffering=1) if args.truth else None
    # Line-buffered: a reader sees every step at once; one small write per step costs the
    # same with and without sattui attached (bench/overhead.py compares the two).
    step_times = open(args.step_times, "a", buffering=1) if args.step_times else None
    sim = SimCardFeed(args.sim_card, model, args.batch, dim) if args.sim_card else None
    wait_s = 0.0
    steps = 0
    # each later epoch's start: from iter(loader) (which starts its new workers, without
    # persistent_workers) to its first batch
    restarts, restart_s = 0, 0.0
    epochs = 0
    t_start = time.perf_counter()
    deadline = t_start + args.seconds
    next_truth = 0.0
    print(f"trainer pid {os.getpid()} scenario {args.scenario} workers {workers}", flush=True)
    try:
        while time.perf_counter() < deadline:
            t_iter = time.perf_counter()
            it = iter(loader)
            first = True
            while True:
                t0 = time.perf_counter()
                try:
                    x, y = next(it)
                except StopIteration:
                    wait_s += time.perf_counter() - t0
                    break
                t1 = time.perf_counter()
                wait_s += t1 - t0
                if first and epochs and workers > 0 and not args.persistent_workers:
                    restarts += 1
                    restart_s += t1 - t_iter
                first = False
                if pin_stage is not None:
                    pin_stage.offer((x, y))
                if sim is not None:
                    sim.begin()
                opt.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
                if sim is not None:
                    sim.end()
                steps += 1
                if step_times is not None:
                    step_times.write(f"{time.monotonic():.6f}\n")
                now = time.perf_counter()
                if truth is not None and now >= next_truth:
                    truth.write(json.dumps({"wall": time.time(), "wait_s": wait_s, "elapsed_s": now - t_start,
                                            "steps": steps, "restarts": restarts,
                                            "restart_s": restart_s}) + "\n")
                    next_truth = now + 1.0
                if now >= deadline:
                    break
            epochs += 1
    finally:
        stop.set()
        if step_times is not None:
            step_times.close()
        if sim is not None:
            sim.close()
        if pin_stage is not None:
            pin_stage.close()
        elapsed = time.perf_counter() - t_start
        if truth is not None:
            truth.write(json.dumps({"wall": time.time(), "wait_s": wait_s, "elapsed_s": elapsed,
                                    "steps": steps, "restarts": restarts, "restart_s": restart_s,
                                    "final": True}) + "\n")
            truth.close()
        if args.steps_file:
            with open(args.steps_file, "w") as f:
                json.dump({"steps": steps, "elapsed_s": elapsed, "steps_per_s": steps / elapsed}, f)
    print(f"trainer done: {steps} steps in {elapsed:.1f} s, data wait {wait_s / max(elapsed, 1e-9):.2f}",
          flush=True)
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        # Ctrl-C, or `sattui record -- CMD` ending first: stop quietly.
        print("trainer interrupted", flush=True)
        raise SystemExit(130) from None
