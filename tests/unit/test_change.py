"""A change of phase (sattui/advisor/intervals/change.py): simulated one-second bins judged
every second over a sliding two-minute window, the window cut where a change is found, as
the advisor does; and the advisor itself on a job that starts waiting for data."""

from __future__ import annotations

import random

import pytest

from sattui.advisor import Advisor
from sattui.advisor import verdict as verdict_mod
from sattui.advisor.intervals.change import RECENT_BINS, find_change
from sattui.ledger.causes import RULE_CAUSE
from tests.unit.test_advisor_kit import TL, ctx
from tests.unit.test_sequential import _bins, _periodic

WINDOW_BINS = 120


def _cuts(bins: list[float]) -> list[int]:
    """The seconds (1-based: bins seen) at which the window was cut."""
    rows: list[tuple[float, dict[str, float]]] = []
    cuts = []
    for i, x in enumerate(bins):
        rows.append((1.0, {"c": x} if x > 0 else {}))
        if len(rows) > WINDOW_BINS:
            rows.pop(0)
        change = find_change(rows)
        if change is not None:
            cuts.append(i + 1)
            rows = rows[change.at:]
    return cuts


STEADY = {
    "30 % in 1-s waits": lambda rng: _bins(rng, 0.3, 1.0, 300),
    "50 % in 3-s waits": lambda rng: _bins(rng, 0.5, 3.0, 300),
    "90 % in 1-s waits": lambda rng: _bins(rng, 0.9, 1.0, 300),
    "a 1.3-s checkpoint every 6.5 s": lambda rng: _periodic(rng, 0.2, 6.5, 0.1, 300),
    "an 8-s evaluation every 33 s": lambda rng: _periodic(rng, 0.25, 33.0, 0.1, 300),
}


@pytest.mark.parametrize("shape", sorted(STEADY))
def test_a_steady_job_judged_every_second_for_five_minutes_is_rarely_cut(shape):
    rng = random.Random(20261203)
    streams = 150
    cut = sum(1 for _ in range(streams) if _cuts(STEADY[shape](rng)))
    # with 300 streams each: 1.3 % for 30 % in 1-s waits, none for the others
    assert cut / streams <= 0.02, (shape, cut)


def _delays(before, after, streams: int = 60, change_s: int = 40) -> list[float]:
    rng = random.Random(11)
    out = []
    for _ in range(streams):
        cuts = [c - change_s for c in _cuts(before(rng) + after(rng)) if c > change_s - 5]
        out.append(cuts[0] if cuts else float("inf"))
    return sorted(out)


def test_a_healthy_job_that_starts_waiting_is_cut_within_seconds():
    d = _delays(lambda rng: [0.0] * 40, lambda rng: _bins(rng, 0.9, 0.5, 40))
    assert d[0] >= 0, "cut before the change"
    assert d[len(d) // 2] <= RECENT_BINS, d
    assert d[int(len(d) * 0.9)] <= RECENT_BINS + 2, d


def test_a_cause_that_comes_with_the_new_phase_needs_no_spread_before_it():
    # 30 healthy seconds give no spread to measure a shift against: a cause absent from
    # all of them that now holds half the time, within the seconds, came with the change
    d = _delays(lambda rng: [0.0] * 30, lambda rng: _bins(rng, 0.5, 0.3, 40), change_s=30)
    assert d[0] >= 0 and d[int(len(d) * 0.9)] <= RECENT_BINS, d


def test_the_first_pass_of_several_ranks_out_of_step_is_no_new_phase():
    # eight ranks' checkpoints a little apart: the job's bins hold a change of state within
    # the second, as a new phase's would; a pass cause is not taken as one by appearing
    rows = [(1.0, {}) for _ in range(40)]
    rows += [(1.0, {"periodic_stall": x}) for x in (0.2, 0.5, 0.6, 0.7, 0.6, 0.5, 0.4, 0.2)]
    assert find_change(rows, frozenset({"periodic_stall"})) is None
    assert find_change(rows) is not None  # the same bins of a cause that is no pass


def test_a_job_that_stops_waiting_is_cut_once_the_new_run_is_twice_the_recent_bins():
    # its first seconds without a wait look the same as a pass's: one unbroken run of
    # whole seconds is cut only once it has lasted 2 × 8 bins
    d = _delays(lambda rng: _bins(rng, 0.9, 0.3, 40), lambda rng: [0.0] * 40)
    assert 0 <= d[0] and d[len(d) // 2] <= 2 * RECENT_BINS + 1, d


def test_one_pass_of_whole_seconds_is_no_change_and_the_cut_is_placed_at_the_change():
    healthy = [0.0] * 40
    assert _cuts(healthy + [1.0] * 12 + [0.0] * 30) == []
    rows = [(1.0, {}) for _ in range(40)] + [(1.0, {"c": 0.9}) for _ in range(10)]
    change = find_change(rows)
    assert change is not None and change.at == 40 and change.cause == "c"
    assert change.before == 0.0 and change.after == pytest.approx(0.9)


def _starts_waiting(change_s: float, end_s: float) -> TL:
    k = TL().main(cpu=0.5, t1=end_s).proc(201, "worker", 0.95, t1=end_s)
    k.stacks({"forward": 0.5, "backward": 0.5}, t1=change_s)
    k.stacks({"data_wait": 0.9, "forward": 0.1}, t0=change_s, t1=end_s)
    return k


def _named_after(adv: Advisor, k: TL, change_s: float, end_s: float) -> float | None:
    for t in range(15, int(end_s)):
        v = adv.evaluate(k.tl, float(t))
        if t > change_s and v.headline is not None and v.headline.rule == "worker_cpu_bound":
            return t - change_s
    return None


def test_the_advisor_names_the_new_phase_within_fifteen_seconds(monkeypatch):
    change_s, end_s = 70.0, 140.0
    k = _starts_waiting(change_s, end_s)
    adv = Advisor(ctx(cpu_count=2, cards=[]))
    named = _named_after(adv, k, change_s, end_s)
    assert named is not None and named <= 15, named
    assert adv.phase_change is not None and adv.phase_change.cause == RULE_CAUSE["worker_cpu_bound"]
    assert abs(adv.phase_t0 - change_s) <= 1.0, adv.phase_t0
    # without the cut the healthy minute before stays in the window and the interval
    # decides later
    monkeypatch.setattr(verdict_mod, "find_change", lambda rows, passes=frozenset(): None)
    slow = _named_after(Advisor(ctx(cpu_count=2, cards=[])), _starts_waiting(change_s, end_s), change_s, end_s)
    assert slow is None or slow > named + 5, (named, slow)
