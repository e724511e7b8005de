"""The card screen's dips (sattui/view/dips.py): runs of utilization under 50 % lasting
≥ 0.5 s, each with the cause the time ledger gives that stretch, on hand-made Timelines."""

from __future__ import annotations

import pytest

from sattui.advisor.loop import AdvisorLoop
from sattui.ledger import bins as ledger
from sattui.ledger.causes import WORKER_BUSY
from sattui.model import CardSample, StackSample
from sattui.session import Session, SessionStatus
from sattui.view.binning import BinCache
from sattui.view.data import ViewData
from sattui.view.dips import PENDING, explain, low_stretches, recent_dips
from tests.unit.test_advisor_kit import FRAMES, PID, TL, ctx

CYCLE, WAIT = 6.0, 2.0  # the main thread waits [0, 2) s of every 6 s


def samples(utils: list[float | None], dt: float = 0.5, t0: float = 0.5) -> list[CardSample]:
    return [CardSample(t=t0 + i * dt, card=0, util=u) for i, u in enumerate(utils)]


def spans(k: TL, pid: int, state_at, t0: float = 0.0, t1: float = 60.0, step: float = 0.25) -> TL:
    """Main-thread spans of ``step`` seconds, each in ``state_at(t)``."""
    t = t0
    while t < t1 - 1e-9:
        st = state_at(t)
        k.tl.add("stack", pid, t, StackSample(t, step, pid, pid, "MainThread", True, FRAMES[st], state=st))
        t += step
    return k


def waiting(t: float) -> bool:
    return t % CYCLE < WAIT


def util_during_waits(low: float = 3.0, high: float = 95.0):
    # a sample at t stands for (t - 0.5, t]: low when that half second is in a wait
    return lambda t: {"util": low if waiting(t - 0.25) else high}


# -- finding the stretches ------------------------------------------------------------

def test_a_run_under_the_threshold_is_a_dip_from_the_sample_before_it():
    got = low_stretches(samples([90, 90, 10, 5, 20, 90, 90]))
    # samples every 0.5 s from 0.5: the low ones at 1.5, 2.0, 2.5 stand for (1.0, 2.5]
    assert got == [(1.0, 2.5, 5)]


def test_fifty_percent_is_not_a_dip_and_a_short_run_is_not_either():
    assert low_stretches(samples([90, 50, 50, 90])) == []
    # one 2 Hz sample stands for 0.5 s: a dip; two samples at 6 Hz (0.33 s) are not
    assert low_stretches(samples([90, 10, 90])) == [(0.5, 1.0, 10)]
    assert low_stretches(samples([90, 10, 10, 90, 90], dt=1 / 6)) == []
    assert len(low_stretches(samples([90, 10, 10, 10, 90, 90], dt=1 / 6))) == 1


def test_no_data_ends_a_dip():
    # a None utilization (the card did not say) and a gap in the samples both end the run
    assert low_stretches(samples([90, 10, 10, None, 10, 10, 90])) == [(0.5, 1.5, 10), (2.0, 3.0, 10)]
    gap = [CardSample(t=t, card=0, util=u) for t, u in ((0.5, 90), (1.0, 10), (1.5, 10), (9.0, 10), (9.5, 10),
                                                        (10.0, 90), (10.5, 90))]
    assert low_stretches(gap) == [(0.5, 1.5, 10), (8.5, 9.5, 10)]


def test_every_wait_of_the_hand_made_card_is_found():
    k = TL().cards(t0=0.5, t1=60.5, fn=util_during_waits())
    found = low_stretches(k.tl.window("card", 0, 0, 61))
    assert [(a, b) for a, b, _ in found] == [(c * CYCLE, c * CYCLE + WAIT) for c in range(10)]


# -- causes from the ledger -------------------------------------------------------------

def dip_of(k: TL, t0: float = 30.0, card: int = 0, c=None):
    a, b = t0, t0 + WAIT
    return explain(k.window(c or ctx(), a - 2, b + 2), card, a, b, 3.0)


def test_a_dip_in_a_data_wait_with_busy_workers_names_their_cpu():
    k = TL().cards(t0=0.5, t1=60.5, fn=util_during_waits()).main(cpu=0.5)
    k.proc(201, "worker", 0.97).proc(202, "worker", 0.95)
    spans(k, PID, lambda t: "data_wait" if waiting(t) else "forward")
    d = dip_of(k)
    assert d.cause == "worker_busy" and d.state == "data_wait"
    assert d.detail == "data wait, both workers at 96% CPU"
    assert d.length_s == pytest.approx(2.0) and d.card == 0


def test_a_dip_during_an_evaluation_pass_is_eval():
    k = TL().cards(t0=0.5, t1=60.5, fn=util_during_waits()).main(cpu=0.9)
    spans(k, PID, lambda t: "eval" if waiting(t) else "forward")
    d = dip_of(k)
    assert (d.cause, d.detail) == ("periodic_stall", "eval")


def test_a_rank_in_a_collective_waits_for_the_rank_that_computes():
    k = TL()
    for c, pid in ((0, 100), (1, 101), (2, 102)):
        k.proc(pid, "rank", 0.9, ppid=1, rank=c)
    k.cards(t0=0.5, t1=60.5, card=0, fn=util_during_waits(), procs={"100": 1})
    k.cards(t0=0.5, t1=60.5, card=1, util=97.0, procs={"101": 1})
    k.cards(t0=0.5, t1=60.5, card=2, fn=util_during_waits(), procs={"102": 1})
    spans(k, 100, lambda t: "collective" if waiting(t) else "forward")
    spans(k, 101, lambda t: "forward")  # the slow one: it computes while the others wait
    spans(k, 102, lambda t: "collective" if t % CYCLE < WAIT / 2 else "forward")
    d = dip_of(k, c=ctx(pid=None, cards=[]))
    assert (d.cause, d.detail) == ("straggler", "waiting for rank 1")


def test_a_dip_without_stacks_is_unknown():
    k = TL().cards(t0=0.5, t1=60.5, fn=util_during_waits()).main(cpu=0.5)
    d = dip_of(k)
    assert (d.cause, d.detail) == ("unknown", "unknown (no stacks)")


def test_the_cause_follows_the_evidence_not_a_fixed_answer():
    # the same card and stacks, but the workers asleep: they wait on their data source
    k = TL().cards(t0=0.5, t1=60.5, fn=util_during_waits()).main(cpu=0.5)
    k.proc(201, "worker", 0.02, state="S")
    spans(k, PID, lambda t: "data_wait" if waiting(t) else "forward")
    assert dip_of(k).cause == "worker_io_bound"


# -- the list a screen shows -------------------------------------------------------------

class Frozen(Session):
    def __init__(self, k: TL, t: float, live: bool) -> None:
        super().__init__(k.tl, {"pid": PID, "cards": [{"card": 0, "vendor": "nvidia", "name": "H200"}],
                                "cpu_usable": 8, "interval_s": 1.0}, live=live)
        self.t = t

    def now(self) -> float:
        return self.t

    def status(self) -> SessionStatus:
        return SessionStatus(None, None, None, True, None, "nvml", None, None)

    def start(self) -> None: ...

    def stop(self) -> None: ...


def test_recent_dips_are_newest_first_and_fresh_ones_wait_for_their_stacks():
    k = TL().cards(t0=0.5, t1=60.5, fn=util_during_waits()).main(cpu=0.5)
    k.proc(201, "worker", 0.97).proc(202, "worker", 0.97)
    spans(k, PID, lambda t: "data_wait" if waiting(t) else "forward")
    cache = BinCache()
    replay = recent_dips(ViewData(Frozen(k, 57.0, live=False), 57.0, 60.0, cache), 0)
    assert [d.t0 for d in replay] == [54.0, 48.0, 42.0, 36.0, 30.0, 24.0, 18.0, 12.0, 6.0, 0.0]
    assert all(d.cause == "worker_busy" for d in replay[:-1])
    # live: the dip 3 s ago may not have its stacks yet (py-spy chunks come late)
    live = recent_dips(ViewData(Frozen(k, 57.0, live=True), 57.0, 60.0, BinCache()), 0)
    assert live[0].cause == PENDING and live[0].detail.startswith("…")
    assert live[1].cause == "worker_busy"
    # nothing past the view's end is listed
    earlier = recent_dips(ViewData(Frozen(k, 40.0, live=False), 40.0, 60.0, cache), 0)
    assert earlier[0].t0 == 36.0


def test_a_dip_while_the_trainer_starts_says_so():
    k = TL().cards(t0=0.5, t1=60.5, fn=util_during_waits()).main(cpu=0.9)
    spans(k, PID, lambda t: "startup" if t < 40 else "forward")
    d = dip_of(k)
    assert (d.cause, d.state, d.detail) == ("unknown", "startup", "start-up (imports, before the first step)")


# -- the bins: the advisor's where it computed them, else one pass for the list ----------

def starved_by_busy_workers() -> TL:
    k = TL().cards(t0=0.5, t1=60.5, fn=util_during_waits()).main(cpu=0.5)
    k.proc(201, "worker", 0.97).proc(202, "worker", 0.97)
    return spans(k, PID, lambda t: "data_wait" if waiting(t) else "forward")


class Advised(Frozen):
    """A session whose advisor kept the ledger's bins (a live one's, or a judged replay's)."""

    def __init__(self, k: TL, t: float, bins: dict) -> None:
        super().__init__(k, t, live=False)
        self.bins = bins

    def ledger_bins(self, lo: int, hi: int) -> dict:
        return {b: j for b, j in self.bins.items() if lo <= b < hi}


def counting_passes(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = ledger.build_bins

    def build_bins(*a, **kw):
        calls.append(1)
        return real(*a, **kw)
    monkeypatch.setattr(ledger, "build_bins", build_bins)
    return calls


def test_the_dips_read_the_bins_the_advisor_computed(monkeypatch):
    k = starved_by_busy_workers()
    bins = ledger.build_bins(k.window(t0=0.0, t1=60.0), 0.0, 60.0)
    # every data-wait bin says the workers were reading: the dips must say what the
    # advisor's bins say, not what the Timeline would give them afresh (workers busy)
    for j in bins.values():
        for cl in j.cards.values():
            if WORKER_BUSY in cl.by_cause_s:
                cl.by_cause_s = {"worker_io_bound": cl.by_cause_s[WORKER_BUSY]}
    passes = counting_passes(monkeypatch)
    got = recent_dips(ViewData(Advised(k, 57.0, bins), 57.0, 60.0, BinCache()), 0)
    assert len(got) == 10 and all(d.cause == "worker_io_bound" for d in got[:-1])
    assert passes == []  # nothing rebuilt


def test_without_an_advisor_the_list_computes_its_bins_once_not_per_dip(monkeypatch):
    k = starved_by_busy_workers()
    passes = counting_passes(monkeypatch)
    cache, session = BinCache(), Frozen(k, 57.0, live=False)
    first = recent_dips(ViewData(session, 57.0, 60.0, cache), 0)
    assert len(first) == 10 and len(passes) == 1
    # the next redraw (the view moved on a little) computes nothing: the causes are kept
    again = recent_dips(ViewData(session, 57.5, 60.0, cache), 0)
    assert [(d.t0, d.cause, d.detail) for d in again] == [(d.t0, d.cause, d.detail) for d in first]
    assert len(passes) == 1
    # and they are the causes each dip's own ledger gives
    assert [(d.cause, d.detail) for d in first[:-1]] == [(explain(k.window(ctx(), d.t0 - 2, d.t1 + 2), 0, d.t0,
                                                                  d.t1, 3.0).cause, d.detail) for d in first[:-1]]


def test_the_live_loop_keeps_the_advisors_bins_for_the_view_and_forgets_old_ones():
    k = starved_by_busy_workers()
    loop = AdvisorLoop(k.tl, Frozen(k, 0.0, live=True).header)
    loop.on_tick(0.5)
    assert loop.advisor is not None
    loop.advisor.long_window_s = 20.0  # (300 s by default: a shorter run shows the forgetting)
    for i in range(2, 121):
        loop.on_tick(i * 0.5)
    kept = sorted(loop.bins)
    book = loop.advisor.book.settled()
    assert book and all(loop.bins.get(b) is j for b, j in book)  # every bin the book has: the same, not copies
    assert kept[-1] == book[-1][0] >= 50  # up to the newest settled one
    assert kept[-1] - kept[0] < 20  # at most the long window's
