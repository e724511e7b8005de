"""Card rules R08–R13b and card_imbalance on hand-built Timelines, including the signals
this machine cannot produce (GPM, clock reasons, PCIe, several cards)."""

from sattui.advisor import rules_gpu as rg
from tests.unit.test_advisor_kit import PID, TL, TOTAL, ctx, rules_of


def _w(**fields):
    return TL().cards(**fields).main().window()


def test_util_high_sm_low_severity_follows_the_anchors():
    (f,) = rg.util_high_sm_low(_w(util=99.0, sm_active=20.0))
    assert f.severity == "high" and f.card == 0 and f.impact > 0.7
    (f,) = rg.util_high_sm_low(_w(util=99.0, sm_active=40.0))
    assert f.severity == "medium"  # SM ≥ 25 %: at most medium (KempnerPulse)
    assert rg.util_high_sm_low(_w(util=99.0, sm_active=55.0)) == []
    assert rg.util_high_sm_low(_w(util=70.0, sm_active=20.0)) == []
    assert rg.util_high_sm_low(_w(util=99.0)) == []  # no SM activity reported: never guessed
    (f,) = rg.util_high_sm_low(_w(util=99.0, sm_active=20.0, dram_active=70.0))
    assert "memory-bound" in f.evidence["labels"]


def test_low_tensor_core_use():
    (f,) = rg.low_tensor_core_use(_w(util=97.0, sm_active=85.0, tensor_active=0.5))
    assert f.severity == "medium"
    (f,) = rg.low_tensor_core_use(_w(util=97.0, sm_active=85.0, tensor_active=5.0))
    assert f.severity == "info"
    assert rg.low_tensor_core_use(_w(util=97.0, sm_active=85.0, tensor_active=15.0)) == []
    assert rg.low_tensor_core_use(_w(util=97.0, sm_active=40.0, tensor_active=0.5)) == []


def _sawtooth(t: float, peak: float = 0.97) -> dict:
    phase = t % 10.0
    frac = 0.60 + (peak - 0.60) * phase / 8.0 if phase < 8.0 else 0.60
    util = 90.0 if phase < 8.0 else 3.0
    return {"util": util, "mem_used": int(frac * TOTAL), "procs": {str(PID): int(frac * TOTAL)}}


def test_allocator_thrash_on_a_sawtooth():
    w = TL().cards(t1=60, fn=_sawtooth).main().window(t0=10, t1=60)
    (f,) = rg.allocator_thrash(w)
    assert f.evidence["source"] == "process" and len(f.evidence["drops"]) >= 3
    assert f.severity in ("medium", "high") and f.impact > 0.05
    assert f.evidence["event_times"]


def test_allocator_thrash_not_below_85_percent_nor_without_drops():
    low = TL().cards(t1=60, fn=lambda t: _sawtooth(t, peak=0.80)).main().window(t0=10, t1=60)
    assert rg.allocator_thrash(low) == []  # flushes need a peak near the card's size
    grow = TL().cards(t1=60, fn=lambda t: {"util": 90.0, "mem_used": int((0.6 + 0.006 * t) * TOTAL),
                                           "procs": {str(PID): int((0.6 + 0.006 * t) * TOTAL)}})
    assert rg.allocator_thrash(grow.main().window(t0=10, t1=60)) == []


def test_allocator_thrash_seed_signature_full_memory_churning_idle_gpu():
    def fn(t):
        frac = 0.93 if int(t * 2) % 2 else 0.86
        return {"util": 2.0, "mem_used": int(frac * TOTAL), "procs": None}
    (f,) = rg.allocator_thrash(TL().cards(t1=60, fn=fn).main().window(t0=10, t1=60))
    assert "not compute" in f.summary and f.severity == "high"
    steady = TL().cards(t1=60, util=2.0, mem_used=int(0.93 * TOTAL), procs=None).main().window(t0=10, t1=60)
    assert rg.allocator_thrash(steady) == []


def test_memory_near_full():
    (f,) = rg.memory_near_full(_w(util=95.0, mem_used=int(0.96 * TOTAL), procs={str(PID): 1, "999": 5}))
    assert f.severity == "low" and f.evidence["foreign_processes"] == {"999": 5}
    (f,) = rg.memory_near_full(_w(util=95.0, mem_used=int(0.91 * TOTAL)))
    assert f.severity == "info"
    assert rg.memory_near_full(_w(util=95.0, mem_used=int(0.88 * TOTAL))) == []


def test_throttled_hw_and_power_cap():
    hot = _w(util=98.0, clock_reasons=0x40 | 0x20, sm_clock_mhz=1100.0, temp_c=92.0)
    (f,) = rg.throttled(hot)
    assert f.severity == "high" and "HwThermalSlowdown" in f.evidence["reasons"]
    assert abs(f.impact - (1 - 1100 / 1980)) < 1e-6
    (f,) = rg.throttled(_w(util=98.0, clock_reasons=0x4, sm_clock_mhz=1600.0))
    assert f.severity == "medium" and "power cap" in f.summary
    assert rg.throttled(_w(util=98.0, clock_reasons=0x4, sm_clock_mhz=1900.0)) == []  # capped but at 96 % clock
    rare = TL().cards(util=98.0, sm_clock_mhz=1900.0, fn=lambda t: {"clock_reasons": 0x8 if int(t * 2) % 20 == 0
                                                                    else 0}).main().window()
    assert rg.throttled(rare) == []  # 5 % of samples < 10 %
    assert rg.throttled(_w(util=98.0, sm_clock_mhz=1100.0)) == []  # no reasons reported
    assert rg.throttled(_w(util=20.0, clock_reasons=0x40, sm_clock_mhz=1100.0)) == []  # idle card


def test_pcie_bound_three_paths():
    # x16 Gen5 ≈ 63 GB/s per direction: 40 GB/s is ≥ 50 %
    (f,) = rg.pcie_bound(_w(util=50.0, pcie_rx_Bps=40e9, pcie_gen=5, pcie_width=16))
    assert f.severity == "high" and f.evidence["rx_hi_share"] == 1.0
    assert rg.pcie_bound(_w(util=85.0, pcie_rx_Bps=40e9, pcie_gen=5, pcie_width=16)) == []
    assert rg.pcie_bound(_w(util=50.0, pcie_rx_Bps=20e9, pcie_gen=5, pcie_width=16)) == []
    # 2 GB/s over a 63 GB/s link is not a busy link, whatever the SM activity …
    assert rg.pcie_bound(_w(util=50.0, sm_active=20.0, pcie_rx_Bps=2e9, pcie_gen=5, pcie_width=16)) == []
    # … KempnerPulse's ≥ 1 GB/s with SM < 30 % stands in only where the link's capacity is unknown
    unknown_link = TL().cards(util=50.0, sm_active=20.0, pcie_rx_Bps=2e9).main().window(ctx(cards=[{"card": 0}]))
    (f,) = rg.pcie_bound(unknown_link)
    assert "GB/s over PCIe" in f.summary
    k = TL().cards(util=50.0).main().stacks({"h2d_copy": 0.3, "forward": 0.7})
    (f,) = rg.pcie_bound(k.window())
    assert f.evidence["h2d_copy_share"] >= 0.29


def test_link_degraded():
    (f,) = rg.link_degraded(_w(util=95.0, pcie_gen=3, pcie_width=8))
    assert f.severity == "low" and not f.evidence["pcie_limited"] and f.evidence["bandwidth_lost"] > 0.8
    (f,) = rg.link_degraded(_w(util=60.0, pcie_gen=3, pcie_width=8, pcie_rx_Bps=6e9))
    assert f.evidence["pcie_limited"] and f.severity == "high"
    assert rg.link_degraded(_w(util=95.0, pcie_gen=5, pcie_width=16)) == []
    # links drop their generation when idle to save power: not a fault
    assert rg.link_degraded(_w(util=5.0, pcie_gen=1, pcie_width=16)) == []


def test_card_imbalance():
    k = TL().cards(card=0, util=95.0).cards(card=1, util=60.0).main()
    (f,) = rg.card_imbalance(k.window(ctx(cards=[{"card": 0}, {"card": 1}])))
    assert f.card == 1 and f.severity == "medium" and abs(f.impact - 0.175) < 1e-6
    k = TL().cards(card=0, util=95.0).cards(card=1, util=85.0).main()
    assert rg.card_imbalance(k.window()) == []
    assert rg.card_imbalance(_w(util=40.0)) == []


def test_only_the_jobs_cards_are_judged():
    k = TL().cards(card=0, util=99.0, sm_active=20.0).cards(card=1, util=99.0, sm_active=20.0, procs={"777": 1})
    w = k.main().window()
    assert w.job_cards == [0]
    assert [f.card for f in rg.util_high_sm_low(w)] == [0]
    assert rules_of(rg.util_high_sm_low(w)) == ["util_high_sm_low"]
