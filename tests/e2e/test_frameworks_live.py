"""Ranks a trainer starts itself, on real CPU jobs under ``sattui record -- CMD``.

* ``torch.multiprocessing.spawn``, 2 gloo ranks, one forked DataLoader worker each: the
  process started only waits in ``join``; both spawned children are ranks (told from
  spawned workers by one ``py-spy dump``: ``_wrap`` of ``torch/multiprocessing/spawn.py``),
  numbered 0, 1 by start, each with its own stacks; their workers stay workers.
* Lightning ``Trainer(accelerator="cpu", devices=2, strategy="ddp")``: the process started
  is rank 0 and re-runs its own command line for rank 1 with ``LOCAL_RANK=1``; both are
  ranks, and their steps read as forward/backward, not optimizer (the closure rule of
  docs/states.md). Needs lightning (the ``test`` extra).
* Hugging Face ``transformers.Trainer`` (a local model, ``use_cpu``, 2 DataLoader workers, an
  eval every 30 steps, 12 s of steps): one run judged by three tests: the main thread reads forward/backward
  (``compute_loss``, ``accelerator.backward``), not optimizer or other; the eval reads eval;
  the workers are workers; the verdict is about the job, not its input. Needs transformers
  (the ``test`` extra).

Each run is ~25-35 s on 2 busy cores.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.conftest import need_trainer_tools, run_sattui
from tests.e2e.test_scenarios import describe, pid_states, read_lines

pytestmark = pytest.mark.e2e

TRAINER = ["-m", "sattui.demo.framework_trainer"]


def _record(out: Path, *args: str) -> dict:
    import sys

    # The jobs run a fixed number of steps (the ranks' collectives must stay in step): 20-35 s
    # on a quiet box, 34-48 s beside other tests, and over 60 s in one CI run this week (load
    # ~5: the mp.spawn job was cut by --duration mid-run and printed a traceback). The cap is
    # only a backstop: a job that finishes ends the recording.
    r = run_sattui("record", "-o", str(out), "--rate", "20", "--duration", "150", "--",
                   sys.executable, *TRAINER, *args, timeout=240)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    rep = run_sattui("report", str(out), "--json")
    assert rep.returncode == 0, rep.stderr
    return json.loads(rep.stdout)


def _check_two_ranks(rep: dict, out: Path) -> dict[int, dict]:
    ranks = {p["rank"]: p for p in rep["processes"] if p["role"] == "rank"}
    assert sorted(ranks) == [0, 1], rep["processes"]
    assert ranks[0]["pid"] != ranks[1]["pid"]
    by_rank = {x["rank"]: x for x in rep["trainer"]["ranks"]}
    assert sorted(by_rank) == [0, 1], rep["trainer"]["ranks"]  # a ledger row per rank
    per_pid = pid_states(out)
    for r in (0, 1):
        st = per_pid.get(ranks[r]["pid"])
        assert st is not None, (r, per_pid)  # its own stacks
        model = st.get("forward", 0.0) + st.get("backward", 0.0)
        assert st.get("forward", 0.0) > 0 and st.get("backward", 0.0) > 0, (r, st)
        assert model > 2 * st.get("optimizer", 0.0), (r, st)
    return ranks


@pytest.mark.beside  # roles and parents, not timings
@pytest.mark.long
def test_mp_spawn_ranks_are_ranks_not_workers(tmp_path):
    need_trainer_tools()
    out = tmp_path / "spawn.jsonl"
    # 16 s of steps, whatever the neighbours' load makes of the step rate (1200 steps took
    # 20 s on a quiet box and 34-48 s beside other tests): the report judges from 10 s after
    # the recording's start (its warm-up; imports and the spawn take ~5 s of it) and a
    # rank's ledger row needs seconds after that.
    rep = _record(out, "--idiom", "plain", "--ranks", "2", "--steps", "100000", "--seconds", "16",
                  "--width", "256", "--num-workers", "1", "--port", "29571")
    ranks = _check_two_ranks(rep, out)
    started = rep["trainer"]["pid"]
    procs = {p["pid"]: p for p in rep["processes"]}
    assert procs[started]["role"] == "other", procs[started]  # it only waits in join()
    assert {ranks[0]["ppid"], ranks[1]["ppid"]} == {started}
    workers = [p for p in rep["processes"] if p["role"] == "worker"]
    assert sorted(w["rank"] for w in workers) == [0, 1], workers  # one per rank, theirs
    assert {w["ppid"] for w in workers} == {ranks[0]["pid"], ranks[1]["pid"]}
    # the waiting parent's sampler stops once it is known not to train: it does not stay a strip
    assert started not in {x["pid"] for x in rep["trainer"]["ranks"]}


@pytest.mark.beside  # which frames, not how long
@pytest.mark.long
def test_lightning_ddp_ranks_read_forward_backward(tmp_path):
    need_trainer_tools()
    pytest.importorskip("lightning", reason="lightning not installed (pip install -e .[test])")
    out = tmp_path / "lightning.jsonl"
    rep = _record(out, "--idiom", "lightning", "--ranks", "2", "--strategy", "ddp", "--steps", "900",
                  "--width", "256")
    ranks = _check_two_ranks(rep, out)
    started = rep["trainer"]["pid"]
    assert ranks[0]["pid"] == started, ranks  # the process started is rank 0 ...
    assert ranks[1]["ppid"] == started, ranks  # ... and rank 1 its child, not a worker
    assert not [p for p in rep["processes"] if p["role"] == "worker"], rep["processes"]
    lines = read_lines(out)
    assert any(r.get("kind") == "stacks" and r["pid"] == ranks[1]["pid"] for r in lines)


# --------------------------------------------------------------------------- Hugging Face Trainer

@dataclass(frozen=True)
class HfRun:
    out: Path
    rep: dict


@pytest.fixture(scope="module")
def hf_run(tmp_path_factory) -> HfRun:
    need_trainer_tools()
    pytest.importorskip("transformers", reason="transformers not installed (pip install -e .[test])")
    out = tmp_path_factory.mktemp("hf") / "hf.jsonl"
    # 5-10 s of imports, then 20 s of steps (time-bound: the step rate here goes from 3 to 20 a
    # second with the others' load, and a fixed step count ended some runs before the report's
    # 10-s warm-up was over: no_data) with an eval of 4 batches every 30 steps: ~27 s in all.
    # 12 s of steps left ~6 s to judge after the warm-up: the verdict then rested on an
    # interval of 0-50 % (CI read input_bound medium 9-12 % from it twice).
    # Samples cost 0.05 ms of a worker's CPU (6 ms a batch): at 0.2 ms (26 ms a batch) torch's
    # two compute threads left the two workers too little of the 2 cores, and a quiet CI box
    # read a true data wait of 13-18 % (worker_cpu_bound medium 15 %, 2026-12-07): input-bound,
    # not the compute-bound job this test is about.
    # Width 2048: four times the compute of 1024 per batch, so each batch's hand-over from the
    # workers (the main thread in next(), workers idle) is ~1-2 % of the step, not the ~5 % that
    # sat on the medium threshold (the live advisor then judged "data wait leads, 0-23 %" all run).
    rep = _record(out, "--idiom", "hf", "--steps", "100000", "--seconds", "20", "--width", "2048",
                  "--batch", "128", "--num-workers", "2", "--sample-cost-ms", "0.05", "--eval-steps", "25")
    return HfRun(out, rep)


def test_hf_trainer_main_thread_reads_forward_backward(hf_run):
    main = hf_run.rep["trainer"]["pid"]
    st = pid_states(hf_run.out).get(main)
    assert st is not None, (main, describe(hf_run.rep))
    fwd, bwd, opt = st.get("forward", 0.0), st.get("backward", 0.0), st.get("optimizer", 0.0)
    # measured: forward 0.22, backward 0.46, optimizer 0.13 (clipping included), eval 0.05,
    # data_wait 0.08, other 0.05 (setup: Accelerator.free_memory's gc, the model build)
    assert fwd > 0.05 and bwd > 0.1, st
    assert fwd + bwd > 1.5 * opt, st
    assert st.get("other", 0.0) + st.get("idle", 0.0) < 0.3, st
    assert st.get("eval", 0.0) > 0.0, st  # evaluation_loop, every 30 steps


def test_hf_trainer_dataloader_workers_are_workers(hf_run):
    procs = hf_run.rep["processes"]
    main = hf_run.rep["trainer"]["pid"]
    mains = [p for p in procs if p["pid"] == main]
    assert mains and mains[0]["role"] == "main", procs
    workers = [p for p in procs if p["role"] == "worker"]
    # 2 for training, 2 more for the (cached, persistent) eval loader
    assert len(workers) >= 2 and {w["ppid"] for w in workers} == {main}, procs
    assert not [p for p in procs if p["role"] == "rank"], procs


# a compute-bound job with an eval every 30 steps: healthy, an eval stall, or (on a box others
# load) CPU contention; never a cause in its input or its ranks
SANE_HEADLINES = {"healthy", "periodic_stall", "cpu_contention"}
WRONG_FINDINGS = {"input_bound", "worker_cpu_bound", "too_few_workers", "worker_io_bound",
                  "main_process_loading", "straggler", "starved_unattributed"}


# A compute-bound HF job still spends some time in next(loader): its workers fall behind now and
# then on a loaded 2-core box, and each batch's hand-over costs the main thread (worker_cpu_bound
# medium 7.6 % once, input_bound medium 9 % once, both on CI). Such a wait may show at medium; a data
# cause above this share, or at high, would be a wrong answer.
LOADED_BOX_WAIT = 0.12


def test_hf_trainer_report_gives_a_sane_verdict(hf_run):
    rep = hf_run.rep
    # A small data cause at medium is true here too (the trainer's main thread sat 8-15 % of
    # some seconds in next(), its workers idle: the hand-over of each batch; a quiet CI box
    # read input_bound medium 9 % once), and with nothing else at medium it is the headline.
    small_wait = rep["verdict"]["rule"] in WRONG_FINDINGS and rep["verdict"]["severity"] == "medium" \
        and rep["verdict"]["impact"] <= LOADED_BOX_WAIT
    # Not sure yet is sane too, as long as what leads is not an input cause: an eval pass of
    # 5-12 % of the time every 25 steps takes longer than this run to be sure of (the live
    # advisor said "judging: checkpoint/eval/logging leads, 0-29 %" on one of two runs).
    nd = next((f for f in rep["findings"] if f["rule"] == "no_data"), None)
    judging = rep["verdict"]["rule"] == "no_data" and nd is not None and \
        nd["evidence"].get("leading") not in WRONG_FINDINGS and rep["verdict"]["summary"].startswith("judging")
    assert rep["verdict"]["rule"] in SANE_HEADLINES or small_wait or judging, describe(rep)
    loud = [f["rule"] for f in rep["findings"] if f["severity"] == "high"
            or (f["severity"] == "medium" and f["impact"] > LOADED_BOX_WAIT)]
    assert not set(loud) & WRONG_FINDINGS, describe(rep)
    states = rep["trainer"]["states"]
    assert states.get("forward", 0.0) + states.get("backward", 0.0) > 0.3, describe(rep)
