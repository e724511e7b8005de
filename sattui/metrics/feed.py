"""The advisor behind a headless exporter: ``sattui record --metrics`` has no screen and
no live session, yet its metrics need the time ledger (each rank's state and lost
seconds, each card's idle seconds by state) and the current findings. This keeps a
Timeline fed from the engine's records and judges it every ``ADVISOR_PERIOD_S`` on the
sampling thread, as the live session does (sattui/session.py), and at every tick publishes
the ledger's newly settled bins; the recording itself is unchanged (findings go to the
exporter only, and to ``on_findings``: ``--webhook`` / ``--on-finding``, sattui/notify.py,
which also runs it without an exporter).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sattui.feed import Feed
from sattui.metrics.node import NodeMetrics
from sattui.session import ADVISOR_PERIOD_S, STALE_PROC_S, advisor_lag_s, advisor_records, make_advisor
from sattui.timeline import DEFAULT_HISTORY_S, Timeline


def tell_world_size(node: NodeMetrics, advisor: Any) -> None:
    """A node running one rank of a multi-node job: the ranks' WORLD_SIZE (read by the
    exporter through the allow-list) tells the advisor's ledger that waits in backward()
    are for other ranks, even when this node sees only one."""
    ctx = getattr(advisor, "ctx", None)
    if ctx is not None and node.world_size and "WORLD_SIZE" not in ctx.env:
        ctx.env["WORLD_SIZE"] = str(node.world_size)


def push_ledger(node: NodeMetrics, advisor: Any) -> None:
    """The ledger bins settled since the last call into the node's counters."""
    book = getattr(advisor, "book", None)
    if book is not None:
        node.add_ledger(book.settled(node.ledger_done))


def settle_and_push(node: NodeMetrics, advisor: Any, timeline: Timeline, t_now: float) -> None:
    """At every tick: the ledger's bins settled by ``t_now`` (``StackBinner.LAG_S`` after
    their samples) into the node's counters at once, warm-up included, whether or not the
    advisor judges yet. Waiting for the evaluations kept a rank's state seconds off the
    exporter for the warm-up, the evaluations' own lag and the 20 s of ledger they judge
    from: no ``sattui_rank_state_seconds_total`` at all 20 s after start (issue 23)."""
    settle = getattr(advisor, "settle_ledger", None)
    if settle is None:
        return
    tell_world_size(node, advisor)
    settle(timeline, t_now)
    push_ledger(node, advisor)


class AdvisedMetrics:
    """An engine sink plus an ``on_tick`` for ``Engine.run`` (both on the sampling thread)."""

    def __init__(self, node: NodeMetrics | None, header: dict[str, Any], clock: Any,
                 on_findings: Callable[[list[dict[str, Any]]], None] | None = None) -> None:
        self.node = node
        self.on_findings = on_findings
        self.clock = clock
        self.timeline = Timeline(DEFAULT_HISTORY_S)
        self.feed = Feed(self.timeline)
        self.advisor = make_advisor(header)
        self.lag_s = advisor_lag_s()
        self.failed: str | None = None
        self._next = ADVISOR_PERIOD_S
        self._next_prune = STALE_PROC_S

    def sink(self, records: list[dict[str, Any]]) -> None:
        for r in records:
            self.feed.add_record(r)

    def on_tick(self) -> None:
        t = self.clock()
        if t >= self._next_prune:
            self._next_prune = t + STALE_PROC_S / 10
            self.timeline.drop_stale("proc", t - STALE_PROC_S)
        if self.advisor is None or self.failed is not None:
            return
        try:
            if t >= self._next:
                self._next = t + ADVISOR_PERIOD_S
                t_eval = t - self.lag_s
                if t_eval > 0:
                    if self.node is not None:
                        tell_world_size(self.node, self.advisor)
                    found = advisor_records(self.advisor, self.timeline, t_eval)
                    if self.node is not None:
                        self.node.set_findings(found)
                    if self.on_findings is not None:
                        self.on_findings(found)
            if self.node is not None:
                settle_and_push(self.node, self.advisor, self.timeline, t)
        except Exception as e:  # a bug in the advisor must not stop the recording
            self.failed = f"{type(e).__name__}: {e}"
