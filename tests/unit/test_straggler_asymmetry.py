"""A straggler is an asymmetry of the ranks' waits (issue 23, item 6): a balanced job whose
ranks both wait in their all-reduces (rank 0 25 %, rank 1 22 %) is comm_bound or nothing,
never a straggler; the straggler's impact is the asymmetric part, cleared with its interval
(sattui/advisor/intervals/batch_means.py: batch means over the ledger's one-second bins)."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest

from sattui.advisor import rules_ledger as rl
from sattui.advisor.intervals import batch_means as iv
from sattui.cluster.across_hosts import judge
from sattui.cluster.source import HostData, JobData, RankData
from sattui.ledger.bins import WAIT_BINS_MAX, JobLedger, RankLedger


def _bins_ledger(waits: dict[int, list[float]]) -> JobLedger:
    """A job's ledger the way the advisor's book makes one: one small ledger per 1-s bin
    (each rank's waiting seconds in it, the rest forward), merged in time order."""
    job = JobLedger()
    n = len(next(iter(waits.values())))
    for b in range(n):
        one = JobLedger()
        for r, xs in waits.items():
            x = xs[b]
            causes = {"straggler": x} if x > 0 else {}
            one.ranks[500 + r] = RankLedger(500 + r, r, 1.0, {"collective": x, "forward": 1.0 - x}, causes,
                                            wait_bins={1000 + b: (1.0, x)})
        job.merge(one)
    return job


def _judge(job: JobLedger) -> dict[str, object]:
    w = SimpleNamespace(ledger=job, gpu_job=False, has_stacks=True)
    return {f.rule: f for fn in (rl.straggler, rl.comm_bound) for f in fn(w, 1.0)}  # type: ignore[arg-type]


def _phases(rnd: random.Random, n: int, mean: float, run_s: int, spread: float) -> list[float]:
    """Per-bin waiting shares around ``mean`` that drift in runs of ``run_s`` seconds (a box
    whose load favours one rank for a while, then the other): autocorrelated bins."""
    out: list[float] = []
    while len(out) < n:
        level = min(1.0, max(0.0, mean + rnd.uniform(-spread, spread)))
        out += [min(1.0, max(0.0, level + rnd.gauss(0.0, 0.02))) for _ in range(run_s)]
    return out[:n]


# -- interval.py ----------------------------------------------------------------------------

@pytest.mark.parametrize(("df", "want"), [(1, 12.706), (2, 4.303), (3, 3.182), (5, 2.571), (10, 2.228),
                                          (30, 2.042), (1000, 1.960)])
def test_t_quantile_matches_the_tables(df, want):
    assert iv.t_quantile(0.975, df) == pytest.approx(want, abs=1e-3)
    assert iv.t_quantile(0.025, df) == pytest.approx(-want, abs=1e-3)


def test_an_interval_needs_two_bins_and_equal_bins_have_no_width():
    assert iv.share_interval([(1.0, 0.5)]) is None
    assert iv.share_interval([(0.0, 0.0), (1.0, 0.5)]) is None  # a bin without seconds is no bin
    got = iv.share_interval([(1.0, 0.25)] * 30)
    assert got is not None and got.estimate == pytest.approx(0.25) and got.half_width == pytest.approx(0.0)
    assert got.effective_bins is None and got.batches == 6  # ⌊√30⌋ = 5 bins a batch
    with pytest.raises(ValueError):
        iv.difference_interval([(1.0, 0.5)] * 3, [(1.0, 0.5)] * 2)


def test_the_share_is_the_ratio_of_the_sums():
    got = iv.share_interval([(0.5, 0.5), (1.0, 0.0), (1.0, 0.0), (1.5, 0.5)])
    assert got is not None and got.estimate == pytest.approx(1.0 / 4.0)


def test_batch_means_cover_the_truth_of_autocorrelated_bins_where_independent_bins_would_not():
    # Waits that come in 10-s runs: 120 bins hold about 12 independent observations. Each
    # bin taken as an independent trial gives an interval √10 too narrow; batch means cover
    # the true share about as often as they claim.
    rnd = random.Random(23)
    covered = naive_covered = 0
    trials = 300
    for _ in range(trials):
        xs = _phases(rnd, 120, 0.3, 10, 0.25)
        got = iv.share_interval([(1.0, x) for x in xs])
        assert got is not None
        covered += got.low <= 0.3 <= got.high
        m = sum(xs) / len(xs)
        sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs))
        naive_covered += abs(m - 0.3) <= 1.96 * sd
        assert got.effective_bins is not None and got.effective_bins < 60
    assert covered / trials >= 0.85, covered / trials
    assert naive_covered / trials <= 0.6, naive_covered / trials


def test_a_paired_difference_cancels_what_both_sides_share():
    # Both ranks slowed together, second by second (the host's load): their difference is
    # steady, and the paired interval is narrow though each share swings widely.
    rnd = random.Random(5)
    common = _phases(rnd, 60, 0.4, 5, 0.3)
    a = [(1.0, min(1.0, c + 0.1)) for c in common]
    b = [(1.0, c) for c in common]
    d = iv.difference_interval(a, b)
    one = iv.share_interval(b)
    assert d is not None and one is not None
    assert d.estimate == pytest.approx(0.1, abs=0.01) and d.half_width < 0.02 < one.half_width


# -- the rules on one host ------------------------------------------------------------------

def test_the_users_balanced_job_is_comm_bound_not_a_straggler():
    # The measured job: same work on each rank, both waiting in all-reduce, rank 0 25 %,
    # rank 1 22 % (the old rule: straggler MEDIUM, rank 1, impact 13 %).
    rnd = random.Random(4)
    job = _bins_ledger({0: _phases(rnd, 120, 0.25, 3, 0.1), 1: _phases(rnd, 120, 0.22, 3, 0.1)})
    w0, w1 = job.ranks[500].share("straggler"), job.ranks[501].share("straggler")
    assert round(w0, 2) == 0.25 and round(w1, 2) == 0.22, "scenario is not the user's"
    f = _judge(job)
    assert "straggler" not in f, f["straggler"].evidence
    assert f["comm_bound"].impact == pytest.approx((job.ranks[500].share("straggler")
                                                    + job.ranks[501].share("straggler")) / 2)


def test_a_loaded_box_that_favours_one_rank_for_a_while_is_no_straggler():
    # 30 % against 22 % over 40 s, the waits swinging in 8-s runs (the scheduler favouring
    # one rank, then the other): this draw's point asymmetry is 8 % of the job, but its
    # interval reaches down to 1 % — no evidence either rank is late. The same means held
    # steadily over two minutes are one.
    rnd = random.Random(7)
    noisy = _bins_ledger({0: _phases(rnd, 40, 0.30, 8, 0.25), 1: _phases(rnd, 40, 0.22, 8, 0.25)})
    ranks = list(noisy.ranks.values())
    gap = rl.wait_asymmetry(ranks, ranks[1])
    assert gap is not None and gap.estimate / 2 > 0.05 and gap.low / 2 < rl.SHOWN_FROM
    assert "straggler" not in _judge(noisy)
    steady = _bins_ledger({0: [0.30 + 0.01 * (b % 3) for b in range(120)], 1: [0.22] * 120})
    s = _judge(steady)["straggler"]
    assert s.rank == 1 and s.impact == pytest.approx(0.045, abs=0.003)


def test_a_slow_rank_is_a_straggler_with_the_asymmetric_part_as_impact():
    rnd = random.Random(3)
    job = _bins_ledger({0: _phases(rnd, 60, 0.60, 2, 0.1), 1: _phases(rnd, 60, 0.05, 2, 0.04)})
    f = _judge(job)
    s = f["straggler"]
    w0, w1 = job.ranks[500].share("straggler"), job.ranks[501].share("straggler")
    assert s.rank == 1 and s.impact == pytest.approx((w0 - w1) / 2, abs=1e-6)  # not rank 0's whole wait / 2
    ev = s.evidence
    assert ev["wait_shares"] == {"rank 0": round(w0, 3), "rank 1": round(w1, 3)}
    assert ev["wait_gap"] == pytest.approx(w0 - w1, abs=1e-3)
    lo, hi = ev["asymmetric_interval"]
    assert lo < s.impact < hi and hi - lo < 0.1 and ev["effective_bins"] > 0
    assert "more than it waits for them" in s.summary
    # beside a straggler the waits are its, not comm_bound's
    assert "comm_bound" not in f


def test_three_ranks_waiting_for_the_fourth():
    job = _bins_ledger({0: [0.5, 0.6] * 30, 1: [0.55] * 60, 2: [0.6, 0.5] * 30, 3: [0.1] * 60})
    s = _judge(job)["straggler"]
    assert s.rank == 3 and s.impact == pytest.approx(0.45 * 3 / 4, abs=1e-3)


def test_a_ledger_without_per_bin_waits_names_no_straggler():
    job = JobLedger()
    for r, x in ((0, 0.9), (1, 0.0)):
        job.ranks[r] = RankLedger(r, r, 10.0, {"collective": 10 * x}, {"straggler": 10 * x} if x else {})
    assert "straggler" not in _judge(job)


def test_a_runs_ledger_coarsens_its_bins_and_keeps_the_seconds():
    job = _bins_ledger({0: [0.5] * (WAIT_BINS_MAX + 10), 1: [0.1] * (WAIT_BINS_MAX + 10)})
    r = job.ranks[500]
    assert r.wait_bin_width == 2 and len(r.wait_bins) <= WAIT_BINS_MAX
    assert sum(w for w, _ in r.wait_bins.values()) == pytest.approx(WAIT_BINS_MAX + 10)
    assert sum(x for _, x in r.wait_bins.values()) == pytest.approx(0.5 * (WAIT_BINS_MAX + 10))
    # a window's running sum takes bins out again
    win = JobLedger()
    one = _bins_ledger({0: [0.5], 1: [0.1]})
    win.merge(one)
    win.merge(one, -1.0)
    assert win.ranks[500].wait_bins == {}


# -- across hosts ---------------------------------------------------------------------------

def _job_data(waits: dict[int, list[float]]) -> JobData:
    data = JobData(0.0, 300.0, {})
    for r, xs in waits.items():
        h = data.hosts.setdefault(f"n{r}", HostData(f"n{r}", True))
        total = 5.0 * sum(xs)
        h.ranks.append(RankData(f"n{r}", str(r), "0", "run-1",
                                {"collective": total, "forward": 5.0 * len(xs) - total},
                                {"straggler": total} if total else {},
                                wait_bins={k: (5.0, 5.0 * x) for k, x in enumerate(xs)}))
    return data


def test_the_cluster_judge_calls_symmetric_waits_comm_bound_and_an_asymmetry_a_straggler():
    rnd = random.Random(11)
    head, found = judge(_job_data({0: _phases(rnd, 24, 0.25, 2, 0.1), 1: _phases(rnd, 24, 0.22, 2, 0.1)}))
    assert "straggler" not in {f.rule for f in found}, [f.evidence for f in found]
    assert head is not None and head.rule == "comm_bound"
    head, found = judge(_job_data({0: _phases(rnd, 24, 0.7, 2, 0.1), 1: _phases(rnd, 24, 0.05, 2, 0.04)}))
    assert head is not None and (head.rule, head.rank, head.evidence["host"]) == ("straggler", 1, "n1")
    assert head.impact == pytest.approx(head.evidence["wait_gap"] / 2, abs=1e-3)
