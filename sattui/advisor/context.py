"""Core types of the advisor: findings, verdicts, the context, severities.

Severity comes from impact, the estimated share of wall time that fixing the cause
would recover, with TensorFlow Profiler's input-pipeline cut-offs (docs/rules.md,
"How rules are evaluated"): ≥ 20 % high, 5–20 % medium, below that low (or info when nothing is lost).
A rule may floor or cap that where its anchor says so (e.g. R08 is at most medium while
SM activity is ≥ 25 %, KempnerPulse).
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sattui.findings import Finding, Severity
from sattui.host import usable_cpus
from sattui.sampler_status import NO_STACK_EVENTS

HIGH_IMPACT = 0.20
MEDIUM_IMPACT = 0.05



def severity_for(impact: float, floor: Severity | str | None = None, cap: Severity | str | None = None) -> Severity:
    """Severity of an impact (0–1), optionally kept within ``[floor, cap]``."""
    if impact >= HIGH_IMPACT:
        sev = Severity.HIGH
    elif impact >= MEDIUM_IMPACT:
        sev = Severity.MEDIUM
    elif impact > 0.0:
        sev = Severity.LOW
    else:
        sev = Severity.INFO
    if floor is not None and not sev.at_least(floor):
        sev = Severity(floor)
    if cap is not None and sev.rank > Severity(cap).rank:
        sev = Severity(cap)
    return sev


def share_text(x: float | None, digits: int = 0) -> str:
    """A 0–1 share as percent text: 0.713 → "71%". (A 0–100 value for the screen is
    ``view.fmt.pct_text``, which the advisor's layer cannot import.)"""
    return "n/a" if x is None else f"{x * 100:.{digits}f}%"


@dataclass
class Verdict:
    """What one evaluation concluded. ``headline`` is also in ``findings``.

    ``collecting`` is true while there is too little evidence after the warm-up (the
    headline is then ``no_data``); ``cannot_judge`` maps rule ids to why they could not
    be evaluated (no stacks, a signal the card does not give).
    """

    headline: Finding | None
    findings: list[Finding]
    t: float = 0.0
    collecting: bool = False
    cannot_judge: dict[str, str] = field(default_factory=dict)


@dataclass
class AdvisorContext:
    """What the advisor knows about the session apart from the Timeline.

    ``cards``: the header's card entries (max clocks, PCIe link maxima, power limits).
    ``env``: the trainer's allow-listed environment (sattui/trainer/env.py).
    Live callers may build it directly (``cpu_count`` defaults to :func:`usable_cpus`)
    or with :meth:`from_header`; recordings should carry ``cpu_usable`` in the header.
    ``has_stacks``: True when stacks are sampled, False when they cannot be (no ptrace
    permission, not Python, --no-stacks, cards-only), None while unknown;
    ``no_stacks_reason`` says why not. ``cpu_count``: CPUs the trainer may use;
    ``cpu_count_known`` is False when it is only this machine's count (a recording
    made elsewhere), and rules that compare against it then stay silent.
    """

    cards: list[dict[str, Any]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    has_stacks: bool | None = None
    cpu_count: int = field(default_factory=lambda: usable_cpus())
    pid: int | None = None
    nspid: list[int] | None = None
    no_stacks_reason: str | None = None
    cpu_count_known: bool = True
    stack_rate_hz: float | None = None

    @classmethod
    def from_header(cls, header: dict[str, Any], events: Iterable[Any] = ()) -> AdvisorContext:
        """From a recording header (docs/format.md) and any events already known.

        ``events`` may be :class:`sattui.model.Event` objects or event records (dicts).
        """
        pid = header.get("pid")
        cpus = header.get("cpu_usable") or header.get("cpu_count")
        known = isinstance(cpus, (int, float)) and cpus > 0
        # Without the figure in the header, this machine's count is right only if the
        # recording was made here.
        here = not known and header.get("host") is not None and header.get("host") == socket.gethostname()
        ctx = cls(cards=list(header.get("cards") or []), env=dict(header.get("env") or {}),
                  pid=int(pid) if isinstance(pid, int) else None,
                  nspid=list(header.get("nspid") or []) or None,
                  cpu_count=int(cpus) if known and isinstance(cpus, (int, float)) else usable_cpus(),
                  cpu_count_known=known or here,
                  stack_rate_hz=header.get("stack_rate_hz"))
        if ctx.pid is None:
            ctx.has_stacks, ctx.no_stacks_reason = False, "cards-only recording: no trainer to sample"
        elif "stack_rate_hz" in header and header.get("stack_rate_hz") is None:
            ctx.has_stacks, ctx.no_stacks_reason = False, "stacks were not sampled (--no-stacks)"
        for ev in events:
            ctx.note_event(ev)
        return ctx

    def note_event(self, ev: Any) -> None:
        """Learn from an event (object or record) that stacks will not come."""
        etype = ev.get("type") if isinstance(ev, dict) else getattr(ev, "type", None)
        if etype in NO_STACK_EVENTS and self.has_stacks is not True:
            msg = ev.get("message") if isinstance(ev, dict) else getattr(ev, "message", "")
            self.has_stacks = False
            self.no_stacks_reason = f"{etype}: {msg}" if msg else str(etype)

    def card_info(self, card: int) -> dict[str, Any]:
        for c in self.cards:
            if c.get("card") == card:
                return c
        return {}
