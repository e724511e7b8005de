"""The ledger reads the workers' own stacks (worker_stack records) where /proc cannot
tell why an asleep worker sleeps, and keeps the CPUs' clock for busy-worker seconds."""

from __future__ import annotations

from sattui.ledger import bins as ledger
from sattui.model import Frame, WorkerStack
from tests.unit.test_advisor_kit import TL, ctx

W0, W1 = 10.0, 40.0


def looks(k: TL, pid: int, state: str, t0: float = 0.0, t1: float = 60.0, every: float = 5.0) -> TL:
    t = t0
    while t < t1:
        k.tl.add("worker_stack", pid, t, WorkerStack(t, pid, state, (Frame("get", "multiprocessing/queues.py", 1),),
                                                     active=False))
        t += every
    return k


def shares(k: TL, cpus: int = 2) -> dict[str, float]:
    return ledger.build(k.window(ctx(cpu_count=cpus))).cause_shares()


def asleep_worker(main_delay: float | None) -> TL:
    return TL().main(run_delay=main_delay).proc(201, "worker", 0.02, state="S").stacks(
        {"data_wait": 0.2, "forward": 0.8})


def test_asleep_workers_with_no_stack_wait_on_their_source():
    s = shares(asleep_worker(None))
    assert set(s) == {"worker_io_bound"} and abs(s["worker_io_bound"] - 0.2) < 0.02


def test_asleep_workers_in_their_fetch_wait_on_their_source_even_on_a_busy_host():
    s = shares(looks(asleep_worker(0.5), 201, "fetch_wait"))
    assert abs(s["worker_io_bound"] - 0.2) < 0.02 and "input_bound" not in s


def test_idle_workers_had_the_batch_ready_the_wait_is_the_loops_own():
    # not contended: the hand-over of the batch itself, not narrowed down further
    s = shares(looks(asleep_worker(0.05), 201, "idle"))
    assert set(s) == {"input_bound"} and abs(s["input_bound"] - 0.2) < 0.02
    # the main thread runnable but off the CPU: the host's contention (its compute too)
    s = shares(looks(asleep_worker(0.5), 201, "idle"))
    assert "worker_io_bound" not in s and "input_bound" not in s
    assert abs(s["cpu_contention"] - (0.2 + 0.8 * 0.5)) < 0.02


def test_a_look_says_nothing_far_from_it():
    # stacks only in the first ten seconds: the bins after them go by /proc as before
    s = shares(looks(asleep_worker(0.05), 201, "idle", t1=2.0))
    assert abs(s["worker_io_bound"] - 0.2 * 26 / 30) < 0.03


def test_the_clock_is_kept_for_busy_worker_seconds_only():
    k = TL().main(cpu=0.5).proc(201, "worker", 0.95).stacks({"data_wait": 0.5, "forward": 0.5})
    k.host(freq_mhz=1500.0, freq_max_mhz=3000.0)
    job = ledger.build(k.window(ctx(cpu_count=2)))
    det = next(iter(job.ranks.values())).detail[ledger.WORKER_BUSY]
    assert abs(det["clock_known_s"] - 15.0) < 0.5 and abs(det["clock_ratio_s"] / det["clock_known_s"] - 0.5) < 1e-6
    # no host record: no clock kept
    k = TL().main(cpu=0.5).proc(201, "worker", 0.95).stacks({"data_wait": 0.5, "forward": 0.5})
    det = next(iter(ledger.build(k.window(ctx(cpu_count=2))).ranks.values())).detail[ledger.WORKER_BUSY]
    assert "clock_known_s" not in det
