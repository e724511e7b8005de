"""One small CPU training job per framework idiom (docs/states.md "Frameworks", tests).

    python -m sattui.demo.framework_trainer --idiom IDIOM [--ranks N] [--steps N] [--ready FILE]

IDIOM:

``plain``       ``zero_grad(); loss = f(model(x)); loss.backward(); opt.step()``
``lbfgs``       ``torch.optim.LBFGS``: forward and backward run inside ``opt.step(closure)``
``accelerate``  Hugging Face Accelerate: ``accelerator.prepare`` / ``accelerator.backward``
``lightning``   PyTorch Lightning's automatic optimization: ``training_step`` and
                ``backward()`` run inside ``optimizer.step(closure)``
``hf``          Hugging Face ``transformers.Trainer`` (``training_step`` → ``compute_loss``
                → the model; ``accelerator.backward``; ``optimizer.step()`` outside any
                closure); ``--eval-steps N`` evaluates every N steps (``evaluation_loop``),
                ``--save-steps N`` saves a checkpoint every N (``_save_checkpoint``)

``--ranks N`` (N > 1) trains N gloo ranks on CPU. ``plain`` and ``lbfgs`` start them with
``torch.multiprocessing.spawn`` (every rank a child of this process, which only waits);
``lightning`` with its own launcher, ``--strategy ddp`` (this process is rank 0 and re-runs
its own command line for ranks 1.., with ``LOCAL_RANK`` in their environment) or
``ddp_spawn`` (``torch.multiprocessing`` spawn, like ``plain``). Every rank runs the same
number of steps: ``--steps``, or for ``plain`` and ``lbfgs`` with ``--seconds`` as many as
the first rank past its deadline has run (the ranks agree on it at every step with an
all-reduce of a stop flag, so their collectives stay in step).

``--ready FILE``: rank 0 writes its pid there once it is past its first steps (the
fixture capture and the e2e tests wait for it). ``--num-workers`` gives each rank that
many DataLoader workers (forked), so the tests see ranks and workers side by side.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

IDIOMS = ("plain", "lbfgs", "accelerate", "lightning", "hf")
DIM = 128
READY_AFTER_STEPS = 5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m sattui.demo.framework_trainer", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--idiom", choices=IDIOMS, default="plain")
    p.add_argument("--ranks", type=int, default=1, help="gloo ranks on CPU (default 1: no process group)")
    p.add_argument("--strategy", choices=("ddp", "ddp_spawn"), default="ddp",
                   help="Lightning's launcher with --ranks > 1")
    p.add_argument("--steps", type=int, default=200, help="optimizer steps per rank")
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--num-workers", type=int, default=0, help="DataLoader workers per rank")
    p.add_argument("--port", type=int, default=29561, help="gloo rendezvous port (mp.spawn)")
    p.add_argument("--sample-cost-ms", type=float, default=0.0,
                   help="hf: CPU time each DataLoader worker spends per sample (a real loader's decode)")
    p.add_argument("--eval-steps", type=int, default=0,
                   help="hf: evaluate every N optimizer steps (0: never)")
    p.add_argument("--save-steps", type=int, default=0,
                   help="hf: save a checkpoint every N optimizer steps into a temp dir (0: never)")
    p.add_argument("--seconds", type=float, default=None,
                   help="hf, plain, lbfgs: stop this many seconds after the first step (or at --steps, "
                        "if first)")
    p.add_argument("--ready", default=None, metavar="FILE", help="rank 0 writes its pid here when stepping")
    return p.parse_args(argv)


def make_model(width: int, depth: int) -> nn.Module:
    layers: list[nn.Module] = [nn.Linear(DIM, width), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, 10))
    return nn.Sequential(*layers)


def make_loader(args: argparse.Namespace, rank: int) -> DataLoader:
    g = torch.Generator().manual_seed(rank)
    n = args.batch * 64
    ds = TensorDataset(torch.randn(n, DIM, generator=g), torch.randint(0, 10, (n,), generator=g))
    return DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=args.num_workers,
                      persistent_workers=args.num_workers > 0, drop_last=True)


def batches(loader: DataLoader, steps: int) -> Any:
    done = 0
    while True:
        for xy in loader:
            if done >= steps:
                return
            yield xy
            done += 1


class Ready:
    """Rank 0 says (once) that it is past its first steps: one-off work is over."""

    def __init__(self, path: str | None, rank: int) -> None:
        self.path = path if rank == 0 else None
        self.steps = 0

    def step(self) -> None:
        self.steps += 1
        if self.path is not None and self.steps == READY_AFTER_STEPS:
            with open(self.path, "w") as f:
                f.write(f"{os.getpid()}\n")


# --------------------------------------------------------------------------- plain / lbfgs


def make_closure(opt: torch.optim.Optimizer, net: nn.Module, loss_fn: nn.Module,
                 x: torch.Tensor, y: torch.Tensor) -> Callable[[], float]:
    def closure() -> float:
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        return float(loss)

    return closure


def train_loop(rank: int, args: argparse.Namespace) -> None:
    world = args.ranks
    torch.set_num_threads(1)  # ranks share two cores with sattui and py-spy
    if world > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    net: nn.Module = make_model(args.width, args.depth)
    if world > 1:
        net = nn.parallel.DistributedDataParallel(net)
    loss_fn = nn.CrossEntropyLoss()
    ready = Ready(args.ready, rank)
    if args.idiom == "lbfgs":
        opt: torch.optim.Optimizer = torch.optim.LBFGS(net.parameters(), lr=0.1, max_iter=4,
                                                       history_size=4)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    deadline = None
    for x, y in batches(make_loader(args, rank), args.steps):
        if args.idiom == "lbfgs":
            opt.step(make_closure(opt, net, loss_fn, x, y))
        else:
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
        ready.step()
        if args.seconds is not None:
            if deadline is None:
                deadline = time.monotonic() + args.seconds
            if stop_agreed(time.monotonic() >= deadline, world):
                break
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


def stop_agreed(mine: bool, world: int) -> bool:
    """Whether any rank wants to stop after this step: every rank asks at every step, so
    all leave the loop after the same step (a rank left alone in a collective would hang)."""
    if world == 1:
        return mine
    flag = torch.tensor([1 if mine else 0], dtype=torch.int32)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


# --------------------------------------------------------------------------- accelerate


def train_accelerate(args: argparse.Namespace) -> None:
    from accelerate import Accelerator  # type: ignore[import-untyped]

    torch.set_num_threads(1)
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = make_model(args.width, args.depth)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model, opt, loader = accelerator.prepare(model, opt, make_loader(args, 0))
    loss_fn = nn.CrossEntropyLoss()
    ready = Ready(args.ready, accelerator.process_index)
    for x, y in batches(loader, args.steps):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        accelerator.backward(loss)
        opt.step()
        ready.step()


# --------------------------------------------------------------------------- lightning


def train_lightning(args: argparse.Namespace) -> None:
    import lightning as L

    torch.set_num_threads(1)

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = make_model(args.width, args.depth)
            self.loss_fn = nn.CrossEntropyLoss()

        def training_step(self, batch: Any, _idx: int) -> torch.Tensor:
            x, y = batch
            return self.loss_fn(self.net(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)

    class ReadyCallback(L.Callback):
        def __init__(self) -> None:
            self.ready: Ready | None = None

        def on_train_batch_end(self, trainer: Any, *_a: Any) -> None:
            if self.ready is None:
                self.ready = Ready(args.ready, trainer.global_rank)
            self.ready.step()

    torch.manual_seed(0)
    ranks = args.ranks
    trainer = L.Trainer(accelerator="cpu", devices=ranks,
                        strategy=args.strategy if ranks > 1 else "auto",
                        max_steps=args.steps, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, callbacks=[ReadyCallback()])
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    trainer.fit(Module(), make_loader(args, rank))


# --------------------------------------------------------------------------- hugging face


def train_hf(args: argparse.Namespace) -> None:
    """``transformers.Trainer`` on a model built here (no hub download: none is reachable)."""
    import shutil
    import signal
    import tempfile
    import time

    from torch.utils.data import Dataset
    from transformers import Trainer, TrainerCallback, TrainingArguments

    torch.set_num_threads(1)

    class Net(nn.Module):
        # Trainer calls model(**batch) and reads outputs["loss"] when labels are present
        def __init__(self) -> None:
            super().__init__()
            self.net = make_model(args.width, args.depth)
            self.loss_fn = nn.CrossEntropyLoss()

        def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
            logits = self.net(x)
            return {"loss": self.loss_fn(logits, labels), "logits": logits}

    class Samples(Dataset):
        def __init__(self, n: int, seed: int) -> None:
            g = torch.Generator().manual_seed(seed)
            self.x = torch.randn(n, DIM, generator=g)
            self.y = torch.randint(0, 10, (n,), generator=g)

        def __len__(self) -> int:
            return len(self.x)

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            # busy, not asleep: a worker decoding a sample uses CPU
            t_end = time.perf_counter() + args.sample_cost_ms / 1000.0
            while time.perf_counter() < t_end:
                pass
            return {"x": self.x[i], "labels": self.y[i]}

    train_s = args.seconds  # on_step_end's own "args" are the TrainingArguments

    class StepCallback(TrainerCallback):
        """Writes --ready after the first steps; ends training after --seconds."""

        def __init__(self) -> None:
            self.ready = Ready(args.ready, 0)
            self.first_step_t: float | None = None

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.ready.step()
            now = time.monotonic()
            if self.first_step_t is None:
                self.first_step_t = now
            # one process, no collectives to keep in step: a time bound gives the tests the
            # same seconds of training whatever the box's load makes of the step rate
            if train_s is not None and now - self.first_step_t >= train_s:
                control.should_training_stop = True

    torch.manual_seed(0)
    evaluating = args.eval_steps > 0
    saving = args.save_steps > 0
    out_dir = tempfile.mkdtemp(prefix="sattui_hf_")
    # the tests and the fixture capture end this job with SIGTERM: unwind, so the
    # checkpoints in out_dir go with it
    signal.signal(signal.SIGTERM, lambda *_a: sys.exit(143))
    try:
        targs = TrainingArguments(
            output_dir=out_dir, use_cpu=True, report_to="none", disable_tqdm=True,
            max_steps=args.steps, per_device_train_batch_size=args.batch,
            per_device_eval_batch_size=args.batch, learning_rate=0.01,
            logging_strategy="no",
            save_strategy="steps" if saving else "no", save_steps=args.save_steps if saving else 500,
            save_total_limit=1,
            eval_strategy="steps" if evaluating else "no",
            eval_steps=args.eval_steps if evaluating else None,
            dataloader_num_workers=args.num_workers, dataloader_persistent_workers=args.num_workers > 0,
            dataloader_drop_last=True, seed=0)
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        trainer = Trainer(model=model, args=targs, train_dataset=Samples(args.batch * 64, 0),
                          eval_dataset=Samples(args.batch * 4, 1) if evaluating else None,
                          optimizers=(opt, None), callbacks=[StepCallback()])
        trainer.train()
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.idiom == "lightning":
        train_lightning(args)
    elif args.idiom == "accelerate":
        train_accelerate(args)
    elif args.idiom == "hf":
        train_hf(args)
    elif args.ranks > 1:
        mp.spawn(train_loop, args=(args,), nprocs=args.ranks)
    else:
        train_loop(0, args)
    return 0


if __name__ == "__main__":
    code = main()
    # torch 2.13's gloo aborts in interpreter finalization now and then (see ddp_trainer.py)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
