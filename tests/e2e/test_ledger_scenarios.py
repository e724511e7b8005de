"""The time ledger on real PyTorch CPU trainers that time their own phases (issue 10).

Each scenario records a trainer with ``sattui record -- CMD`` (as test_scenarios.py does,
whose helpers this file uses), judges it with ``sattui report --json``, and checks

* the headline: the scenario's own cause (eval pass → ``periodic_stall`` naming
  ``eval``; workers restarting every epoch → ``worker_respawn``; busy processes on the
  trainer's core → ``cpu_contention``; a slow DDP rank → ``straggler`` rank 1; a worker
  that keeps what it serves → ``memory_growth``; compute-bound → ``healthy``);
* that no other cause reaches medium;
* the ledger's shares (``trainer.ranks[].lost``, the findings' impacts) against the
  trainer's own truth, measured inside it over the same stretch (the advisor's warm-up to
  the trainer's end), within ±0.10;
* the steps seen from outside (``trainer.ranks[]``: ``steps_per_s``, ``step_s_p50``,
  ``step_s_p90``) against the trainer's own step starts, or null with a reason.

The one cause a trainer cannot rule out from inside its own code is the host: on a
shared machine its compute waits for a CPU whatever the scenario. Each trainer measures
that too (wall time minus its main thread's CPU time in forward/backward/optimizer:
time it was runnable and not running), and ``cpu_contention`` is then expected beside
the scenario's cause at that share — the headline is whichever of the two is larger
(by more than the tolerance; either when they are close). Every other cause stays
below medium.

CPU only, 2 cores: seven recordings of 14–40 s of training; the whole file takes about
6 minutes alone (longer on a loaded machine, where the imports are slower). The healthy
one is recorded by ``record --pid`` (conftest.py's healthy_attached_run), attached mid-run:
test_record_cli.py judges the same run.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from sattui.advisor.verdict import SPECS
from tests.e2e.conftest import AttachedRun
from tests.e2e.test_scenarios import (  # noqa: F401  (_tools: the module's autouse fixture)
    S00_FORBIDDEN,
    SEV_RANK,
    SHARE_TOL,
    _tools,
    _torchrun,
    describe,
    finding,
    read_lines,
    record,
    report,
    trainer_cmd,
)

pytestmark = pytest.mark.e2e

CAUSES = {s.id for s in SPECS.values() if s.category == "cause"}
# Steps seen from outside against the trainer's own: the detector misses a step now and
# then (a phase that happened to fall between two samples), never invents one.
STEPS_TOL = 0.20
# The truth's shares of this size are below what the advisor could call medium.
NEGLIGIBLE = 0.03
# The causes of a data wait (sattui/ledger/bins.py, DATA_CAUSES, by their rules' ids).
DATA_RULES = {"input_bound", "worker_cpu_bound", "too_few_workers", "worker_io_bound", "worker_respawn"}


# --------------------------------------------------------------------------- truth


def t_started(rec: Path) -> float:
    return datetime.fromisoformat(read_lines(rec)[0]["started_at"]).timestamp()


def between(lines: list[dict], wall0: float, wall1: float) -> dict[str, float]:
    """The trainer's own shares of wall time per key between two wall clocks (its truth
    lines are cumulative seconds and counts), plus ``steps_per_s``."""
    a = min(lines, key=lambda r: abs(r["wall"] - wall0))
    b = min(lines, key=lambda r: abs(r["wall"] - wall1))
    dt = b["elapsed_s"] - a["elapsed_s"]
    assert dt > 10, (a, b)
    out = {k: (b[k] - a[k]) / dt for k in b if k.endswith("_s") and k != "elapsed_s" and k in a}
    out["steps_per_s"] = (b["steps"] - a["steps"]) / dt
    return out


def contention_truth(sh: dict[str, float]) -> float:
    """The main thread's time runnable but not running, as a share of wall time: its
    compute phases' wall time minus its own CPU time in them (they never block)."""
    if "step_cpu_s" not in sh:
        return 0.0
    return max(0.0, sh["fwd_s"] + sh["bwd_s"] + sh["opt_s"] - sh["step_cpu_s"])


def step_lengths(path: Path, mono0: float | None = None) -> list[float]:
    starts = [float(x) for x in path.read_text().split()]
    if mono0 is not None:
        starts = [t for t in starts if t >= mono0]
    return [b - a for a, b in zip(starts, starts[1:])]


def quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * len(s)) - 1))]


# --------------------------------------------------------------------------- checks


def shares_of(rep: dict, rule: str) -> float:
    f = finding(rep, rule)
    return f["impact"] if f is not None else 0.0


def rank_lost(rep: dict, cause: str, rank: int | None = None) -> float:
    ranks = rep["trainer"]["ranks"]
    r = ranks[0] if rank is None else next(x for x in ranks if x["rank"] == rank)
    return r["lost"].get(cause, 0.0)


@dataclass
class Truth:
    own: str                 # the scenario's own cause
    own_share: float         # its truth; for memory_growth and healthy (no lost time) 0
    contention: float        # the host's share in the step (contention_truth)
    wait: float = 0.0        # the trainer's data wait: on a busy host partly contention too


def check_causes(rep: dict, t: Truth) -> None:
    """The headline is the scenario's cause or the host's contention, the larger of the
    two; nothing else reaches medium; contention's ledger share matches its truth: the
    step's time off a CPU, plus at most the data wait (whose workers — or the woken
    main thread — may have waited for a CPU too; the trainer cannot tell from inside)."""
    why = describe(rep) + f"\n  truth: {t}"
    allowed = {t.own} | ({"cpu_contention"} if t.contention >= NEGLIGIBLE else set())
    # The trainer's own data wait is lost time too: on a loaded box even a scenario built
    # around another cause waits for its workers now and then. A data-wait cause may
    # stand beside the scenario's own when the truth's wait is that large.
    waits = {f["rule"] for f in rep["findings"] if f["rule"] in DATA_RULES
             and t.wait >= NEGLIGIBLE and f["impact"] <= t.wait + SHARE_TOL}
    allowed |= waits
    head = rep["verdict"]["rule"]
    if head in waits and t.own_share < NEGLIGIBLE:
        pass  # nothing of the scenario's own is lost time (memory): the wait is the largest
    elif t.contention < NEGLIGIBLE or t.own_share - t.contention > SHARE_TOL:
        assert head == t.own, why
    elif t.contention - t.own_share > SHARE_TOL:
        assert head == "cpu_contention", why
    else:
        assert head in allowed, why
    bad = [f["rule"] for f in rep["findings"] if f["rule"] in CAUSES and f["rule"] not in allowed
           and SEV_RANK[f["severity"]] >= SEV_RANK["medium"]]
    assert not bad, f"other causes at >= medium: {bad}\n{why}"
    if t.own != "healthy":
        f = finding(rep, t.own)
        assert f is not None and SEV_RANK[f["severity"]] >= SEV_RANK["medium"], why
    seen = shares_of(rep, "cpu_contention")
    assert t.contention - SHARE_TOL <= seen <= t.contention + t.wait + SHARE_TOL, why


def check_steps(rep: dict, truth_lines: list[dict], wall0: float, wall1: float, lengths: list[float],
                rank: int | None = None, required: bool = False) -> str:
    """The ranks' steps seen from outside against the trainer's own: steps/s over the
    judged stretch within STEPS_TOL, p50/p90 of the step lengths within 25 %; or null with
    a reason (``required``: the scenario's steps are long enough to be seen)."""
    ranks = rep["trainer"]["ranks"]
    r = ranks[0] if rank is None else next(x for x in ranks if x["rank"] == rank)
    true_rate = between(truth_lines, wall0, wall1)["steps_per_s"]
    p50, p90 = quantile(lengths, 0.5), quantile(lengths, 0.9)
    msg = (f"steps: truth {true_rate:.2f}/s p50 {p50:.3f} p90 {p90:.3f}; sattui {r.get('steps_per_s')}/s "
           f"p50 {r.get('step_s_p50')} p90 {r.get('step_s_p90')} ({r.get('steps_null_reason')})")
    if r["steps_per_s"] is None:
        assert not required, msg
        assert r["step_s_p50"] is None and r["step_s_p90"] is None and r["steps_null_reason"], msg
        return msg
    assert abs(r["steps_per_s"] - true_rate) <= STEPS_TOL * true_rate, msg
    assert abs(r["step_s_p50"] - p50) <= 0.25 * p50, msg
    # A missed boundary merges two steps into one twice as long. When more than one step
    # in twenty was missed (a loaded box: py-spy lowers its rate, a phase falls between
    # samples), the slowest tenth may be such pairs: p90 then lies up to two steps' length.
    missed = max(0.0, 1.0 - r["steps_per_s"] / true_rate)
    top = 0.25 * p90 + 0.05 if missed <= 0.05 else 2 * 1.25 * p90 + 0.05 - p90
    assert -(0.25 * p90 + 0.05) <= r["step_s_p90"] - p90 <= top, msg + f"; missed {missed:.2f}"
    return msg


# The phase trainers' length: the report judges from 10 s after the recording's start
# (the imports take ~4 s of it) and names a cause within ~10 s of that (issue 23), so 30 s
# of training leave ~25 s judged against the trainer's own truth (40 s before, sized for
# the old 25-s start of judging).
PHASE_S = 30
# The oversubscribed host's contention holds over half the time from the loop's first
# second: it is named at the report's first looks, and 24 s leave ~18 s judged.
OVERSUBSCRIBED_S = 24


def run_phase_trainer(tmp: Path, seconds: int, *args: str, prefix: tuple[str, ...] = ()) -> tuple[dict, list, Path]:
    truth = tmp / "truth.jsonl"
    out = tmp / "run.jsonl"
    record(out, *prefix, *trainer_cmd("sattui.demo.phase_trainer", "--seconds", str(seconds), "--truth", str(truth),
                                      "--step-times", str(tmp / "steps.txt"), *args))
    lines = read_lines(truth)
    assert lines[-1].get("final"), "trainer did not finish"
    return report(out), lines, out


def window_of(rep: dict, rec: Path, lines: list[dict]) -> tuple[float, float]:
    """The judged stretch in wall clock: the advisor's warm-up to the trainer's end."""
    return t_started(rec) + rep["advisor"]["warmup_s"], lines[-1]["wall"]


def mono_at(lines: list[dict], wall: float) -> float:
    """The trainer's monotonic clock (its step-times file's) at a wall clock time."""
    a = min(lines, key=lambda r: abs(r["wall"] - wall))
    return a["mono"] + (wall - a["wall"])


# --------------------------------------------------------------------------- scenarios


def test_healthy_compute_bound(healthy_attached_run: AttachedRun):
    # A large MLP on cheap data: the loop computes nearly all the time; batch 512 makes
    # a step long enough (several sampling periods per phase) to be seen from outside.
    # One run with test_record_cli.py's compute-bound test (conftest.py): `record --pid`
    # attached mid-run, ~34 s recorded. A 35-s recording of a loaded box, cut at 31 s, was
    # healthy on all of its 19 evaluations (decided 3 s after the warm-up).
    run = healthy_attached_run
    rep, lines, rec = report(run.out), read_lines(run.truth), run.out
    assert lines[-1].get("final"), "trainer did not finish"
    wall0, wall1 = window_of(rep, rec, lines)
    sh = between(lines, wall0, wall1)
    cont = contention_truth(sh)
    lost = sum(rep["trainer"]["ranks"][0]["lost"].values())
    # Figures are owed when the trainer's own forward pass and the rest of its step each
    # last three sampling periods (20 Hz) on average: then every one is seen twice or more.
    per_step = {k: sh[k] / sh["steps_per_s"] for k in ("fwd_s", "bwd_s", "opt_s")}
    owed = per_step["fwd_s"] >= 0.15 and per_step["bwd_s"] + per_step["opt_s"] >= 0.15
    steps = check_steps(rep, lines, wall0, wall1, step_lengths(run.steps, mono_at(lines, wall0)),
                        required=owed)
    steps += f"; truth per step {per_step}, figures owed: {owed}"
    print(f"healthy: truth wait {sh['wait_s']:.3f} contention {cont:.3f}; ledger lost {lost:.3f} "
          f"{rep['trainer']['ranks'][0]['lost']}\n{steps}\n{describe(rep)}")
    assert sh["wait_s"] <= 0.10, "scenario is not what it claims"
    check_causes(rep, Truth("healthy", 0.0, cont, sh["wait_s"]))
    # S00 of advisor-rules.md §4.2 too: check_causes holds the causes; its other
    # forbidden rules (card, configuration) stay below medium as well
    others = [f["rule"] for f in rep["findings"] if f["rule"] in S00_FORBIDDEN and f["rule"] not in CAUSES
              and SEV_RANK[f["severity"]] >= SEV_RANK["medium"]]
    assert not others, f"S00 forbidden at >= medium: {others}\n{describe(rep)}"
    # everything the ledger calls lost is the host's contention (and the trainer's few waits)
    assert abs(lost - (cont + sh["wait_s"])) <= SHARE_TOL, rep["trainer"]["ranks"]


def test_eval_every_n_steps(tmp_path):
    # An evaluation pass (10 batches of 512 under inference_mode) every 30 training steps.
    rep, lines, rec = run_phase_trainer(tmp_path, PHASE_S, "--width", "1024", "--batch", "128", "--eval-every", "30",
                                        "--eval-batches", "10")
    wall0, wall1 = window_of(rep, rec, lines)
    sh = between(lines, wall0, wall1)
    cont = contention_truth(sh)
    f = finding(rep, "periodic_stall")
    steps = check_steps(rep, lines, wall0, wall1, step_lengths(tmp_path / "steps.txt", mono_at(lines, wall0)))
    print(f"eval: truth eval {sh['eval_s']:.3f} wait {sh['wait_s']:.3f} contention {cont:.3f}; ledger "
          f"{rep['trainer']['ranks'][0]['lost']}\n{steps}\n{describe(rep)}")
    assert sh["eval_s"] >= 0.10, "scenario is not what it claims"
    check_causes(rep, Truth("periodic_stall", sh["eval_s"], cont, sh["wait_s"]))
    assert f["evidence"]["phase"] == "eval", f
    assert abs(f["impact"] - sh["eval_s"]) <= SHARE_TOL, (f, sh)
    assert abs(rank_lost(rep, "periodic_stall") - sh["eval_s"]) <= SHARE_TOL


def test_workers_restart_every_epoch(tmp_path):
    # persistent_workers=False and ~4 s epochs: at every epoch's end the DataLoader ends
    # its two workers and starts two new ones, each spending 0.8 s of CPU in its
    # worker_init_fn before its first item.
    # 40 s: at 30 s the restarts' share read 0.34 of a true 0.52 (out of tolerance)
    rep, lines, rec = run_phase_trainer(tmp_path, 40, "--workers", "2", "--width", "1024", "--epoch-items", "2048",
                                        "--worker-init-ms", "800")
    wall0, wall1 = window_of(rep, rec, lines)
    sh = between(lines, wall0, wall1)
    cont = contention_truth(sh)
    respawn = rank_lost(rep, "worker_respawn")
    steps = check_steps(rep, lines, wall0, wall1, step_lengths(tmp_path / "steps.txt", mono_at(lines, wall0)))
    print(f"restarts: truth restart {sh['restart_s']:.3f} wait {sh['wait_s']:.3f} contention {cont:.3f}; "
          f"{lines[-1]['epochs']} epochs; ledger {rep['trainer']['ranks'][0]['lost']}\n{steps}\n{describe(rep)}")
    assert lines[-1]["epochs"] >= 6 and sh["restart_s"] >= 0.08, "scenario is not what it claims"
    # The data wait beside the restarts: the truth's wait less what the ledger called the
    # restart. The truth counts each restart to its first batch, which the new workers
    # compute: the ledger gives that compute to the workers (a persistent worker computes
    # its epoch's first batch too), and on a loaded CI box it was 0.24 of the time.
    check_causes(rep, Truth("worker_respawn", sh["restart_s"], cont, max(0.0, sh["wait_s"] - respawn)))
    # The ledger counts each start from the new workers' birth until the first batch is
    # seen (less the rank's usual wait); the trainer's truth from iter(loader), which
    # first ends the old workers and forks the new ones, to its first batch. Part of each
    # start reads as the workers busy (their worker_init_fn burns CPU): 0.41, 0.39 and 0.38
    # of a true 0.52-0.56 on clean-clone CI runs, 0.48 of 0.55 locally, the rest as
    # worker_busy (0.11-0.18). Issue 23 leaves this split open (see its notes); what is
    # held here: the restarts are most of it, never more than the truth, and the data
    # wait around them is all accounted for, restart and workers together.
    busy = rank_lost(rep, "worker_busy") + rank_lost(rep, "input_bound")
    for seen in (respawn, shares_of(rep, "worker_respawn")):
        assert 0.6 * sh["restart_s"] <= seen <= sh["restart_s"] + SHARE_TOL, (seen, sh)
    assert abs(respawn + busy - sh["wait_s"]) <= SHARE_TOL, (respawn, busy, sh)


def _hog(cpu: int) -> subprocess.Popen:
    return subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", "while True: pass"])


def _hogs_once_training(truth: Path, cpu: int, n: int, hogs: list[subprocess.Popen], started_wall: list[float],
                        stop: threading.Event) -> threading.Thread:
    """``n`` busy processes on ``cpu`` from the trainer's first truth line (its loop's
    start) on: its imports then run at a whole core's speed, not a third of one (~10 s
    saved on CI), and every judged second still has them."""
    def start() -> None:
        while not stop.is_set():
            if truth.exists():
                hogs.extend(_hog(cpu) for _ in range(n))
                started_wall.append(time.time())
                return
            time.sleep(0.05)

    th = threading.Thread(target=start, daemon=True)
    th.start()
    return th


def test_oversubscribed_host(tmp_path):
    # The trainer pinned to CPU 1 (taskset), two busy processes pinned there too: its
    # main thread is runnable most of the time but gets about a third of the core.
    hogs: list[subprocess.Popen] = []
    hogs_started_wall: list[float] = []
    stop = threading.Event()
    starter = _hogs_once_training(tmp_path / "truth.jsonl", 1, 2, hogs, hogs_started_wall, stop)
    try:
        rep, lines, rec = run_phase_trainer(tmp_path, OVERSUBSCRIBED_S, "--width", "1024",
                                            prefix=("taskset", "-c", "1"))
    finally:
        stop.set()
        starter.join()
        for h in hogs:
            h.kill()
            h.wait()
    assert len(hogs) == 2, "the busy processes never started"
    # they were there from the loop's first second: every step judged shared the core
    assert hogs_started_wall[0] - lines[0]["wall"] <= 1.0, (hogs_started_wall, lines[0])
    wall0, wall1 = window_of(rep, rec, lines)
    sh = between(lines, wall0, wall1)
    cont = contention_truth(sh)
    steps = check_steps(rep, lines, wall0, wall1, step_lengths(tmp_path / "steps.txt", mono_at(lines, wall0)))
    print(f"oversubscribed: truth contention {cont:.3f} wait {sh['wait_s']:.3f}; ledger "
          f"{rep['trainer']['ranks'][0]['lost']}\n{steps}\n{describe(rep)}")
    assert cont >= 0.4, "scenario is not what it claims"
    check_causes(rep, Truth("cpu_contention", cont, cont, sh["wait_s"]))
    assert rep["verdict"]["rule"] == "cpu_contention"
    f = finding(rep, "cpu_contention")
    assert f["evidence"]["waiting_for_a_cpu"] == "the training thread", f
    # whose work holds the core: the hogs (host-wide busy minus the trainer's tree), not its own
    assert "other processes on the host keep" in f["summary"] and f["fix"].startswith("Other processes"), f
    assert cont - SHARE_TOL <= rank_lost(rep, "cpu_contention") <= cont + sh["wait_s"] + SHARE_TOL


def test_balanced_ddp_on_a_loaded_box_is_no_straggler(tmp_path):
    # Issue 23: two ranks doing the same work, both waiting in their all-reduces (each for
    # the other, whichever is behind this step), while a busy process competes for the two
    # cores. Their waits differ by chance, not because one rank is late: no straggler at
    # any severity (the old rule called 25 % against 22 % a MEDIUM straggler). No rank is
    # slowed (--slow-rank=-1): even a sleep(0) a step yields the CPU to the busy process,
    # and that rank is then really late (measured: 86 % against 78 % in all_reduce).
    prefix = tmp_path / "truth"
    out = tmp_path / "run.jsonl"
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        record(out, *_torchrun(), "--standalone", "--nproc_per_node=2", "-m", "sattui.demo.ddp_trainer",
               "--steps", "600", "--slow-rank=-1", "--sleep-s", "0", "--truth", str(prefix))
    finally:
        hog.kill()
        hog.wait()
    rep = report(out)
    truths = {r: read_lines(Path(f"{prefix}.rank{r}")) for r in (0, 1)}
    for r, lines in truths.items():
        assert lines[-1].get("final"), f"rank {r} did not finish"
    ranks = {x["rank"]: x for x in rep["trainer"]["ranks"]}
    waits = {r: ranks[r]["lost"].get("straggler", 0.0) for r in (0, 1)}
    truth = {r: truths[r][-1]["allreduce_s"] / truths[r][-1]["elapsed_s"] for r in (0, 1)}
    print(f"balanced ddp: truth all_reduce shares {truth}, trainer {truths[0][-1]['elapsed_s']:.1f} s; "
          f"ledger waits {waits}\n{describe(rep)}")
    assert min(truth.values()) >= 0.02 and min(waits.values()) > 0.0, "scenario is not what it claims"
    assert not [f for f in rep["findings"] if f["rule"] == "straggler"], describe(rep)


def test_worker_memory_grows_per_item(tmp_path):
    # Two workers, each keeping 6 KiB of every item it serves (a cache never read back), for
    # the whole run: persistent workers (an epoch of 65,536 items took 22 s on a faster box,
    # whose epoch's end restarted the workers: two generations of 20 s each, too short to
    # call a series growth).
    # 40 s: at 30 s the rule had not yet named the growth (a clean-clone CI run read
    # "judging" at the end)
    rep, lines, rec = run_phase_trainer(tmp_path, 40, "--workers", "2", "--width", "1024", "--leak-kb", "6",
                                        "--persistent-workers")
    wall0, wall1 = window_of(rep, rec, lines)
    sh = between(lines, wall0, wall1)
    cont = contention_truth(sh)
    a = min(lines, key=lambda r: abs(r["wall"] - wall0))
    b = lines[-1]
    true_mb_min = (b["kept_bytes"] - a["kept_bytes"]) / (b["elapsed_s"] - a["elapsed_s"]) * 60 / (1 << 20)
    f = finding(rep, "memory_growth")
    print(f"memory: truth kept {true_mb_min:.1f} MB/min, contention {cont:.3f}, wait {sh['wait_s']:.3f}\n"
          f"{describe(rep)}")
    assert true_mb_min >= 100, "scenario is not what it claims"
    check_causes(rep, Truth("memory_growth", 0.0, cont, sh["wait_s"]))
    ev = f["evidence"]
    assert ev["what"] == "workers" and ev["kind"] == "allocation", ev
    assert len(ev["workers"]) == 2, ev
    seen = ev["mb_per_hour"] / 60
    assert abs(seen - true_mb_min) <= 0.25 * true_mb_min, (seen, true_mb_min)
    # no time is lost to it: the ledger's lost time is the host's contention and the few waits
    lost = sum(rep["trainer"]["ranks"][0]["lost"].values())
    assert abs(lost - (cont + sh["wait_s"])) <= SHARE_TOL, rep["trainer"]["ranks"]


def test_ddp_straggler_waits_inside_backward(tmp_path):
    prefix = tmp_path / "truth"
    out = tmp_path / "run.jsonl"
    # DistributedDataParallel over gloo: rank 1 sleeps 0.1 s between forward and backward
    # every step, so rank 0 waits for its gradients inside loss.backward() — no
    # collective frame on rank 0's main thread, only its own CPU falling idle. 210 steps:
    # a 260-step run of a loaded box (35 s recorded), cut at 30 s and at 25 s, was still
    # straggler rank 1 high on every evaluation, decided 3 s after the warm-up.
    record(out, *_torchrun(), "--standalone", "--nproc_per_node=2", "-m", "sattui.demo.ddp_trainer", "--ddp",
           "--steps", "210", "--truth", str(prefix), "--step-times", str(tmp_path / "steps"))
    rep = report(out)
    truths = {r: read_lines(Path(f"{prefix}.rank{r}")) for r in (0, 1)}
    for r, lines in truths.items():
        assert lines[-1].get("final"), f"rank {r} did not finish"
    wall0 = t_started(out) + rep["advisor"]["warmup_s"]
    wall1 = min(lines[-1]["wall"] for lines in truths.values())
    sh = {r: between(truths[r], wall0, wall1) for r in (0, 1)}
    ranks = {x["rank"]: x for x in rep["trainer"]["ranks"]}
    f = finding(rep, "straggler", rank=1)
    msgs = []
    for r in (0, 1):
        lengths = step_lengths(Path(f"{tmp_path / 'steps'}.rank{r}"), mono_at(truths[r], wall0))
        msgs.append(check_steps(rep, truths[r], wall0, wall1, lengths, rank=r))
    print(f"ddp: truth rank 0 backward wait {sh[0]['bwd_wait_s']:.3f}, rank 1 sleep {sh[1]['sleep_s']:.3f} "
          f"backward wait {sh[1]['bwd_wait_s']:.3f}; ledger rank 0 {ranks[0]['lost']}, rank 1 {ranks[1]['lost']}\n"
          + "\n".join(msgs) + "\n" + describe(rep))
    assert sh[0]["bwd_wait_s"] >= 0.5 and sh[1]["sleep_s"] >= 0.5, "scenario is not what it claims"
    # the straggler is rank 1, whose own time is its sleep; rank 0 waits for it in backward
    assert rep["verdict"]["rule"] == "straggler" and rep["verdict"]["rank"] == 1, describe(rep)
    assert f is not None and "sleeping" in f["evidence"]["slow_rank_own"], f
    assert not [x["rule"] for x in rep["findings"] if x["rule"] in CAUSES - {"straggler"}
                and SEV_RANK[x["severity"]] >= SEV_RANK["medium"]], describe(rep)
    for r in (0, 1):
        assert abs(ranks[r]["lost"].get("straggler", 0.0) - sh[r]["bwd_wait_s"]) <= SHARE_TOL, (r, ranks[r], sh[r])
        assert abs(f["evidence"]["wait_shares"][f"rank {r}"] - sh[r]["bwd_wait_s"]) <= SHARE_TOL, (f, sh)
    assert abs(ranks[1]["states"].get("idle", 0.0) - sh[1]["sleep_s"]) <= SHARE_TOL, (ranks[1], sh[1])
    # the job's figure: the waiting rank's wait over both ranks' wall time
    assert abs(f["impact"] - sh[0]["bwd_wait_s"] / 2) <= SHARE_TOL, (f, sh)
