"""deploy/grafana/sattui.json: importable as Grafana exports a dashboard (the data source
a variable, no data source of ours written in), and every panel's PromQL, with its
template variables as "All" (regex match-all), parses and returns series from a real
Prometheus (tests/prom.py) scraping two sattui exporters (tests/cluster_nodes.py: an
NVIDIA host and a host with another vendor's card) and a captured dcgm-exporter page (a
host with only dcgm-exporter)."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.cluster_nodes import CardScript, RankScript, ScriptedNode
from tests.prom import Prometheus, StaticExporter

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy" / "grafana" / "sattui.json"
RULES = REPO / "deploy" / "prometheus" / "sattui-rules.yml"
DCGM_PAGE = REPO / "tests" / "fixtures" / "vendors" / "dcgm-exporter" / \
    "dcgm-exporter-metrics_a100-mig-1g.5gb_full-gpu-and-gi_nvidia-docs.prom"
DCGM_HOST = "ub20-a100-k8s"  # the captured page's Hostname
JOB = "wtg-dash"
# Grafana's $__rate_interval is at least four scrapes; the test scrapes every second.
RATE_INTERVAL = "8s"
DS = {"type": "prometheus", "uid": "${datasource}"}
CARD_OR = "\nor on (Hostname, gpu)\n"


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def nodes() -> list[ScriptedNode]:
    return [
        ScriptedNode("g0", [RankScript(0, {"data_wait": 0.4, "forward": 0.3, "backward": 0.3}, {"worker_busy": 0.4})],
                     [CardScript(0, 55.0, sm_active=40.0), CardScript(1, 3.0, sm_active=2.0)], run_id="run-g",
                     findings=[{"rule": "worker_cpu_bound", "severity": "high", "impact": 0.4, "card": 0, "rank": 0}]),
        ScriptedNode("a1", [RankScript(1, {"forward": 0.5, "backward": 0.45, "collective": 0.05},
                                       {"comm_bound": 0.05})],
                     [CardScript(0, 90.0, idle_state="forward", idle_cause="host_overhead_bound", sm_active=70.0,
                                 vendor="amd", model="AMD Instinct MI300X")], run_id="run-g",
                     findings=[{"rule": "straggler", "severity": "medium", "impact": 0.12, "card": None, "rank": 1},
                               {"rule": "throttled", "severity": "high", "impact": 0.3, "card": 0, "rank": 1},
                               {"rule": "memory_growth", "severity": "medium", "impact": 0.0, "card": None,
                                "rank": 1}]),
    ]


@pytest.fixture(scope="module")
def prom():
    ns = nodes()
    with StaticExporter(DCGM_PAGE.read_text()) as dcgm:
        for n in ns:
            n.__enter__()
        try:
            with Prometheus({JOB: [n.target for n in ns] + [f"127.0.0.1:{dcgm.port}"]}, rule_files=[RULES]) as p:
                p.wait_for(f'sattui_rank_state_seconds_total{{job="{JOB}"}} > 0', n=2)
                p.wait_for(f'DCGM_FI_DEV_FB_USED{{job="{JOB}"}}', n=2)
                # a rate over RATE_INTERVAL needs the whole interval scraped: over a younger
                # series Prometheus extrapolates a part of it (0.19 for 0.4 at 6 s of 15)
                p.wait_for(f'count_over_time(sattui_rank_state_seconds_total{{job="{JOB}"}}[{RATE_INTERVAL}]) '
                           f'>= {int(RATE_INTERVAL[:-1])}', n=2)
                yield p
        finally:
            for n in ns:
                n.__exit__(None, None, None)


def substitute(expr: str) -> str:
    """The query as Grafana sends it with every variable at "All" (allValue ``.*``)."""
    got = expr.replace("$__rate_interval", RATE_INTERVAL)
    got = re.sub(r"\$\{(job|host)\}|\$(job|host)\b", ".*", got)
    left = re.findall(r"\$\{?[A-Za-z_]\w*", got)
    assert not left, f"variables the test does not know: {left} in {expr!r}"
    return got


def query(prom: Prometheus, q: str) -> list[dict]:
    """An instant query: its series, or an AssertionError with Prometheus's own complaint."""
    url = f"{prom.url}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:
        raise AssertionError(f"{q!r}: {e.read().decode(errors='replace')}") from None
    assert body["status"] == "success", body
    return body["data"]["result"]


def targets(d: dict) -> list[tuple[str, dict]]:
    return [(p["title"], t) for p in d["panels"] for t in p.get("targets", [])]


def test_importable_with_the_data_source_a_variable():
    d = dashboard()
    assert d["title"] and d["uid"] and isinstance(d["schemaVersion"], int) and d["id"] is None
    # the data source is the dashboard's variable, so an import asks for none
    assert d["__inputs"] == [] and d["__elements"] == {}
    required = {(r["type"], r["id"]) for r in d["__requires"]}
    assert {("grafana", "grafana"), ("datasource", "prometheus")} <= required
    assert {("panel", p["type"]) for p in d["panels"]} <= required
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for name in ("job", "host"):
        v = variables[name]
        assert v["type"] == "query" and v["datasource"] == DS and v["includeAll"] and v["allValue"] == ".*"
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    for p in d["panels"]:
        assert p["datasource"] == DS, p["title"]
        assert {"h", "w", "x", "y"} <= set(p["gridPos"]), p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"] == DS and t["expr"].strip(), p["title"]
    # no data source of the author's machine written in: only the variable
    uids = set(re.findall(r'"uid":\s*"([^"]*)"', DASHBOARD.read_text())) - {d["uid"]}
    assert uids <= {"${datasource}", "-- Grafana --"}, uids


def test_the_panels_the_issue_asks_for():
    exprs = " ".join(t["expr"] for _, t in targets(dashboard()))
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE", "sattui_rank_state_seconds_total",
                 "sattui_card_idle_seconds_total", "sattui_rank_lost_seconds_total", "sattui_finding_impact_ratio"):
        assert name in exprs, name
    tables = [p for p in dashboard()["panels"] if p["type"] == "table"]
    assert [t["expr"] for p in tables for t in p["targets"]] == \
        ['sattui_finding_impact_ratio{job=~"$job", host=~"$host"}']
    for p in dashboard()["panels"]:
        for t in p["targets"]:
            assert "$job" in t["expr"] and "$host" in t["expr"], p["title"]


def test_every_panel_query_returns_series(prom):
    for title, t in targets(dashboard()):
        got = query(prom, substitute(t["expr"]))
        assert got, f"panel {title!r}: no series for {substitute(t['expr'])!r}"
        # A card panel's alternatives (dcgm's names, then sattui's) each find their cards:
        # a misspelt one would hide behind the others.
        parts = t["expr"].split(CARD_OR)
        for part in parts if len(parts) > 1 else []:
            assert query(prom, substitute(part)), f"panel {title!r}: no series for {substitute(part)!r}"


def test_every_variable_query_finds_the_hosts_and_the_job(prom):
    d = dashboard()
    found = {}
    for v in d["templating"]["list"]:
        if v["type"] != "query":
            continue
        m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", v["definition"])
        # a plain string: Grafana 9 reads it, 10 and later turn it into their query object
        assert m and v["query"] == v["definition"], v
        series = query(prom, substitute(m.group(1)))
        found[v["name"]] = {s["metric"].get(m.group(2)) for s in series}
    assert found == {"job": {JOB}, "host": {"g0", "a1"}}


def card_series(prom: Prometheus, title: str) -> list[tuple[str, str]]:
    [t] = [t for p, t in targets(dashboard()) if p == title]
    return sorted((s["metric"]["Hostname"], s["metric"]["gpu"]) for s in query(prom, substitute(t["expr"])))


def test_card_panels_show_each_card_once_whoever_publishes_it(prom):
    # g0's NVIDIA card through dcgm's names (sattui publishes both: once), a1's AMD card
    # through sattui's, the dcgm-only host's whole GPU through dcgm's (its graphics engine's
    # activity: the MIG page has no GPU_UTIL), its MIG instance left out
    util = card_series(prom, "Card utilization")
    assert util.count(("g0", "0")) == 1 and util.count(("a1", "0")) == 1, util
    assert util.count((DCGM_HOST, "0")) == 1, util
    sm = card_series(prom, "SM activity")
    assert sm.count(("g0", "0")) == 1 and sm.count(("a1", "0")) == 1, sm
    values = {(s["metric"]["Hostname"], s["metric"]["gpu"]): float(s["value"][1]) for s in query(
        prom, substitute([t for p, t in targets(dashboard()) if p == "Card utilization"][0]["expr"]))
        if s["metric"]["Hostname"] != DCGM_HOST}
    assert values == {("g0", "0"): pytest.approx(0.55), ("g0", "1"): pytest.approx(0.03),
                      ("a1", "0"): pytest.approx(0.90)}


def test_rank_and_cause_panels_read_the_ledgers(prom):
    by_title = dict(targets(dashboard()))
    states = query(prom, substitute(by_title["Each rank's main-thread time by state"]["expr"]))
    got = {(s["metric"]["host"], s["metric"]["rank"], s["metric"]["state"]): float(s["value"][1]) for s in states}
    assert got[("g0", "0", "data_wait")] == pytest.approx(0.4, abs=0.1), got
    assert got[("a1", "1", "forward")] == pytest.approx(0.5, abs=0.1), got
    lost = query(prom, substitute(by_title["Lost time by cause"]["expr"]))
    assert {(s["metric"]["host"], s["metric"]["cause"]) for s in lost} == {("g0", "worker_busy"), ("a1", "comm_bound")}
    idle = query(prom, substitute(by_title["Card idle time by its rank's state"]["expr"]))
    assert {(s["metric"]["host"], s["metric"]["state"]) for s in idle} == {("g0", "data_wait"), ("a1", "forward")}
    found = query(prom, substitute(by_title["Current findings"]["expr"]))
    assert sorted((s["metric"]["host"], s["metric"]["rule"], s["metric"]["rank"]) for s in found) == \
        [("a1", "memory_growth", "1"), ("a1", "straggler", "1"), ("a1", "throttled", "1"),
         ("g0", "worker_cpu_bound", "0")]


def test_the_alerting_rules_evaluate_on_the_exporters_series(prom):
    """deploy/prometheus/sattui-rules.yml loaded in the same Prometheus: every rule
    evaluates without error on what the exporters really publish, and the alerts whose
    conditions the scripted nodes meet are pending (their ``for`` is minutes), with
    annotations naming the host, rank and card, the idle card's rank state and the
    starved rank's cause read by the annotations' own queries."""
    rules = [r for g in prom.api("rules")["groups"] for r in g["rules"]]
    assert len(rules) == 6 and all(r["health"] == "ok" for r in rules), \
        [(r["name"], r.get("lastError")) for r in rules]
    want = {("SattuiCardAllocatedIdle", "g0", "", "1"), ("SattuiDataStarvation", "g0", "0", ""),
            ("SattuiStraggler", "a1", "1", ""), ("SattuiCardThrottled", "a1", "1", "0"),
            ("SattuiMemoryGrowing", "a1", "1", "")}
    deadline = time.monotonic() + 30
    while True:
        alerts = prom.api("alerts")["alerts"]
        got = {(a["labels"]["alertname"], a["labels"]["host"], a["labels"].get("rank", ""),
                a["labels"].get("card", "")) for a in alerts}
        if got == want or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert got == want
    assert all(a["state"] == "pending" for a in alerts)
    text = {a["labels"]["alertname"]: a["annotations"]["summary"] + " " + a["annotations"]["description"]
            for a in alerts}
    assert "host g0 card 1 is allocated to a running trainer but idle (3% utilization)" in text[
        "SattuiCardAllocatedIdle"]
    assert "its rank was in data_wait 100% of that time" in text["SattuiCardAllocatedIdle"]
    assert "host g0 rank 0 loses 40% of its time" in text["SattuiDataStarvation"]
    assert "Largest cause: worker_busy. Fix: the DataLoader workers are busy" in text["SattuiDataStarvation"]
    assert "host a1 card 0 is throttled" in text["SattuiCardThrottled"]
    assert "host a1 rank 1 is a straggler" in text["SattuiStraggler"]
    assert "rank 1's DataLoader workers: memory only grows" in text["SattuiMemoryGrowing"]
