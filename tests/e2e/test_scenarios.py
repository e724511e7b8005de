"""Advisor scenarios (advisor-rules.md §4.2) on real PyTorch CPU trainers.

Every scenario starts a trainer under ``sattui record -- CMD`` (so sattui sees the
whole process tree from its first second, torchrun's ranks included; the advisor skips
its 10 s warm-up), lets it train for a fixed time and exit, then judges the recording
with ``sattui report --json`` and checks it against

* the expected headline (the report's ``verdict``),
* the findings that must be there (at a least severity),
* the findings that must not be there at ≥ medium,
* the trainer's own truth, measured inside the process (share of wall time in
  ``next(loader)``, in checkpoint saves, in ``all_reduce`` …), within ±0.10 for shares
  and ±25 % for periods, as §4.1 asks.

CPU only, 2 cores: the whole file takes about 4.5 minutes (five recordings of 31-40 s of
training; S01 and S03 shared with test_record_cli.py).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest

from tests.e2e.conftest import DemoRun, _have_torch, run_sattui
from tests.e2e.conftest import torchrun_cmd as _torchrun

pytestmark = pytest.mark.e2e

SEV_RANK = {"info": 0, "low": 1, "medium": 2, "high": 3}
SHARE_TOL = 0.10
PERIOD_TOL = 0.25
# The advisor judges stack rules only with >= 300 main-thread samples in its 30 s
# window (advisor-rules.md §3.1). At the recorder's default 10 Hz that is 28.5 s of a
# 30 s window, so nothing is judged before t ~ 40 s; at 20 Hz judging starts at ~25 s
# and every scenario fits in ~40 s. py-spy costs ~3 % of a core at 20 Hz on these
# few-thread trainers (docs/sampling.md).
RATE_HZ = "20"


@pytest.fixture(autouse=True)
def _tools():
    if not _have_torch():
        pytest.skip("torch not installed (pip install torch==2.13.0)")
    from sattui.trainer.stacks import find_py_spy

    if find_py_spy() is None:
        pytest.skip("py-spy not installed")


# --------------------------------------------------------------------------- helpers


@dataclass
class Expect:
    """One row of advisor-rules.md §4.2, in CONTRACT rule ids."""

    headline: str
    required: dict[str, str] = field(default_factory=dict)  # rule -> least severity
    forbidden: tuple[str, ...] = ()  # not at >= medium
    rank: int | None = None  # the headline's rank, where it names one


def record(out: Path, *cmd: str, limit_s: float = 120) -> None:
    """``sattui record -- CMD`` until the trainer exits; the duration is only a backstop."""
    r = run_sattui("record", "-o", str(out), "--rate", RATE_HZ, "--duration", str(limit_s), "--", *cmd,
                   timeout=limit_s + 60)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr


def report(path: Path) -> dict:
    r = run_sattui("report", str(path), "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def read_lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def trainer_cmd(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def describe(rep: dict) -> str:
    """What the advisor said, for assertion messages: a wrong verdict needs its evidence."""
    v = rep.get("verdict") or {}
    lines = [f"verdict {v.get('rule')} {v.get('severity')} impact {v.get('impact')} rank {v.get('rank')} "
             f"led {v.get('led_share')} of {v.get('evaluations')}: {v.get('summary')}"]
    for f in rep.get("findings") or []:
        lines.append(f"  {f['rule']} {f['severity']} impact {f['impact']} rank {f.get('rank')} "
                     f"evals {f.get('evaluations')}: {json.dumps(f.get('evidence'), default=str)[:400]}")
    tr = rep.get("trainer") or {}
    lines.append(f"  states {tr.get('states')}")
    return "\n".join(lines)


def cpu_wait_seen(rec: Path) -> float:
    """The kernel's word on CPU contention in a recording: the mean run-queue wait
    (``run_delay``, from /proc/PID/schedstat) of the trainer's processes' ticks."""
    waits = [r["run_delay"] for r in read_lines(rec) if r.get("kind") == "proc"
             and r.get("role") in ("main", "rank", "worker") and r.get("run_delay") is not None]
    return sum(waits) / len(waits) if waits else 0.0


def check_advice(rep: dict, exp: Expect, cpu_wait: float = 0.0, true_wait: float | None = None) -> None:
    """The headline, the required findings, and no forbidden one at medium or above.
    ``cpu_wait``: the recording's own run-queue wait (cpu_wait_seen); a box this busy
    (2 shared cores: the trainer, its workers, py-spy, sattui and CI's neighbours) makes
    ``cpu_contention`` true, so it may stand at medium, never above its measure.
    ``true_wait``: the trainer's own share of time in next(loader) over the judged stretch;
    a data cause may stand at medium beside the scenario's when it is no larger than that
    (the checkpoint trainer truly waits 5-8 % for its one worker)."""
    assert "verdict" in rep and "findings" in rep, "report has no advisor output yet"
    why = describe(rep) + f"\n  run-queue wait of the trainer's processes: {cpu_wait:.3f}"
    v = rep["verdict"]
    assert v["rule"] == exp.headline, why
    if exp.rank is not None:
        assert v.get("rank") == exp.rank, why
    got: dict[str, int] = {}
    for f in rep["findings"]:
        got[f["rule"]] = max(got.get(f["rule"], -1), SEV_RANK[f["severity"]])
    for rule, sev in exp.required.items():
        assert got.get(rule, -1) >= SEV_RANK[sev], f"{rule} missing at >= {sev}\n{why}"
    contention = finding(rep, "cpu_contention")
    excused = {"cpu_contention"} if (contention is not None and cpu_wait >= 0.05
                                     and contention["impact"] <= cpu_wait + SHARE_TOL
                                     and contention["severity"] != "high") else set()
    if true_wait is not None and true_wait >= 0.05:
        excused |= {f["rule"] for f in rep["findings"] if f["rule"] in DATA_WAIT_RULES
                    and f["severity"] == "medium" and f["impact"] <= true_wait + SHARE_TOL}
    bad = [r for r in exp.forbidden if got.get(r, -1) >= SEV_RANK["medium"] and r not in excused]
    assert not bad, f"forbidden at >= medium: {bad}\n{why}"


# The causes of the main thread's time in next(loader) (sattui/ledger/causes.py's data-wait group).
DATA_WAIT_RULES = ("input_bound", "worker_cpu_bound", "worker_io_bound", "too_few_workers", "worker_respawn")


def finding(rep: dict, rule: str, rank: int | None = None) -> dict | None:
    for f in rep.get("findings") or []:
        if f["rule"] == rule and (rank is None or f.get("rank") == rank):
            return f
    return None


def pid_states(rec: Path, wall0: float | None = None, wall1: float | None = None) -> dict[int, dict[str, float]]:
    """Main-thread state shares per sampled pid, read from the recording's stack chunks.

    The report sums every sampled main thread into one ``trainer.states``; per-rank
    shares are what the straggler truth is about. ``wall0``/``wall1`` restrict the
    samples to the trainer's own truth window (the recording's ``t`` is seconds after
    its ``started_at``).
    """
    lines = read_lines(rec)
    t0 = datetime.fromisoformat(lines[0]["started_at"]).timestamp()
    secs: dict[int, dict[str, float]] = {}
    for r in lines[1:]:
        if r.get("kind") != "stacks":
            continue
        pid = int(r["pid"])
        for t, dur, tid, _si, state in r["samples"]:
            if int(tid) != pid or state in (None, "startup"):
                continue
            if wall0 is not None and not wall0 <= t0 + float(t) <= wall1:
                continue
            d = secs.setdefault(pid, {})
            d[state] = d.get(state, 0.0) + float(dur)
    return {pid: {k: v / sum(d.values()) for k, v in d.items()} for pid, d in secs.items() if d}


def share_between(lines: list[dict], key: str, wall0: float, wall1: float) -> float:
    """The trainer's own share of wall time in ``key`` (cumulative seconds) between two walls."""
    a = min(lines, key=lambda r: abs(r["wall"] - wall0))
    b = min(lines, key=lambda r: abs(r["wall"] - wall1))
    assert b["elapsed_s"] - a["elapsed_s"] > 5, (a, b)
    return (b[key] - a[key]) / (b["elapsed_s"] - a["elapsed_s"])


# --------------------------------------------------------------------------- S00–S03


@dataclass
class LoaderScenario:
    id: str
    trainer_scenario: str  # sattui.demo.trainer --scenario
    expect: Expect
    truth_min: float | None = None  # the scenario must really be what it claims
    truth_max: float | None = None
    # ~4 s of imports come first; the report judges from 10 s after the recording's start
    # and names a clear cause within seconds of that (issue 23): 22 s of training leave
    # ~15 s judged against the trainer's own truth (27 s before; 37 s sized for the old
    # 25-s start). At 22 s the shares read within 0.03 of the truth and the live headline
    # came 11 s after the first step.
    seconds: int = 22


# §4.2 "forbidden" columns: R01–R08, R10, R13–R19 for S00 (R09, R11, R12 need a card).
S00_FORBIDDEN = ("input_bound", "worker_cpu_bound", "too_few_workers", "worker_io_bound", "main_process_loading",
                 "host_sync_stall", "host_overhead_bound", "util_high_sm_low", "allocator_thrash", "pcie_bound",
                 "link_degraded", "straggler", "comm_bound", "periodic_stall", "worker_respawn", "cpu_contention",
                 "debug_settings", "starved_unattributed")

LOADER_SCENARIOS = [
    # S00 (healthy, compute-bound) is tests/e2e/test_ledger_scenarios.py::test_healthy_compute_bound:
    # one healthy run checks S00_FORBIDDEN, the ledger's shares and the steps (two cost 35 s more).
    # R03 "only if >= 2 idle cores (must not fire on 2 vCPU)": forbidden here on CI's 2 cores.
    # The data wait's cause is the headline (the ledger splits the wait by what the workers
    # did at those moments); the umbrella "input_bound" is only for a wait nothing narrows.
    LoaderScenario("S01", "input_bound",
                   Expect("worker_cpu_bound", {"worker_cpu_bound": "high"},
                          ("worker_io_bound", "main_process_loading", "host_sync_stall", "host_overhead_bound",
                           "input_bound", "cpu_contention", "worker_respawn")
                          + (("too_few_workers",) if (os.cpu_count() or 1) <= 2 else ())),
                   truth_min=0.5),
    LoaderScenario("S02", "io_bound",
                   Expect("worker_io_bound", {"worker_io_bound": "high"},
                          ("worker_cpu_bound", "too_few_workers", "main_process_loading", "input_bound",
                           "cpu_contention", "worker_respawn")),
                   truth_min=0.5),
    LoaderScenario("S03", "inline",
                   Expect("main_process_loading", {"main_process_loading": "high"},
                          ("worker_cpu_bound", "worker_io_bound", "worker_respawn")),
                   truth_min=0.5),
]


def loader_run(demo_trainer_run, sc: LoaderScenario) -> DemoRun:
    """The scenario's one run (conftest.py: test_record_cli.py judges it too). One epoch
    longer than the run: with the default 4096 items an epoch lasts ~5 s and every epoch
    starts new workers (persistent_workers=False), which is R16's scenario, not these."""
    return demo_trainer_run(sc.trainer_scenario, sc.seconds, "--epoch-items", "65536", rate_hz=RATE_HZ)


LOADER = {sc.trainer_scenario: sc for sc in LOADER_SCENARIOS}


@pytest.mark.parametrize("sc", LOADER_SCENARIOS, ids=lambda s: f"{s.id}-{s.trainer_scenario}")
def test_loader_scenarios(sc: LoaderScenario, demo_trainer_run):
    run = loader_run(demo_trainer_run, sc)
    truth, out = run.truth, run.out
    rep = report(out)
    lines = read_lines(truth)
    final = lines[-1]
    assert final.get("final"), "trainer did not finish"
    # The report's states cover the whole run (imports left out), like the trainer's
    # final line; the advisor judges only after its warm-up, so the same stretch is
    # compared too, cut from the recording's stacks by wall time.
    true_run = final["wait_s"] / final["elapsed_s"]
    states = rep["trainer"]["states"]
    seen_run = states.get("data_wait", 0.0) + states.get("data_inline", 0.0)
    t_start = datetime.fromisoformat(read_lines(out)[0]["started_at"]).timestamp()
    wall0, wall1 = t_start + rep["advisor"]["warmup_s"], final["wall"]
    true_judged = share_between(lines, "wait_s", wall0, wall1)
    window = pid_states(out, wall0, wall1)
    main = window.get(rep["trainer"]["pid"], {})
    seen_judged = main.get("data_wait", 0.0) + main.get("data_inline", 0.0)
    print(f"{sc.id}: data wait truth {true_run:.3f} run / {true_judged:.3f} judged; sattui {seen_run:.3f} "
          f"report / {seen_judged:.3f} judged\n{describe(rep)}")
    if sc.truth_min is not None:
        assert true_judged >= sc.truth_min, f"scenario is not what it claims: truth {true_judged:.2f}"
    if sc.truth_max is not None:
        assert true_judged <= sc.truth_max, f"scenario is not what it claims: truth {true_judged:.2f}"
    assert abs(seen_run - true_run) <= SHARE_TOL, (states, true_run)
    assert abs(seen_judged - true_judged) <= SHARE_TOL, (main, true_judged)
    # py-spy sampled the trainer's main process only, never a worker
    assert set(window) == {rep["trainer"]["pid"]}, window
    check_advice(rep, sc.expect, cpu_wait_seen(out))


def _live_headlines(out: Path) -> tuple[list[tuple[float, str]], float]:
    """The live advisor's headline at every second of a recording (judged as `sattui
    --pid` judges: every second, its 1-s warm-up, bins settled as their stacks arrive), and
    the time of the main thread's first sample past its imports (a user attaching to a
    running trainer starts there)."""
    from sattui.advisor.judge import Judge
    from sattui.advisor.loop import LIVE_WARMUP_S
    from sattui.recording import RecordingReader, samples_from_record

    reader = RecordingReader(str(out))
    pid = reader.header["pid"]
    judge = Judge(reader.header, every_s=1.0, warmup_s=LIVE_WARMUP_S)
    heads: list[tuple[float, str]] = []
    count = judge._count

    def seen(v):
        heads.append((v.t, v.headline.rule if v.headline is not None else "no_data"))
        count(v)

    judge._count = seen
    first_step = None
    for rec in reader.records():
        if first_step is None and rec["kind"] == "stacks" and rec["pid"] == pid:
            trained = [x.t for x in samples_from_record(rec) if x.tid == pid and x.state not in (None, "startup")]
            first_step = min(trained) if trained else None
        judge.add(rec)
    judge.result()
    assert first_step is not None, "no main-thread sample past the imports"
    return heads, first_step


def test_the_live_advisor_names_the_input_bound_cause_within_seconds_and_holds_it(demo_trainer_run):
    # Issue 23: the verdict as fast as its evidence allows. On S01's real run, the live
    # advisor names worker_cpu_bound within 25 s of the trainer's first step (the bench,
    # bench/time_to_answer.py, gives the figure: 8 s live on a quiet box) and never changes
    # its headline after that. Before issue 23: 41-44 s.
    sc = LOADER["input_bound"]
    heads, first_step = _live_headlines(loader_run(demo_trainer_run, sc).out)
    first = next((i for i, (_t, rule) in enumerate(heads) if rule != "no_data"), None)
    assert first is not None, heads
    t_first, rule = heads[first]
    print(f"S01 live: first headline {rule} at {t_first - first_step:.1f} s after the first step; "
          f"{len(heads) - first} evaluations after it")
    assert rule == sc.expect.headline and t_first - first_step <= 25.0, (heads[:first + 1], first_step)
    assert {r for _t, r in heads[first:]} == {rule}, heads[first:]


# --------------------------------------------------------------------------- S10


def test_S10_periodic_checkpoint(tmp_path):
    truth = tmp_path / "truth.jsonl"
    out = tmp_path / "run.jsonl"
    # R15 sees a stall in 1-s bins where >= 50 % of the main thread is in torch.save,
    # and needs >= 3 of them after the warm-up, >= 5 s and >= 3 x their length apart,
    # plus one more evaluation (hysteresis) before it can lead. A 160 MB blob plus 30000
    # small tensors takes ~1.4 s to save, mostly CPU (pickling), so about as long on any
    # disk; every 5 s of training that is a ~6.5 s period and saves at ~8, 15, 21, 28,
    # 34 … s. R15 is raised from ~40 s; until then the loop computes >= 70 % of the
    # time, which the advisor calls healthy. 51 s of training: evaluations at 25 … 55 s,
    # R15 leads at least as many as healthy (ties go to the larger impact).
    record(out, *trainer_cmd("sattui.demo.ckpt_trainer", "--seconds", "40", "--every-s", "5",
                             "--small-tensors", "30000", "--truth", str(truth)))
    rep = report(out)
    lines = read_lines(truth)
    ticks = [r for r in lines if "event" not in r]
    ckpts = [r for r in lines if r.get("event") == "ckpt"]
    final = ticks[-1]
    assert final.get("final"), "trainer did not finish"
    t_start = datetime.fromisoformat(read_lines(out)[0]["started_at"]).timestamp()
    wall0, wall1 = t_start + rep["advisor"]["warmup_s"], final["wall"]
    in_window = [c for c in ckpts if wall0 <= c["wall"] <= wall1]
    true_period = statistics.mean(b["wall"] - a["wall"] for a, b in zip(ckpts, ckpts[1:]))
    true_stall = statistics.mean(c["dur_s"] for c in in_window)
    true_lost = share_between(ticks, "ckpt_s", wall0, wall1)
    true_save = share_between(ticks, "save_s", wall0, wall1)
    window = pid_states(out, wall0, wall1)
    seen_ckpt = window[rep["trainer"]["pid"]].get("checkpoint", 0.0)
    f = finding(rep, "periodic_stall")
    print(f"S10: truth period {true_period:.2f} s, stall {true_stall:.2f} s, lost {true_lost:.3f} "
          f"(torch.save {true_save:.3f}), {len(in_window)} saves judged; sattui checkpoint state "
          f"{seen_ckpt:.3f}, report states {rep['trainer']['states']}\n{describe(rep)}")
    assert len(in_window) >= 3
    true_wait = final["wait_s"] / final["elapsed_s"]
    assert abs(rep["trainer"]["states"].get("data_wait", 0.0) - true_wait) <= SHARE_TOL, (rep["trainer"], true_wait)
    # The sampler names torch.save; the fsync after it is a C call in the user's frame.
    assert abs(seen_ckpt - true_save) <= SHARE_TOL
    check_advice(rep, Expect("periodic_stall", {"periodic_stall": "medium"}, ("input_bound", "cpu_contention")),
                 cpu_wait_seen(out), true_wait=share_between(ticks, "wait_s", wall0, wall1))
    ev = f["evidence"]
    assert ev["phase"] == "checkpoint", ev
    # the ledger's share is of the whole run after the warm-up: the trainer's own torch.save
    # share (the fsync after it is a C call in the user's frame, which the stacks call other)
    assert abs(f["impact"] - true_save) <= SHARE_TOL, (f, true_save)


# --------------------------------------------------------------------------- S13a


def test_S13a_ddp_straggler(tmp_path):
    prefix = tmp_path / "truth"
    out = tmp_path / "run.jsonl"
    # ~0.12 s per step (rank 1 sleeps 0.1 s of it): ~31 s of training after the ranks'
    # imports and the gloo rendezvous (~7 s). R14 needs both ranks judged (>= 95 % of
    # the window sampled each, see RATE_HZ) on two evaluations running, and then to
    # lead. A 340-step run of a loaded box, cut at 38 s (what 260 steps give): straggler
    # rank 1 high, decided 3 s after the warm-up, leading 26 of 26 evaluations.
    record(out, *_torchrun(), "--standalone", "--nproc_per_node=2", "-m", "sattui.demo.ddp_trainer",
           "--steps", "260", "--truth", str(prefix))
    rep = report(out)
    truths = {r: read_lines(Path(f"{prefix}.rank{r}")) for r in (0, 1)}
    for r, lines in truths.items():
        assert lines[-1].get("final"), f"rank {r} did not finish"

    # The tree: launcher as given pid, both ranks found with their numbers.
    ranks = {p["rank"]: p for p in rep["processes"] if p["role"] == "rank"}
    assert sorted(ranks) == [0, 1], rep["processes"]
    assert rep["trainer"]["pid"] not in {p["pid"] for p in ranks.values()}
    # The report's trainer states come from the ranks' main threads, not the launcher's.
    t_start = datetime.fromisoformat(read_lines(out)[0]["started_at"]).timestamp()
    wall0 = t_start + rep["advisor"]["warmup_s"]
    wall1 = min(lines[-1]["wall"] for lines in truths.values())
    per_pid = pid_states(out, wall0, wall1)
    assert set(per_pid) == {ranks[0]["pid"], ranks[1]["pid"]}, (per_pid, ranks)

    msgs = []
    for r in (0, 1):
        true_ar = share_between(truths[r], "allreduce_s", wall0, wall1)
        true_sleep = share_between(truths[r], "sleep_s", wall0, wall1)
        st = per_pid[ranks[r]["pid"]]
        msgs.append((r, true_ar, st.get("collective", 0.0), true_sleep, st.get("idle", 0.0), st))
    print("S13a: " + "; ".join(f"rank {r}: all_reduce truth {a:.3f} sattui {b:.3f}, sleep truth {c:.3f} "
                               f"sattui idle {d:.3f} ({s})" for r, a, b, c, d, s in msgs) + "\n" + describe(rep))
    for r, true_ar, seen_ar, true_sleep, seen_idle, st in msgs:
        assert abs(seen_ar - true_ar) <= SHARE_TOL, (r, st, true_ar)
        assert abs(seen_idle - true_sleep) <= SHARE_TOL, (r, st, true_sleep)
    check_advice(rep, Expect("straggler", {"straggler": "medium"}, ("input_bound",), rank=1))
    ev = finding(rep, "straggler", rank=1)["evidence"]
    for r, true_ar, *_ in msgs:
        assert abs(ev["collective_shares"][f"rank {r}"] - true_ar) <= SHARE_TOL, (ev, r, true_ar)
    assert "sleeping" in ev["slow_rank_own"], ev  # rank 1's own time: its sleep
    # per rank in the report (CONTRACT: trainer.ranks)
    by_rank = {x["rank"]: x for x in rep["trainer"]["ranks"]}
    assert sorted(by_rank) == [0, 1]
    for r, _true_ar, _seen, true_sleep, *_ in msgs:
        assert abs(by_rank[r]["states"].get("idle", 0.0) - true_sleep) <= 2 * SHARE_TOL, (by_rank[r], true_sleep)
