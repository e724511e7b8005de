"""The time ledger (sattui/ledger/bins.py) and the findings it gives (rules_ledger.py):
every lost second gets a cause from positive evidence at the same moments, never from a
missing signal; impacts are shares of the job's wall time."""

from __future__ import annotations

import pytest

from sattui.advisor import Advisor
from sattui.advisor import rules_ledger as rl
from sattui.ledger import bins as ledger
from sattui.ledger import restarts
from tests.unit.test_advisor_kit import PID, TL, ctx

W0, W1 = 10.0, 40.0  # the kit's window
WALL = W1 - W0


def shares(k: TL, c=None) -> dict[str, float]:
    return ledger.build(k.window(c or ctx())).cause_shares()


def findings(k: TL, c=None, t0: float = W0, t1: float = W1):
    w = k.window(c or ctx(), t0=t0, t1=t1)
    w.ledger = ledger.build(w)
    out = {}
    for fn in (rl.worker_cpu_bound, rl.too_few_workers, rl.worker_io_bound, rl.worker_respawn, rl.input_bound,
               rl.main_process_loading, rl.cpu_contention, rl.periodic_stall, rl.straggler, rl.comm_bound,
               rl.host_sync_stall, rl.host_overhead_bound, rl.starved_unattributed):
        for f in fn(w, 1.0):
            out[f.rule] = f
    return out


def near(a: float, b: float, tol: float = 0.02) -> bool:
    return abs(a - b) <= tol


def test_busy_workers_and_no_free_core_are_worker_cpu_bound():
    k = TL().main(cpu=0.5).proc(201, "worker", 0.95).stacks({"data_wait": 0.5, "forward": 0.5})
    s = shares(k, ctx(cpu_count=2))
    assert near(s["worker_busy"], 0.5) and set(s) == {"worker_busy"}
    f = findings(k, ctx(cpu_count=2))
    assert set(f) == {"worker_cpu_bound"} and near(f["worker_cpu_bound"].impact, 0.5)
    # the summary says why it does not ask for more workers, from the figures that decided it
    assert "(only 0.55 cores free on average: less than another worker needs)" in f["worker_cpu_bound"].summary
    assert near(f["worker_cpu_bound"].evidence["free_cores_mean"], 2 - 0.5 - 0.95)


def test_busy_workers_with_free_cores_are_too_few_workers():
    k = TL().main(cpu=0.5).proc(201, "worker", 0.95).stacks({"data_wait": 0.5, "forward": 0.5})
    f = findings(k, ctx(cpu_count=8))
    assert set(f) == {"too_few_workers"}
    assert f["too_few_workers"].severity == "high" and "num_workers" in f["too_few_workers"].fix
    assert "7" in f["too_few_workers"].fix  # Lightning: 8 // 1 - 1
    # one free core but already Lightning's maximum (3 cores: 3 // 1 - 1 = 2 workers): busy, not too few
    k2 = TL().main(cpu=0.5).proc(201, "worker", 0.7).proc(202, "worker", 0.7)
    k2.stacks({"data_wait": 0.5, "forward": 0.5})
    assert set(findings(k2, ctx(cpu_count=4))) == {"too_few_workers"}
    at_max = findings(k2, ctx(cpu_count=3))
    assert set(at_max) == {"worker_cpu_bound"}
    # a core was free: the summary must not claim otherwise
    assert "(2 workers already, Lightning's suggested maximum for 3 usable cores)" in at_max["worker_cpu_bound"].summary
    assert near(at_max["worker_cpu_bound"].evidence["free_cores_mean"], 3 - 0.5 - 1.4)
    # the usable cores not known: no free-core figure, and the summary says so
    unknown = findings(k, ctx(cpu_count=2, cpu_count_known=False))
    assert "the host's usable cores are unknown" in unknown["worker_cpu_bound"].summary
    assert "free_cores_mean" not in unknown["worker_cpu_bound"].evidence


def test_workers_restarted_every_epoch_count_as_the_workers_alive_at_once():
    # one busy worker at a time, a new pid every 6 s: ten pids over the window are still one
    # worker, so with cores free (4: Lightning suggests 3) more workers would help
    k = TL().main(cpu=0.5)
    for i in range(10):
        k.proc(201 + i, "worker", 0.95, t0=6 * i, t1=6 * i + 6)
    k.stacks({"data_wait": 0.5, "forward": 0.5})
    f = findings(k, ctx(cpu_count=4))
    assert "too_few_workers" in f and "worker_cpu_bound" not in f, f
    assert f["too_few_workers"].evidence["workers"] == 1
    assert near(f["too_few_workers"].evidence["worker_cpu_mean"], 0.95)


def test_workers_in_disk_wait_or_reading_are_io_bound():
    k = TL().main().proc(201, "worker", 0.1, state="D").proc(202, "worker", 0.2, state="S", read_Bps=50e6)
    k.stacks({"data_wait": 0.4, "forward": 0.6})
    s = shares(k)
    # the workers' seconds: 0.3 of a core on a CPU, 1.7 blocked on I/O; the wait splits so
    assert near(s["worker_io_bound"], 0.4 * 1.7 / 2.0) and near(s["worker_busy"], 0.4 * 0.3 / 2.0)
    f = findings(k)
    assert set(f) == {"worker_io_bound", "too_few_workers"}  # 8 CPUs: the little computing is not the issue
    assert f["worker_io_bound"].severity == "high" and f["too_few_workers"].impact < 0.1


def test_sleeping_workers_while_the_loop_waits_are_waiting_on_their_data_source():
    k = TL().main().proc(201, "worker", 0.03, state="S").stacks({"data_wait": 0.6, "forward": 0.4})
    assert near(shares(k)["worker_io_bound"], 0.6)


def test_no_live_worker_between_generations_is_worker_respawn():
    k = TL().main(cpu=0.5).proc(201, "worker", 0.95, t0=0, t1=20).proc(202, "worker", 0.95, t0=30, t1=60)
    k.stacks({"data_wait": 0.5, "forward": 0.5})
    s = shares(k, ctx(cpu_count=2))
    # 20–28 s: no live worker (the new one's first tick, at 30 s, describes the two bins
    # before it); of those 8 s, half in data wait. Its start is no restart: the main thread
    # goes on getting a batch every 0.5 s, as it usually does.
    assert near(s["worker_respawn"], 8 * 0.5 / WALL, 0.005)
    assert near(s["worker_busy"], (30 - 8) * 0.5 / WALL, 0.005)


def test_a_young_worker_asleep_on_its_data_has_started_not_restarting():
    # persistent_workers=False with fork: each epoch's new worker is in its loop within
    # milliseconds. Asleep in its first seconds, it waits on its data like any other (the
    # io_bound demo read as HIGH worker_respawn 40 %, its truth a restart of ~0.1 s an epoch).
    k = TL().main(cpu=0.5).proc(201, "worker", 0.03, state="S", t0=0, t1=20)
    k.proc(202, "worker", 0.03, state="S", t0=20, t1=60).stacks({"data_wait": 0.6, "forward": 0.4})
    s = shares(k, ctx(cpu_count=2))
    assert "worker_respawn" not in s and near(s["worker_io_bound"], 0.6), s


def _born(k: TL, pid: int, t0: float, t1: float, cpu: float | None, state: str = "S") -> TL:
    """Worker samples every second from ``t0`` + 0.3, the first with /proc's start time
    (``started_t`` = ``t0``: born while sattui watched)."""
    from sattui.model import ProcSample

    t = t0 + 0.3
    while t < t1:
        k.tl.add("proc", pid, t, ProcSample(t, pid, PID, "worker", None, "pt_data_worker", cpu, state, 1000, 0.0,
                                            0.0, started_t=t0 if t == t0 + 0.3 else None))
        t += 1.0
    return k


def _epochs(starts: dict[float, float], cpu: float | None = 0.01, step=None, step_s: float = 0.5) -> TL:
    """A trainer whose loop computes 0.25 s and waits 0.25 s per step (or ``step``, shares
    of ``step_s``), restarting its one
    worker at each ``born`` of ``starts`` (``born -> seconds``): the main thread then waits
    that long for the new worker's first batch."""
    k = TL().main(cpu=0.5)
    edges = [0.0, *sorted(starts), 60.0]
    for i, (a, z) in enumerate(zip(edges, edges[1:])):
        _born(k, 201 + i, a, z, cpu)
        first = starts.get(a, 0.0)
        if first:
            k.stacks({"data_wait": 1.0}, t0=a, t1=a + first, step=first)
        # (the step's compute first: the first batch ends the start's wait)
        k.stacks(step or {"forward": 0.5, "data_wait": 0.5}, t0=a + first, t1=z, step=step_s)
    return k


def test_a_new_generation_starts_until_the_first_batch_reaches_the_main_thread():
    # A worker_init_fn that sleeps 1.5 s, each epoch (persistent_workers=False): the new
    # worker is asleep, as one waiting on its data would be, yet the wait is its start.
    # Counted: the start (1.5 s from the birth to the main thread out of its wait) less
    # what the rank's batches usually take to show up (0.25 s here), each epoch.
    k = _epochs({15.0: 1.5, 25.0: 1.5, 35.0: 1.5})
    s = shares(k, ctx(cpu_count=2))
    assert near(s["worker_respawn"], 3 * (1.5 - 0.25) / WALL, 0.005), s
    f = findings(k, ctx(cpu_count=2))["worker_respawn"]
    assert f.severity == "medium"
    assert f.evidence["restarts"] == 3 and near(f.evidence["start_s_per_epoch"], 1.5, 0.01), f.evidence
    # by timing, whatever the new workers' own figures say: busy (spawn's imports) the same
    busy = shares(_epochs({15.0: 1.5, 25.0: 1.5, 35.0: 1.5}, cpu=0.95), ctx(cpu_count=2))
    assert near(busy["worker_respawn"], s["worker_respawn"], 0.001), busy
    # or none known at all (a recorder without the first sample's figures)
    unknown = shares(_epochs({15.0: 1.5, 25.0: 1.5, 35.0: 1.5}, cpu=None), ctx(cpu_count=2))
    assert near(unknown["worker_respawn"], s["worker_respawn"], 0.001), unknown


def test_the_first_generation_is_the_jobs_start_up_not_a_restart():
    k = TL().main(cpu=0.5)
    _born(k, 201, 12.0, 60.0, 0.01)
    k.stacks({"data_wait": 1.0}, t0=12.0, t1=14.0, step=2.0).stacks({"data_wait": 0.5, "forward": 0.5}, 14.0, 60.0)
    assert "worker_respawn" not in shares(k, ctx(cpu_count=2))


def test_a_generation_seen_in_its_fetch_loop_has_started():
    # A long first wait, but the new worker's own stack shows it fetching 0.3 s after its
    # birth: its start ended there, the rest of the wait is its data's.
    from sattui.model import Frame, WorkerStack

    def run(with_look: bool) -> dict[str, float]:
        k = _epochs({20.0: 1.5})
        if with_look:
            look = WorkerStack(20.3, 202, "fetch_wait", (Frame("__getitem__", "ds.py", 1),), active=False)
            k.tl.add("worker_stack", 202, 20.3, look)
        return shares(k, ctx(cpu_count=2))

    assert near(run(False)["worker_respawn"], (1.5 - 0.25) / WALL, 0.005)
    # the start ends at the look (0.3 s), less the usual 0.25 s
    assert near(run(True).get("worker_respawn", 0.0), (0.3 - 0.25) / WALL, 0.001)


def test_a_first_batch_within_the_usual_wait_is_no_restart():
    # io_bound's rhythm: waits of up to 0.6 s between sightings of the compute (steps
    # shorter than the sampling period are seen now and then); the new worker's first
    # batch shows up 0.5 s after its birth, no later than batches usually do.
    k = _epochs({15.0: 0.5, 25.0: 0.5, 35.0: 0.5}, step={"forward": 1 / 7, "data_wait": 6 / 7}, step_s=0.7)
    s = shares(k, ctx(cpu_count=2))
    assert "worker_respawn" not in s, s
    assert near(s["worker_io_bound"], 0.6 / 0.7, 0.03), s


def test_usual_wait_leaves_each_generations_start_out():
    # the waits: nine of 0.1 s, and the start (1.5 s) that ends in the first leave after a birth
    runs = [(float(i), i + 0.1) for i in range(9)] + [(9.0, 10.5)]
    assert near(restarts.usual_wait_s(runs, [9.2]), 0.1, 1e-9)
    assert near(restarts.usual_wait_s(runs, []), 1.5, 1e-9)  # without the birth it is a wait like any
    assert restarts.usual_wait_s(runs[:4], []) is None  # too few to go by


def test_a_restart_before_the_usual_wait_is_known_is_no_restart():
    # A trainer slowed at start-up (2 loaded cores): its first restart comes after two
    # waits, and the bins around it are computed once, with what is known then (the
    # Timeline holds the spans up to 13.5 s). The new worker's first batch takes what every
    # batch takes (0.6 s): its data's wait, not a restart. Read as "no usual wait", every
    # such start was worker_respawn (the io_bound demo on a loaded box: 3-6 %).
    def run(known_to: float) -> dict[str, float]:
        k = TL().main(cpu=0.5).stacks({"startup": 1.0}, t0=0.0, t1=10.0, step=1.0)
        _born(k, 201, 10.0, 12.1, 0.01)
        _born(k, 202, 12.1, 60.0, 0.01)
        k.stacks({"data_wait": 6 / 7, "forward": 1 / 7}, t0=10.0, t1=known_to, step=0.7)
        return ledger.build(k.window(ctx(cpu_count=2), t0=10.0, t1=known_to)).cause_shares()

    early = run(13.5)
    assert "worker_respawn" not in early and near(early["worker_io_bound"], 6 / 7, 0.05), early
    # and once the rhythm is known, the same start is still no restart
    assert "worker_respawn" not in run(40.0)


def test_runnable_but_waiting_workers_are_cpu_contention():
    # a worker that would run all the time gets 0.4 of a core and waits 0.6 in the run queue
    k = TL().main(cpu=0.4).proc(201, "worker", 0.4, state="R", run_delay=0.6)
    k.stacks({"data_wait": 0.5, "forward": 0.5})
    s = shares(k, ctx(cpu_count=2))
    assert near(s["cpu_contention"], 0.5 * 0.6) and near(s["worker_busy"], 0.5 * 0.4)
    f = findings(k, ctx(cpu_count=2))
    assert f["cpu_contention"].impact > f["worker_cpu_bound"].impact


def test_the_main_threads_own_run_delay_slows_its_compute():
    k = TL().main(cpu=0.5, state="R", run_delay=0.4).stacks({"forward": 0.5, "backward": 0.5})
    assert near(shares(k)["cpu_contention"], 0.4)


def test_contention_says_whose_work_holds_the_cores():
    # Four busy workers and the main thread on 2 usable cores: the trainer's own tree fills
    # them, and the fix is fewer workers, not "other processes".
    own = TL().main(cpu=0.4, state="R", run_delay=0.6)
    for pid in range(201, 205):
        own.proc(pid, "worker", 0.4, state="R")
    own.stacks({"forward": 0.5, "backward": 0.5})
    f = findings(own, ctx(cpu_count=2))["cpu_contention"]
    assert "its own processes fill the 2 usable cores (2.0 busy, 1.6 of them in 4 DataLoader workers)" in f.summary
    assert f.fix.startswith("The trainer's own processes fill") and near(f.evidence["trainer_cores"], 2.0)
    # A main thread alone on a host whose other processes keep 1.4 cores busy
    other = TL().main(cpu=0.5, state="R", run_delay=0.5).host(cpu_busy=1.9)
    other.stacks({"forward": 0.5, "backward": 0.5})
    f = findings(other, ctx(cpu_count=2))["cpu_contention"]
    assert "other processes on the host keep 1.4 cores busy" in f.summary and f.fix.startswith("Other processes")
    assert near(f.evidence["other_cores"], 1.4)
    # no host figures: it does not guess whose
    blind = TL().main(cpu=0.5, state="R", run_delay=0.5).stacks({"forward": 0.5, "backward": 0.5})
    f = findings(blind, ctx(cpu_count=2))["cpu_contention"]
    assert "other work holds the cores (the host's busy cores are not known)" in f.summary
    assert "other_cores" not in f.evidence


def test_no_cause_from_a_missing_signal():
    # A busy host, but no run-delay figures: contention is not guessed; no worker figures
    # for the data wait: it stays input_bound (not narrowed), not I/O.
    k = TL().proc(PID, "main", None, state="S", ppid=1).stacks({"data_wait": 0.5, "forward": 0.5})
    s = shares(k, ctx(cpu_count=1))
    assert set(s) == {"input_bound"} and near(s["input_bound"], 0.5)
    f = findings(k, ctx(cpu_count=1))
    assert set(f) == {"input_bound"}


def test_eval_and_checkpoint_are_a_periodic_stall_that_names_the_phase():
    k = TL().main().proc(201, "worker", 0.95).stacks({"eval": 0.25, "checkpoint": 0.05, "forward": 0.70})
    f = findings(k)["periodic_stall"]
    assert near(f.impact, 0.30) and f.severity == "high" and f.evidence["phase"] == "eval"
    assert "evaluation" in f.summary and "Evaluate less often" in f.fix
    assert "cpu_contention" not in findings(k)  # the old rules called an eval pass contention


def test_inline_loading_is_main_process_loading():
    k = TL().main(cpu=1.0).stacks({"data_inline": 0.7, "forward": 0.3})
    f = findings(k)["main_process_loading"]
    assert near(f.impact, 0.7) and "num_workers" in f.fix


def _ddp(k: TL, slow_idle: float = 0.7) -> TL:
    k.main(cpu=0.0).proc(501, "rank", 0.05, state="S", rank=0, cpu_main=0.04)
    k.proc(502, "rank", 0.3, state="S", rank=1, cpu_main=0.3)
    k.stacks({"backward": 0.9, "forward": 0.1}, pid=501)
    k.stacks({"idle": slow_idle, "backward": 0.2, "forward": 1 - slow_idle - 0.2}, pid=502)
    return k


def test_ddp_backward_with_the_main_thread_idle_waits_for_the_slow_rank():
    k = _ddp(TL())
    f = findings(k)
    s = f["straggler"]
    assert s.rank == 1 and s.evidence["slow"] == "rank 1"
    assert s.evidence["wait_shares"]["rank 0"] > 0.8 and s.evidence["wait_shares"]["rank 1"] < 0.1
    assert "sleeping" in s.evidence["slow_rank_own"]
    assert near(s.impact, 0.9 * 0.96 / 2, 0.03)  # rank 0's wait, over the job's two ranks
    assert "comm_bound" not in f


def test_a_rank_with_its_own_cpu_busy_in_backward_is_computing():
    k = TL().main(cpu=0.0).proc(501, "rank", 1.0, rank=0, cpu_main=0.95).proc(502, "rank", 1.0, rank=1,
                                                                               cpu_main=0.95)
    k.stacks({"backward": 0.6, "forward": 0.4}, pid=501).stacks({"backward": 0.6, "forward": 0.4}, pid=502)
    assert shares(k) == {}


def test_equal_waits_are_comm_bound_not_a_straggler():
    k = TL().main(cpu=0.0).proc(501, "rank", 0.2, rank=0).proc(502, "rank", 0.2, rank=1)
    k.stacks({"collective": 0.3, "forward": 0.7}, pid=501).stacks({"collective": 0.3, "forward": 0.7}, pid=502)
    f = findings(k)
    assert "straggler" not in f and near(f["comm_bound"].impact, 0.3)


def test_card_idle_ledger_follows_the_ranks_state_at_the_same_moments():
    # The card idles exactly while the main thread waits for data (0.25 s of every 0.5 s);
    # a utilization sample at t stands for the time since the previous one.
    k = TL().main().proc(201, "worker", 0.95)
    k.cards(dt=0.25, fn=lambda t: {"util": 0.0 if ((t - 0.25) % 0.5) < 0.25 - 1e-9 else 100.0})
    k.stacks({"data_wait": 0.5, "forward": 0.5})
    j = ledger.build(k.window(ctx(cpu_count=2)))
    cl = j.cards[0]
    assert near(cl.idle_s / cl.wall_s, 0.5, 0.05)
    assert near(sum(cl.by_state_s.values()), cl.idle_s, 1e-6)
    assert near(cl.by_state_s["data_wait"], cl.idle_s, 0.3) and set(cl.by_state_s) == {"data_wait"}
    assert set(cl.by_cause_s) == {"worker_busy"}


def test_idle_card_while_the_rank_computes_is_host_overhead():
    k = TL().main(cpu=1.0).cards(util=60.0).stacks({"forward": 0.5, "backward": 0.5})
    f = findings(k)["host_overhead_bound"]
    assert near(f.impact, 0.40) and f.severity == "high"


def test_an_idle_card_inside_one_utilization_sample_is_the_data_wait_s_first():
    # The card idles exactly while the main thread waits for data (the first 0.25 s of
    # every 0.5 s), but each utilization sample is the average over 0.5 s: 50 %. Which of
    # the idle seconds fell on which state is not in the evidence; a waiting rank gives
    # the card no work, so the wait accounts for them, and nothing is host overhead.
    k = TL().main().proc(201, "worker", 0.95).cards(dt=0.5, util=50.0)
    k.stacks({"data_wait": 0.5, "forward": 0.5})
    cl = ledger.build(k.window(ctx(cpu_count=2))).cards[0]
    assert near(cl.idle_s / cl.wall_s, 0.5)
    assert near(cl.by_state_s["data_wait"], cl.idle_s, 1e-6) and set(cl.by_state_s) == {"data_wait"}
    assert set(cl.by_cause_s) == {"worker_busy"}
    f = findings(k, ctx(cpu_count=2))
    assert set(f) == {"worker_cpu_bound"} and near(f["worker_cpu_bound"].impact, 0.5)
    # the summary says why it does not ask for more workers, from the figures that decided it
    assert "(only 0.55 cores free on average: less than another worker needs)" in f["worker_cpu_bound"].summary
    assert near(f["worker_cpu_bound"].evidence["free_cores_mean"], 2 - 0.5 - 0.95)


def test_host_overhead_is_only_the_idle_time_the_window_s_waits_leave():
    # The card idles a steady 40 %; the rank's sightings of its 40 % data wait swing from
    # second to second (0.2, 0.6, …), as 10 Hz py-spy sightings of 30 ms steps do (the
    # demo trainer's own record against its recording: per-second compute shares off by
    # up to 0.4). Second by second that leaves idle time beside compute sightings; over
    # the window the waits account for every idle second, so no host overhead is found.
    k = TL().main().proc(201, "worker", 0.95).cards(util=60.0)
    for s in range(60):
        k.stacks({"data_wait": 0.2, "forward": 0.8} if s % 2 == 0 else {"data_wait": 0.6, "forward": 0.4},
                 t0=s, t1=s + 1, step=1.0)
    w = k.window(ctx(cpu_count=2))
    w.ledger = ledger.build(w)
    assert w.ledger.cause_shares()["host_overhead_bound"] > 0.05  # what the seconds alone say
    assert rl.host_overhead_bound(w, 1.0) == []
    f = findings(k, ctx(cpu_count=2))
    assert set(f) == {"worker_cpu_bound"}


def test_host_overhead_beside_data_waits_is_still_found():
    # Idle while the rank waits (0.25 s of every 0.5 s), and half idle while it computes:
    # 25 % of the time is host overhead, beyond anything the waits account for.
    k = TL().main().proc(201, "worker", 0.95)
    k.cards(dt=0.25, fn=lambda t: {"util": 0.0 if ((t - 0.25) % 0.5) < 0.25 - 1e-9 else 50.0})
    k.stacks({"data_wait": 0.5, "forward": 0.5})
    f = findings(k, ctx(cpu_count=2))
    assert near(f["host_overhead_bound"].impact, 0.25) and f["host_overhead_bound"].severity == "high"
    assert near(f["worker_cpu_bound"].impact, 0.5)


def test_host_overhead_within_the_sampling_error_of_the_waits_is_not_called():
    # A starved loader: the rank waits 87 % of the time (sampled at 10 Hz for 30 s: 300
    # samples, ±1.9 points), the card idles 93 %. The 6 points beyond the waits are within
    # two standard errors of 5 %: sampling noise (the io_bound demo once read MEDIUM 6.3 %).
    # At 12 points beyond them the evidence is clear.
    def overhead(util: float) -> list:
        k = TL().main().proc(201, "worker", 0.03, state="S").cards(util=util)
        k.stacks({"data_wait": 0.87, "forward": 0.13})
        w = k.window(ctx(stack_rate_hz=10.0))
        w.ledger = ledger.build(w)
        assert near(w.ledger.cause_shares()["host_overhead_bound"], (100 - util) / 100 - 0.87, 0.005)
        return rl.host_overhead_bound(w, 1.0)

    assert overhead(7.0) == []
    (f,) = overhead(1.0)
    assert near(f.impact, 0.12, 0.005) and f.severity == "medium"


def test_without_stacks_the_idle_card_is_unattributed():
    k = TL().main().cards(util=30.0)
    w = k.window(ctx(has_stacks=False, no_stacks_reason="permission_denied: no ptrace"))
    w.ledger = ledger.build(w)
    (f,) = rl.starved_unattributed(w, 1.0)
    assert near(f.impact, 0.70) and "ptrace" in f.fix.lower()


def test_one_card_of_eight_counts_an_eighth():
    k = TL()
    for c in range(8):
        pid = 600 + c
        k.proc(pid, "rank", 1.0, rank=c, ppid=PID)
        if c == 3:  # idle exactly while its rank waits for data (0.3 s of every 0.5 s)
            k.cards(card=c, dt=0.1, procs={str(pid): 10_000_000_000},
                    fn=lambda t: {"util": 0.0 if ((t - 0.1) % 0.5) < 0.3 - 1e-9 else 100.0})
            k.stacks({"data_wait": 0.6, "forward": 0.4}, pid=pid)
        else:
            k.cards(card=c, util=100.0, procs={str(pid): 10_000_000_000})
            k.stacks({"forward": 1.0}, pid=pid)
        k.proc(700 + c, "worker", 0.05, state="S", ppid=pid, rank=c)
    k.main(cpu=0.0)
    s = shares(k)
    assert near(s["worker_io_bound"], 0.6 / 8, 0.01)
    assert s.get("host_overhead_bound", 0) < 0.01


def test_advisor_headline_is_the_largest_cause_and_healthy_never_stands_beside_a_medium_one():
    k = TL().main(cpu=0.5, t1=200).proc(201, "worker", 0.95, t1=200)
    k.stacks({"data_wait": 0.3, "eval": 0.1, "forward": 0.6}, t1=200)
    adv = Advisor(ctx(cpu_count=2, cards=[]))
    for t in range(15, 200, 5):
        v = adv.evaluate(k.tl, float(t))
    assert v.headline is not None and v.headline.rule == "worker_cpu_bound"
    rules = {f.rule for f in v.findings}
    assert "periodic_stall" in rules and "healthy" not in rules


@pytest.mark.parametrize("util,link_gbps,fires", [(30.0, 1.4, False), (30.0, 50.0, True)])
def test_pcie_bound_needs_the_link_busy_against_its_capacity(util, link_gbps, fires):
    from sattui.advisor import rules_gpu

    k = TL().main().cards(util=util, sm_active=10.0, pcie_rx_Bps=link_gbps * 1e9, pcie_tx_Bps=0.0,
                          pcie_gen=5, pcie_width=16)
    got = rules_gpu.pcie_bound(k.window(), 1.0)
    assert bool(got) is fires


def test_the_loader_shutting_its_workers_down_at_the_end_is_not_a_restart():
    k = TL().main(cpu=0.5).proc(201, "worker", 0.95, t0=0, t1=35).stacks({"data_wait": 0.5, "forward": 0.5})
    s = shares(k, ctx(cpu_count=2))
    assert "worker_respawn" not in s and near(s["worker_busy"], 0.5 * 25 / WALL, 0.03)


def test_the_books_running_window_equals_summing_its_bins():
    import random

    from sattui.ledger.bins import CardLedger, JobLedger, LedgerBook, RankLedger, total

    rnd = random.Random(7)
    book = LedgerBook()
    for b in range(400):
        j = JobLedger(gpu_job=True)
        j.ranks[1] = RankLedger(1, None, 1.0, {"forward": 0.4, "data_wait": 0.6}, {"worker_busy": rnd.random() * 0.6},
                                {"worker_busy": {"data_wait": 0.3}})
        j.cards[0] = CardLedger(0, 1, None, 1.0, rnd.random(), {"data_wait": 0.2}, {"worker_busy": 0.2})
        book._bins[b] = j
    for t1 in range(130, 400, 5):
        got = book.window(t1 - 120.0, t1 + 0.5, gpu_job=True)
        want = total((book._bins[b] for b in range(t1 - 120, t1)), gpu_job=True)
        assert near(got.ranks[1].causes_s["worker_busy"], want.ranks[1].causes_s["worker_busy"], 1e-6)
        assert near(got.cards[0].idle_s, want.cards[0].idle_s, 1e-6)
        assert near(got.ranks[1].wall_s, 120.0, 1e-6)


@pytest.mark.parametrize("binned", [True, False])
def test_a_wait_begun_before_the_window_counts_in_its_first_bins(binned):
    # 3.5-s data waits (8.0–11.5 s, …) with the card idle exactly then: the window opens at
    # 10 s inside one. The rank's first bins must hold that wait as the card's idle time
    # beside it does; taken by start alone they held only the forward after it, and the
    # card's idle second fell on a state the rank's bin did not have (the io_bound demo read
    # MEDIUM host overhead 12.8 % on CI from its first bin).
    from sattui.ledger.window import StackBinner, Window

    k = TL().main(cpu=0.05).proc(201, "worker", 0.03, state="S")
    k.cards(dt=0.25, fn=lambda t: {"util": 100.0 if (t % 4.0) >= 3.5 - 1e-9 or (t % 4.0) < 1e-9 else 0.0})
    k.stacks({"data_wait": 0.875, "forward": 0.125}, step=4.0)
    # (the binner settles bins LAG_S before the window's end)
    w = Window(k.tl, ctx(cpu_count=2), W0, W1 + StackBinner.LAG_S if binned else W1,
               binner=StackBinner() if binned else None)
    bins = w.stack_bins(PID)
    assert near(bins[10]["data_wait"], 1.0, 1e-6) and near(bins[11]["data_wait"], 0.5, 1e-6)
    assert min(bins) == 10
    w.ledger = ledger.build(w, W0, W1)
    cl = w.ledger.cards[0]
    assert near(cl.by_cause_s.get("host_overhead_bound", 0.0), 0.0, 0.3), cl.by_cause_s
    assert "unknown" not in cl.by_cause_s and near(cl.by_cause_s["worker_io_bound"], cl.idle_s, 0.3)
    assert rl.host_overhead_bound(w, 1.0) == []


def test_an_idle_card_while_the_loader_shuts_down_is_no_host_overhead():
    # The workers end at 35 s and the rank waits for data until the window's end: no time
    # lost to a cause (the run is ending), and the card's idle time then is no host
    # overhead either: the rank gave it no work.
    k = TL().main(cpu=0.5).proc(201, "worker", 0.95, t0=0, t1=35).stacks({"data_wait": 0.5, "forward": 0.5})
    k.cards(dt=0.25, fn=lambda t: {"util": 0.0 if ((t - 0.25) % 0.5) < 0.25 - 1e-9 else 100.0})
    cl = ledger.build(k.window(ctx(cpu_count=2))).cards[0]
    assert "host_overhead_bound" not in cl.by_cause_s, cl.by_cause_s
    assert near(cl.by_cause_s["idle"], 0.5 * (W1 - 35), 0.3) and near(cl.by_cause_s["worker_busy"], 0.5 * 25, 0.3)


def test_idle_beyond_the_waits_that_swings_second_by_second_is_not_host_overhead():
    # The card idles a steady 80 %; its rank is sighted waiting 95 % of one second and 35 %
    # of the next (a py-spy starved of CPU stretches the sightings it took before each
    # pause). Over the window the card idles 15 points beyond the waits, well past the
    # binomial error at 10 Hz (±2.8 points), but second by second the gap swings by ±30
    # points: its standard error over 30 s is ~5.6, and 15 is within two of it. The same
    # 15 points every second are host overhead.
    def found(swing: float) -> list:
        k = TL().main(cpu=0.05).proc(201, "worker", 0.03, state="S").cards(util=20.0)
        for s in range(60):
            wait = 0.65 + (swing if s % 2 == 0 else -swing)
            k.stacks({"data_wait": wait, "forward": 1.0 - wait}, t0=s, t1=s + 1, step=1.0)
        w = k.window(ctx(stack_rate_hz=10.0))
        w.ledger = ledger.build(w)
        assert near(rl._idle_beyond_waits(w.ledger), 0.15, 0.01)
        return rl.host_overhead_bound(w, 1.0)

    assert found(0.30) == []
    (f,) = found(0.0)
    assert near(f.impact, 0.15, 0.01)


def test_a_torn_stack_inside_a_wait_does_not_end_it():
    # py-spy (nonblocking) can read a stack without its outer frames: a lone
    # RandomSampler.__iter__ inside the loader's restart, read as `other`, ended a real
    # restart 0.03 s after its workers' birth (2 of 22 in a recording of the
    # worker-init scenario), and its whole start went to the workers' figures.
    from types import SimpleNamespace

    from sattui.model import Frame
    from sattui.states import State

    root = Frame("_run_module_as_main", "<frozen runpy>", 198)
    loader = Frame("_MultiProcessingDataLoaderIter._next_data", "torch/utils/data/dataloader.py", 1300)

    def span(t: float, state: str, *frames: Frame) -> SimpleNamespace:
        return SimpleNamespace(t=t, state=state, frames=frames)

    torn = span(0.05, State.OTHER, Frame("RandomSampler.__iter__", "torch/utils/data/sampler.py", 182))
    whole = span(0.05, State.OTHER, Frame("train", "train.py", 40), root)
    for middle, want in ((torn, [(0.0, 0.9)]), (whole, [(0.0, 0.05), (0.1, 0.9)])):
        spans = [span(0.0, State.DATA_WAIT, loader, root), middle, span(0.1, State.DATA_WAIT, loader, root),
                 span(0.9, State.FORWARD, Frame("Module._call_impl", "torch/nn/modules/module.py", 1), root)]
        assert restarts.wait_runs(spans) == want
    # outside a wait it begins nothing (it is not a data wait)
    assert restarts.wait_runs([span(0.0, State.FORWARD, root), torn, span(0.1, State.DATA_WAIT, loader, root),
                              span(0.3, State.FORWARD, root)]) == [(0.1, 0.3)]


def test_a_batch_seen_arriving_inside_the_wait_ends_the_start():
    # On a loaded box a step's compute can fall between two samples: the main thread reads
    # as waiting from one generation's birth to the end of the next one's start. A sample
    # of it unpickling a batch (torch's storage rebuilt, its file descriptor handed over)
    # says the first batch came: one start read as 3.9 s where the truth was 1.5 s.
    from types import SimpleNamespace

    from sattui.model import Frame
    from sattui.states import State

    root = Frame("main", "train.py", 40)
    poll = Frame("Connection._poll", "multiprocessing/connection.py", 440)
    got = Frame("rebuild_storage_fd", "torch/multiprocessing/reductions.py", 541)
    fd = Frame("DupFd.detach", "/usr/lib/python3.13/multiprocessing/resource_sharer.py", 57)

    def span(t: float, state: str, *frames: Frame) -> SimpleNamespace:
        return SimpleNamespace(t=t, state=state, frames=(*frames, root))

    # ten steps of 0.1 s wait, 0.1 s compute (the usual wait: 0.1 s), then the generations
    spans = [x for i in range(10) for x in (span(0.2 * i, State.DATA_WAIT, poll),
                                             span(0.2 * i + 0.1, State.FORWARD))]
    births = {201: -0.5, 202: -0.49, 301: 3.0, 302: 3.01, 401: 5.0, 402: 5.01}  # the first: start-up

    def starts(arrived: tuple[Frame, ...]) -> list[tuple[float, float | None]]:
        seen = [*spans, span(3.0, State.DATA_WAIT, poll), span(4.5, State.DATA_WAIT, *arrived),
                span(4.6, State.DATA_WAIT, poll), span(6.5, State.FORWARD)]
        return [(round(s.born, 2), s.seen_s and round(s.seen_s, 2))
                for s in restarts.find_starts(births, seen, {}, 7.0)]

    assert starts((poll,)) == [(3.0, 3.5), (5.0, 1.5)]  # without it: to the next start's end
    assert starts((got,)) == [(3.0, 1.5), (5.0, 1.5)]
    assert starts((fd, got)) == [(3.0, 1.5), (5.0, 1.5)]
    # one outside the wait is not the loader's delivery (a trainer's own torch.multiprocessing)
    assert restarts.first_receipt([span(4.5, State.FORWARD, got)], 3.0, 6.0) is None
    assert restarts.first_receipt([span(4.5, State.DATA_WAIT, got)], 3.0, 6.0) == 4.5
    assert restarts.first_receipt([span(4.5, State.DATA_WAIT, got)], 3.0, 4.5) is None


def test_the_old_epochs_last_step_placed_just_after_a_birth_ends_no_start():
    # Stack times and /proc birth times can disagree by tens of ms on a loaded box. ci
    # (stop 32) read a backward sample 0.04 s after a birth as the new generation's first
    # batch: that start counted nothing, its 0.8-s wait became a "usual" wait, and two such
    # made the usual wait so long that every other start was cut in half.
    from types import SimpleNamespace

    from sattui.states import State

    def span(t: float, state: str) -> SimpleNamespace:
        return SimpleNamespace(t=t, state=state, frames=())

    # twelve steps of 0.05 s wait, 0.1 s compute (the usual wait: 0.05 s)
    steady = [x for i in range(12) for x in (span(0.15 * i, State.DATA_WAIT), span(0.15 * i + 0.05, State.FORWARD))]
    births = {201: -0.5, 301: 2.0, 401: 4.0}
    seen = [*steady, span(1.95, State.DATA_WAIT),
            span(2.04, State.BACKWARD),  # the old epoch's last step, placed 0.04 s late
            span(2.1, State.DATA_WAIT), span(2.9, State.FORWARD),  # the start: 0.9 s
            span(3.95, State.DATA_WAIT), span(4.9, State.FORWARD),
            span(5.0, State.DATA_WAIT), span(5.05, State.FORWARD)]
    got = restarts.find_starts(births, seen, {}, 6.0)
    assert [(round(s.born, 2), round(s.seen_s or 0, 2)) for s in got] == [(2.0, 0.9), (4.0, 0.9)]
    # the 0.8-s wait is the start's, not a usual one: each start counts all but 0.05 s
    assert [round(s.counted_to - s.born, 2) for s in got] == [0.85, 0.85]
    # a step seen later than the slack does end a start (a fast loader's first batch)
    assert restarts.find_starts(births, [*seen[:-5], span(2.2, State.FORWARD), *seen[-4:]], {}, 6.0)[0].seen_s \
        == pytest.approx(0.2)


def test_the_loaders_shutdown_at_the_runs_end_is_no_lost_time():
    # The run's last second: the loop ended, the DataLoader joins its worker (the main
    # thread in the loader's code, read as data_wait). The worker's last sample is at
    # 37.1, the main process's last tick at 38.1 no longer saw it, and no tick describes
    # bin 38: the worker is gone, not "figures unknown" (which read as input_bound, and a
    # CI run's HF job got input_bound medium 9 % from its last seconds).
    def run(until_worker: float) -> dict[str, float]:
        k = TL().main(cpu=0.5, t1=38.2)
        _born(k, 201, 0.0, until_worker, 0.01)
        k.stacks({"forward": 1.0}, t0=0.0, t1=38.0).stacks({"data_wait": 1.0}, t0=38.0, t1=39.0, step=1.0)
        w = k.window(ctx(cpu_count=2), t0=30.0, t1=39.0)
        bins = ledger.build_bins(w, 30.0, 39.0)
        return bins[38].ranks[PID].causes_s if 38 in bins and PID in bins[38].ranks else {}

    assert run(until_worker=37.5) == {}  # gone before the last tick: the shutdown, nothing lost
    # still seen at the last tick (38.1): no tick describes bin 38, the cause is not narrowed
    assert run(until_worker=38.5).get("input_bound", 0.0) > 0.5
