"""The advisor behind a headless exporter: ``sattui record --metrics`` has no screen and
no live session, yet its metrics need the time ledger (each rank's state and lost
seconds, each card's idle seconds by state) and the current findings. It runs the one
advisor loop (sattui/advisor/loop.py) on its own Timeline, as the live session does on
its own, with the findings served instead of recorded: the recording itself is unchanged
(findings go to the exporter only, and to ``on_findings``: ``--webhook`` /
``--on-finding``, sattui/notify.py, which also runs it without an exporter).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sattui.advisor.loop import AdvisorLoop
from sattui.metrics.node import NodeMetrics
from sattui.timeline import DEFAULT_HISTORY_S, Timeline


class AdvisedMetrics:
    """An engine sink plus an ``on_tick`` for ``Engine.run`` (both on the sampling thread)."""

    def __init__(self, node: NodeMetrics | None, header: dict[str, Any], clock: Any,
                 on_findings: Callable[[list[dict[str, Any]]], None] | None = None) -> None:
        self.node = node
        self.on_findings = on_findings
        self.clock = clock
        self.loop = AdvisorLoop(Timeline(DEFAULT_HISTORY_S), header, publish=self._publish, node=node)

    def _publish(self, records: list[dict[str, Any]]) -> None:
        if self.node is not None:
            self.node.set_findings(records)
        if self.on_findings is not None:
            self.on_findings(records)

    @property
    def timeline(self) -> Timeline:
        return self.loop.timeline

    @property
    def failed(self) -> str | None:
        return self.loop.failed

    def sink(self, records: list[dict[str, Any]]) -> None:
        self.loop.sink(records)

    def on_tick(self) -> None:
        self.loop.on_tick(self.clock())
