"""The report's whole-run ledger (sattui/advisor/judge.py): a cause that no live
evaluation showed is only as severe as its interval is sure."""

from __future__ import annotations

from sattui.advisor.judge import Judge
from sattui.findings import Finding, Severity


def _f(sev: Severity, impact: float) -> Finding:
    return Finding("input_bound", sev, impact, "training waits for the DataLoader")


def test_a_cause_only_the_whole_run_holds_is_as_severe_as_its_lower_bound():
    # the HF run of a CI box: 12 % over 6 judged seconds, interval 0-50 %: not sure of 3 %
    assert Judge._sure_severity(_f(Severity.MEDIUM, 0.12), [0.0, 0.50]) == Severity.LOW
    # 2-8 % (the 8-rank fixture's host overhead): sure of low, not of medium
    assert Judge._sure_severity(_f(Severity.MEDIUM, 0.05), [0.02, 0.08]) == Severity.LOW
    # a share whose interval clears medium keeps medium; one that clears high stays at its point's medium
    assert Judge._sure_severity(_f(Severity.MEDIUM, 0.12), [0.07, 0.17]) == Severity.MEDIUM
    assert Judge._sure_severity(_f(Severity.MEDIUM, 0.12), [0.30, 0.40]) == Severity.MEDIUM
    assert Judge._sure_severity(_f(Severity.HIGH, 0.40), [0.08, 0.70]) == Severity.MEDIUM
    # no interval at all: not sure of anything above low
    assert Judge._sure_severity(_f(Severity.HIGH, 0.40), None) == Severity.LOW
