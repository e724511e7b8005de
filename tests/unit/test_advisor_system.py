"""Job-wide rules: healthy (R00), cpu_contention (R17), debug_settings (R18),
starved_unattributed (R19); the cost alerts, η, and util_anomaly."""

from sattui.advisor import anomaly, cost
from sattui.advisor import rules_system as rs
from tests.unit.test_advisor_kit import PID, TL, TOTAL, ctx


def test_healthy_util_and_sm_path_and_seed_path():
    f = rs.healthy(TL().cards(util=97.0, sm_active=85.0).main().window())
    assert f is not None and f.evidence["cards"]["0"]["path"] == "util+sm"
    assert rs.healthy(TL().cards(util=97.0, sm_active=60.0).main().window()) is None
    seed = TL().cards(util=85.0, power_w=560.0, mem_used=int(0.5 * TOTAL)).main().window()
    assert rs.healthy(seed).evidence["cards"]["0"]["path"] == "util+power+memory"
    low_power = TL().cards(util=85.0, power_w=300.0, mem_used=int(0.5 * TOTAL)).main().window()
    assert rs.healthy(low_power) is None


def test_healthy_cpu_job_of_two_ranks_names_the_ranks():
    k = TL().main(cpu=0.0, state="S")
    for pid, rank, fwd in ((501, 0, 0.5), (502, 1, 0.4)):
        k.proc(pid, "rank", 1.0, rank=rank)
        k.stacks({"forward": fwd, "backward": 0.45, "other": 0.55 - fwd}, pid=pid)
    f = rs.healthy(k.window())
    assert f is not None and f.evidence["compute_share"] == {"rank 0": 0.95, "rank 1": 0.85}
    assert "each rank's main thread computes at least 85%" in f.summary


def test_healthy_cpu_job_from_stacks():
    w = TL().main(cpu=1.0, state="R").stacks({"forward": 0.4, "backward": 0.3, "optimizer": 0.1, "other": 0.2})
    f = rs.healthy(w.window())
    assert f is not None and "CPU compute-bound" in f.summary
    w = TL().main().stacks({"forward": 0.4, "data_wait": 0.6})
    assert rs.healthy(w.window()) is None


def test_debug_settings():
    w = TL().cards(util=40.0).main().window(ctx(env={"CUDA_LAUNCH_BLOCKING": "1"}))
    (f,) = rs.debug_settings(w)
    assert f.severity == "high" and abs(f.impact - 0.6) < 1e-6 and "CUDA_LAUNCH_BLOCKING" in f.fix
    assert rs.debug_settings(TL().cards(util=40.0).main().window(ctx(env={"CUDA_LAUNCH_BLOCKING": "0"}))) == []
    (f,) = rs.debug_settings(TL().main().window(ctx(env={"TORCH_NCCL_BLOCKING_WAIT": "1"})))
    assert f.severity == "info"
    (f,) = rs.debug_settings(TL().main().window(ctx(env={"CUDA_LAUNCH_BLOCKING": "1"})))
    assert f.severity == "info"  # a CPU job: the flag costs nothing


def _ledgered(w):
    from sattui.ledger import bins as ledger

    w.ledger = ledger.build(w)
    return w


def test_starved_unattributed_without_stacks_says_what_would_attribute():
    from sattui.advisor import rules_ledger as rl

    k = TL().cards(util=20.0, mem_used=int(0.3 * TOTAL)).main().proc(201, "worker", 0.95)
    w = _ledgered(k.window(ctx(has_stacks=False, no_stacks_reason="permission_denied: no ptrace")))
    (f,) = rl.starved_unattributed(w)
    assert f.severity == "high" and "CAP_SYS_PTRACE" in f.fix and "nothing says why" in f.summary
    assert abs(f.impact - 0.80) < 0.02
    w = _ledgered(k.window(ctx(has_stacks=False, no_stacks_reason="stacks were not sampled (--no-stacks)")))
    assert "--no-stacks" in rl.starved_unattributed(w)[0].fix


def test_starved_unattributed_conditions():
    from sattui.advisor import rules_ledger as rl

    # a busy card's last few percent are not news
    assert rl.starved_unattributed(_ledgered(TL().cards(util=95.0).main().window())) == []
    # the seeds' "waiting for data": util swings, power low, memory occupied
    swing = TL().cards(fn=lambda t: {"util": 90.0 if int(t * 2) % 2 else 10.0}, power_w=200.0,
                       mem_used=int(0.4 * TOTAL)).main()
    (f,) = rl.starved_unattributed(_ledgered(swing.window()))
    assert f.evidence["cards"]["card 0"]["signature"] and f.severity == "high"
    # an idle card nobody uses is not "starved"
    idle = TL().cards(util=0.0, mem_used=0, procs=None).window(ctx(pid=None, has_stacks=False))
    assert rl.starved_unattributed(_ledgered(idle)) == []


def test_low_utilization_consider_stopping():
    (f,) = cost.low_utilization(TL().cards(util=20.0, mem_used=int(0.2 * TOTAL)).main().window())
    assert f.severity == "medium" and f.evidence["headroom"] and "larger batch" in f.fix
    assert cost.low_utilization(TL().cards(util=35.0).main().window()) == []
    # one long dip in an otherwise busy window is not "sustained"
    dip = TL().cards(fn=lambda t: {"util": 0.0 if t < 25 else 90.0}).main()
    assert cost.low_utilization(dip.window()) == []


def test_memory_swing_aperiodic_only():
    levels = [0.1, 0.8, 0.2, 0.9, 0.15, 0.85, 0.1, 0.7]
    spans = [0, 7, 11, 20, 26, 60, 100, 104, 200]

    def aperiodic(t):
        i = max(j for j in range(len(levels)) if spans[j] <= t)
        return {"util": 50.0, "mem_used": int(levels[i] * TOTAL)}
    (f,) = cost.memory_swing(TL().cards(t1=120, fn=aperiodic).main(t1=120).window(t0=0, t1=120))
    assert f.severity == "low" and f.evidence["swing"] > 0.5
    periodic = TL().cards(t1=120, fn=lambda t: {"util": 50.0, "mem_used": int((0.85 if t % 10 < 5 else 0.1) * TOTAL)})
    assert cost.memory_swing(periodic.main(t1=120).window(t0=0, t1=120)) == []
    small = TL().cards(t1=120, fn=lambda t: {"util": 50.0, "mem_used": int((0.5 if t % 13 < 5 else 0.1) * TOTAL)})
    assert cost.memory_swing(small.main(t1=120).window(t0=0, t1=120)) == []


def test_pcie_saturated_sm_idle():
    # Gen4 x16 ≈ 31.5 GB/s per direction
    (f,) = cost.pcie_saturated_sm_idle(TL().cards(util=60.0, sm_active=20.0, pcie_tx_Bps=28e9, pcie_gen=4,
                                                  pcie_width=16).main().window())
    assert f.severity == "medium"
    assert cost.pcie_saturated_sm_idle(TL().cards(util=60.0, sm_active=50.0, pcie_tx_Bps=28e9, pcie_gen=4,
                                                  pcie_width=16).main().window()) == []
    assert cost.pcie_saturated_sm_idle(TL().cards(util=60.0, sm_active=20.0, pcie_tx_Bps=20e9, pcie_gen=4,
                                                  pcie_width=16).main().window()) == []


def test_efficiency_methods():
    m = cost.EfficiencyMeter([{"card": 0, "power_limit_w": 500.0}])
    for t in range(10):
        m.add({"t": float(t), "card": 0, "util": 80.0, "sm_active": 60.0, "power_w": 250.0})
        m.add({"t": float(t), "card": 1, "util": 80.0, "power_w": 250.0, "power_limit_w": 500.0})
        m.add({"t": float(t), "card": 2, "util": 50.0})
    r = m.result()
    by = {c["card"]: c for c in r["cards"]}
    assert by[0]["eta"] == 0.6 and by[0]["method"] == "sm_active"
    assert by[1]["eta"] == 0.4 and by[1]["method"] == "util×power"
    assert by[2]["eta"] == 0.5 and by[2]["method"] == "util"
    assert r["job"]["eta"] == 0.5
    assert cost.EfficiencyMeter(from_t=5.0).card(0)["eta"] is None


def _flat(t, extra=None):
    d = {"util": 95.0 + (1.0 if int(t * 2) % 2 else -1.0)}
    if extra:
        d.update(extra(t) or {})
    return d


def test_util_anomaly_dip_and_level_shift():
    dip = TL().cards(t1=120, fn=lambda t: _flat(t, lambda t: {"util": 5.0} if t >= 117 else None)).main(t1=120)
    (f,) = anomaly.util_anomaly(dip.window(t0=0, t1=120))
    assert f.evidence["kind"] == "dip" and f.severity == "info"
    flat = TL().cards(t1=120, fn=_flat).main(t1=120)
    assert anomaly.util_anomaly(flat.window(t0=0, t1=120)) == []
    shift = TL().cards(t1=120, fn=lambda t: _flat(t, lambda t: {"util": 50.0 + (t % 2)} if t >= 102 else None))
    (f,) = anomaly.util_anomaly(shift.main(t1=120).window(t0=0, t1=120))
    assert f.evidence["kind"] == "level_shift" and f.severity == "low" and f.evidence["to"] < 60
    # reported when it happens, not for the next minutes
    later = TL().cards(t1=160, fn=lambda t: _flat(t, lambda t: {"util": 50.0 + (t % 2)} if t >= 102 else None))
    assert anomaly.util_anomaly(later.main(t1=160).window(t0=0, t1=160)) == []


def test_context_from_header_and_events():
    from sattui.advisor import AdvisorContext

    c = AdvisorContext.from_header({"pid": PID, "stack_rate_hz": None, "cards": [], "cpu_usable": 4})
    assert c.has_stacks is False and "--no-stacks" in c.no_stacks_reason and c.cpu_count == 4 and c.cpu_count_known
    c = AdvisorContext.from_header({"pid": None})
    assert c.has_stacks is False and "cards-only" in c.no_stacks_reason
    c = AdvisorContext.from_header({"pid": PID, "stack_rate_hz": 20.0, "host": "elsewhere"},
                                   [{"type": "permission_denied", "message": "no"}])
    assert c.has_stacks is False and c.no_stacks_reason.startswith("permission_denied") and not c.cpu_count_known
