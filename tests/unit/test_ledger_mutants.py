"""Tests written to kill mutants that survived the mutation check of the time ledger and
its rules (scripts/mutation_check.sh; survivors and the equivalent ones are listed in
docs/mutation-survivors.md).

Each test names the mutant it kills. Where a fixture recording reaches the code, it is
used; the rest are contract tests on built contexts, marked so.
"""

from __future__ import annotations

import math

import pytest

from sattui.advisor import rules_ledger as rl
from sattui.ledger import bins as ledger
from sattui.ledger.bins import CardLedger, JobLedger, RankLedger
from tests.unit.test_advisor_kit import TL, ctx


def _rank(pid: int, wall: float, starving: float = 0.0, rank: int | None = None) -> RankLedger:
    return RankLedger(pid, rank, wall, {"data_wait": starving} if starving else {})


def _card(card: int, wall: float, idle: float = 0.0, gap: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> CardLedger:
    return CardLedger(card, wall_s=wall, idle_s=idle, gap_w=gap[0], gap_wx=gap[1], gap_wxx=gap[2])


# -- rules_ledger ------------------------------------------------------------------------

@pytest.mark.parametrize(("cpus", "env", "n"), [(16, {"LOCAL_WORLD_SIZE": "4"}, 3), (7, {"LOCAL_WORLD_SIZE": "2"}, 2),
                                                (8, {}, 7), (8, {"LOCAL_WORLD_SIZE": "x"}, 7)])
def test_suggested_workers_is_lightnings_integer_per_local_rank(cpus, env, n):
    # Kills suggested_workers' env.get("LOCAL_WORLD_SIZE") → get(None) / "XX…XX" /
    # lower case and "cpus // lws" → "/": torchrun's LOCAL_WORLD_SIZE divides the cores,
    # and the count the fix texts quote is an integer. Contract test on a built window.
    w = TL().main().window(ctx(cpu_count=cpus, env=env))
    got = rl.suggested_workers(w)
    assert got == n and isinstance(got, int)
    assert f"(start near {n})" in rl._inline_fix(w)  # kills _inline_fix's "{S}" edits and str(None)


def test_why_not_more_workers_quotes_the_figures():
    # Kills _why_not_more's message edits ("XX…XX", the plural "s" forced or "XXXX") and
    # "free_mean < 1.0" → "<= 1.0": exactly one free core is a worker's worth. Contract
    # test on a built window with one worker.
    w = TL().main().proc(201, "worker", 0.9).window(ctx(cpu_count=2))
    assert rl._why_not_more(w, None) == "the host's usable cores are unknown"
    assert rl._why_not_more(w, 0.5) == "only 0.50 cores free on average: less than another worker needs"
    assert rl._why_not_more(w, 1.0) == "1 worker already, Lightning's suggested maximum for 2 usable cores"


def test_who_holds_the_cores_says_whose_work_and_picks_the_fix():
    # Kills _who_holds' edits: the cores counted only when known ("or True"), the tree's
    # "≥ 0.8 × cpus", "workers is not None and n" → "or", the plural edits, the texts
    # ("XX…XX", upper case), "others ≥ 0.5" → "> 0.5", and the "own" flag → True (which
    # picks FIX_CONTENTION_OWN). Contract test on built windows.
    one = TL().main().proc(201, "worker", 0.9).window(ctx(cpu_count=4))
    h = {"trainer_cores": 3.2, "workers_cores": 0.9, "other_cores": 0.1}
    assert rl._who_holds(one, h) == ("its own processes fill the 4 usable cores (3.2 busy, 0.9 of them in 1 "
                                     "DataLoader worker)", True)
    none = TL().main().window(ctx(cpu_count=4))
    assert rl._who_holds(none, {**h, "workers_cores": 0.0}) == ("its own processes fill the 4 usable cores "
                                                                "(3.2 busy)", True)
    unknown = TL().main().window(ctx(cpu_count=4, cpu_count_known=False))
    assert rl._who_holds(unknown, h) == ("other work holds the cores", False)
    assert rl._who_holds(one, {**h, "trainer_cores": 1.0, "other_cores": None}) == (
        "other work holds the cores (the host's busy cores are not known)", False)
    assert rl._who_holds(one, {**h, "trainer_cores": 1.0, "other_cores": 0.5}) == (
        "other processes on the host keep 0.5 cores busy", False)


def test_core_holders_without_process_figures_and_with_a_pin_thread():
    # Kills _core_holders' key edits in the no-figures answer (the cluster view reads the
    # ledger alone; _who_holds reads those keys), the "pin" role edits (a pin thread is
    # counted in its process, not twice) and "max(0.0, …)" → "max(1.0, …)". Contract test.
    bare = TL().main().window(ctx())
    bare.procs.clear()
    assert rl._core_holders(bare) == {"trainer_cores": None, "workers_cores": None, "other_cores": None}
    k = TL().main(cpu=1.0).proc(201, "worker", 0.5).proc(202, "pin", 0.5).host(cpu_busy=1.7)
    got = rl._core_holders(k.window(ctx()))
    assert got["trainer_cores"] == pytest.approx(1.5) and got["workers_cores"] == pytest.approx(0.5)
    assert got["other_cores"] == pytest.approx(0.2)


def test_gap_error_is_the_weighted_standard_error():
    # Kills _gap_error's "w < 3.0" → "<=" / "< 4.0", its "return 0.0" → 1.0, and the
    # formula edits ("- mean²" → "+", "/ (w − 1)" → "* (w − 1)" / "(w + 1)" / "(w − 2)").
    # Contract test on hand-made sums: weights 3.5, mean 0.2, variance 0.05.
    w, mean, var = 3.5, 0.2, 0.05
    job = JobLedger(cards={0: _card(0, 3.5, gap=(w, w * mean, w * (var + mean * mean)))}, gpu_job=True)
    assert rl._gap_error(job) == pytest.approx(math.sqrt(var / (w - 1.0)))
    at3 = JobLedger(cards={0: _card(0, 3.0, gap=(3.0, 3.0 * mean, 3.0 * (var + mean * mean)))})
    assert rl._gap_error(at3) == pytest.approx(math.sqrt(var / 2.0))
    assert rl._gap_error(JobLedger(cards={0: _card(0, 2.0, gap=(2.0, 0.4, 0.2))})) == 0.0


def test_wait_shares_and_their_error_over_ranks():
    # Kills _rank_wait_share's rank filter "wall_s > 0" → ">= 0" / "> 1", "if ranks" →
    # "or True" (a division by zero), "/ len" → "* len" and "else 0.0" → 1.0;
    # _wait_share_error's filter edits, "n <= 0" → "< 0" / "<= 1", "return 0.0" → 1.0;
    # _attributed_idle_share's "wall > 0" edits and "else 0.0" → 1.0; _idle_beyond_waits'
    # "or" → "and" and its "> 0" edits. Contract test on hand-made ledgers.
    empty = JobLedger()
    assert rl._rank_wait_share(empty) == 0.0
    assert rl._wait_share_error(empty, 20.0) == 0.0
    assert rl._attributed_idle_share(empty) == 0.0
    assert rl._idle_beyond_waits(empty) is None
    assert rl._idle_beyond_waits(JobLedger(ranks={1: _rank(1, 0.5, 0.1)})) is None
    assert rl._idle_beyond_waits(JobLedger(cards={0: _card(0, 0.5, 0.3)})) is None
    assert rl._idle_beyond_waits(JobLedger(ranks={1: _rank(1, 0.0)}, cards={0: _card(0, 0.5, 0.3)})) is None
    assert rl._idle_beyond_waits(JobLedger(ranks={1: _rank(1, 0.5, 0.1)}, cards={0: _card(0, 0.0)})) is None
    zero = JobLedger(ranks={1: _rank(1, 0.0)}, cards={0: _card(0, 0.0)})
    assert rl._rank_wait_share(zero) == 0.0 and rl._wait_share_error(zero, 20.0) == 0.0
    assert rl._attributed_idle_share(zero) == 0.0
    job = JobLedger(ranks={1: _rank(1, 0.5, 0.1), 2: _rank(2, 0.5, 0.3)}, cards={0: _card(0, 0.5, 0.35)})
    assert rl._rank_wait_share(job) == pytest.approx((0.2 + 0.6) / 2)
    assert rl._attributed_idle_share(job) == pytest.approx(0.7)
    assert rl._idle_beyond_waits(job) == pytest.approx(0.3)
    assert rl._wait_share_error(job, 1.0) == pytest.approx(math.sqrt(0.4 * 0.6 / 1.0))


def test_a_rank_without_a_number_is_named_by_its_pid():
    # Kills _rank_name's "r.rank is not None" → "or True" ("rank None" in the straggler's
    # summary). Contract test.
    assert rl._rank_name(_rank(4242, 1.0)) == "pid 4242"
    assert rl._rank_name(_rank(4242, 1.0, rank=3)) == "rank 3"


def _judged(k: TL, c=None):
    w = k.window(c or ctx())
    w.ledger = ledger.build(w)
    return w


def test_a_data_rules_evidence_summary_and_doc():
    # Kills the edits inside _data_rule's rule_fn (built at import, so mutmut's forked
    # workers never run them: checked with the module reloaded, docs/mutation-survivors.md):
    # the data-wait share's states ("data_wait" + "data_inline", their names and defaults),
    # the ranks' wall "or 1.0" → "and 1.0", the rounding to 4 / 2 places, the evidence keys,
    # P=share_text(d) → None / share_text(None), and rule_fn.__doc__ → None. Contract test on a built
    # window: a third of the time waiting on one busy worker, a ninth loading inline.
    k = TL().main(cpu=0.5).proc(201, "worker", 0.9549).stacks({"data_wait": 1 / 3, "data_inline": 1 / 9,
                                                                 "forward": 5 / 9})
    f = rl.worker_cpu_bound(_judged(k, ctx(cpu_count=2)))
    assert len(f) == 1
    assert f[0].summary == ("training waits 33% of the time for DataLoader workers that are busy computing samples "
                            "(only 0.55 cores free on average: less than another worker needs)")
    assert f[0].evidence == {"share": 0.3333, "data_wait_share": 0.4444, "workers": 1, "worker_cpu_mean": 0.95,
                             "cpus_usable": 2, "free_cores_mean": 0.55}
    assert rl.worker_cpu_bound.__doc__.startswith("R02 — ")


def test_a_data_rule_shows_from_3_percent_scaled_by_relax():
    # Kills rule_fn's default relax 1.0 → 2.0, "SHOWN_FROM * relax" → "/ relax" and the
    # data-wait share's defaults for a state the rank was never in (0.0 → 1.0):
    # 5 % waiting is shown (3 % threshold), 2 % only when the Advisor relaxes it to half
    # (hysteresis). Contract test on built windows.
    five = _judged(TL().main(cpu=0.5).proc(201, "worker", 0.0, state="S").stacks({"data_wait": 0.05,
                                                                                   "forward": 0.95}))
    got = rl.worker_io_bound(five)
    assert [f.rule for f in got] == ["worker_io_bound"] and got[0].evidence["data_wait_share"] == 0.05
    # (and a state the rank was never in adds nothing: get(…, 0.0) → 1.0 is killed here)
    inline = rl.main_process_loading(_judged(TL().main(cpu=1.0).stacks({"data_inline": 0.25, "forward": 0.75})))
    assert [f.evidence["data_wait_share"] for f in inline] == [0.25]
    two = _judged(TL().main(cpu=0.5).proc(201, "worker", 0.0, state="S").stacks({"data_wait": 0.02,
                                                                                  "forward": 0.98}))
    assert rl.worker_io_bound(two) == []
    assert [f.rule for f in rl.worker_io_bound(two, 0.5)] == ["worker_io_bound"]


def test_the_stragglers_finding_in_full():
    # Kills straggler's edits to its evidence (keys, roundings to 3 places, the collective
    # share's state and default, the slow rank's own share and its "no cause" default), its
    # summary's share_text(wait) → share_text(None), its fix ({R}, {CAUSE}, → None) and the slow rank's
    # tie-break key. Contract test on a built two-rank CPU job: rank 0 waits in backward
    # (its own CPU at 0.037) and in collectives; rank 1 sleeps 65.43 % of its time.
    k = TL()
    k.main(cpu=0.0).proc(501, "rank", 0.05, state="S", rank=0, cpu_main=0.037)
    k.proc(502, "rank", 0.3, state="S", rank=1, cpu_main=0.3)
    k.stacks({"backward": 0.7766, "collective": 0.1234, "forward": 0.1}, pid=501)
    k.stacks({"idle": 0.6543, "backward": 0.2, "forward": 0.1457}, pid=502)
    (f,) = rl.straggler(_judged(k))
    assert f.rank == 1 and f.impact == pytest.approx(0.4356, abs=1e-4)
    assert f.summary == ("the other ranks wait for rank 1 87% of their time more than it waits for them "
                         "(87%–87%, 95 %); its own time goes to sleeping, or waiting on something unknown")
    # (every bin the same: the interval has no width and no effective count of bins)
    assert f.evidence == {"share": 0.4356, "rank_shares": {"rank 0": 0.871, "rank 1": 0.0}, "slow": "rank 1",
                          "wait_shares": {"rank 0": 0.871, "rank 1": 0.0},
                          "slow_rank_own": "sleeping, or waiting on something unknown", "slow_rank_own_share": 0.654,
                          "collective_shares": {"rank 0": 0.123, "rank 1": 0.0}, "wait_gap": 0.871,
                          "wait_gap_interval": [0.871, 0.871], "asymmetric_interval": [0.4356, 0.4356],
                          "effective_bins": None}
    assert f.fix.startswith("The other ranks wait for rank 1 at every gradient all-reduce. Look at what rank 1 does "
                            "that the others do not: its own time goes to sleeping, or waiting on something unknown.")


@pytest.mark.parametrize(("shares", "summary", "evidence", "fix_first"), [
    ({"checkpoint": 0.21111, "eval": 0.1, "logging": 0.05, "forward": 0.63889},
     "training stops for checkpointing 36% of the time",
     {"share": 0.3611, "phase": "checkpoint", "phase_shares": {"checkpoint": 0.2111, "eval": 0.1, "logging": 0.05}},
     ("checkpoint", "eval", "logging")),
    ({"logging": 0.2, "eval": 0.1, "forward": 0.7}, "training stops for logging 30% of the time",
     {"share": 0.3, "phase": "logging", "phase_shares": {"logging": 0.2, "eval": 0.1}}, ("logging", "eval")),
])
def test_a_periodic_stall_names_its_largest_phase_first(shares, summary, evidence, fix_first):
    # Kills periodic_stall's edits: the phases' sums (get(k, 0.0) → 1.0 / get(None)), the
    # top phase's key, the wall "or 1.0" → "and 1.0", the phase shares' rounding, keys and
    # order (largest first), the phase names in the summary, share_text(d) → share_text(None), and the
    # fixes' order and separator. Contract test on built windows.
    (f,) = rl.periodic_stall(_judged(TL().main(cpu=0.5).stacks(shares)))
    assert f.summary == summary and f.evidence == evidence
    assert list(f.evidence["phase_shares"]) == list(evidence["phase_shares"])
    assert f.fix == " ".join(rl.FIX_STALL[p] for p in fix_first)
