"""sattui.trainer.classifier on real py-spy stacks (tests/fixtures/stacks/) and small synthetic ones.

The fixtures were captured from real PyTorch processes with
``py-spy record --nonblocking --idle --threads -r 50 -d 3 -f raw`` (see the README there);
``meta.json`` keeps the commands, the trainer's in-process truth and the source text of the
user lines, so the line rules replay without the capture scripts' current line numbers.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sattui.frames import is_user_frame, read_source_line
from sattui.model import Frame
from sattui.states import COUNTED_NAMES
from sattui.states import NAMES as STATES
from sattui.trainer.classifier import (
    RULES,
    classify,
    explain,
    parse_collapsed_line,
)

STACKS = Path(__file__).resolve().parent.parent / "fixtures" / "stacks"
META: dict = json.loads((STACKS / "meta.json").read_text())
SP = "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/"
STDLIB = "/root/.pyenv/versions/3.11.7/lib/python3.11/"


# --- fixture helpers -----------------------------------------------------------------------

def main_stacks(name: str) -> list[tuple[tuple[Frame, ...], int]]:
    """(frames innermost-first, count) of every MainThread line of one raw capture."""
    out = []
    for line in (STACKS / f"{name}.txt").read_text().splitlines():
        _tid, thread, frames, count = parse_collapsed_line(line)
        if thread == "MainThread":
            out.append((frames, count))
    assert out, f"{name}: no MainThread samples"
    return out


def replay_lines(name: str) -> Callable[[str, int], str | None]:
    lines: dict[str, str] = META[name].get("lines", {})
    return lambda filename, line: lines.get(f"{filename}:{line}")


def shares(name: str, *, cuda: bool = False) -> dict[str, float]:
    """Share of main-thread samples per state, startup samples left out (CONTRACT.md)."""
    counts: collections.Counter[str] = collections.Counter()
    src = replay_lines(name)
    for frames, n in main_stacks(name):
        counts[classify(frames, source_line=src, cuda=cuda)] += n
    counts.pop("startup", None)
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items()}


def has(frames: tuple[Frame, ...], name: str, file_suffix: str = "") -> bool:
    return any((f.name == name or f.name.endswith("." + name)) and f.filename.endswith(file_suffix)
               for f in frames)


RAW_FIXTURES = sorted(p.stem for p in STACKS.glob("*.txt"))


# --- the table itself ------------------------------------------------------------------------

def test_states_are_the_contract_activities_plus_startup():
    assert STATES == COUNTED_NAMES + ("startup",)


def test_every_rule_is_well_formed():
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    for r in RULES:
        assert r.state in STATES, r.id
        assert r.phase in ("startup", "context", "override", "anchor", "idle"), r.id
        assert r.files or r.names, f"{r.id} would match every frame"


# --- per-fixture shares on real captures ---------------------------------------------------

@pytest.mark.parametrize("name,state,lo,hi", [
    ("input_bound_w1", "data_wait", 0.5, 1.0),
    ("input_bound_w1_pin", "data_wait", 0.5, 1.0),
    ("io_bound_w2", "data_wait", 0.5, 1.0),
    ("inline_w0", "data_inline", 0.5, 1.0),
    ("inline_w0", "data_wait", 0.0, 0.05),
    ("compute_bound", "data_wait", 0.0, 0.15),
    ("compute_bound", "data_inline", 0.0, 0.0),
    ("epoch_respawn", "data_wait", 0.0, 0.2),
    ("epoch_respawn_spawn", "data_wait", 0.4, 1.0),
    ("phase_forward", "forward", 0.9, 1.0),
    ("phase_backward", "backward", 0.9, 1.0),
    ("phase_optimizer", "optimizer", 0.9, 1.0),
    ("phase_zero_grad", "other", 0.9, 1.0),
    ("phase_zero_grad", "backward", 0.0, 0.0),
    ("phase_zero_grad", "compile", 0.0, 0.0),
    ("phase_checkpoint", "checkpoint", 0.9, 1.0),
    ("phase_eval", "eval", 0.9, 1.0),
    ("phase_eval", "data_wait", 0.0, 0.05),  # torn stacks that lost the evaluate frame
    ("phase_sleep", "idle", 0.9, 1.0),
    ("phase_event_wait", "idle", 0.9, 1.0),
    ("phase_logging", "logging", 0.9, 1.0),
    ("phase_compile", "compile", 0.8, 1.0),
    ("phase_compiled_steady", "compile", 0.0, 0.0),
    ("collective_gloo", "collective", 0.9, 1.0),
])
def test_share_per_fixture(name, state, lo, hi):
    got = shares(name).get(state, 0.0)
    assert lo <= got <= hi, f"{name}: {state} share {got:.2f}, all: {shares(name)}"


def test_compute_bound_is_mostly_model_work():
    s = shares("compute_bound")
    assert s.get("forward", 0) + s.get("backward", 0) + s.get("optimizer", 0) > 0.7, s


def test_compiled_model_steady_state_is_forward_and_backward():
    # every call of a compiled module runs through torch/_dynamo/eval_frame.py and
    # torch/_inductor/output_code.py: §2.3's "torch/_dynamo/*, torch/_inductor/*" would
    # call all of it compile
    s = shares("phase_compiled_steady")
    assert s.get("forward", 0) > 0.2 and s.get("backward", 0) > 0.2, s


def test_ddp_wait_hides_under_backward():
    # §2.2: DDP's allreduce wait sits in _engine_run_backward; telling it apart needs the
    # thread state, which classify() is not given
    assert shares("collective_ddp").get("backward", 0) > 0.9


@pytest.mark.parametrize("name", sorted(n for n in META if META[n].get("truth_wait_share")
                                        is not None))
def test_loader_share_matches_in_process_truth(name):
    """The demo trainer timed next(loader) itself over the capture window."""
    s = shares(name)
    got = s.get("data_wait", 0.0) + s.get("data_inline", 0.0)
    truth = META[name]["truth_wait_share"]
    assert abs(got - truth) < 0.15, f"{name}: stacks say {got:.2f}, trainer says {truth:.2f}"


def test_import_phase_is_startup():
    stacks = main_stacks("import_phase")
    n_import = sum(n for frames, n in stacks if any(f.filename.startswith("<frozen importlib")
                                                 for f in frames))
    n_startup = sum(n for frames, n in stacks if classify(frames) == "startup")
    assert n_import > 0.5 * sum(n for _f, n in stacks) and n_startup == n_import


def test_importlib_frame_of_a_loaded_module_is_not_startup():
    # phase_compile caught ModuleSpec.parent (a function-level relative import of a module
    # already loaded) deep inside inductor's compile: that sample is compile, not startup
    stacks = [frames for frames, _n in main_stacks("phase_compile")
              if any(f.filename.startswith("<frozen importlib") for f in frames)]
    assert stacks
    for frames in stacks:
        assert classify(frames) == "compile", [f.name for f in frames]
    leaf_import = fr(*LOOP, "_handle_fromlist@<frozen importlib._bootstrap>:1232")
    assert classify(leaf_import) == "other"


# --- per-stack markers across every real capture -------------------------------------------

def _in_closure(fr: tuple[Frame, ...]) -> bool:
    return (has(fr, "_call_impl", "torch/nn/modules/module.py") or has(fr, "backward", "torch/_tensor.py")
            or has(fr, "zero_grad", "torch/optim/optimizer.py"))


# (what the stack contains, the state it must get); contexts are excluded where they would win
MARKERS: list[tuple[str, Callable[[tuple[Frame, ...]], bool], set[str]]] = [
    ("zero_grad", lambda fr: has(fr, "zero_grad", "torch/optim/optimizer.py"), {"other"}),
    ("Tensor.backward", lambda fr: has(fr, "backward", "torch/_tensor.py"), {"backward"}),
    # optimizer.step(closure) (Lightning, LBFGS): forward, backward, zero_grad inside it win
    ("optimizer step", lambda fr: (has(fr, "step", "optimizer.py") and not _in_closure(fr))
     or has(fr, "_single_tensor_adam") or has(fr, "_single_tensor_sgd"), {"optimizer"}),
    ("loader wait", lambda fr: has(fr, "_try_get_data"), {"data_wait"}),
    ("inline fetch", lambda fr: has(fr, "fetch", "_utils/fetch.py"), {"data_inline"}),
    ("torch.save", lambda fr: has(fr, "save", "torch/serialization.py"), {"checkpoint"}),
    ("evaluate()", lambda fr: has(fr, "evaluate"), {"eval"}),
    ("dynamo convert_frame", lambda fr: has(fr, "ConvertFrame.__call__"), {"compile"}),
    ("all_reduce", lambda fr: has(fr, "all_reduce", "distributed_c10d.py"), {"collective"}),
    ("Module call", lambda fr: has(fr, "_call_impl", "torch/nn/modules/module.py"), {"forward"}),
]


def _context_or_startup(frames: tuple[Frame, ...]) -> bool:
    return any(f.filename.startswith("<frozen importlib") for f in frames) or has(
        frames, "evaluate") or has(frames, "ConvertFrame.__call__")


@pytest.mark.parametrize("name", RAW_FIXTURES)
def test_markers_in_real_stacks(name):
    for frames, _n in main_stacks(name):
        got = classify(frames, source_line=replay_lines(name))
        for label, present, want in MARKERS:
            if not present(frames):
                continue
            if label not in ("evaluate()", "dynamo convert_frame") and _context_or_startup(frames):
                continue
            if label == "Module call" and (has(frames, "backward", "torch/_tensor.py")
                                            or has(frames, "_try_get_data")):
                continue
            assert got in want, f"{name}: {label} stack got {got}: {[f.name for f in frames]}"


def test_zero_grad_stack_passes_through_dynamo_but_is_not_compile():
    # torch 2.13 wraps Optimizer.zero_grad in torch._disable_dynamo: eval_frame.py frames
    # sit right above it in every sample
    for frames, _n in main_stacks("phase_zero_grad"):
        if has(frames, "zero_grad"):
            assert any("torch/_dynamo/eval_frame.py" in f.filename for f in frames)
            assert explain(frames).rule == "other.zero_grad"


# --- framework idioms (real captures: capture.py fw_*; docs/states.md "Frameworks") -------

def _model_work(s: dict[str, float]) -> float:
    return s.get("forward", 0.0) + s.get("backward", 0.0)


@pytest.mark.parametrize("name", ["fw_plain", "fw_accelerate", "fw_lightning", "fw_lightning_ddp", "fw_hf"])
def test_framework_idioms_read_as_forward_and_backward(name):
    # the same MLP, SGD with momentum, in every idiom: the update is ~0.1-0.15 of the step
    # (fw_plain), whoever calls it. Lightning's automatic optimization runs training_step and
    # backward inside optimizer.step(closure): read outermost-first it was 0.84 optimizer.
    s = shares(name)
    assert _model_work(s) > 0.6, s
    assert 0.03 < s.get("optimizer", 0.0) < 0.25, s


def test_lbfgs_closure_is_forward_and_backward():
    # LBFGS calls the closure up to max_iter times per step; its own two-loop recursion
    # over flattened gradients stays optimizer
    s = shares("fw_lbfgs")
    assert s.get("forward", 0.0) > 0.1 and s.get("backward", 0.0) > 0.1, s
    assert s.get("optimizer", 0.0) > 0.3, s


@pytest.mark.parametrize("name", ["fw_lightning", "fw_lightning_ddp", "fw_lbfgs"])
def test_inside_the_closure_the_innermost_phase_wins(name):
    seen = collections.Counter()
    for frames, n in main_stacks(name):
        step = next((i for i, f in enumerate(frames) if f.name.endswith("profile_hook_step.<locals>.wrapper")),
                    None)
        if step is None or _context_or_startup(frames):
            continue
        inner = frames[:step]
        got = classify(frames)
        if has(inner, "_engine_run_backward") and not has(inner, "all_reduce"):
            assert got == "backward", [f.name for f in frames]
            seen["backward"] += n
        elif has(inner, "_call_impl", "torch/nn/modules/module.py") and not has(inner, "backward"):
            assert got == "forward", [f.name for f in frames]
            seen["forward"] += n
        elif any(f.filename.endswith(("torch/optim/sgd.py", "torch/optim/lbfgs.py")) for f in inner[:1]):
            assert got == "optimizer", [f.name for f in frames]  # the update itself
            seen["optimizer"] += n
    assert seen["backward"] and seen["forward"] and seen["optimizer"], seen


def _hf_phase(frames: tuple[Frame, ...]) -> str | None:
    """The phase a transformers.Trainer stack is in, from Trainer's and Accelerate's own frames."""
    if has(frames, "_save_checkpoint", "transformers/trainer.py"):
        return "checkpoint"
    if has(frames, "evaluation_loop", "transformers/trainer.py"):
        return "eval"
    if has(frames, "get_batch_samples", "transformers/trainer.py") and has(frames, "_try_get_data"):
        return "data_wait"  # next(epoch_iterator) on 2 DataLoader workers
    if has(frames, "Accelerator.backward", "accelerate/accelerator.py") and has(frames, "_engine_run_backward"):
        return "backward"
    if has(frames, "compute_loss", "transformers/trainer.py") and has(frames, "_call_impl"):
        return "forward"
    if has(frames, "AcceleratedOptimizer.step", "accelerate/optimizer.py") or has(
            frames, "Accelerator.clip_grad_norm_", "accelerate/accelerator.py"):
        return "optimizer"
    return None


@pytest.mark.parametrize("name,phases", [
    ("fw_hf", {"data_wait", "forward", "backward", "optimizer"}),
    ("fw_hf_phases", {"forward", "backward", "optimizer", "eval", "checkpoint"}),
])
def test_hf_trainer_frames_read_as_their_phase(name, phases):
    # transformers 5.25 Trainer._run_epoch: get_batch_samples -> training_step (compute_loss,
    # accelerator.backward) -> _clip_grad_norm -> optimizer.step; evaluate/_save_checkpoint
    # from _maybe_log_save_evaluate. No closure: the update is outside training_step.
    seen: collections.Counter[str] = collections.Counter()
    for frames, n in main_stacks(name):
        want = _hf_phase(frames)
        if want is None or any(f.filename.startswith("<frozen importlib") for f in frames):
            continue
        assert classify(frames) == want, (want, [f.name for f in frames])
        seen[want] += n
    assert phases <= set(seen), seen


def test_hf_trainer_gradient_clipping_is_optimizer():
    # Accelerator.clip_grad_norm_'s own bookkeeping (which parameters, DTensor or not) around
    # torch's clip_grad read as "other" before optimizer.clip_grad_wrappers
    stacks = [frames for name in ("fw_hf", "fw_hf_phases") for frames, _n in main_stacks(name)
              if has(frames, "Accelerator.clip_grad_norm_")]
    assert any(frames[0].filename.endswith("accelerate/accelerator.py") for frames in stacks)
    for frames in stacks:
        assert explain(frames).state == "optimizer", [f.name for f in frames]
    clip = (f"Trainer._clip_grad_norm@{SP}transformers/trainer.py:2831",
            f"Accelerator.clip_grad_norm_@{SP}accelerate/accelerator.py:2951",
            f"Accelerator._clip_grad_norm_dtensor_aware@{SP}accelerate/accelerator.py:2887")
    m = explain(fr(*LOOP, *clip))
    assert (m.state, m.rule) == ("optimizer", "optimizer.clip_grad_wrappers")


def test_lightning_closure_stacks_are_really_inside_optimizer_step():
    # the premise of the rule, on the real capture: training_step sits below Optimizer.step
    stacks = [frames for frames, _n in main_stacks("fw_lightning") if has(frames, "training_step")]
    assert stacks
    for frames in stacks:
        names = [f.name for f in frames]
        assert any(n.endswith("profile_hook_step.<locals>.wrapper") for n in names), names
        assert names.index("Closure.__call__") < next(i for i, n in enumerate(names)
                                                       if n.endswith("profile_hook_step.<locals>.wrapper"))


def test_lazy_dynamo_import_in_optimizer_is_startup():
    # §2.2(a): torch._dynamo is imported by the first Optimizer; those frames include
    # torch/_dynamo/convert_frame.py <module>, which must not read as compile
    stacks = [frames for frames, _n in main_stacks("import_phase")
              if has(frames, "_disable_dynamo.<locals>.inner")]
    assert stacks
    assert {classify(frames) for frames in stacks} == {"startup"}


def test_sleep_needs_the_source_line():
    frames, _n = max(main_stacks("phase_sleep"), key=lambda s: s[1])
    assert classify(frames, source_line=replay_lines("phase_sleep")) == "idle"
    assert classify(frames) == "other"  # pure by default: no line, no sleep rule


def test_short_and_absolute_filenames_classify_alike():
    """py-spy's default short names vs --full-filenames, and Windows separators."""
    for name in ("input_bound_w1_pin", "inline_w0", "phase_zero_grad", "phase_compile",
                 "phase_compiled_steady", "phase_eval", "collective_gloo", "import_phase"):
        for frames, _n in main_stacks(name):
            full = classify(frames)
            short = tuple(Frame(f.name, _shorten(f.filename), f.line) for f in frames)
            win = tuple(Frame(f.name, f.filename.replace("/", "\\"), f.line) for f in frames)
            assert classify(short) == full, [f.name for f in frames]
            assert classify(win) == full, [f.name for f in frames]


def _shorten(filename: str) -> str:
    for prefix in (SP, STDLIB):
        if filename.startswith(prefix):
            return filename[len(prefix):]
    return filename


def test_dump_json_samples():
    """py-spy dump --json: absolute filenames, frames already innermost-first."""
    dumps = json.loads((STACKS / "dump_input_bound.json").read_text())
    states = []
    for threads in dumps:
        main = next(t for t in threads if t["thread_name"] == "MainThread")
        frames = tuple(Frame(f["name"], f["filename"], f["line"]) for f in main["frames"])
        assert frames[0].filename.startswith("/") or frames[0].filename.startswith("<")
        states.append(classify(frames))
    assert set(states) <= {"data_wait", "forward", "backward", "optimizer", "other"}
    assert "data_wait" in states


# --- synthetic stacks ---------------------------------------------------------------------

def fr(*spec: str) -> tuple[Frame, ...]:
    """Frames from "name@file:line" strings, OUTERMOST first (as one reads a traceback)."""
    out = []
    for s in spec:
        name, _, where = s.partition("@")
        file, _, line = where.rpartition(":")
        out.append(Frame(name, file, int(line)) if line.isdigit() else Frame(name, where, None))
    return tuple(reversed(out))


USER = "/home/u/proj/train.py"
LOOP = (f"main@{USER}:10",)
FWD = (f"Module._wrapped_call_impl@{SP}torch/nn/modules/module.py:1778",
       f"Module._call_impl@{SP}torch/nn/modules/module.py:1789",
       f"Net.forward@{USER}:30")


def lines(text: str) -> Callable[[str, int], str | None]:
    return lambda filename, line: text if filename == USER else None


@pytest.mark.parametrize("line,cuda,want", [
    ("loss_val = loss.item()", True, "sync"),
    ("acc = (pred == y).float().mean().cpu()", True, "sync"),
    ("ids = mask.nonzero()", True, "sync"),
    ('print(f"loss {loss}")', True, "sync"),
    ('x = out.to("cpu")', True, "sync"),
    ("x = x.to(device, non_blocking=True)", True, "h2d_copy"),
    ("x = x.cuda()", True, "h2d_copy"),
    ("buf.copy_(batch)", True, "h2d_copy"),
    ("loss_val = loss.item()", False, "other"),  # no CUDA: .item() is a plain read
    ("x = x.to(device)", False, "other"),
    ("y = x * 2", True, "other"),
])
def test_implicit_sync_and_h2d_from_the_user_line(line, cuda, want):
    frames = fr(f"main@{USER}:42")
    assert classify(frames, source_line=lines(line), cuda=cuda) == want


def test_line_rules_need_a_line_reader():
    assert classify(fr(f"main@{USER}:42"), cuda=True) == "other"


def test_sync_line_inside_forward_wins_over_forward():
    frames = fr(*LOOP, *FWD)
    assert classify(frames, source_line=lines("if x.sum().item() > 0:"), cuda=True) == "sync"
    assert classify(frames, source_line=lines("h = self.fc(x)"), cuda=True) == "forward"


def test_library_leaf_is_not_a_user_sync():
    frames = fr(*LOOP, f"helper@{SP}somelib/util.py:5")
    src = lambda f, n: "v = t.item()"  # noqa: E731 - any file says .item(
    assert classify(frames, source_line=src, cuda=True) == "other"


def test_dataset_numpy_line_is_loading_not_sync():
    frames = fr(*LOOP, f"_BaseDataLoaderIter.__next__@{SP}torch/utils/data/dataloader.py:725",
                f"_SingleProcessDataLoaderIter._next_data@{SP}torch/utils/data/dataloader.py:785",
                f"_MapDatasetFetcher.fetch@{SP}torch/utils/data/_utils/fetch.py:54",
                f"Images.__getitem__@{USER}:77")
    assert classify(frames, source_line=lines("return img.numpy()"), cuda=True) == "data_inline"


def test_explicit_sync():
    base = fr(*LOOP, f"synchronize@{SP}torch/cuda/__init__.py:1083")
    assert classify(base) == "sync"
    ev = fr(*LOOP, *FWD, f"Event.synchronize@{SP}torch/cuda/streams.py:230")
    assert classify(ev) == "sync"
    native = fr(*LOOP, "cudaStreamSynchronize@libcudart.so.12")
    assert classify(native) == "sync"


C10D = f"{SP}torch/distributed/distributed_c10d.py"
C10D_LOG = f"{SP}torch/distributed/c10d_logger.py"


@pytest.mark.parametrize("frames,want", [
    (fr(*LOOP, f"all_reduce@{C10D}:3252"), "collective"),
    (fr(*LOOP, f"_exception_logger.<locals>.wrapper@{C10D_LOG}:83", f"all_reduce@{C10D}:3252"),
     "collective"),
    (fr(*LOOP, *FWD, f"all_gather_into_tensor@{C10D}:4000"), "collective"),
    (fr(*LOOP, f"barrier@{C10D}:4800"), "collective"),
    (fr(*LOOP, f"DistributedDataParallel._sync_buffers@{SP}torch/nn/parallel/distributed.py:2000"),
     "collective"),
    (fr(f"evaluate@{USER}:90", f"all_reduce@{C10D}:3252"), "eval"),  # context wins
    (fr(*LOOP, f"new_group_helper@{C10D}:5000"), "other"),  # not a collective by name
])
def test_collective(frames, want):
    assert classify(frames) == want


LOADER = f"{SP}torch/utils/data/dataloader.py"


def test_worker_spawn_at_epoch_start_counts_as_data_wait():
    frames = fr(*LOOP, f"DataLoader.__iter__@{LOADER}:490",
                f"DataLoader._get_iterator@{LOADER}:424",
                f"_MultiProcessingDataLoaderIter.__init__@{LOADER}:1190",
                f"BaseProcess.start@{STDLIB}multiprocessing/process.py:121",
                f"Popen.__init__@{STDLIB}multiprocessing/popen_fork.py:19")
    m = explain(frames)
    assert (m.state, m.rule) == ("data_wait", "data_wait.iter_init")
    single = fr(*LOOP, f"DataLoader.__iter__@{LOADER}:490",
                f"_SingleProcessDataLoaderIter.__init__@{LOADER}:770")
    assert classify(single) == "data_inline"


def test_torn_stack_without_outer_frames():
    # nonblocking reads can miss the outer frames (seen in inline_w0 and phase_compile)
    assert classify(fr(f"collate@{SP}torch/utils/data/_utils/collate.py:155")) == "data_inline"
    torn = fr(f"rebuild_storage_fd@{SP}torch/multiprocessing/reductions.py:538",
              f"DupFd.detach@{STDLIB}multiprocessing/resource_sharer.py:57")
    assert classify(torn) == "data_wait"
    assert classify(()) == "other"


@pytest.mark.parametrize("frames,want", [
    # Module.eval() only flips a flag: not an eval loop
    (fr(*LOOP, f"Module.eval@{SP}torch/nn/modules/module.py:2900"), "other"),
    # activation checkpointing is forward work, not a checkpoint save
    (fr(*LOOP, *FWD, f"checkpoint@{SP}torch/utils/checkpoint.py:480"), "forward"),
    (fr(*LOOP, f"validate@{USER}:50", *FWD), "eval"),
    (fr(*LOOP, f"run_validation_epoch@{USER}:50", *FWD), "forward"),  # no eval prefix
    (fr(*LOOP, f"Trainer.val_step@{USER}:50", *FWD), "eval"),
    (fr(*LOOP, f"Trainer.evaluate@{SP}transformers/trainer.py:4000", *FWD), "eval"),
    (fr(*LOOP, f"save_file@{SP}safetensors/torch.py:280"), "checkpoint"),
    (fr(*LOOP, f"save@{SP}numpy/lib/_npyio_impl.py:560"), "checkpoint"),
    (fr(*LOOP, f"FileSystemWriter.write_data@{SP}torch/distributed/checkpoint/"
        "filesystem.py:600"), "checkpoint"),
    # outermost context wins: a save inside eval is eval, an eval inside save is checkpoint
    (fr(f"evaluate@{USER}:90", f"save@{SP}torch/serialization.py:1003"), "eval"),
    (fr(f"save@{SP}torch/serialization.py:1003", f"eval_shape@{USER}:9"), "checkpoint"),
])
def test_contexts(frames, want):
    assert classify(frames) == want


@pytest.mark.parametrize("frames,want", [
    (fr(*LOOP, f"Run.log@{SP}wandb/sdk/wandb_run.py:1800"), "logging"),
    (fr(*LOOP, f"SummaryWriter.add_scalar@{SP}torch/utils/tensorboard/writer.py:380"), "logging"),
    # tqdm(loader) wraps the wait: only tqdm's drawing is logging
    (fr(*LOOP, f"tqdm.__iter__@{SP}tqdm/std.py:1181", f"_BaseDataLoaderIter.__next__@{LOADER}:725",
        f"_MultiProcessingDataLoaderIter._next_data@{LOADER}:1505"), "data_wait"),
    (fr(*LOOP, f"tqdm.__iter__@{SP}tqdm/std.py:1196", f"tqdm.update@{SP}tqdm/std.py:1242"),
     "logging"),
    (fr(*LOOP, f"GradScaler._maybe_opt_step@{SP}torch/amp/grad_scaler.py:380"), "optimizer"),
    (fr(*LOOP, f"clip_grad_norm_@{SP}torch/nn/utils/clip_grad.py:100"), "optimizer"),
    (fr(*LOOP, f"Module.zero_grad@{SP}torch/nn/modules/module.py:2950"), "other"),
    (fr(*LOOP, f"empty_cache@{SP}torch/cuda/memory.py:220"), "other"),
    (fr(*LOOP, f"grad@{SP}torch/autograd/__init__.py:500"), "backward"),
    # Python 3.10 and older: py-spy reports unqualified names
    (fr(*LOOP, f"__next__@{LOADER}:725", f"_next_data@{LOADER}:1505",
        f"_get_data@{LOADER}:1464"), "data_wait"),
    (fr(*LOOP, f"backward@{SP}torch/_tensor.py:623"), "backward"),
    # a recompile inside a compiled module's call is compile, and so is a lazy backward compile
    (fr(*LOOP, f"OptimizedModule.__call__@{SP}torch/_dynamo/eval_frame.py:511",
        f"ConvertFrame.__call__@{SP}torch/_dynamo/convert_frame.py:1900"), "compile"),
    (fr(*LOOP, f"Tensor.backward@{SP}torch/_tensor.py:623",
        f"compile_fx_inner@{SP}torch/_inductor/compile_fx.py:700"), "compile"),
    (fr(*LOOP, f"Thread.join@{STDLIB}threading.py:1112"), "idle"),
    (fr(*LOOP, f"BaseSelector.select@{STDLIB}selectors.py:415"), "idle"),
    (fr(*LOOP, f"helper@{STDLIB}json/decoder.py:300"), "other"),
])
def test_activities(frames, want):
    assert classify(frames) == want


OPT_STEP = (f"Optimizer.profile_hook_step.<locals>.wrapper@{SP}torch/optim/optimizer.py:526",
            f"LBFGS.step@{SP}torch/optim/lbfgs.py:330")
CLOSURE = (f"closure@{USER}:50",)


@pytest.mark.parametrize("inner,want,rule", [
    (FWD, "forward", "forward.module"),
    ((f"Tensor.backward@{SP}torch/_tensor.py:625",
      f"_engine_run_backward@{SP}torch/autograd/graph.py:841"), "backward", "backward.autograd"),
    ((f"Optimizer.zero_grad@{SP}torch/optim/optimizer.py:1000",), "other", "other.zero_grad"),
    # gradient clipping inside the closure is still the optimizer's part
    ((f"clip_grad_norm_@{SP}torch/nn/utils/clip_grad.py:100",), "optimizer", "optimizer.optim"),
    ((), "optimizer", "optimizer.optim"),  # the closure's own line: nothing inner known
])
def test_closure_inside_optimizer_step(inner, want, rule):
    m = explain(fr(*LOOP, *OPT_STEP, *CLOSURE, *inner))
    assert (m.state, m.rule) == (want, rule)


def test_optimizer_own_update_stays_optimizer():
    m = explain(fr(*LOOP, *OPT_STEP, f"LBFGS._add_grad@{SP}torch/optim/lbfgs.py:280"))
    assert (m.state, m.rule, m.index) == ("optimizer", "optimizer.optim", 2)


def test_closure_collective_and_context_still_win():
    # passes 2 and 3 come first: a DDP all_reduce or an eval inside the closure
    ar = (f"all_reduce@{SP}torch/distributed/distributed_c10d.py:3252",)
    assert classify(fr(*LOOP, *OPT_STEP, *CLOSURE, *FWD, *ar)) == "collective"
    assert classify(fr(f"evaluate@{USER}:5", *OPT_STEP, *CLOSURE, *FWD)) == "eval"


def test_alloc_is_other_but_named():
    m = explain(fr(*LOOP, f"empty_cache@{SP}torch/cuda/memory.py:220"))
    assert (m.state, m.rule) == ("other", "other.alloc")


def test_a_failing_line_reader_loses_nothing():
    def boom(filename: str, line: int) -> str | None:
        raise OSError("gone")

    assert classify(fr(f"main@{USER}:42"), source_line=boom, cuda=True) == "other"


def test_is_user_frame():
    assert is_user_frame(USER)
    assert is_user_frame("train.py")
    assert is_user_frame("sattui/demo/trainer.py")
    for lib in (f"{SP}torch/nn/modules/module.py", "torch/nn/modules/module.py",
                f"{STDLIB}threading.py", "threading.py", "multiprocessing/queues.py",
                "<frozen runpy>", "<string>", "/usr/lib/python3.10/queue.py",
                "/usr/lib/python3/dist-packages/numpy/core/x.py",
                "/tmp/torchinductor_root/ir/cirtup5q.py"):
        assert not is_user_frame(lib), lib


@given(st.lists(st.tuples(st.text(max_size=30), st.text(max_size=60),
                          st.one_of(st.none(), st.integers(-5, 10_000))), max_size=20),
       st.booleans())
def test_never_raises_and_returns_a_state(raw, cuda):
    frames = tuple(Frame(n, f, ln) for n, f, ln in raw)
    assert classify(frames, source_line=lambda f, n: "x.item() .to( sleep(", cuda=cuda) in STATES


# --- read_source_line ----------------------------------------------------------------------

def test_read_source_line(tmp_path):
    p = tmp_path / "t.py"
    p.write_text("a = 1\n    loss.item()  \n")
    assert read_source_line(str(p), 2) == "loss.item()"
    assert read_source_line(str(p), 99) is None
    assert read_source_line(str(p), 0) is None
    assert read_source_line(str(tmp_path / "missing.py"), 1) is None
    assert read_source_line("<frozen importlib._bootstrap>", 1) is None
    assert read_source_line("", 1) is None


# --- parse_collapsed_line ------------------------------------------------------------------

def test_parse_collapsed_line():
    tid, name, frames, n = parse_collapsed_line(
        "thread (4281): MainThread;<module> (train.py:5);main (train.py:130);"
        "_MultiProcessingDataLoaderIter._next_data (torch/utils/data/dataloader.py:1505) 78\n")
    assert (tid, name, n) == (4281, "MainThread", 78)
    assert frames[0] == Frame("_MultiProcessingDataLoaderIter._next_data",
                              "torch/utils/data/dataloader.py", 1505)
    assert frames[-1] == Frame("<module>", "train.py", 5)


def test_parse_collapsed_line_variants():
    tid, name, frames, n = parse_collapsed_line("thread (0x7f3a2c): ;f (a.py:1) 3")
    assert (tid, name, n) == (0x7F3A2C, None, 3)
    _, _, frames, _ = parse_collapsed_line("process 12:\"python t.py\";thread (12): MainThread;"
                                           "f (a.py:1) 1")
    assert frames == (Frame("f", "a.py", 1),)
    # no --threads; a codegen pseudo-file with a colon; a frame without a line number
    tid, name, frames, n = parse_collapsed_line(
        "g (b.py:2);_runtime_wrapper (torch/_functorch/_aot_autograd/subclass_codegen.py:"
        "codegen(runtime_wrapper_orchestration):11);h (c.py) 9")
    assert (tid, name, n) == (None, None, 9)
    assert frames[1] == Frame("_runtime_wrapper", "torch/_functorch/_aot_autograd/"
                              "subclass_codegen.py:codegen(runtime_wrapper_orchestration)", 11)
    assert frames[0] == Frame("h", "c.py", None)
    # an empty stack (py-spy saw the thread but no Python frame)
    assert parse_collapsed_line("thread (9079): MainThread 2") == (9079, "MainThread", (), 2)
    with pytest.raises(ValueError):
        parse_collapsed_line("garbage")


def test_docs_list_every_state_and_every_row_of_the_table():
    from pathlib import Path

    from sattui.states import State

    doc = (Path(__file__).resolve().parents[2] / "docs" / "states.md").read_text(encoding="utf-8")
    for s in State:
        assert f"`{s.value}`" in doc and f"`{s.glyph}`" in doc, s
    for r in RULES:
        assert f"`{r.id}`" in doc, f"docs/states.md misses the classifier row {r.id}"
