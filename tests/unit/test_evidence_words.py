"""A finding's evidence is printed as words and numbers (sattui/findings.evidence_text),
in the advice panel and the report alike, for the ledger's per-rank and per-phase
records too: never a Python dict repr."""

from __future__ import annotations

import re
from pathlib import Path

from sattui.findings import Finding, evidence_text
from sattui.report import build_report, format_text
from sattui.widgets.advice import advice_text

RANKS = Path(__file__).resolve().parents[1] / "fixtures" / "recordings" / "ranks_fixture.jsonl"
# A dict or list repr: braces, quoted keys, quoted items ("[8 eval., 40–75 s]" is the report's own).
REPR = re.compile(r"[{}]|': |\": |', '|\['")


def test_records_are_spelt_out_in_parentheses():
    ev = {"share": 0.5312, "slow": "rank 5", "phase_shares": {"checkpoint": 0.7, "eval": 0.3},
          "wait_shares": {f"rank {r}": (0.06 if r == 5 else 0.61) for r in range(8)}, "workers": 2}
    assert evidence_text(ev) == ("share 53%, slow rank 5, phase shares (checkpoint 70%, eval 30%), "
                                 "wait shares (61% rank 0 1 2 3 4 6 7; 6% rank 5), workers 2")


def test_a_few_distinct_values_stay_one_by_one():
    ev = {"rank_shares": {"rank 0": 0.9, "rank 1": 0.2}}
    assert evidence_text(ev) == "rank shares (rank 0 90%, rank 1 20%)"


def test_the_advisor_s_ledger_evidence_reads_as_words_in_the_report_and_the_advice_panel():
    rep, _ = build_report(str(RANKS))
    findings = [Finding.from_record(f) for f in rep["findings"]]
    keys = {k for f in findings for k, v in f.evidence.items() if isinstance(v, dict)}
    assert {"rank_shares", "wait_shares"} <= keys  # the per-rank records are there to print
    text = format_text(rep)
    assert not REPR.search(text.split("findings", 1)[1]), text
    panel = advice_text(findings, width=80).plain
    assert "wait shares (" in panel and not REPR.search(panel), panel
