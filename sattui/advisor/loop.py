"""The one advisor loop: records in, a Timeline fed, judged every period, findings and
the ledger's settled bins out.

The live monitor (sattui/session/live.py) and the headless exporter (``sattui record
--metrics``, sattui/metrics/advised.py) both run it on the engine's sampling thread: the
engine's records go to :meth:`AdvisorLoop.sink`, and :meth:`AdvisorLoop.on_tick` is the
engine's ``on_tick``. What each does with the findings differs and is handed in as
``publish``: the live session emits them as records (into its recording, its own view
and, with ``--metrics``, its exporter); the exporter of ``record --metrics`` serves them
(``NodeMetrics.set_findings``). An exporter also gets the ledger's bins as they settle, from
the first tick on (``node``), not after the warm-up and at the evaluations' pace: a rank's
state seconds are on the page within seconds of its first samples (issue 23).

A bug in the advisor must not stop sampling: the loop stops judging, says so once
(``on_failure``), and the records keep flowing.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from typing import Any, Protocol

from sattui.advisor.verdict import Advisor
from sattui.feed import Feed
from sattui.ledger.bins import BIN_S, JobLedger
from sattui.timeline import Timeline

# Judged every second: the intervals (sattui/advisor/intervals/) decide when a cause is
# sure, so looking often costs no false alarms, only CPU (bench/judge_cost.py: +0.1–0.3 %
# of a core against every 5 s).
ADVISOR_PERIOD_S = 1.0
# The live advisor's warm-up: py-spy's first chunk; the intervals say when there is enough.
LIVE_WARMUP_S = 1.0
# Processes not seen for this long leave the Timeline (a long run's exited workers).
STALE_PROC_S = 600.0


class LedgerNode(Protocol):
    """What an exporter takes from the loop: the ledger's settled bins
    (sattui/metrics/node.py's NodeMetrics)."""

    @property
    def world_size(self) -> int | None: ...

    @property
    def ledger_done(self) -> int | None: ...

    def add_ledger(self, bins: Iterable[Any]) -> None: ...


def make_advisor(header: dict[str, Any], warmup_s: float = LIVE_WARMUP_S) -> Advisor:
    """An advisor for a session with this header."""
    from sattui.advisor.context import AdvisorContext

    return Advisor(AdvisorContext.from_header(header), warmup_s=warmup_s)


def advisor_lag_s() -> float:
    """How far behind ``now`` to judge: not at all. py-spy's chunks arrive ~2 s late, and
    the advisor's ledger settles each pid's bins as its samples arrive
    (StackBinner.settled_t), so judging ``now`` costs no accuracy and no time."""
    return 0.0


def advisor_records(advisor: Advisor, timeline: Timeline, t: float) -> list[dict[str, Any]]:
    """Finding records of one evaluation at ``t``, the headline first."""
    verdict = advisor.evaluate(timeline, t)
    found = list(verdict.findings)
    head = verdict.headline
    if head is not None:
        found = [head] + [f for f in found if f is not head]
    out = []
    for f in found:
        rec = f.to_record()
        rec["t"] = t
        out.append(rec)
    return out


class AdvisorLoop:
    """Feeds ``timeline`` (under ``lock`` where a view reads it meanwhile), judges it every
    ``ADVISOR_PERIOD_S``, hands each evaluation's finding records to ``publish`` (the
    headline first; an empty list clears), and the ledger's settled bins to ``node``."""

    def __init__(self, timeline: Timeline, header: dict[str, Any] | None = None, *,
                 lock: threading.Lock | threading.RLock | None = None, feed: Feed | None = None,
                 publish: Callable[[list[dict[str, Any]]], None] | None = None,
                 node: LedgerNode | None = None,
                 on_failure: Callable[[float, str], None] | None = None) -> None:
        self.timeline = timeline
        self.feed = feed if feed is not None else Feed(timeline)
        self.lock: Any = lock if lock is not None else nullcontext()
        self.publish = publish
        self.node = node
        self.on_failure = on_failure
        self.advisor: Advisor | None = None
        self.failed: str | None = None
        self.lag_s = advisor_lag_s()
        self.next_t = ADVISOR_PERIOD_S
        self._next_prune = STALE_PROC_S
        self._header = header
        # The ledger's settled bins of the advisor's long window, for a view to read under
        # ``lock`` (LiveSession.ledger_bins: the card screen's dips); the book itself is
        # the sampling thread's.
        self.bins: dict[int, JobLedger] = {}
        self._bins_next: int | None = None

    def set_header(self, header: dict[str, Any]) -> None:
        """The engine's header, once it is open (the advisor is made from it)."""
        self._header = header

    def sink(self, records: list[dict[str, Any]]) -> None:
        """An engine sink: the records into the Timeline."""
        with self.lock:
            for r in records:
                self.feed.add_record(r)

    def on_tick(self, t: float) -> None:
        """At every engine tick (``t`` on the engine's clock)."""
        if t >= self._next_prune:
            self._next_prune = t + STALE_PROC_S / 10
            with self.lock:
                self.timeline.drop_stale("proc", t - STALE_PROC_S)
                self.timeline.drop_stale("worker_stack", t - STALE_PROC_S)
        if self.failed is not None or self._header is None:
            return
        try:
            if self.advisor is None:
                self.advisor = make_advisor(self._header)
            if t >= self.next_t:
                self.next_t = t + ADVISOR_PERIOD_S
                self._judge(t)
            if self.node is not None:
                # the bins settled by now, warm-up included, whether or not it judges yet
                self._tell_world_size()
                self.advisor.settle_ledger(self.timeline, t)
                self._push_ledger()
        except Exception as e:  # a bug in the advisor must not stop sampling
            self.failed = f"{type(e).__name__}: {e}"
            if self.on_failure is not None:
                self.on_failure(t, f"advisor stopped: {self.failed}")

    def _judge(self, t: float) -> None:
        # Judge a moment a little in the past, whose stacks have all arrived (no lag now:
        # advisor_lag_s); the finding records carry that moment's t.
        t_eval = t - self.lag_s
        if t_eval <= 0 or self.advisor is None:
            return
        self._tell_world_size()
        records = advisor_records(self.advisor, self.timeline, t_eval)
        if self.publish is not None:
            self.publish(records)
        self._push_ledger()
        self._keep_bins()

    def _keep_bins(self) -> None:
        """The bins settled since the last evaluation into :attr:`bins`, those the book
        has let go out of it (at most the advisor's long window is kept)."""
        if self.advisor is None:
            return
        new = self.advisor.book.settled(self._bins_next)
        if not new:
            return
        lo = math.floor((new[-1][0] + 1) * BIN_S - self.advisor.long_window_s)
        with self.lock:
            self.bins.update(new)
            for b in [b for b in self.bins if b < lo]:
                del self.bins[b]
        self._bins_next = new[-1][0] + 1

    def _tell_world_size(self) -> None:
        """A node running one rank of a multi-node job: the ranks' WORLD_SIZE (read by the
        exporter through the allow-list) tells the ledger that waits in backward() are for
        other ranks, even when this node sees only one."""
        node, advisor = self.node, self.advisor
        if node is not None and advisor is not None and node.world_size and "WORLD_SIZE" not in advisor.ctx.env:
            advisor.ctx.env["WORLD_SIZE"] = str(node.world_size)

    def _push_ledger(self) -> None:
        if self.node is not None and self.advisor is not None:
            self.node.add_ledger(self.advisor.book.settled(self.node.ledger_done))
