"""A host read from Prometheus (sattui/cluster/hostsession.py): each poll feeds the one
Timeline through its Feed with only the points it has not seen, and the result is what a
fresh load of the same read gives; a new step starts afresh."""

from __future__ import annotations

import math

from sattui.cluster.hostsession import RANK_PID_BASE, HostSession
from sattui.cluster.source import HostDetail, RankData
from sattui.feed import Feed
from sattui.session import Session

ORIGIN = 1_700_000_000.0
STEP = 1.429  # a window of 60 s over 42 columns, in whole milliseconds


def grid(t1_k: int, n: int) -> list[float]:
    """The instants of a read ending at step ``t1_k`` (whole steps from the epoch, as
    JobReader.host_detail asks Prometheus for them)."""
    return [round(ORIGIN + (t1_k - n + 1 + i) * STEP, 3) for i in range(n)]


def detail(t1_k: int, n: int = 42, step: float = STEP, findings: list | None = None) -> HostDetail:
    ts = grid(t1_k, n) if step == STEP else [ORIGIN + (t1_k - n + 1 + i) * step for i in range(n)]
    util = [(t, 30.0 + (round(t * 1000) // 7) % 60) for t in ts]
    d = HostDetail("n1", ts[0], ts[-1], step)  # Prometheus answers from the window's start on
    d.cards = {"0": {"util": util, "mem_used": [(t, 2.0e9) for t in ts], "mem_total": [(t, 8.0e9) for t in ts]},
               "1": {"util": [(t, 95.0) for t in ts]}}
    d.card_info = {"0": {"vendor": "nvidia", "model": "H200", "uuid": "GPU-0"}}
    for r in ("0", "1"):
        steps = [(t, {"forward": 0.5 * step, "data_wait": (0.2 + 0.1 * int(r)) * step}) for t in ts]
        d.ranks.append(RankData("n1", r, steps=steps))
    d.findings = findings if findings is not None else [{"rule": "input_bound", "severity": "high", "impact": 0.3,
                                                         "card": "0", "rank": None}]
    return d


def contents(s: Session, d: HostDetail) -> dict:
    """Every series of the session's Timeline over the read's window (what the screens draw)."""
    t0, t1 = d.t0 - ORIGIN, d.t1 - ORIGIN + 1e-6
    tl = s.timeline
    return {(kind, k): tl.window(kind, k, t0, t1) for kind in ("card", "proc", "stack") for k in sorted(tl.keys(kind))}


class CountingFeed(Feed):
    def __init__(self, feed: Feed) -> None:
        super().__init__(feed.timeline)
        self.added = 0

    def add_card(self, s):  # type: ignore[no-untyped-def]
        self.added += 1
        super().add_card(s)

    def add_proc(self, s):  # type: ignore[no-untyped-def]
        self.added += 1
        super().add_proc(s)

    def add_stack(self, s):  # type: ignore[no-untyped-def]
        self.added += 1
        super().add_stack(s)


def test_a_second_poll_adds_only_the_new_points_and_reads_as_a_fresh_load():
    polled = HostSession("n1", True, origin=ORIGIN)
    polled.load(detail(1000))
    tl = polled.timeline
    polled.feed = counting = CountingFeed(polled.feed)
    later = detail(1003, findings=[])  # three steps on; the node's findings cleared
    polled.load(later)
    assert polled.timeline is tl and polled.feed is counting  # not rebuilt
    # three new instants: 2 cards, and per rank a process tick and its two state spans
    assert counting.added == 3 * (2 + 2 * (1 + 2))
    fresh = HostSession("n1", True, origin=ORIGIN)
    fresh.load(later)
    got, want = contents(polled, later), contents(fresh, later)
    assert want[("card", 0)] and want[("stack", RANK_PID_BASE + 1)]
    assert got == want
    assert polled.header == fresh.header and polled.findings() == fresh.findings() == []


def test_the_same_read_twice_adds_nothing_and_findings_follow_the_latest_read():
    s = HostSession("n1", True, origin=ORIGIN)
    s.load(detail(1000))
    assert [f.rule for f in s.findings()] == ["input_bound"] and s.findings()[0].card == 0
    n = s.timeline.sample_count()
    s.load(detail(1000, findings=[]))
    assert s.timeline.sample_count() == n and s.findings() == []


def test_a_read_with_another_step_starts_afresh():
    s = HostSession("n1", True, origin=ORIGIN)
    s.load(detail(1000))
    old = s.timeline
    coarse = detail(500, n=20, step=3.0)
    s.load(coarse)
    assert s.timeline is not old
    fresh = HostSession("n1", True, origin=ORIGIN)
    fresh.load(coarse)
    assert contents(s, coarse) == contents(fresh, coarse)
    cards = s.timeline.window("card", 0, -math.inf, math.inf)
    assert len(cards) == 20  # none of the finer read's points left


class AskedClient:
    """Records what a JobReader asks (no Prometheus: every answer is empty)."""

    def __init__(self) -> None:
        self.ranges: list[tuple[float, float, float]] = []

    def query_range(self, q: str, start: float, end: float, step: float) -> list:
        self.ranges.append((start, end, step))
        return []

    def query(self, q: str, t: float) -> list:
        return []


def test_reads_a_poll_apart_ask_for_the_same_instants():
    from sattui.cluster.source import JobReader

    asked = []
    for now in (ORIGIN + 0.3, ORIGIN + 2.9):  # two polls, ~2.6 s apart, of a 60-s window over 42 columns
        client = AskedClient()
        JobReader(client).host_detail("n1", False, now, 60.0, 60.0 / 42)  # type: ignore[arg-type]
        starts = {(round(a * 1000), round(z * 1000), round(st * 1000)) for a, z, st in client.ranges}
        assert len(starts) == 1
        asked.append(starts.pop())
    (a0, z0, st0), (a1, z1, st1) = asked
    assert st0 == st1 == 1429  # the step in whole milliseconds
    # both on the grid of whole steps from the epoch, the window's length a whole number of steps
    assert a0 % st0 == z0 % st0 == a1 % st0 == z1 % st0 == 0 and (z0 - a0) == (z1 - a1) == 42 * st0
    assert z1 > z0 and z0 <= (ORIGIN + 0.3) * 1000
