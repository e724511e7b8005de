"""Host-side rules: sync stalls (R06), launch overhead (R07), stragglers and
communication (R14), periodic stalls (R15)."""

from sattui.advisor import rules_host as rh
from sattui.model import Frame

from tests.unit.test_advisor_kit import PID, TL, ctx


def test_host_sync_stall():
    k = TL().cards(util=50.0).main(cpu=1.0, state="R").stacks({"sync": 0.25, "forward": 0.75})
    (f,) = rh.host_sync_stall(k.window())
    assert abs(f.impact - 0.25) < 1e-6 and f.severity == "high"
    assert f.evidence["sites"][0]["site"] == "train_step (u/train.py:57)"
    busy = TL().cards(util=96.0).main().stacks({"sync": 0.25, "forward": 0.75})
    assert rh.host_sync_stall(busy.window()) == []  # waiting for a busy GPU
    few = TL().cards(util=50.0).main().stacks({"sync": 0.08, "forward": 0.92})
    assert rh.host_sync_stall(few.window()) == []
    cpu_job = TL().main().stacks({"sync": 0.3, "forward": 0.7})
    assert rh.host_sync_stall(cpu_job.window()) == []


def test_host_overhead_bound():
    k = TL().cards(util=40.0).main(cpu=0.98, state="R").stacks({"forward": 0.5, "backward": 0.3, "optimizer": 0.2})
    (f,) = rh.host_overhead_bound(k.window())
    assert abs(f.impact - 0.6) < 1e-6 and "launch" in f.summary
    idle_cpu = TL().cards(util=40.0).main(cpu=0.6, state="R").stacks({"forward": 1.0})
    assert rh.host_overhead_bound(idle_cpu.window()) == []
    waiting = TL().cards(util=40.0).main(cpu=0.98, state="R").stacks({"forward": 0.8, "data_wait": 0.2})
    assert rh.host_overhead_bound(waiting.window()) == []  # that is R01's
    busy = TL().cards(util=95.0, sm_active=85.0).main(cpu=0.98, state="R").stacks({"forward": 1.0})
    assert rh.host_overhead_bound(busy.window()) == []


def _ranks(k: TL, c0: float, c1: float) -> TL:
    k.proc(PID, "main", 0.0, ppid=1, name="pt_elastic")
    k.proc(501, "rank", 1.0, rank=0).proc(502, "rank", 1.0, rank=1)
    k.stacks({"collective": c0, "forward": 1 - c0}, pid=501).stacks({"collective": c1, "other": 1 - c1}, pid=502)
    return k


def test_straggler_stack_path_and_comm_bound():
    k = _ranks(TL().cards(card=0, util=90.0, procs={"501": 1}).cards(card=1, util=90.0, procs={"502": 1}),
               0.9, 0.05)
    w = k.window(ctx(cards=[{"card": 0}, {"card": 1}]))
    (f,) = rh.straggler(w)
    assert f.rank == 1 and f.card == 1 and f.evidence["path"] == "stacks"
    assert rh.comm_bound(w) == []
    k = _ranks(TL(), 0.5, 0.45)
    w = k.window()
    assert rh.straggler(w) == []
    (f,) = rh.comm_bound(w)
    assert abs(f.impact - 0.45) < 1e-6
    assert rh.comm_bound(_ranks(TL(), 0.05, 0.05).window()) == []


def test_straggler_gpu_path_nccl_spin():
    # card 1 spins NCCL kernels (util 100, SM low) waiting for card 0, which computes
    k = TL().cards(card=0, util=95.0, sm_active=80.0, procs={"501": 1})
    k.cards(card=1, util=100.0, sm_active=20.0, procs={"502": 1})
    k.proc(PID, "main", 0.0, ppid=1).proc(501, "rank", 1.0, rank=0).proc(502, "rank", 1.0, rank=1)
    w = k.window(ctx(cards=[{"card": 0}, {"card": 1}], has_stacks=False))
    (f,) = rh.straggler(w)
    assert f.card == 0 and f.rank == 0 and f.evidence["path"] == "gpu" and f.evidence["waiting_cards"] == [1]
    k = TL().cards(card=0, util=95.0, sm_active=80.0).cards(card=1, util=100.0, sm_active=60.0).main()
    assert rh.straggler(k.window(ctx(has_stacks=False))) == []


def _stalls(t: float, period: float = 20.0, dur: float = 2.0) -> dict:
    return {"util": 2.0 if t % period < dur else 95.0}


def test_periodic_stall_gpu_path():
    k = TL().cards(t1=130, fn=_stalls).main(t1=130)
    (f,) = rh.periodic_stall(k.window(t0=10, t1=130))
    assert abs(f.evidence["period_s"] - 20.0) < 0.5 and abs(f.evidence["stall_s"] - 2.0) < 0.6
    assert f.evidence["kind"] == "unknown" and abs(f.impact - 0.1) < 0.03 and f.severity == "medium"


def test_periodic_stall_kind_from_stacks_and_a_write_burst():
    k = TL().cards(t1=130, fn=_stalls).main(t1=130, write_Bps=0.0)
    for i in range(7):
        k.stacks({"checkpoint": 1.0}, t0=20 * i, t1=20 * i + 2)
        k.stacks({"forward": 1.0}, t0=20 * i + 2, t1=20 * i + 20)
        k.proc(PID + 1, "other", 0.1, t0=20 * i, t1=20 * i + 2, write_Bps=200e6)
    (f,) = rh.periodic_stall(k.window(t0=10, t1=130))
    assert f.evidence["kind"] == "checkpoint" and "async_save" in f.fix


def test_periodic_stall_not_irregular_nor_a_duty_cycle():
    irregular = {20.0, 31.0, 70.0, 75.0, 120.0}
    k = TL().cards(t1=130, fn=lambda t: {"util": 2.0 if any(0 <= t - s < 2 for s in irregular) else 95.0})
    assert rh.periodic_stall(k.main(t1=130).window(t0=10, t1=130)) == []
    # 1 s idle every 1.5 s is a starved card's rhythm, not a stall
    k = TL().cards(t1=130, fn=lambda t: {"util": 2.0 if t % 1.5 < 1.0 else 90.0})
    assert rh.periodic_stall(k.main(t1=130).window(t0=10, t1=130)) == []


def test_periodic_stall_stack_path_for_a_cpu_job():
    k = TL().main(t1=130)
    for i in range(7):
        k.stacks({"eval": 1.0}, t0=20 * i, t1=20 * i + 3)
        k.stacks({"forward": 1.0}, t0=20 * i + 3, t1=20 * i + 20)
    (f,) = rh.periodic_stall(k.window(t0=10, t1=130))
    assert f.evidence["source"] == "stacks" and f.evidence["kind"] == "eval" and f.card is None


def test_sync_sites_name_the_users_line():
    line = Frame("step", "/home/u/loop.py", 77)
    k = TL().cards(util=40.0).main().stacks({"sync": 0.3, "forward": 0.7}, frames={"sync": (line,)})
    (f,) = rh.host_sync_stall(k.window())
    assert f.evidence["sites"][0]["site"] == "step (u/loop.py:77)"
