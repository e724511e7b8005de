"""The example trainer with a periodic, synchronous checkpoint (the rule catalogue's scenario S10, tests/e2e).

Run it as ``python -m sattui.demo.ckpt_trainer --every-s 6``. It is the loop of
``sattui.demo.trainer``'s ``compute_bound`` scenario (one cheap DataLoader worker, an
MLP of width 2048 and depth 4) that stops every N steps (``--every-steps``) or every S
seconds (``--every-s``) to ``torch.save({"model": state_dict, "blob": ...})`` into a
file and ``os.fsync`` it: the training loop stands still while the bytes are written.
``--small-tensors N`` adds N small tensors (optimizer state of a many-layer model),
which makes the save CPU-bound and so about equally long on any disk.

With ``--truth FILE`` it appends, about once a second, the wall clock and cumulative
seconds spent in ``next(loader)`` (``wait_s``) and in checkpointing (``ckpt_s``:
torch.save + fsync, ``save_s``: torch.save alone, the part a stack sampler can name),
plus one ``{"event": "ckpt", "wall", "dur_s", "save_s"}`` line per checkpoint, so a
test can compare the period, the stall length and the lost share with sattui's.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import torch
from torch import nn
from torch.utils.data import DataLoader

from sattui.demo.trainer import SyntheticDataset, make_model


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m sattui.demo.ckpt_trainer", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=60.0, help="train this long, then exit 0")
    every = p.add_mutually_exclusive_group()
    every.add_argument("--every-steps", type=int, default=None, help="checkpoint every N steps")
    every.add_argument("--every-s", type=float, default=None,
                       help="checkpoint every S seconds of training (default 6; a step count gives a period "
                            "that depends on the machine's speed)")
    p.add_argument("--blob-floats", type=int, default=40_000_000,
                   help="float32 values of extra payload per checkpoint (40M = 160 MB; optimizer state "
                        "and EMA weights make real checkpoints this much bigger than the model)")
    p.add_argument("--small-tensors", type=int, default=0,
                   help="also save this many 1000-float tensors (per-parameter optimizer state of a model "
                        "with many layers): serialising each costs CPU, so the save lasts about as long on a "
                        "fast disk as on a slow one (30000 ≈ 1.3 s on a 2-core CI box)")
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--dir", default=None, help="where to write the checkpoint (default: a temporary dir)")
    p.add_argument("--truth", default=None, help="append truth JSON lines here")
    return p.parse_args(argv)


def save_checkpoint(model: nn.Module, blob: torch.Tensor, small: list[torch.Tensor],
                    path: str) -> tuple[float, float]:
    """Write one checkpoint durably; returns (seconds in torch.save, seconds in all)."""
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        torch.save({"model": model.state_dict(), "blob": blob, "optim": small}, f)
        t1 = time.perf_counter()
        f.flush()
        os.fsync(f.fileno())
    return t1 - t0, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    every_s = args.every_s if args.every_s is not None or args.every_steps is not None else 6.0
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dim = 128
    ds = SyntheticDataset(4096, dim, 0.0, 0.0)
    loader = DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=args.workers)
    model = make_model(dim, args.width, args.depth)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    # Generated once: drawing 40M normals costs ~0.5 s of CPU in the caller's frame,
    # which is neither saving nor training and would blur the truth.
    blob = torch.randn(args.blob_floats)
    small = [torch.randn(1000) for _ in range(args.small_tensors)]
    tmpdir: str | None = None
    if args.dir is None:
        tmpdir = tempfile.mkdtemp(prefix="sattui-ckpt-")
    path = os.path.join(str(args.dir or tmpdir), f"ckpt-{os.getpid()}.pt")

    truth = open(args.truth, "a", buffering=1) if args.truth else None
    wait_s = ckpt_s = save_s = 0.0
    steps = ckpts = 0
    t_start = time.perf_counter()
    deadline = t_start + args.seconds
    next_truth = 0.0
    next_ckpt = t_start + every_s if every_s is not None else None

    def write_truth(now: float, **extra) -> None:
        if truth is not None:
            truth.write(json.dumps({"wall": time.time(), "wait_s": wait_s, "ckpt_s": ckpt_s, "save_s": save_s,
                                    "ckpts": ckpts, "elapsed_s": now - t_start, "steps": steps, **extra}) + "\n")

    print(f"ckpt trainer pid {os.getpid()} every {every_s or args.every_steps} {'s' if every_s else 'steps'}",
          flush=True)
    try:
        while time.perf_counter() < deadline:
            it = iter(loader)
            while True:
                t0 = time.perf_counter()
                try:
                    x, y = next(it)
                except StopIteration:
                    wait_s += time.perf_counter() - t0
                    break
                wait_s += time.perf_counter() - t0
                opt.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
                steps += 1
                now = time.perf_counter()
                due = (now >= next_ckpt) if next_ckpt is not None else steps % args.every_steps == 0
                if due:
                    wall = time.time()
                    s, d = save_checkpoint(model, blob, small, path)
                    ckpts += 1
                    ckpt_s += d
                    save_s += s
                    if truth is not None:
                        truth.write(json.dumps({"event": "ckpt", "wall": wall, "dur_s": d, "save_s": s}) + "\n")
                    now = time.perf_counter()
                    if next_ckpt is not None:
                        next_ckpt = now + every_s
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
        for p in (path,):
            try:
                os.unlink(p)
            except OSError:
                pass
        if tmpdir is not None:
            try:
                os.rmdir(tmpdir)
            except OSError:
                pass
    print(f"ckpt trainer done: {steps} steps, {ckpts} checkpoints in {elapsed:.1f} s, "
          f"checkpointing {ckpt_s / max(elapsed, 1e-9):.2f} of the time", flush=True)
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        print("ckpt trainer interrupted", flush=True)
        raise SystemExit(130) from None
