"""The causes of lost time: one table, read by the ledger, the rules, the cluster judge,
the views and the exporter.

A rank's lost second, and a card's idle one, is given one of these causes by the time
ledger (sattui/ledger/bins.py); a rule names it (its id in docs/rules.md and
CONTRACT.md, where the cause has one); the words are what a screen or a headline says of
it; the fix is the rule's advice where it does not depend on the evidence (the rules add
what does: the number of workers to try, the phase, the rank).

Two groups the judges need, not the same:

* ``data_wait`` — causes of the main thread's ``data_wait`` seconds (the DataLoader's
  ``next()``): the workers busy, reading, restarting, starved of a CPU, or the wait not
  narrowed down;
* ``input_pipeline`` — causes a faster input pipeline removes, where a host's ranks wait
  for their data while the others do not (sattui/cluster/across_hosts.py): the data-wait ones
  but CPU contention (a host's cores, not its pipeline), plus loading on the training
  thread.
"""

from __future__ import annotations

from dataclasses import dataclass

FIX_INPUT = ("Make the input pipeline produce batches faster than the model consumes them: more or faster "
             "DataLoader workers, prefetching (prefetch_factor), caching decoded samples.")
FIX_WORKER_CPU = (
    "Each worker is busy computing samples. If cores are free, add workers. Otherwise make samples cheaper: "
    "decode/resize once and cache (TF: 'preprocess the data OFFLINE'; tf.data: 'cache'), keep uint8 tensors and "
    "normalise on the GPU, move augmentation to the GPU (NVIDIA DALI, torchvision.transforms.v2 on CUDA tensors), "
    "and stop per-worker thread oversubscription (cv2.setNumThreads(0), OMP_NUM_THREADS=1).")
FIX_WORKER_IO = (
    "Workers spend their time waiting, not computing. Move data closer (local NVMe/RAM disk, warm page cache), "
    "read fewer, larger, sequential chunks (sharded WebDataset/TFRecord/LMDB/Parquet instead of many small "
    "files), raise I/O concurrency (more workers, larger prefetch_factor, threaded/async reads in the Dataset — "
    "waiting workers cost little CPU), cache decoded samples after epoch 1.")
FIX_INLINE = (
    "DataLoader(num_workers=0) loads every batch on the training thread (PyTorch tuning guide: 'the data loading "
    "is synchronous and done in the main process'). Set num_workers > 0 (start near {S}), pin_memory=True when "
    "training on a GPU, persistent_workers=True.")
FIX_RESPAWN = (
    "Consider setting `persistent_workers=True` on the DataLoader to speed up the worker initialization "
    "(PyTorch Lightning's advice); reduce per-worker start-up work (heavy imports, opening datasets in "
    "worker_init_fn).")
FIX_SYNC = (
    "Avoid unnecessary CPU-GPU synchronization (PyTorch tuning guide): no print(cuda_tensor), "
    "cuda_tensor.item(), .cpu()/.to('cpu'), nonzero() or Python control flow on CUDA results inside the step; "
    "accumulate metrics on the GPU and read them every N steps; use torch.cuda.set_sync_debug_mode('warn') to "
    "find hidden syncs (Nsight cuda_api_sync: 'Avoid excessive use of synchronization'). GradScaler's one "
    ".item() per step is expected.")
FIX_OVERHEAD = (
    "Kernels are too small or too many for Python to keep up: increase the batch size; fuse ops with "
    "torch.compile; use CUDA graphs (torch.compile(mode='reduce-overhead')); use foreach/fused optimizers "
    "(torch.optim.AdamW(..., fused=True)); remove per-step Python work (logging, metric objects).")
FIX_STRAGGLER = ("The other ranks wait for rank {R} at every gradient all-reduce. Look at what rank {R} does "
                 "that the others do not: its own time goes to {CAUSE}. Balance the data (equal-sized shards, "
                 "a bucketing sampler) and the work per rank; a slow rank that changes from epoch to epoch "
                 "points to data.")
FIX_COMM = (
    "Communication takes a large share of every step: try gradient compression or gradient accumulation, or "
    "increase the batch size (torch-tb-profiler); use DDP no_sync() during accumulation; check NCCL_* settings "
    "in the environment (e.g. disabled P2P/IB).")
FIX_STALL = {
    "checkpoint": ("Save asynchronously (torch.distributed.checkpoint.async_save) or less often, write locally and "
                   "upload in the background, save once per node/sharded."),
    "eval": ("Evaluate less often or on a subset, with a larger eval batch and torch.inference_mode(); "
             "persistent_workers=True for the validation loader."),
    "logging": "Aggregate metrics on the GPU and log every N steps.",
}
FIX_TOO_FEW = ("Every DataLoader worker is busy computing samples and cores are free: raise num_workers "
               "(to about {S}), then make samples cheaper if the wait stays (decode/resize once and cache).")
FIX_CONTENTION_OWN = (
    "The trainer's own processes fill its usable CPUs, so its threads wait for a core: run fewer DataLoader "
    "workers (at most the usable CPUs minus one per rank, counting the main thread's intra-op threads), cap "
    "each process's threads (OMP_NUM_THREADS, torch.set_num_threads, cv2.setNumThreads(0) in workers), or "
    "give the job more cores (the container's CPU quota, taskset).")
FIX_CONTENTION = (
    "Other processes take the trainer's CPUs: its threads are runnable but wait for a core. Give the job its "
    "own cores (taskset/cgroups, no other busy jobs on the box), keep num_workers + intra-op threads within the "
    "usable CPUs (OMP_NUM_THREADS, torch.set_num_threads), and check the container's CPU quota.")


@dataclass(frozen=True)
class Cause:
    id: str
    words: str                 # on a screen or in a headline
    rule: str | None           # the rule that names it; None: no rule does
    data_wait: bool = False
    input_pipeline: bool = False
    fix: str | None = None
    on_card_only: bool = False  # a card's idle cause that no rank's lost second has
    # passes of whole seconds that recur (an evaluation, a checkpoint): the first one after
    # a quiet start is a pass, not a new phase (sattui/advisor/intervals/change.py)
    passes: bool = False


# The ids (the ledger's keys, the exporter's ``cause`` label): every reader names a cause by
# these, never by a bare string. Most equal the id of the rule that names the cause (the
# table's ``rule``); where a rule is meant, its rule id is written, not the cause's.
# Workers busy computing: worker_cpu_bound, or too_few_workers where cores were free; the
# rules decide over the window (from the free cores kept in the detail), not bin by bin.
WORKER_BUSY = "worker_busy"
WORKER_IO = "worker_io_bound"
WORKER_RESPAWN = "worker_respawn"
CPU_CONTENTION = "cpu_contention"
INPUT_BOUND = "input_bound"
MAIN_PROCESS_LOADING = "main_process_loading"
PERIODIC_STALL = "periodic_stall"
STRAGGLER = "straggler"
COMM_BOUND = "comm_bound"
HOST_SYNC_STALL = "host_sync_stall"
IDLE = "idle"
HOST_OVERHEAD = "host_overhead_bound"
UNKNOWN = "unknown"

CAUSES: tuple[Cause, ...] = (
    Cause(WORKER_BUSY, "data wait, workers busy computing", "worker_cpu_bound", data_wait=True, input_pipeline=True,
          fix=FIX_WORKER_CPU),
    Cause(WORKER_IO, "data wait, workers reading or waiting on their data source", "worker_io_bound",
          data_wait=True, input_pipeline=True, fix=FIX_WORKER_IO),
    Cause(WORKER_RESPAWN, "data wait while DataLoader workers restart", "worker_respawn", data_wait=True,
          input_pipeline=True, fix=FIX_RESPAWN),
    Cause(CPU_CONTENTION, "waiting for a CPU (other processes on its cores)", "cpu_contention", data_wait=True,
          fix=FIX_CONTENTION),
    Cause(INPUT_BOUND, "data wait", "input_bound", data_wait=True, input_pipeline=True, fix=FIX_INPUT),
    Cause(MAIN_PROCESS_LOADING, "loading data on the training thread", "main_process_loading",
          input_pipeline=True, fix=FIX_INLINE.replace("{S}", "a few")),
    Cause(PERIODIC_STALL, "checkpoint/eval/logging", "periodic_stall", passes=True),
    Cause(STRAGGLER, "waiting for another rank", "straggler"),
    Cause(COMM_BOUND, "collectives (communication)", "comm_bound", fix=FIX_COMM),
    Cause(HOST_SYNC_STALL, "waiting for the device (host sync)", "host_sync_stall", fix=FIX_SYNC),
    Cause(IDLE, "sleeping, or waiting on something unknown", None),
    Cause(HOST_OVERHEAD, "launch / host overhead (the rank computes)", "host_overhead_bound",
          fix=FIX_OVERHEAD, on_card_only=True),
    Cause(UNKNOWN, "unknown (no stacks)", "starved_unattributed", on_card_only=True),
)
BY_ID: dict[str, Cause] = {c.id: c for c in CAUSES}

DATA_CAUSES: tuple[str, ...] = tuple(c.id for c in CAUSES if c.data_wait)
INPUT_PIPELINE_CAUSES: tuple[str, ...] = tuple(c.id for c in CAUSES if c.input_pipeline)
# Every cause a rank's lost seconds can have, and a card's idle seconds: the exporter
# starts each at 0 (sattui/metrics/exposition.py).
RANK_CAUSES: tuple[str, ...] = tuple(c.id for c in CAUSES if not c.on_card_only)
CARD_CAUSES: tuple[str, ...] = tuple(c.id for c in CAUSES)
CAUSE_WORDS: dict[str, str] = {c.id: c.words for c in CAUSES}
PASS_CAUSES: frozenset[str] = frozenset(c.id for c in CAUSES if c.passes)
# The ledger's cause each rule reads, where the names differ.
RULE_CAUSE: dict[str, str] = {"worker_cpu_bound": WORKER_BUSY, "too_few_workers": WORKER_BUSY,
                              "starved_unattributed": UNKNOWN}


def words(cause: str) -> str:
    """What a screen says of a cause (its id, spaced, for one this table lacks)."""
    c = BY_ID.get(cause)
    return c.words if c is not None else cause.replace("_", " ")
