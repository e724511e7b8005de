"""The advice panel: every finding with its evidence and fix, worst first."""

from __future__ import annotations

import textwrap
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from sattui.findings import VERDICT_ONLY_RULES, Finding, evidence_text
from sattui.textsafe import clean
from sattui.view.data import ViewData


def _wrapped(out: Text, head: str, body: str, style: str, width: int) -> None:
    """``head`` then ``body`` wrapped under itself (a hanging indent), so the fix text of a
    finding stays one block at 80 columns. ``body`` may quote process and frame names:
    escaped before it is wrapped."""
    lines = textwrap.wrap(clean(body), max(20, width - len(head))) or [""]
    out.append("\n" + head, "dim")
    out.append(lines[0], style)
    for line in lines[1:]:
        out.append("\n" + " " * len(head) + line, style)


def advice_text(findings: list[Finding], width: int = 80) -> Text:
    out = Text(end="", no_wrap=True, overflow="ellipsis")
    if not findings:
        out.append("no findings yet", "dim")
        out.append(" — the advisor judges once there is a window of samples", "dim")
        return out
    for i, f in enumerate(findings):
        if i:
            out.append("\n")
        sev = f.severity.value
        out.append(f"{sev.upper():<6} ", f.severity.text_style)
        out.append(clean(f.rule), "bold")
        out.append(f"  impact {f.impact_text()}", "dim")
        if f.since_s is not None and f.rule not in VERDICT_ONLY_RULES:
            out.append(f"  held since {f.since_s:.0f} s", "dim")
        if f.where():
            out.append("  " + f.where(), "dim")
        _wrapped(out, "  ", f.summary, "", width)
        ev = evidence_text(f.evidence)
        if ev:
            _wrapped(out, "  evidence ", ev, "", width)
        if f.fix:
            _wrapped(out, "  fix ", f.fix, "green", width)
    return out


class AdvicePanel(VerticalScroll, can_focus=False):
    """Not focusable: ↑/↓ belong to the card selection; the wheel still scrolls it."""

    DEFAULT_CSS = """
    AdvicePanel { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._key: Any = None
        self._lines = 1

    def compose(self) -> ComposeResult:
        yield Static(id="advice-text")

    def show(self, data: ViewData) -> int:
        """Draw the findings (only when they changed); returns the lines they take, so the
        screen can give the advice room for all of them before its charts grow."""
        findings = data.findings
        width = max(20, (self.size.width or self.app.size.width) - 2)
        key = (repr(findings), width)
        if key != self._key:
            self._key = key
            body = advice_text(findings, width)
            self._lines = body.plain.count("\n") + 1
            self.query_one("#advice-text", Static).update(body)
        return self._lines
