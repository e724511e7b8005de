"""Input-pipeline rules R01–R05 and R16 on hand-built Timelines (known activity shares)."""

from sattui.advisor import rules_input as ri

from tests.unit.test_advisor_kit import PID, TL, ctx, rules_of


def _gpu(k: TL, util: float = 40.0) -> TL:
    return k.cards(util=util, sm_active=util * 0.8)


def test_input_bound_fires_high_medium_and_not_on_a_near_miss():
    w = _gpu(TL()).main().proc(201, "worker", 0.9).stacks({"data_wait": 0.30, "forward": 0.70}).window()
    (f,) = ri.input_bound(w)
    assert f.severity == "high" and abs(f.impact - 0.30) < 1e-6 and "HIGHLY" in f.summary
    assert f.evidence["workers"] == 1 and f.evidence["top_wait"][0]["site"].startswith("main (")
    w = _gpu(TL()).main().stacks({"data_wait": 0.08, "forward": 0.92}).window()
    assert [x.severity for x in ri.input_bound(w)] == ["medium"]
    w = _gpu(TL()).main().stacks({"data_wait": 0.04, "forward": 0.96}).window()
    assert ri.input_bound(w) == []
    # hysteresis hold: 4.5 % is over 0.8 × 5 %
    w = _gpu(TL()).main().stacks({"data_wait": 0.045, "forward": 0.955}).window()
    assert ri.input_bound(w) == [] and rules_of(ri.input_bound(w, 0.8)) == ["input_bound"]


def test_input_bound_is_at_most_low_when_the_gpu_is_busy():
    w = _gpu(TL(), util=95.0).main().stacks({"data_wait": 0.40, "forward": 0.60}).window()
    (f,) = ri.input_bound(w)
    assert f.severity == "low"


def test_input_bound_needs_stacks():
    w = _gpu(TL()).main().proc(201, "worker", 0.95).window(ctx(has_stacks=False, no_stacks_reason="x"))
    assert ri.input_bound(w) == [] and ri.worker_cpu_bound(w) == []


def test_worker_cpu_bound():
    k = _gpu(TL()).main().stacks({"data_wait": 0.7, "forward": 0.3})
    w = k.proc(201, "worker", 0.95, "R").window()
    (f,) = ri.worker_cpu_bound(w)
    assert f.severity == "high" and f.evidence["worker_cpu_median"] > 0.9
    near = _gpu(TL()).main().stacks({"data_wait": 0.7, "forward": 0.3}).proc(201, "worker", 0.45, "R").window()
    assert ri.worker_cpu_bound(near) == []
    # Always runnable but squeezed by a busy host: still CPU-bound.
    loaded = _gpu(TL()).main().stacks({"data_wait": 0.7, "forward": 0.3}).proc(201, "worker", 0.68, "R").window()
    (f,) = ri.worker_cpu_bound(loaded)
    assert f.evidence["worker_state_R"] >= 0.9
    sleepy = _gpu(TL()).main().stacks({"data_wait": 0.7, "forward": 0.3}).proc(201, "worker", 0.95, "S").window()
    assert ri.worker_cpu_bound(sleepy) == []  # busy CPU but mostly not running: not this rule


def test_too_few_workers_needs_spare_cores_and_says_how_many():
    k = _gpu(TL()).main(cpu=0.3).stacks({"data_wait": 0.7, "forward": 0.3}).proc(201, "worker", 0.95, "R")
    (f,) = ri.too_few_workers(k.window(ctx(cpu_count=8)))
    assert f.evidence["suggested_max"] == 7 and f.evidence["try_num_workers"] == 4  # ⌈1 / (1 − 0.7)⌉
    # advisor-rules.md S01: on 2 vCPU it must not fire (S = 1, no spare cores)
    assert ri.too_few_workers(k.window(ctx(cpu_count=2))) == []
    # unknown CPU count (a recording from elsewhere): silent
    assert ri.too_few_workers(k.window(ctx(cpu_count=8, cpu_count_known=False))) == []


def test_too_few_workers_lightning_branch_is_at_most_medium():
    # one worker that is not saturated, many CPUs: Lightning's num_workers < 2 warning
    k = _gpu(TL()).main().stacks({"data_wait": 0.5, "forward": 0.5}).proc(201, "worker", 0.5, "S")
    (f,) = ri.too_few_workers(k.window(ctx(cpu_count=16)))
    assert f.severity == "medium"


def test_worker_io_bound_storage_and_latency():
    base = _gpu(TL()).main().stacks({"data_wait": 0.8, "forward": 0.2})
    (f,) = ri.worker_io_bound(base.proc(201, "worker", 0.05, "S").proc(202, "worker", 0.05, "S").window())
    assert f.evidence["kind"] == "latency" and f.severity == "high"
    k = _gpu(TL()).main().stacks({"data_wait": 0.8, "forward": 0.2}).proc(201, "worker", 0.1, "D")
    (f,) = ri.worker_io_bound(k.window())
    assert f.evidence["kind"] == "storage"
    busy = _gpu(TL()).main().stacks({"data_wait": 0.8, "forward": 0.2}).proc(201, "worker", 0.6, "S").window()
    assert ri.worker_io_bound(busy) == []  # 0.6 cores: not waiting


def test_main_process_loading():
    w = _gpu(TL()).main(cpu=1.0, state="R").stacks({"data_inline": 0.6, "forward": 0.4}).window()
    (f,) = ri.main_process_loading(w)
    assert f.severity == "high" and "num_workers=0" in f.summary and "num_workers > 0" in f.fix
    with_worker = _gpu(TL()).main().proc(201, "worker", 0.5).stacks({"data_inline": 0.6, "forward": 0.4}).window()
    assert ri.main_process_loading(with_worker) == []
    small = _gpu(TL()).main().stacks({"data_inline": 0.04, "forward": 0.96}).window()
    assert ri.main_process_loading(small) == []


def _respawning(k: TL, persistent: bool = False) -> TL:
    # an epoch every 20 s; new worker pids each epoch unless persistent
    for e in range(4):
        t0, t1 = 5.0 + 20 * e, 5.0 + 20 * (e + 1) - 2.0
        pid = 300 if persistent else 300 + e
        if persistent:
            t0, t1 = (5.0, 85.0) if e == 0 else (0, 0)
        if t1 > t0:
            k.proc(pid, "worker", 0.9, t0=t0, t1=t1)
    return k


def test_worker_respawn_with_stacks_and_gpu_dips():
    k = TL().cards(t1=90, fn=lambda t: {"util": 2.0 if (t - 5) % 20 < 3 else 80.0})
    k.main(t1=90)
    # the main thread waits for the new workers' first batches for ~3 s at each epoch start
    for e in range(4):
        k.stacks({"data_wait": 1.0}, t0=5 + 20 * e - 2, t1=5 + 20 * e + 3)
        k.stacks({"forward": 1.0}, t0=5 + 20 * e + 3, t1=5 + 20 * (e + 1) - 2)
    _respawning(k)
    (f,) = ri.worker_respawn(k.window(t0=10, t1=90))
    assert len(f.evidence["respawns"]) >= 2 and "persistent_workers=True" in f.fix
    k2 = TL().cards(t1=90, util=80.0).main(t1=90).stacks({"forward": 1.0}, t1=90)
    assert ri.worker_respawn(_respawning(k2, persistent=True).window(t0=10, t1=90)) == []


def test_worker_respawn_without_a_stall_is_not_reported():
    k = TL().cards(t1=90, util=80.0).main(t1=90).stacks({"forward": 1.0}, t1=90)
    assert ri.worker_respawn(_respawning(k).window(t0=10, t1=90)) == []


def test_per_rank_findings_carry_the_rank():
    k = TL().cards(util=40.0, procs={"501": 1, "502": 1})
    k.proc(PID, "main", 0.0, ppid=1, name="pt_elastic")
    k.proc(501, "rank", 0.5, rank=0).proc(502, "rank", 0.5, rank=1)
    k.stacks({"data_wait": 0.5, "forward": 0.5}, pid=501).stacks({"forward": 1.0}, pid=502)
    (f,) = ri.input_bound(k.window())
    assert f.rank == 0 and "(rank 0)" in f.summary
    assert PID not in k.window().trainer_pids
