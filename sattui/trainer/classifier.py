"""Classify one main-thread stack sample into a state (docs/states.md).

Pure and table-driven: :data:`RULES` is the stack signature dictionary of
docs/states.md as rows of (state, filename suffixes, function-name suffixes, extra
predicate), and :func:`classify` walks it in five passes:

1. ``startup``: a module being loaded (``<frozen importlib._bootstrap>`` loading frames).
2. context: the OUTERMOST frame matching a CHECKPOINT/EVAL row wins over everything
   below it (a data wait inside an eval loop is ``eval``; ``torch.save`` is ``checkpoint``).
3. override: the outermost frame matching a COMPILE / COLLECTIVE / explicit SYNC row, wherever
   it sits (a recompile inside forward is compile, an ``all_reduce`` inside forward is the
   wait).
4. anchor: the OUTERMOST frame matching any state row (docs/states.md: searching the
   whole stack innermost-first for autograd frames mislabels ``zero_grad`` as backward, and
   every ``Optimizer`` call goes through ``torch/_dynamo/eval_frame.py``). Torch frames that
   match no row (``torch/_compile.py``, ``torch/autograd/profiler.py``, ``no_grad``
   decorators, ``mp.spawn``'s ``_wrap``) are transparent wrappers.
   One exception: an ``optimizer`` anchor calls a closure back (``optimizer.step(closure)``:
   Lightning's automatic optimization, LBFGS); the outermost other anchor inside it (forward,
   backward, data, zero_grad …) wins, so the optimizer keeps only its own update.
   Then, with ``cuda=True`` only, the innermost *user* source line refines it: ``.item(``,
   ``.cpu(`` … is an implicit ``sync``, ``.to(``/``.cuda(``/``.copy_(`` a ``h2d_copy``
   (C ops add no Python frame, so the user line is where the thread is).
5. no anchor: ``idle`` if the innermost frame is a plain wait (``threading`` wait,
   ``selectors`` select, ``queue`` get, or a user line calling ``sleep(``), else ``other``.

Source lines are only read through the ``source_line`` callable the caller passes (usually
:func:`read_source_line`); without it the line-based rules are skipped, so ``classify``
itself never touches the file system.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sattui.frames import is_user_frame, norm_path
from sattui.model import Frame

SourceLine = Callable[[str, int], str | None]
# (frames innermost-first, index of the frame being matched) -> bool
Predicate = Callable[[Sequence[Frame], int], bool]


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of the signature dictionary (docs/states.md).

    ``files``: filename suffixes matched on whole path components after normalising
    separators ("torch/utils/data/dataloader.py" matches ".../site-packages/torch/utils/
    data/dataloader.py"); a pattern ending in "/" is a directory anywhere in the path; one
    starting with "<" is a prefix of a pseudo-filename; "*" globs. Empty = any file.
    ``names``: function-name suffixes on qualified-name components ("_next_data" matches
    "_MultiProcessingDataLoaderIter._next_data"); "*" globs the last component or the
    whole qualified name. Empty = any name.
    ``when``: an extra predicate over the whole stack. ``user_only``: the frame must be user
    code (not a library, the stdlib or a pseudo-file).
    """

    id: str
    state: str
    phase: str  # startup | context | override | anchor | idle
    files: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    when: Predicate | None = None
    user_only: bool = False
    note: str = ""


@dataclass(frozen=True, slots=True)
class Match:
    """Why a stack got its state: the rule row id and the frame index it matched (None for
    a default)."""

    state: str
    rule: str
    index: int | None = None


# --- helpers the table's predicates use --------------------------------------------------

_LOADER = "torch/utils/data/dataloader.py"
_FETCH = "torch/utils/data/_utils/fetch.py"
_COLLATE = "torch/utils/data/_utils/collate.py"


def _file_matches(path: str, pattern: str) -> bool:
    if pattern.startswith("<"):
        return path.startswith(pattern)
    if "*" in pattern:
        return fnmatch.fnmatchcase("/" + path, "*/" + pattern)
    if pattern.endswith("/"):
        return ("/" + pattern) in ("/" + path)
    return path == pattern or path.endswith("/" + pattern)


def _name_matches(name: str, pattern: str) -> bool:
    if "*" in pattern:
        last = name.rsplit(".", 1)[-1]
        return fnmatch.fnmatchcase(last, pattern) or fnmatch.fnmatchcase(name, pattern)
    return name == pattern or name.endswith("." + pattern)


def _frame_in(frame: Frame, files: tuple[str, ...], names: tuple[str, ...]) -> bool:
    return _frame_in_cached(frame.filename, frame.name, files, names)


# A training loop repeats the same few hundred frames every step: remember each verdict.
@functools.lru_cache(maxsize=1 << 16)
def _frame_in_cached(filename: str, name: str, files: tuple[str, ...],
                     names: tuple[str, ...]) -> bool:
    path = norm_path(filename)
    if files and not any(_file_matches(path, p) for p in files):
        return False
    return not names or any(_name_matches(name, p) for p in names)


_ITER_INIT = ("__iter__", "_get_iterator", "_MultiProcessingDataLoaderIter.__init__", "_reset")


def _has_loader_frame(frames: Sequence[Frame], names: tuple[str, ...]) -> bool:
    return any(_frame_in(f, (_LOADER,), names) for f in frames)


def _fetch_or_collate(frames: Sequence[Frame], _i: int) -> bool:
    return any(_frame_in(f, (_FETCH, _COLLATE), ()) for f in frames) or _has_loader_frame(
        frames, ("_SingleProcessDataLoaderIter.*",))


# --- user code vs library ------------------------------------------------------------------

def _is_user(frames: Sequence[Frame], i: int) -> bool:
    return is_user_frame(frames[i].filename)


# --- the table ---------------------------------------------------------------------------

_COLLECTIVES = (
    "all_reduce", "all_reduce_coalesced", "all_gather", "all_gather_into_tensor",
    "all_gather_object", "all_gather_coalesced", "reduce_scatter", "reduce_scatter_tensor",
    "broadcast", "broadcast_object_list", "barrier", "monitored_barrier", "all_to_all",
    "all_to_all_single", "reduce", "gather", "gather_object", "scatter", "scatter_object_list",
    "send", "recv", "batch_isend_irecv", "send_object_list", "recv_object_list",
)

RULES: tuple[Rule, ...] = (
    # 1. startup
    Rule("startup.import", "startup", "startup", ("<frozen importlib._bootstrap",),
         ("_find_and_load_unlocked", "_load_unlocked", "_load", "exec_module", "create_module",
          "_find_spec", "module_from_spec", "get_code", "_ModuleLockManager.__enter__"),
         note="a module being found or loaded: the import phase and lazy imports (torch._dynamo "
              "on the first Optimizer). Not every importlib frame: a function-level "
              "`from . import x` of a loaded module runs ModuleSpec.parent/_handle_fromlist "
              "on every call (seen inside inductor's compile)"),
    # 2. contexts (outermost wins)
    Rule("checkpoint.torch_save", "checkpoint", "context", ("torch/serialization.py",),
         ("save", "_save", "_legacy_save")),
    Rule("checkpoint.safetensors", "checkpoint", "context", ("safetensors/",), ("save*",)),
    Rule("checkpoint.dcp", "checkpoint", "context", ("torch/distributed/checkpoint/",)),
    Rule("checkpoint.lightning", "checkpoint", "context",
         ("lightning/*checkpoint*.py", "pytorch_lightning/*checkpoint*.py")),
    Rule("checkpoint.transformers", "checkpoint", "context", ("transformers/trainer.py",),
         ("_save_checkpoint", "save_model", "_save")),
    Rule("checkpoint.accelerate", "checkpoint", "context", ("accelerate/checkpointing.py",)),
    Rule("checkpoint.pickle", "checkpoint", "context", ("pickle.py",), ("dump",)),
    Rule("checkpoint.numpy", "checkpoint", "context", ("numpy/",), ("save*",)),
    Rule("eval.lightning", "eval", "context",
         ("lightning/pytorch/loops/evaluation_loop.py",
          "pytorch_lightning/loops/evaluation_loop.py")),
    Rule("eval.transformers", "eval", "context", ("transformers/trainer.py",),
         ("evaluate", "_evaluate", "evaluation_loop", "prediction_step", "predict")),
    Rule("eval.user", "eval", "context", (),
         ("eval*", "validat*", "val_*", "test_*", "run_eval*"), user_only=True,
         note="user functions only: Module.eval() must not open an eval context"),
    # 3. overrides (win wherever they sit below the context)
    Rule("compile.dynamo", "compile", "override",
         ("torch/_dynamo/convert_frame.py", "torch/_dynamo/symbolic_convert.py",
          "torch/_dynamo/output_graph.py"),
         note="NOT torch/_dynamo/* as a whole: eval_frame.py wraps every Optimizer call and "
              "every call of a compiled model"),
    Rule("compile.inductor", "compile", "override",
         ("torch/_inductor/compile_fx.py", "torch/_inductor/async_compile.py",
          "torch/_inductor/codecache.py", "torch/_inductor/graph.py",
          "torch/_inductor/scheduler.py", "torch/_inductor/select_algorithm.py",
          "torch/_inductor/autotune_process.py", "torch/_inductor/runtime/compile_tasks.py"),
         note="NOT torch/_inductor/* as a whole: output_code.py and utils.py run the "
              "compiled graph every step"),
    Rule("compile.inductor_autotune", "compile", "override",
         ("torch/_inductor/runtime/triton_heuristics.py",),
         ("precompile", "autotune_to_one_config", "benchmark_all_configs"),
         note="first-call Triton autotuning (GPU only; not verified on CPU)"),
    Rule("collective.c10d", "collective", "override",
         ("torch/distributed/distributed_c10d.py",), _COLLECTIVES),
    Rule("collective.c10d_logger", "collective", "override", ("torch/distributed/c10d_logger.py",)),
    Rule("collective.ddp_buffers", "collective", "override", ("torch/nn/parallel/distributed.py",),
         ("*_sync_buffers*", "_sync_params_and_buffers", "_distributed_broadcast_coalesced")),
    Rule("collective.native", "collective", "override", (), ("nccl*", "ncclGroupEnd")),
    Rule("sync.explicit", "sync", "override",
         ("torch/cuda/__init__.py", "torch/accelerator/__init__.py", "torch/xpu/__init__.py",
          "torch/mps/__init__.py"), ("synchronize",)),
    Rule("sync.stream_event", "sync", "override", ("torch/cuda/streams.py",), ("*synchronize",)),
    Rule("sync.native", "sync", "override", (),
         ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
          "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize"),
         note="only with py-spy --native"),
    # 4. anchors (outermost wins; table order breaks ties on one frame)
    Rule("data_wait.iter_init", "data_wait", "anchor", (_LOADER,),
         when=lambda fr, _i: _has_loader_frame(fr, _ITER_INIT) and not _fetch_or_collate(fr, _i),
         note="DATA_ITER_INIT: worker (re)spawn at epoch start; the trainer waits for it"),
    Rule("data_wait.worker_shutdown", "data_wait", "anchor", (_LOADER,),
         when=lambda fr, _i: _has_loader_frame(fr, ("_shutdown_workers",)),
         note="end of epoch without persistent_workers: the main thread joins its workers"),
    Rule("data_inline.loader", "data_inline", "anchor", (_LOADER,), when=_fetch_or_collate,
         note="num_workers=0: _SingleProcessDataLoaderIter / fetch / collate on the main thread"),
    Rule("data_wait.loader", "data_wait", "anchor", (_LOADER,),
         note="_next_data/_get_data/_try_get_data and the rest of the multi-process iterator "
              "(__next__'s record_function, _try_put_index); leaf multiprocessing/connection.py, "
              "selectors.py, threading.py or torch/multiprocessing/reductions.py rebuild_*"),
    Rule("data_inline.fetch", "data_inline", "anchor", (_FETCH, _COLLATE),
         note="also catches torn stacks whose outer frames py-spy missed"),
    Rule("data_wait.rebuild", "data_wait", "anchor", ("torch/multiprocessing/reductions.py",),
         ("rebuild_*",), note="receiving a worker's shared-memory batch (torn stacks)"),
    Rule("other.zero_grad", "other", "anchor", ("torch/optim/", "torch/nn/modules/module.py"),
         ("zero_grad",), note="zero_grad is cheap bookkeeping, not optimizer math or backward"),
    Rule("optimizer.optim", "optimizer", "anchor",
         ("torch/optim/", "torch/distributed/optim/", "torch/nn/utils/clip_grad.py",
          "torch/amp/grad_scaler.py", "torch/cuda/amp/grad_scaler.py")),
    Rule("optimizer.clip_grad_wrappers", "optimizer", "anchor",
         ("accelerate/accelerator.py", "transformers/trainer.py"),
         ("clip_grad_norm_", "clip_grad_value_", "_clip_grad_norm*"),
         note="HF Trainer / Accelerate gradient clipping: their own parameter bookkeeping "
              "around torch's clip_grad, part of the update"),
    Rule("backward.autograd", "backward", "anchor",
         ("torch/_tensor.py", "torch/autograd/__init__.py", "torch/autograd/graph.py"),
         ("backward", "grad", "_engine_run_backward")),
    Rule("forward.module", "forward", "anchor", ("torch/nn/modules/module.py",),
         ("_call_impl", "_wrapped_call_impl")),
    Rule("forward.compiled", "forward", "anchor", ("torch/_dynamo/eval_frame.py",),
         ("OptimizedModule.__call__",), note="steady-state call of a torch.compile'd module"),
    Rule("forward.compiled_graph", "forward", "anchor",
         ("torch/_inductor/output_code.py", "torch/_functorch/_aot_autograd/runtime_wrappers.py"),
         ("CompiledFxGraph.__call__", "*CompiledFunction.forward", "runtime_wrapper"),
         note="a compiled function called outside a module"),
    Rule("other.alloc", "other", "anchor", ("torch/cuda/memory.py",), ("empty_cache",),
         note="ALLOC has no activity of its own in the contract; kept as a row so "
              "explain() names it"),
    Rule("logging.libs", "logging", "anchor",
         ("wandb/", "torch/utils/tensorboard/", "tensorboardX/", "tensorboard/", "mlflow/",
          "logging/__init__.py", "lightning/pytorch/loggers/", "pytorch_lightning/loggers/",
          "comet_ml/", "neptune/")),
    Rule("logging.tqdm", "logging", "anchor", ("tqdm/",),
         ("update", "refresh", "display", "set_postfix*", "set_description*", "write"),
         note="only tqdm's drawing: tqdm(loader).__iter__ wraps the data wait"),
    # 5. idle (innermost frame only, and only when nothing above matched)
    Rule("idle.threading", "idle", "idle", ("threading.py",),
         ("wait", "join", "_wait_for_tstate_lock", "acquire")),
    Rule("idle.select", "idle", "idle", ("selectors.py",), ("select",)),
    Rule("idle.queue", "idle", "idle", ("queue.py", "multiprocessing/queues.py"), ("get",)),
    Rule("idle.mp", "idle", "idle",
         ("multiprocessing/connection.py", "multiprocessing/popen_fork.py",
          "multiprocessing/process.py"),
         ("wait", "poll", "_poll", "join", "recv*", "_recv*")),
    Rule("idle.subprocess", "idle", "idle", ("subprocess.py",),
         ("wait", "_wait", "_try_wait", "communicate")),
    Rule("idle.futures", "idle", "idle", ("concurrent/futures/_base.py",),
         ("result", "wait", "as_completed")),
)

# Source-line tokens (docs/states.md: implicit sync / h2d_copy), checked in this order.
SYNC_TOKENS = (".item(", ".cpu(", ".tolist(", ".numpy(", "print(", ".nonzero(", "torch.where(",
               '.to("cpu"', ".to('cpu'")
H2D_TOKENS = (".to(", ".cuda(", ".copy_(")
# C-level waits add no Python frame: the innermost frame is the user line calling them.
IDLE_TOKENS = ("sleep(", "waitpid(", "signal.pause(", "select.select(")
LINE_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (("sync", SYNC_TOKENS),
                                                       ("h2d_copy", H2D_TOKENS))
# Dataset code runs on CPU tensors: its .numpy()/.to() lines are not device syncs or copies.
_NOT_REFINED = frozenset({"data_wait", "data_inline"})

_BY_PHASE: dict[str, tuple[Rule, ...]] = {
    ph: tuple(r for r in RULES if r.phase == ph)
    for ph in ("startup", "context", "override", "anchor", "idle")
}


# Anchors that call user code back (a closure): a different anchor inside one wins.
_CLOSURE_HOSTS = frozenset({"optimizer"})
_IN_CLOSURE: tuple[Rule, ...] = tuple(r for r in _BY_PHASE["anchor"] if r.state not in _CLOSURE_HOSTS)


def _rule_matches(rule: Rule, frames: Sequence[Frame], i: int) -> bool:
    if not _frame_in(frames[i], rule.files, rule.names):
        return False
    if rule.user_only and not _is_user(frames, i):
        return False
    return rule.when is None or rule.when(frames, i)


def _outermost(rules: tuple[Rule, ...], frames: Sequence[Frame]) -> Match | None:
    """First (frame from the outermost, rule in table order) pair that matches."""
    for i in range(len(frames) - 1, -1, -1):
        for rule in rules:
            if _rule_matches(rule, frames, i):
                return Match(rule.state, rule.id, i)
    return None


def _innermost_line(frames: Sequence[Frame], source_line: SourceLine | None) -> str | None:
    """Source text of the innermost frame if it is user code (docs/states.md, pass 4)."""
    if source_line is None or not frames:
        return None
    leaf = frames[0]
    if leaf.line is None or not is_user_frame(leaf.filename):
        return None
    try:
        return source_line(leaf.filename, leaf.line)
    except Exception:  # a caller's reader failing must not lose the sample
        return None


def explain(frames: Sequence[Frame], *, source_line: SourceLine | None = None,
            cuda: bool = False) -> Match:
    """Like :func:`classify`, but also says which rule row (``Rule.id``) decided, and on
    which frame (index into ``frames``, innermost = 0). Line rules report ``line.<state>``."""
    frames = tuple(frames)
    for phase in ("startup", "context", "override"):
        hit = _outermost(_BY_PHASE[phase], frames)
        if hit is not None:
            return hit
    anchor = _outermost(_BY_PHASE["anchor"], frames)
    if anchor is not None and anchor.state in _CLOSURE_HOSTS and anchor.index:
        # optimizer.step(closure) (Lightning's automatic optimization, LBFGS) runs forward
        # and backward inside the step: the innermost phase the table knows is where the
        # thread is; the optimizer's own update (outside the closure) stays optimizer.
        inner = _outermost(_IN_CLOSURE, frames[:anchor.index])
        if inner is not None:
            anchor = inner
    line = _innermost_line(frames, source_line)
    if line is not None and cuda and (anchor is None or anchor.state not in _NOT_REFINED):
        for state, tokens in LINE_RULES:
            if any(t in line for t in tokens):
                return Match(state, f"line.{state}", 0)
    if anchor is not None:
        return anchor
    if frames:
        for rule in _BY_PHASE["idle"]:
            if _rule_matches(rule, frames, 0):
                return Match(rule.state, rule.id, 0)
        if line is not None and any(t in line for t in IDLE_TOKENS):
            return Match("idle", "line.idle", 0)
    return Match("other", "default.other", None)


def classify(frames: Sequence[Frame], *, source_line: SourceLine | None = None,
             cuda: bool = False) -> str:
    """The activity of one main-thread stack sample, a :class:`sattui.states.State` name.

    ``frames`` innermost first, as py-spy gives them (names may be qualified, filenames
    absolute or py-spy's short form). ``source_line(filename, line)`` enables the rules
    that read the innermost user line (implicit sync, H2D copy, ``time.sleep``);
    ``cuda`` says a CUDA device is in use (the sync/copy line rules need it).
    docs/states.md.
    """
    return explain(frames, source_line=source_line, cuda=cuda).state


_THREAD = re.compile(r"^thread \((0x[0-9a-fA-F]+|\d+)\)(?:: ?(.*))?$")
_FRAME = re.compile(r"^(.*?) \((.*)\)$")


def _parse_frame(text: str) -> Frame:
    m = _FRAME.match(text)
    if m is None:  # --native symbols may carry no "(file)" part
        return Frame(text, "")
    name, where = m.group(1), m.group(2)
    file, sep, line = where.rpartition(":")
    if sep and line.isdigit():
        return Frame(name, file, int(line))
    return Frame(name, where, None)


def parse_collapsed_line(line: str) -> tuple[int | None, str | None, tuple[Frame, ...], int]:
    """Parse one line of ``py-spy record --format raw`` (collapsed stacks).

    ``thread (TID): NAME;outer (file:line);...;inner (file:line) COUNT``, outermost first.
    Returns (tid, thread name, frames innermost-first, count); tid/name are None without
    ``--threads``. A ``process …`` element (``--subprocesses``) is skipped. Raises
    ValueError on a line that is not a collapsed stack.
    """
    stack, sep, count = line.rstrip("\n").rpartition(" ")
    if not sep or not count.isdigit():
        raise ValueError(f"not a collapsed stack line: {line[:80]!r}")
    parts = stack.split(";")
    tid: int | None = None
    name: str | None = None
    while parts and parts[0].startswith("process "):
        parts.pop(0)
    if parts:
        m = _THREAD.match(parts[0])
        if m is not None:
            tid = int(m.group(1), 0)
            name = m.group(2) or None
            parts.pop(0)
    frames = tuple(_parse_frame(p) for p in reversed(parts) if p)
    return tid, name, frames, int(count)
