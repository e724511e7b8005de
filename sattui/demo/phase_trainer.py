"""A trainer that times every phase of its own loop: the truth the ledger is checked against.

Run it as ``python -m sattui.demo.phase_trainer --eval-every 40``. It is the loop of
``sattui.demo.trainer`` (a synthetic Dataset, an MLP, SGD) with the knobs that make the
conditions sattui must tell apart (issue 10's scenarios):

* ``--eval-every N``: an evaluation pass (``evaluate``, under ``torch.inference_mode``,
  ``--eval-batches`` batches) every N training steps;
* ``--epoch-items`` small and no ``--persistent-workers``: the DataLoader ends its
  workers at every epoch's end and starts new ones for the next; ``--worker-init-ms``
  is the CPU each new worker spends before its first item (a ``worker_init_fn`` that
  opens the dataset's shards, builds an index …);
* ``--leak-kb``: every item a worker serves leaves that many KiB behind in the worker
  (a per-worker cache of decoded samples that is never read again);
* ``--busy-ms``: the CPU one item costs in a worker;
* ``--change-after-s S --then-busy-ms MS``: a change of phase S seconds after the start
  (from then on each item costs MS more: a healthy loop turns input-bound).

With ``--truth FILE`` it appends, about once a second, a JSON line of cumulative
seconds since the loop began (``elapsed_s``; ``wall`` is ``time.time()``, ``mono``
``time.monotonic()``, the clock of ``--step-times``):

``wait_s``        in the DataLoader: ``iter(loader)``, every ``next()``, the epoch's end
``restart_s``     the part of ``wait_s`` from an epoch's last batch to the next epoch's
                  first (workers shut down, new ones started and initialised), after the
                  first epoch
``fwd_s``, ``bwd_s``, ``opt_s``  forward, ``loss.backward()``, ``zero_grad`` + ``step``
``step_cpu_s``    the main thread's own CPU (``time.thread_time``) in those three: with
                  ``fwd_s + bwd_s + opt_s`` it says how long the step waited for a CPU
``eval_s``        in ``evaluate``
``steps``, ``epochs``, ``items``; ``kept_bytes``: what the workers keep (``--leak-kb``)

The last line has ``"final": true``. ``--step-times FILE`` appends the
``time.monotonic()`` at which each step began (its batch in hand), one a line.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader

from sattui.demo.trainer import SyntheticDataset, make_model


class LeakyDataset(SyntheticDataset):
    """Every item served leaves ``leak_bytes`` behind in the worker that served it."""

    def __init__(self, *a, leak_bytes: int = 0, then_busy_ms: float = 0.0, change_at: float | None = None,
                 **kw) -> None:
        super().__init__(*a, **kw)
        self.leak_bytes = leak_bytes
        self.kept: list[bytearray] = []  # per worker process: each has its own copy
        # a change of phase: from wall time change_at on, each item costs then_busy_ms more
        self.then_busy_s, self.change_at = then_busy_ms / 1000.0, change_at

    def __getitem__(self, i: int):
        if self.change_at is not None and time.time() >= self.change_at:
            _busy(self.then_busy_s)
        if self.leak_bytes:
            buf = bytearray(self.leak_bytes)
            buf[::4096] = b"\x01" * len(range(0, self.leak_bytes, 4096))  # every page written: resident
            self.kept.append(buf)
        return super().__getitem__(i)


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class WorkerInit:
    """A ``worker_init_fn`` that costs ``ms`` of CPU (picklable for any start method)."""

    def __init__(self, ms: float) -> None:
        self.s = ms / 1000.0

    def __call__(self, _worker_id: int) -> None:
        _busy(self.s)


def evaluate(model: nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """The evaluation pass: the named function sattui's classifier calls ``eval``."""
    correct = 0
    with torch.inference_mode():
        for x, y in batches:
            correct += int((model(x).argmax(1) == y).sum())
    return correct / max(1, sum(len(y) for _, y in batches))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m sattui.demo.phase_trainer", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=30.0, help="train this long, then exit 0")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--busy-ms", type=float, default=0.0, help="CPU per item in a worker")
    p.add_argument("--epoch-items", type=int, default=65536, help="dataset length (one epoch)")
    p.add_argument("--persistent-workers", action="store_true")
    p.add_argument("--worker-init-ms", type=float, default=0.0, help="CPU each new worker spends before its first item")
    p.add_argument("--leak-kb", type=float, default=0.0, help="KiB each item leaves behind in its worker")
    p.add_argument("--change-after-s", type=float, default=None,
                   help="a change of phase: after this many seconds each item costs --then-busy-ms more")
    p.add_argument("--then-busy-ms", type=float, default=0.0)
    p.add_argument("--eval-every", type=int, default=0, help="an evaluation pass every N steps (0: none)")
    p.add_argument("--eval-batches", type=int, default=20)
    p.add_argument("--eval-batch", type=int, default=512)
    p.add_argument("--truth", default=None, help="append per-second truth JSON lines here")
    p.add_argument("--step-times", default=None, metavar="FILE", help="append each step's start (monotonic) here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dim = 128
    ds = LeakyDataset(args.epoch_items, dim, args.busy_ms, 0.0, leak_bytes=int(args.leak_kb * 1024),
                      then_busy_ms=args.then_busy_ms,
                      change_at=None if args.change_after_s is None else time.time() + args.change_after_s)
    kw: dict = dict(batch_size=args.batch, shuffle=True, num_workers=args.workers)
    if args.workers > 0:
        kw["persistent_workers"] = args.persistent_workers
        if args.worker_init_ms > 0:
            kw["worker_init_fn"] = WorkerInit(args.worker_init_ms)
    loader = DataLoader(ds, **kw)
    model = make_model(dim, args.width, args.depth)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    held_out = [(torch.randn(args.eval_batch, dim, generator=g), torch.randint(0, 10, (args.eval_batch,), generator=g))
                for _ in range(args.eval_batches)] if args.eval_every else []

    truth = open(args.truth, "a", buffering=1) if args.truth else None
    step_times = open(args.step_times, "a", buffering=1) if args.step_times else None
    acc = dict.fromkeys(("wait_s", "restart_s", "fwd_s", "bwd_s", "opt_s", "step_cpu_s", "eval_s"), 0.0)
    steps = epochs = items = 0
    t_start = time.perf_counter()
    deadline = t_start + args.seconds
    next_truth = 0.0

    def write_truth(now: float, **extra) -> None:
        if truth is not None:
            truth.write(json.dumps({"wall": time.time(), "mono": time.monotonic(), "elapsed_s": now - t_start,
                                    **acc, "steps": steps,
                                    "epochs": epochs, "items": items,
                                    "kept_bytes": items * ds.leak_bytes, **extra}) + "\n")

    print(f"phase trainer pid {os.getpid()} workers {args.workers} eval every {args.eval_every}", flush=True)
    restart_from: float | None = None  # an epoch's end: the restart runs until the next first batch
    try:
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            it = iter(loader)
            acc["wait_s"] += time.perf_counter() - t0
            first = True
            while True:
                t0 = time.perf_counter()
                try:
                    x, y = next(it)
                except StopIteration:
                    t1 = time.perf_counter()
                    acc["wait_s"] += t1 - t0
                    restart_from = t0
                    epochs += 1
                    break
                t1 = time.perf_counter()
                acc["wait_s"] += t1 - t0
                if first and restart_from is not None:
                    acc["restart_s"] += t1 - restart_from
                first = False
                if step_times is not None:
                    step_times.write(f"{time.monotonic():.6f}\n")
                c0 = time.thread_time()
                opt.zero_grad()
                loss = loss_fn(model(x), y)
                t2 = time.perf_counter()
                loss.backward()
                t3 = time.perf_counter()
                opt.step()
                # the CPU clock first: a thread preempted on its way out of that syscall
                # waited for a CPU inside the step, and the wall clock after it says so
                acc["step_cpu_s"] += time.thread_time() - c0
                t4 = time.perf_counter()
                acc["fwd_s"] += t2 - t1
                acc["bwd_s"] += t3 - t2
                acc["opt_s"] += t4 - t3
                steps += 1
                items += len(y)
                now = t4
                if ds.change_at is not None and time.time() >= ds.change_at:
                    print("phase change", flush=True)  # the moment a bench times the answer from
                    ds.change_at = None  # the main process's copy only: the workers' keep theirs
                if args.eval_every and steps % args.eval_every == 0:
                    evaluate(model, held_out)
                    now = time.perf_counter()
                    acc["eval_s"] += now - t4
                if now >= next_truth:
                    write_truth(now)
                    next_truth = now + 1.0
                if now >= deadline:
                    break
    finally:
        elapsed = time.perf_counter() - t_start
        write_truth(time.perf_counter(), final=True)
        if truth is not None:
            truth.close()
        if step_times is not None:
            step_times.close()
    print(f"phase trainer done: {steps} steps, {epochs} epochs in {elapsed:.1f} s; "
          + ", ".join(f"{k} {v / max(elapsed, 1e-9):.2f}" for k, v in acc.items()), flush=True)
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        print("phase trainer interrupted", flush=True)
        raise SystemExit(130) from None
