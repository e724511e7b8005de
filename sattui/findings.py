"""Findings: what the advisor concludes, as objects from the advisor to every view.

A :class:`Finding` travels from the advisor through the Timeline to the screens and the
report as an object; it is a dict only at the file boundary (:meth:`Finding.to_record`
when a recording is written, :meth:`Finding.from_record` when one is read). The one
ranking of findings for a reader (:func:`view_order`) and the one way evidence is put
into words (:func:`evidence_text`) live here too, so the screens and the report say the
same thing the same way. Headless: nothing here imports Textual.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Severity(str, Enum):
    """How much a finding matters, lowest first (the report's ``high``, ``medium``,
    ``low``, ``info``). A ``str``, so records and JSON keep the plain names."""

    INFO = "info"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    def __str__(self) -> str:
        return self.value

    @property
    def rank(self) -> int:
        return _RANK[self]

    def at_least(self, other: Severity | str) -> bool:
        # A plain name finds its member's rank directly (a str Enum hashes and compares as
        # its value); Severity(other) only for anything else, which it refuses as before.
        rank = _RANK.get(other)
        return _RANK[self] >= (rank if rank is not None else _RANK[Severity(other)])

    @property
    def text_style(self) -> str:
        """The Rich style a severity's word is printed in."""
        return _TEXT_STYLE[self]

    @property
    def label(self) -> str:
        """As the text report and the advice panel print it: the loud ones in capitals."""
        return self.value.upper() if self.rank >= _RANK[Severity.MEDIUM] else self.value


_RANK: dict[str, int] = {s: i for i, s in enumerate(Severity)}  # (members, found by their plain names too)
_TEXT_STYLE = {Severity.HIGH: "bold red", Severity.MEDIUM: "bold yellow", Severity.LOW: "cyan", Severity.INFO: "dim"}
SEVERITIES = tuple(s.value for s in Severity)

# Rules that say there is nothing to fix (or nothing yet to judge): shown after the causes.
VERDICT_ONLY_RULES = ("healthy", "no_data")


@dataclass
class Finding:
    """One rule's judgement at one evaluation.

    ``impact`` is the share of the job's wall time (0–1) the fix would recover, as well
    as it can be estimated from outside; ``evidence`` holds the numbers behind the
    summary (JSON values only); ``card``/``rank`` say where, None for the whole job;
    ``t`` is the moment judged (seconds on the session's clock); ``impact_ci`` the
    interval of the impact where the advisor has one (sattui/advisor/intervals/sequential.py),
    ``since_s`` seconds after the judged window's start when it was first shown.
    """

    rule: str
    severity: Severity
    impact: float
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    fix: str = ""
    card: int | None = None
    rank: int | None = None
    t: float = 0.0
    impact_ci: tuple[float, float] | None = None
    since_s: float | None = None

    def __post_init__(self) -> None:
        self.severity = Severity(self.severity)

    def key(self) -> tuple[str, int | None, int | None]:
        return (self.rule, self.card, self.rank)

    def to_record(self) -> dict[str, Any]:
        return {"kind": "finding", "t": round(self.t, 3), "rule": self.rule, "severity": self.severity.value,
                "impact": round(self.impact, 4), "summary": self.summary, "card": self.card, "rank": self.rank,
                "evidence": self.evidence, "fix": self.fix,
                "impact_ci": None if self.impact_ci is None else [round(x, 4) for x in self.impact_ci],
                "since_s": None if self.since_s is None else round(self.since_s, 1)}

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Finding:
        """A ``finding`` record read back (the reader has checked the field types,
        sattui/recording/schema.py); a severity this version does not know reads as info."""
        try:
            sev = Severity(rec.get("severity"))
        except ValueError:
            sev = Severity.INFO
        impact = rec.get("impact")
        ev = rec.get("evidence")
        return cls(rule=str(rec.get("rule")), severity=sev,
                   impact=float(impact) if isinstance(impact, (int, float)) else 0.0,
                   summary=str(rec.get("summary") or ""), evidence=ev if isinstance(ev, dict) else {},
                   fix=str(rec.get("fix") or ""), card=_int_or_none(rec.get("card")),
                   rank=_int_or_none(rec.get("rank")), t=float(rec.get("t") or 0.0),
                   impact_ci=_interval_or_none(rec.get("impact_ci")), since_s=_float_or_none(rec.get("since_s")))

    def impact_text(self) -> str:
        """The impact with how sure it is: ``88% ±5`` or ``41% (12–70%)``."""
        return impact_text(self.impact, self.impact_ci)

    def where(self) -> str:
        """``card 1 rank 0``, or "" for the whole job."""
        return " ".join(f"{k} {v}" for k, v in (("card", self.card), ("rank", self.rank)) if v is not None)


def impact_text(impact: float, ci: tuple[float, float] | list[float] | None) -> str:
    """A share with its interval, in the words every view uses: ``88% ±5`` when the
    interval is about symmetric (in points), else ``41% (12–70%)``; just ``88%`` without one."""
    if ci is None or len(ci) != 2:
        return f"{impact * 100:.0f}%"
    lo, hi = float(ci[0]), float(ci[1])
    below, above = impact - lo, hi - impact
    if abs(below - above) <= 0.01:
        return f"{impact * 100:.0f}% ±{max(below, above) * 100:.0f}"
    return f"{impact * 100:.0f}% ({lo * 100:.0f}–{hi * 100:.0f}%)"


def _float_or_none(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _interval_or_none(v: Any) -> tuple[float, float] | None:
    if isinstance(v, list) and len(v) == 2:
        lo, hi = (_float_or_none(x) for x in v)
        if lo is not None and hi is not None and lo <= hi:
            return lo, hi
    return None


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def view_order(findings: Iterable[Finding]) -> list[Finding]:
    """Findings as a reader should meet them: causes worst first (severity, then impact),
    then ``healthy`` / ``no_data``."""
    return sorted(findings, key=lambda f: (f.rule in VERDICT_ONLY_RULES, -f.severity.rank, -f.impact))


# -- evidence in words ----------------------------------------------------------------

_SHARE_SUFFIXES = ("share", "shares", "_ratio", "_frac", "fraction")
MAX_VALUE_CHARS = 90


def _is_share(key: str) -> bool:
    return key.endswith(_SHARE_SUFFIXES) or key.startswith("share")


def _words(key: str) -> str:
    return key.replace("_", " ")


def evidence_value(key: str, v: Any, limit: int = MAX_VALUE_CHARS) -> str:
    """One evidence value as words and numbers: shares as percentages, floats to three
    figures, lists and records spelt out (never a Python repr)."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "n/a"
        if _is_share(key) and 0.0 <= v <= 1.0:
            return f"{v * 100:.0f}%"
        return f"{v:.3g}"
    if isinstance(v, dict):
        # The values of a share-named record ("phase_shares") are shares too.
        inner = (lambda k: key) if _is_share(key) else (lambda k: k)
        items = [(k, evidence_value(inner(k), x, limit)) for k, x in v.items() if x not in (None, [], {}, "")]
        if len(items) > 4 and len({t for _, t in items}) < len(items):
            # Many keys sharing few values (one per rank): each value once, with its keys
            # ("58% rank 0 1 2 3 4 6 7; 2% rank 5").
            return "(" + _cut("; ".join(_grouped(items)), limit) + ")"
        parts = [f"{_words(k)} {t}" if k not in ("site", "name", "rule") else t for k, t in items]
        # In parentheses, comma-separated: one record among the evidence's other pairs
        # ("wait shares (rank 0 58%, rank 1 2%), slow rank 1").
        return "(" + _cut(", ".join(parts), limit) + ")" if parts else ""
    if isinstance(v, (list, tuple)):
        out: list[str] = []
        for i, item in enumerate(v):
            text = evidence_value(key, item, limit)
            if sum(len(x) + 2 for x in out) + len(text) > limit:
                out.append(f"… +{len(v) - i} more")
                break
            out.append(text)
        return "; ".join(out)
    if v is None:
        return "n/a"
    return str(v)


def _grouped(items: list[tuple[str, str]]) -> list[str]:
    """``value key key …`` per distinct value, in order of first appearance; keys that
    share a first word give it once ("rank 0 1 2")."""
    groups: dict[str, list[str]] = {}
    for k, t in items:
        groups.setdefault(t, []).append(_words(k))
    out = []
    for t, keys in groups.items():
        head = keys[0].split(" ", 1)[0]
        if len(keys) > 1 and all(k.startswith(head + " ") for k in keys):
            keys = [keys[0], *(k[len(head) + 1:] for k in keys[1:])]
        out.append(f"{t} {' '.join(keys)}")
    return out


def _cut(s: str, limit: int) -> str:
    return s if len(s) <= limit else s[: limit - 1] + "…"


def evidence_text(evidence: dict[str, Any] | None, sep: str = ", ") -> str:
    """A finding's evidence as ``key value`` pairs in words; empty values left out."""
    if not isinstance(evidence, dict):
        return ""
    return sep.join(f"{_words(k)} {evidence_value(k, v)}" for k, v in evidence.items()
                    if v not in (None, [], {}, ""))
