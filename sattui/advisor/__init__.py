"""The advisor: why is the accelerator not saturated?

Rules are small pure functions over a Timeline window (one module per family:
``rules_input``, ``rules_host``, ``rules_gpu``, ``rules_system``, ``cost``, ``anomaly``);
``verdict`` runs them with hysteresis, suppression and precedence; ``judge`` replays a
recording through them for ``sattui report``. docs/rules.md lists every rule with its
signals, threshold, anchor and fix. Headless: nothing here imports Textual.

Live use::

    ctx = AdvisorContext.from_header(header)          # or AdvisorContext(cards=..., env=..., ...)
    advisor = Advisor(ctx)
    every ~5 s:  verdict = advisor.evaluate(timeline, clock())
"""

from sattui.advisor.context import AdvisorContext, Verdict, severity_for
from sattui.advisor.cost import EfficiencyMeter, efficiency
from sattui.advisor.judge import Judge, judge_recording
from sattui.advisor.verdict import RULES, Advisor
from sattui.findings import SEVERITIES, Finding, Severity
from sattui.ledger.window import Window

__all__ = [
    "SEVERITIES", "Severity", "RULES", "Advisor", "AdvisorContext", "EfficiencyMeter", "Finding", "Judge",
    "Verdict", "Window",
    "efficiency", "judge_recording", "severity_for",
]
