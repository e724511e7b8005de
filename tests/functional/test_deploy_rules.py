"""deploy/prometheus/sattui-rules.yml with the real ``promtool`` (Debian's prometheus
package; tests/prom.py finds it): ``check rules``, ``test rules`` on its unit tests
(sattui-rules.test.yml), every alert tested firing and not firing, every name a rule
reads or an annotation prints one the exporter really emits, and broken rules turning the
unit tests red."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from sattui.metrics import exposition
from tests.prom import require

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "sattui-rules.yml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "sattui-rules.test.yml"
ALERTS = {"SattuiCardAllocatedIdle", "SattuiDataStarvation", "SattuiStraggler", "SattuiCardThrottled",
          "SattuiMemoryGrowing", "SattuiExporterDown"}
# Labels Prometheus adds at the scrape, and the scheduler's labels CONTRACT.md puts on
# every series (issue 24's job and pod item; empty, so absent, where unknown).
SCRAPE_LABELS = {"job", "instance"}
SCHEDULER_LABELS = {"slurm_job_id", "pod", "namespace"}


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require("promtool"), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def alert_rules() -> list[dict]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


def exported() -> tuple[set[str], set[str]]:
    """The metric names and label names sattui's exporter writes (counters with _total)."""
    fams = [exposition.INFO, *exposition.CARD_FAMILIES, exposition.IDLE, exposition.IDLE_CAUSE,
            exposition.COVERED, exposition.STATES, exposition.LOST, exposition.WORKERS, exposition.WORKER_CPU,
            exposition.FINDINGS, *exposition.DCGM_FAMILIES]
    names = {f.name + ("_total" if f.type == "counter" else "") for f in fams}
    labels = {label for f in fams for label in f.labels}
    return names, labels


def test_promtool_checks_the_rules():
    p = promtool("check", "rules", str(RULES), cwd=RULES.parent)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in p.stdout, p.stdout


def test_promtool_unit_tests_pass():
    p = promtool("test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert p.returncode == 0 and "SUCCESS" in p.stdout, p.stdout + p.stderr


def test_every_alert_is_tested_firing_and_not_firing():
    assert {r["alert"] for r in alert_rules()} == ALERTS
    tests = yaml.safe_load(RULE_TESTS.read_text())
    assert tests["rule_files"] == [RULES.name]
    firing: set[str] = set()
    silent: set[str] = set()
    for t in tests["tests"]:
        for a in t.get("alert_rule_test", []):
            (firing if a["exp_alerts"] else silent).add(a["alertname"])
    assert firing == ALERTS, ALERTS - firing
    assert silent == ALERTS, ALERTS - silent
    # Firing, each alert's annotations are checked word for word (promtool compares them).
    for t in tests["tests"]:
        for a in t.get("alert_rule_test", []):
            for e in a["exp_alerts"]:
                assert set(e["exp_annotations"]) == {"summary", "description"}, a["alertname"]


def test_annotations_name_host_rank_card_and_the_fix():
    for r in alert_rules():
        ann = r["annotations"]
        assert set(ann) >= {"summary", "description"}, r["alert"]
        text = ann["summary"] + ann["description"]
        assert "Fix:" in ann["description"], r["alert"]
        if r["alert"] == "SattuiExporterDown":
            assert "$labels.host" in text and "$labels.instance" in text
        elif r["alert"] == "SattuiDataStarvation":
            assert "$labels.host" in text and "$labels.rank" in text
        else:  # card alerts name the card, findings their rank too
            assert "$labels.host" in text and "$labels.card" in text, r["alert"]
        if "finding_impact_ratio" in r["expr"]:
            assert "$labels.rank" in text, r["alert"]


def test_the_rules_read_only_what_the_exporter_emits():
    names, labels = exported()
    labels |= SCRAPE_LABELS | SCHEDULER_LABELS
    for r in alert_rules():
        expr = r["expr"]
        for m in re.findall(r"\b(sattui_\w+|DCGM_\w+)", expr):
            assert m in names, f"{r['alert']}: {m} is not a metric the exporter writes"
        used = set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)\s*\"", expr))
        for group in re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", expr):
            used |= {x.strip() for x in group.split(",") if x.strip()}
        assert used <= labels, f"{r['alert']}: {used - labels} are not labels of sattui's series"
        text = r["annotations"]["summary"] + r["annotations"]["description"]
        printed = set(re.findall(r"\$labels\.(\w+)", text))
        assert printed <= labels, f"{r['alert']}: annotations print {printed - labels}"
    # rule ids the alerts select are rules of docs/rules.md
    rules_doc = (REPO / "docs" / "rules.md").read_text()
    for r in alert_rules():
        for rule_id in re.findall(r'rule="(\w+)"', r["expr"]):
            assert f"`{rule_id}`" in rules_doc, rule_id
    # the data causes are the ledger's (its table, sattui/ledger/causes.py)
    from sattui.ledger.causes import DATA_CAUSES, RANK_CAUSES

    starving = next(r for r in alert_rules() if r["alert"] == "SattuiDataStarvation")
    got = re.search(r'cause=~"([^"]+)"', starving["expr"])
    assert got is not None
    causes = set(got.group(1).split("|"))
    assert causes == {*DATA_CAUSES, "main_process_loading"} and causes <= set(RANK_CAUSES)


# A broken rule must turn the unit tests red: each mutation is one a careless edit makes.
MUTATIONS = {
    "idle threshold raised": ("< 0.10", "< 0.95"),
    "idle card without the trainer alive": (
        "          and on (job, instance, host, card)\n          rate(sattui_card_ledger_seconds_total[2m]) > 0\n", ""),
    "starvation threshold": (">= 0.20", ">= 0.30"),
    "starvation counts every cause": ('{cause=~"worker_busy|worker_io_bound|worker_respawn|cpu_contention|'
                                      'input_bound|main_process_loading"}[5m]', "[5m]"),
    "straggler of any severity": ('rule="straggler", severity=~"medium|high"', 'rule="straggler"'),
    "straggler alerts sooner": ('{rule="straggler", severity=~"medium|high"})\n        for: 10m',
                                '{rule="straggler", severity=~"medium|high"})\n        for: 5m'),
    "throttled for too long": ("        for: 5m\n", "        for: 15m\n"),
    "memory growth of low severity": ('rule="memory_growth", severity=~"medium|high"', 'rule="memory_growth"'),
    "exporter down forgets its exporters": ("last_over_time(sattui_info[1h])", "sattui_info"),
    "a fix left out": ("Fix: check cooling", "Check cooling"),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_a_broken_rule_fails_the_unit_tests(name, tmp_path):
    old, new = MUTATIONS[name]
    text = RULES.read_text()
    assert text.count(old) == 1, f"mutation {name!r}: {old!r} is not in the rules once"
    (tmp_path / RULES.name).write_text(text.replace(old, new))
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    assert promtool("check", "rules", RULES.name, cwd=tmp_path).returncode == 0, name
    p = promtool("test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert p.returncode != 0 and "FAILED" in p.stdout + p.stderr, f"{name}: the unit tests still pass"
