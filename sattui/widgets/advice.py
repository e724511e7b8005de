"""The advice panel: every finding with its evidence and fix, worst first."""

from __future__ import annotations

import textwrap
from typing import Any

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from sattui.textsafe import clean
from sattui.widgets.viewdata import ViewData

SEVERITY_STYLE = {"high": "bold red", "medium": "bold yellow", "low": "cyan", "info": "dim"}


def _evidence(ev: Any) -> str:
    if not isinstance(ev, dict) or not ev:
        return ""
    parts = []
    for k, v in ev.items():
        if isinstance(v, float):
            v = f"{v:.3g}"
        elif isinstance(v, (list, tuple)):
            v = ", ".join(str(x) for x in v[:3]) + (" …" if len(v) > 3 else "")
        elif isinstance(v, dict):
            continue
        parts.append(f"{k}={v}")
    return "  ".join(parts)


def _wrapped(out: Text, head: str, body: str, style: str, width: int) -> None:
    """``head`` then ``body`` wrapped under itself (a hanging indent), so the fix text of a
    finding stays one block at 80 columns. ``body`` may quote process and frame names:
    escaped before it is wrapped."""
    lines = textwrap.wrap(clean(body), max(20, width - len(head))) or [""]
    out.append("\n" + head, "dim")
    out.append(lines[0], style)
    for line in lines[1:]:
        out.append("\n" + " " * len(head) + line, style)


def advice_text(findings: list[dict[str, Any]], width: int = 80) -> Text:
    out = Text(end="", no_wrap=True, overflow="ellipsis")
    if not findings:
        out.append("no findings yet", "dim")
        out.append(" — the advisor judges once there is a window of samples", "dim")
        return out
    for i, f in enumerate(findings):
        if i:
            out.append("\n")
        sev = str(f.get("severity") or "info")
        out.append(f"{sev.upper():<6} ", SEVERITY_STYLE.get(sev, ""))
        out.append(clean(f.get("rule")), "bold")
        impact = f.get("impact")
        if isinstance(impact, (int, float)):
            out.append(f"  impact {impact:.0%}", "dim")
        where = [f"card {f['card']}" if f.get("card") is not None else "", f"rank {f['rank']}" if f.get("rank") is not None else ""]
        if any(where):
            out.append("  " + " ".join(w for w in where if w), "dim")
        _wrapped(out, "  ", str(f.get("summary") or ""), "", width)
        ev = _evidence(f.get("evidence"))
        if ev:
            _wrapped(out, "  evidence ", ev, "", width)
        if f.get("fix"):
            _wrapped(out, "  fix ", str(f["fix"]), "green", width)
    return out


class AdvicePanel(VerticalScroll, can_focus=False):
    """Not focusable: ↑/↓ belong to the card selection; the wheel still scrolls it."""

    DEFAULT_CSS = """
    AdvicePanel { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._key: Any = None

    def compose(self):
        yield Static(id="advice-text")

    def show(self, data: ViewData) -> None:
        findings = data.findings
        key = repr([(f.get("rule"), f.get("severity"), f.get("impact"), f.get("summary"), f.get("fix"),
                     f.get("card"), f.get("rank"), f.get("evidence")) for f in findings])
        width = max(20, (self.size.width or self.app.size.width) - 2)
        key = (key, width)
        if key != self._key:
            self._key = key
            self.query_one("#advice-text", Static).update(advice_text(findings, width))
