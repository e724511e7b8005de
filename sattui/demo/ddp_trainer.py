"""A data-parallel CPU job with one slow rank (the rule catalogue's scenario S13a, tests/e2e).

Run it under torchrun, which sets RANK / LOCAL_RANK / WORLD_SIZE (sattui finds the
ranks by them)::

    torchrun --standalone --nproc_per_node=2 -m sattui.demo.ddp_trainer --steps 250

Every rank trains the same small MLP on its own synthetic batches over gloo. By default
it averages the gradients with an explicit ``dist.all_reduce`` per parameter after
``backward()``; the straggler rank (``--slow-rank``, default 1) sleeps ``--sleep-s``
(0.1 s) in every step, so the other ranks wait for it inside ``all_reduce``.

With ``--ddp`` the model is wrapped in ``DistributedDataParallel`` instead: its reducer
all-reduces the gradients in buckets from autograd hooks, so the other ranks wait for the
straggler *inside* ``loss.backward()`` (no collective frame on the main thread: only the
thread's own CPU, idle while it waits, tells the wait from the backward's compute). The
straggler sleeps between its forward and its backward.

The loop runs a FIXED number of steps on every rank: a time-bounded loop desynchronises
the number of collectives and deadlocks.

With ``--truth PREFIX`` each rank appends, about once a second, to ``PREFIX.rankN``:
``{"wall", "mono", "elapsed_s", "steps", "allreduce_s", "sleep_s", "fwd_s", "bwd_s",
"bwd_wait_s", "opt_s", "rank"}``: cumulative seconds inside the explicit all_reduce, the
deliberate sleep, forward, ``loss.backward()``, the part of ``backward()`` after the last
gradient was computed (DDP's wait for the other ranks' gradients; ``--ddp`` only), and the
optimizer. ``--step-times FILE`` appends each rank's step starts (``time.monotonic()``)
to ``FILE.rankN``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import nn

from sattui.demo.trainer import SyntheticDataset, make_model


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m sattui.demo.ddp_trainer", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=250, help="steps per rank (identical on all ranks)")
    p.add_argument("--slow-rank", type=int, default=1)
    p.add_argument("--sleep-s", type=float, default=0.1, help="extra time the slow rank spends per step")
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--ddp", action="store_true",
                   help="wrap the model in DistributedDataParallel (the all-reduce runs inside backward())")
    p.add_argument("--truth", default=None, help="append per-rank truth lines to PREFIX.rankN")
    p.add_argument("--step-times", default=None, metavar="PREFIX", help="append step starts to PREFIX.rankN")
    return p.parse_args(argv)


class GradsDone:
    """When the last gradient of a ``backward()`` was accumulated: what follows inside
    ``backward()`` is DDP's reducer waiting for the buckets' all-reduce (the other ranks)."""

    def __init__(self, params: Sequence[torch.Tensor]) -> None:
        self.t = 0.0
        for p in params:
            p.register_post_accumulate_grad_hook(self._hook)

    def _hook(self, _p: torch.Tensor) -> None:
        self.t = time.perf_counter()


def slow_down(seconds: float) -> None:
    # The straggler's own bottleneck, a stand-in for slower data, a hotter card, or
    # rank-0-only logging: time the other ranks spend waiting in all_reduce.
    time.sleep(seconds)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if "RANK" not in os.environ:
        raise SystemExit("run me under torchrun (RANK/WORLD_SIZE unset)")
    torch.set_num_threads(1)  # two ranks share two cores with sattui and py-spy
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # same initial weights on every rank, as DDP's broadcast would give
    dim = 128
    ds = SyntheticDataset(4096, dim, 0.0, 0.0)
    model = make_model(dim, args.width, args.depth)
    params = [p for p in model.parameters() if p.requires_grad]
    grads_done = GradsDone(params)
    net: nn.Module = model
    if args.ddp:
        from torch.nn.parallel import DistributedDataParallel

        net = DistributedDataParallel(model)
    opt = torch.optim.SGD(params, lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(rank)  # every rank sees its own shard of batches

    truth = open(f"{args.truth}.rank{rank}", "a", buffering=1) if args.truth else None
    step_times = open(f"{args.step_times}.rank{rank}", "a", buffering=1) if args.step_times else None
    allreduce_s = sleep_s = 0.0
    ph = dict.fromkeys(("fwd_s", "bwd_s", "bwd_wait_s", "opt_s"), 0.0)
    t_start = time.perf_counter()
    next_truth = 0.0

    def write_truth(steps: int, **extra) -> None:
        if truth is not None:
            truth.write(json.dumps({"wall": time.time(), "mono": time.monotonic(),
                                    "elapsed_s": time.perf_counter() - t_start,
                                    "steps": steps, "allreduce_s": allreduce_s, "sleep_s": sleep_s,
                                    **ph, "rank": rank, **extra}) + "\n")

    print(f"ddp rank {rank}/{world} pid {os.getpid()} steps {args.steps}", flush=True)
    try:
        for step in range(args.steps):
            idx = torch.randint(0, len(ds), (args.batch,), generator=g)
            x, y = ds.x[idx], ds.y[idx]
            if step_times is not None:
                step_times.write(f"{time.monotonic():.6f}\n")
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            ph["fwd_s"] += time.perf_counter() - t0
            if args.ddp and rank == args.slow_rank:
                t0 = time.perf_counter()
                slow_down(args.sleep_s)
                sleep_s += time.perf_counter() - t0
            t0 = time.perf_counter()
            loss.backward()
            t1 = time.perf_counter()
            ph["bwd_s"] += t1 - t0
            if args.ddp:
                ph["bwd_wait_s"] += max(0.0, t1 - grads_done.t)
            else:
                if rank == args.slow_rank:
                    t0 = time.perf_counter()
                    slow_down(args.sleep_s)
                    sleep_s += time.perf_counter() - t0
                t0 = time.perf_counter()
                for p in params:
                    grad = p.grad
                    assert grad is not None  # every parameter takes part in the loss
                    dist.all_reduce(grad, op=dist.ReduceOp.SUM)
                    grad /= world
                allreduce_s += time.perf_counter() - t0
            t0 = time.perf_counter()
            opt.step()
            ph["opt_s"] += time.perf_counter() - t0
            now = time.perf_counter()
            if now - t_start >= next_truth:
                write_truth(step + 1)
                next_truth = now - t_start + 1.0
        write_truth(args.steps, final=True)
    finally:
        if truth is not None:
            truth.close()
        if step_times is not None:
            step_times.close()
        dist.barrier()  # no rank tears its sockets down while another still sends
        dist.destroy_process_group()
    elapsed = time.perf_counter() - t_start
    print(f"ddp rank {rank} done: {args.steps} steps in {elapsed:.1f} s, all_reduce "
          f"{allreduce_s / max(elapsed, 1e-9):.2f}, sleep {sleep_s / max(elapsed, 1e-9):.2f}", flush=True)
    return 0


def _exit_without_finalizing(code: int) -> None:
    # torch 2.13's gloo backend aborts (SIGABRT/SIGSEGV in one of its C++ threads) during
    # interpreter finalization in roughly one run in five, after destroy_process_group()
    # and with or without a barrier; reproduced under plain torchrun with no monitor
    # attached. Everything this job writes is closed by now, so skip finalization.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    try:
        code = main()
    except KeyboardInterrupt:
        print("ddp trainer interrupted", flush=True)
        code = 130
    _exit_without_finalizing(code)
