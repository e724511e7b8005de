"""memory_growth (sattui/advisor/rules_memory.py) and cpu_frequency_low
(sattui/advisor/rules_host.py) on hand-made timelines."""

from __future__ import annotations

from sattui.advisor import Advisor
from sattui.advisor.rules_host import cpu_frequency_low
from sattui.advisor.rules_memory import MIB, memory_growth, steady_growth
from sattui.advisor.verdict import cannot_judge
from sattui.ledger import bins as ledger
from tests.unit.test_advisor_kit import PID, TL, TOTAL, ctx

GIB = 1 << 30


def long_window(k: TL, t0: float = 10.0, t1: float = 70.0):
    return k.window(ctx(), t0=t0, t1=t1)


# -- memory that only grows ----------------------------------------------------------------


def test_steady_growth_needs_growth_through_the_whole_span():
    assert steady_growth([(t, 100 + 5.0 * t) for t in range(0, 30)]) is not None
    # a warm-up that stops: grows in the first third, flat after
    assert steady_growth([(t, 100 + 50.0 * min(t, 8)) for t in range(0, 30)]) is None
    # a sawtooth: falls back by more than a tenth of its range, even while it drifts up
    assert steady_growth([(t, 100 + 5.0 * (t % 10)) for t in range(0, 30)]) is None
    assert steady_growth([(t, 100 + 2.0 * t + 20.0 * (t % 10)) for t in range(0, 30)]) is None
    # too short, too few points
    assert steady_growth([(t, 100 + 5.0 * t) for t in range(0, 15)]) is None
    assert steady_growth([(0, 1), (10, 2), (25, 3)]) is None
    g = steady_growth([(t, 100 + 5.0 * t) for t in range(0, 30)])
    assert abs(g.rate_Bps - 5.0) < 1e-9 and abs(g.growth_B - 5.0 * 29) < 1e-9


def test_a_worker_that_keeps_every_item_grows_in_rss_and_uss():
    # 0.5 MB/s each over three minutes: 180 MB in all, 3.5 GB/h — medium
    k = TL().main(t1=200)
    k.proc(201, "worker", 0.3, rss=lambda t: 300 * MIB + int(0.5 * MIB * t), t1=200)
    k.proc(202, "worker", 0.3, rss=lambda t: 300 * MIB + int(0.5 * MIB * t), t1=200)
    f = memory_growth(long_window(k, t1=200))
    assert len(f) == 1 and f[0].rule == "memory_growth" and f[0].severity == "medium" and f[0].impact == 0.0
    ev = f[0].evidence
    assert ev["what"] == "workers" and ev["kind"] == "allocation" and set(ev["workers"]) == {"201", "202"}
    assert abs(ev["mb_per_hour"] - 2 * 0.5 * 3600) < 20  # both alive at the window's end
    # 2 MB/s each: 14 GB/h, a host filled within hours — high
    k = TL().main()
    k.proc(201, "worker", 0.3, rss=lambda t: 300 * MIB + int(2 * MIB * t), t1=80)
    k.proc(202, "worker", 0.3, rss=lambda t: 300 * MIB + int(2 * MIB * t), t1=80)
    assert memory_growth(long_window(k))[0].severity == "high"
    assert "cache" in f[0].fix


def test_workers_that_exited_before_the_window_ends_give_their_rate_while_they_ran():
    # The run's end: both workers (2 MB/s each) exited 10 s before the last evaluation.
    # Their growth and its rate stand; "now" would be 0 and the report showed 0 MB/h (CI).
    k = TL().main(t1=90)
    k.proc(201, "worker", 0.3, rss=lambda t: 300 * MIB + int(2 * MIB * t), t1=80)
    k.proc(202, "worker", 0.3, rss=lambda t: 300 * MIB + int(2 * MIB * t), t1=80)
    (f,) = memory_growth(long_window(k, t1=90))
    assert f.severity == "high" and abs(f.evidence["mb_per_hour"] - 2 * 2 * 3600) <= 0.05 * 2 * 2 * 3600
    assert "while the last ones ran" in f.summary


def cow_worker(k: TL, rss: int = 900 * MIB, mb_s: float = 5.0, pid: int = 201, t0: float = 0.0) -> TL:
    """A worker whose USS (read every 10 s) climbs ``mb_s`` MB/s from 50 MB while its RSS stays."""
    return k.proc(pid, "worker", 0.3, rss=rss, t0=t0, t1=80,
                  uss=lambda t: 50 * MIB + int(mb_s * MIB * (t - t0)) if int(t) % 10 == 3 else None)


def test_copy_on_read_is_uss_growing_while_rss_stays():
    # USS read every 10 s climbs 5 MB/s; RSS flat at 900 MB: shared pages turned private
    f = memory_growth(long_window(cow_worker(TL().main(t1=80))))
    assert len(f) == 1 and f[0].evidence["kind"] == "copy-on-read", f
    assert f[0].evidence["workers"]["201"]["signal"] == "uss"
    assert "numpy" in f[0].fix and "13246" in f[0].fix
    # It stops when every shared page is private: at most the RSS, 900 - 365 MB more at the
    # window's end (t=70). The host's memory unknown (an older recording): under 1 GB of
    # room is low, not an alarm.
    assert f[0].severity == "low" and 530 <= f[0].evidence["room_mb"] <= 540, f[0].evidence
    assert "at most 53" in f[0].summary and f[0].evidence["host_available_mb"] is None
    # the rate lasts only until then: ~535 MB at 5 MB/s, ~1.8 min
    assert 1.6 <= f[0].evidence["minutes_to_ceiling"] <= 1.9, f[0].evidence


def test_copy_on_read_is_judged_by_its_room_against_the_hosts_available_memory():
    def sev(available_mb: int, **kw) -> str:
        k = cow_worker(TL().main(t1=80), **kw).host(t1=80, mem_total=64 << 30, mem_available=available_mb * MIB)
        (f,) = memory_growth(long_window(k))
        assert f.evidence["host_available_mb"] == available_mb
        return f.severity
    # ~535 MB left to copy: fits many times in 20 GB (low), is a quarter of 2 GB (medium),
    # does not fit in 500 MB (high) — however fast it climbs now
    assert sev(20_000) == "low" and sev(2_000) == "medium" and sev(500) == "high"
    assert sev(20_000, mb_s=50.0) == "low"


def test_copy_on_read_room_counts_the_parents_pages_at_the_workers_birth():
    # The worker has mapped 300 MB so far; its parent held 6 GB when it forked it: 6 GB can
    # still turn private, more than a third of the 16 GB available
    k = TL().main(t1=80, rss=6 << 30)
    k = cow_worker(k, rss=300 * MIB, mb_s=2.0).host(t1=80, mem_available=16 << 30)
    (f,) = memory_growth(long_window(k))
    assert f.evidence["workers"]["201"]["ceiling_mb"] == 6 * 1024
    assert f.severity == "medium" and f.evidence["room_mb"] > 5500


def test_a_fresh_worker_of_a_new_epoch_privatising_its_parent_is_no_alarm():
    # The healthy 5-minute run (bench/time_to_answer.py, healthy): one epoch's worker at a
    # flat USS, then the next epoch's, forked from an 822 MB trainer, whose USS climbed
    # 346 → 566 MB in 70 s (185 MB/min, "11 GB/h" when extrapolated): it read HIGH. Its room
    # is 256 MB of a host with 23 GB available; the old worker's memory went with it.
    k = TL().main(t1=240, rss=822 * MIB)
    k.proc(201, "worker", 0.05, rss=380 * MIB, t1=155,
           uss=lambda t: 132 * MIB + int(0.01 * MIB * t) if int(t) % 10 == 6 else None)
    k.proc(202, "worker", 0.05, rss=822 * MIB, t0=160, t1=240,
           uss=lambda t: min(566 * MIB, 346 * MIB + int(3.1 * MIB * (t - 160))) if int(t) % 10 == 6 else None)
    k.host(t1=240, mem_total=24 << 30, mem_available=23 << 30)
    f = memory_growth(long_window(k, t0=0, t1=240))
    assert [x.severity for x in f] in ([], ["low"]), f
    if f:
        assert set(f[0].evidence["workers"]) == {"202"}  # the exited generation is not counted


def test_memory_that_does_not_only_grow_is_not_flagged():
    k = TL().main()
    k.proc(201, "worker", 0.3, rss=lambda t: 300 * MIB + int(5 * MIB * min(t, 20)), t1=80)  # warm-up, then flat
    k.proc(202, "worker", 0.3, rss=lambda t: 300 * MIB + int(5 * MIB * (t % 15)), t1=80)  # a sawtooth
    k.proc(203, "worker", 0.3, rss=lambda t: 300 * MIB + int(0.5 * MIB * t), t1=80)  # grows, but 30 MB in all
    assert memory_growth(long_window(k)) == []
    # the trainer's own process is not a worker: its memory is not this rule's
    k2 = TL().main(rss=lambda t: 300 * MIB + int(5 * MIB * t), t1=80)
    assert memory_growth(long_window(k2)) == []


def test_a_card_whose_memory_only_grows():
    # 30 MB/s for ~5 minutes on a 150 GB card from 10 GB: 6 % of the card, full in ~70 min
    k = TL().main(t1=300).cards(t1=300, util=90.0, fn=lambda t: {"mem_used": 10 * GIB + int(0.03 * GIB * t)})
    f = memory_growth(long_window(k, t1=300))
    assert len(f) == 1 and f[0].card == 0 and f[0].evidence["what"] == "card"
    left = TOTAL - (10 * GIB + 0.03 * GIB * 299.5)
    assert abs(f[0].evidence["minutes_to_full"] - left / (0.03 * GIB) / 60) < 0.5
    assert f[0].severity == "medium" and "item()" in f[0].fix
    # nearly full and growing: full within the hour → high
    k2 = TL().main().cards(t1=80, util=90.0, fn=lambda t: {"mem_used": 120 * GIB + int(0.2 * GIB * t)})
    assert memory_growth(long_window(k2))[0].severity == "high"
    # the caching allocator filling up early, then steady: not growth
    k3 = TL().main().cards(t1=80, util=90.0, fn=lambda t: {"mem_used": 40 * GIB + int(1 * GIB * min(t, 15))})
    assert memory_growth(long_window(k3)) == []


def test_memory_growth_blocks_healthy_and_leads_when_nothing_else_is_lost():
    k = TL().main(cpu=1.0, t1=100)
    k.proc(201, "worker", 0.05, rss=lambda t: 300 * MIB + int(4 * MIB * t), t1=100)
    k.stacks({"forward": 0.3, "backward": 0.6, "optimizer": 0.1}, t1=100)
    adv = Advisor(ctx(cards=[]))
    heads = [adv.evaluate(k.tl, float(t)).headline.rule for t in range(15, 100, 5)]
    assert heads[-1] == "memory_growth", heads
    assert "healthy" not in heads[-5:], heads


# -- the CPUs' clock -----------------------------------------------------------------------


def busy_workers(freq: float | None, top: float | None = 3000.0, governor: str | None = "powersave") -> TL:
    k = TL().main(cpu=0.5).proc(201, "worker", 0.95).stacks({"data_wait": 0.5, "forward": 0.5})
    return k.host(freq_mhz=freq, freq_max_mhz=top, governor=governor)


def clock_findings(k: TL, cpus: int = 2):
    w = k.window(ctx(cpu_count=cpus))
    w.ledger = ledger.build(w)
    return cpu_frequency_low(w, 1.0)


def test_workers_cpu_bound_on_clocked_down_cpus():
    f = clock_findings(busy_workers(1200.0))
    assert len(f) == 1 and f[0].rule == "cpu_frequency_low"
    # half the time waiting on busy workers, at 40 % of the clock: 0.5 × 0.6 recoverable
    assert abs(f[0].impact - 0.30) < 0.02 and f[0].severity == "high"
    assert f[0].evidence["governor"] == "powersave" and f[0].evidence["clock_ratio"] == 0.4
    assert "performance" in f[0].fix


def test_no_clock_finding_at_normal_clocks_without_busy_workers_or_without_cpufreq():
    assert clock_findings(busy_workers(2400.0)) == []  # 80 % of the maximum: a loaded host's turbo
    # clocked down, but the loop does not wait on computing workers
    k = TL().main(cpu=1.0).proc(201, "worker", 0.05, state="S").stacks({"forward": 0.5, "backward": 0.5})
    k.host(freq_mhz=1000.0, freq_max_mhz=3000.0)
    assert clock_findings(k) == []
    # no cpufreq on the host (a VM): not judged, and said so
    k = busy_workers(None, None, None)
    assert clock_findings(k) == []
    assert "cpu_frequency_low" in cannot_judge(k.window(ctx()))
    assert "cpu_frequency_low" not in cannot_judge(busy_workers(1200.0).window(ctx()))


def test_the_clock_is_read_at_the_moments_the_workers_were_busy():
    # low clock only while the loop computed on its own, full clock while it waited on workers
    k = TL().main(cpu=0.5).proc(201, "worker", 0.95, t0=0, t1=25).proc(201, "worker", 0.05, state="S", t0=25, t1=60)
    k.stacks({"data_wait": 0.5, "forward": 0.5}, t1=25).stacks({"forward": 1.0}, t0=25)
    k.host(t1=25, freq_mhz=3000.0, freq_max_mhz=3000.0).host(t0=25, freq_mhz=900.0, freq_max_mhz=3000.0)
    assert clock_findings(k) == []
    assert PID  # the kit's trainer
