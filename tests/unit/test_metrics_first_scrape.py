"""The exporter from the first scrape (issue 23, item 9): every family of CONTRACT.md's
"Prometheus metrics" table is on the page before anything is known, a known card's or
rank's counters start at 0, an unknown gauge has no series (never a 0 standing in for
it), and the ledger's bins reach the counters as they settle (StackBinner.LAG_S after
their samples), warm-up included, not after the advisor's warm-up and first evaluations."""

from __future__ import annotations

import itertools

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sattui.advisor import Advisor
from sattui.ledger import bins as ledger_mod
from sattui.ledger import causes as causes_table
from sattui.ledger.window import StackBinner
from sattui.metrics.advised import AdvisedMetrics
from sattui.metrics.exposition import CARD_STATES, RANK_STATES, Renderer, rows
from sattui.metrics.node import NodeMetrics
from sattui.model import ProcSample
from sattui.states import COUNTED_NAMES, State
from tests.unit.test_advisor_kit import PID, TL, ctx

# CONTRACT.md, "Prometheus metrics": (family as the parser names it, type).
CONTRACT_FAMILIES = {
    "sattui_info": "gauge",
    "sattui_card_utilization_ratio": "gauge",
    "sattui_card_sm_active_ratio": "gauge",
    "sattui_card_memory_used_bytes": "gauge",
    "sattui_card_memory_total_bytes": "gauge",
    "sattui_card_power_watts": "gauge",
    "sattui_card_temperature_celsius": "gauge",
    "sattui_card_idle_seconds": "counter",
    "sattui_rank_state_seconds": "counter",
    "sattui_dataloader_workers": "gauge",
    "sattui_worker_cpu_seconds": "counter",
    "sattui_finding_impact_ratio": "gauge",
    "sattui_finding_impact_lower_ratio": "gauge",
    "sattui_finding_impact_upper_ratio": "gauge",
    "sattui_rank_lost_seconds": "counter",
    "sattui_card_idle_cause_seconds": "counter",
    "sattui_card_ledger_seconds": "counter",
}

HEADER = {"kind": "header", "backend": "nvml", "pid": PID, "env": {},
          "cards": [{"card": 0, "vendor": "nvidia", "name": "NVIDIA H200", "uuid": "GPU-0", "mem_total": 1000}]}


def page(node: NodeMetrics) -> dict[str, tuple[str, list]]:
    """The page as the server writes it (exposition.Renderer): family -> (type, samples)."""
    text = Renderer().render(rows(node.snapshot())).decode()
    return {f.name: (f.type, f.samples) for f in text_string_to_metric_families(text)}


def series(got: dict, family: str, **labels: str) -> dict[str, float]:
    """``family``'s samples matching ``labels``, keyed by their state or cause label."""
    out = {}
    for s in got[family][1]:
        if all(s.labels.get(k) == v for k, v in labels.items()):
            out[s.labels.get("state") or s.labels.get("cause") or ""] = s.value
    return out


def test_an_empty_node_has_every_family_and_no_made_up_value():
    got = page(NodeMetrics("n1"))
    assert {k: t for k, (t, _) in got.items()} == CONTRACT_FAMILIES
    # Nothing known yet: sattui_info alone has a series; no gauge reads 0 for "unknown".
    assert {k for k, (_, samples) in got.items() if samples} == {"sattui_info"}


def test_a_fresh_session_starts_its_counters_at_0_and_leaves_unknown_gauges_out():
    node = NodeMetrics("n1")
    node.set_header(HEADER)
    node.sink([{"kind": "proc", "t": 1.0, "pid": PID, "ppid": 1, "role": "main", "rank": None, "name": "python",
                "cpu": 0.9, "state": "R", "rss": 1000, "read_Bps": 0.0, "write_Bps": 0.0}])
    got = page(node)
    assert {k: t for k, (t, _) in got.items() if k.startswith("sattui_")} == CONTRACT_FAMILIES
    # An NVIDIA card's dcgm-exporter names too, unknown until it is sampled.
    assert {k for k in got if not k.startswith("sattui_")} == {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE"}
    assert all(samples == [] for k, (_, samples) in got.items() if k.startswith("DCGM_"))
    rank = {"host": "n1", "rank": "", "local_rank": "", "run_id": ""}
    assert series(got, "sattui_rank_state_seconds", **rank) == dict.fromkeys(COUNTED_NAMES, 0.0)
    assert series(got, "sattui_rank_lost_seconds", **rank) == dict.fromkeys(causes_table.RANK_CAUSES, 0.0)
    assert series(got, "sattui_worker_cpu_seconds", **rank) == {"": 0.0}
    assert series(got, "sattui_dataloader_workers", **rank) == {"": 0.0}  # counted at the tick: none
    card = {"host": "n1", "card": "0", "uuid": "GPU-0", "vendor": "nvidia", "model": "NVIDIA H200"}
    assert series(got, "sattui_card_idle_seconds", **card) == dict.fromkeys(CARD_STATES, 0.0)
    assert "unknown" in CARD_STATES and set(COUNTED_NAMES) < set(CARD_STATES)
    assert series(got, "sattui_card_idle_cause_seconds", **card) == dict.fromkeys(causes_table.CARD_CAUSES, 0.0)
    assert series(got, "sattui_card_ledger_seconds", **card) == {"": 0.0}
    # The card has not been sampled yet: its gauges are unknown (memory total is from discovery).
    assert series(got, "sattui_card_memory_total_bytes", **card) == {"": 1000.0}
    for fam in ("sattui_card_utilization_ratio", "sattui_card_sm_active_ratio", "sattui_card_memory_used_bytes",
                "sattui_card_power_watts", "sattui_card_temperature_celsius", "sattui_finding_impact_ratio",
                "sattui_finding_impact_lower_ratio", "sattui_finding_impact_upper_ratio"):
        assert got[fam][1] == [], fam
    assert "startup" not in RANK_STATES  # start-up is counted apart, as in the report


def test_a_counted_second_adds_to_the_zero_series():
    node = NodeMetrics("n1")
    node.set_header(HEADER)
    k = TL().main().stacks({"forward": 0.6, "data_wait": 0.4}).cards(util=50.0)
    node.add_ledger(ledger_mod.build_bins(k.window(ctx()), 10.0, 20.0).items())
    got = page(node)
    states = series(got, "sattui_rank_state_seconds", rank="")
    assert set(states) == set(COUNTED_NAMES)
    assert states["forward"] == pytest.approx(6.0) and states["data_wait"] == pytest.approx(4.0)
    assert states["backward"] == 0.0


# -- the ledger's bins as they settle


def _demo_timeline(stacks_from: float) -> TL:
    """A trainer computing from ``stacks_from`` on (its stack samples begin then), its card
    half busy, one worker."""
    return (TL().main(cpu=1.0, cpu_main=0.9).proc(201, "worker", 0.2).cards(util=50.0)
            .stacks({"forward": 0.5, "data_wait": 0.5}, t0=stacks_from))


def _advised(k: TL) -> tuple[NodeMetrics, AdvisedMetrics, list[float]]:
    node = NodeMetrics("n1")
    node.set_header(HEADER)
    clock = [0.0]
    am = AdvisedMetrics(node, {**HEADER, "cpu_count": 8}, lambda: clock[0])
    am.loop.timeline = k.tl  # the records as the engine's sink would have fed them
    return node, am, clock


def _rank_seconds(node: NodeMetrics) -> float:
    return sum(sum(r.states_s.values()) for r in node.snapshot().ranks)


def test_record_metrics_publishes_each_ledger_bin_lag_s_after_its_samples_warm_up_included():
    # Stacks from 2 s on, all of them in the Timeline already: the bin [2, 3) settles a
    # second after it (StackBinner.MIN_LAG_S: its samples have arrived), at t = 4 — long
    # before the report's 10-s warm-up would end. Before this, the
    # first seconds reached the exporter at t = 25 (the warm-up, the evaluation's lag,
    # the evaluations every 5 s): a user saw no sattui_rank_state_seconds_total at 20 s.
    node, am, clock = _advised(_demo_timeline(stacks_from=2.0))
    first_t = None
    for i in range(0, 81):
        clock[0] = i * 0.5
        am.on_tick()
        if first_t is None and _rank_seconds(node) > 0:
            first_t = clock[0]
    assert am.failed is None
    assert first_t == 3.0 + StackBinner.MIN_LAG_S
    # Every second counted once, the warm-up's too: bins [2, 34) by t = 40.
    assert _rank_seconds(node) == pytest.approx(40.0 - StackBinner.MIN_LAG_S - 2.0)
    r = node.snapshot().ranks[0]
    assert r.states_s["forward"] == pytest.approx(r.states_s["data_wait"])
    assert sum(r.causes_s.values()) == pytest.approx(r.states_s["data_wait"])  # data waits are lost


def test_the_advisor_judges_as_before_and_the_report_total_leaves_the_warm_up_out():
    k = _demo_timeline(stacks_from=0.0)
    closed: list[int] = []
    settled = Advisor(ctx(), on_ledger_bin=lambda b, _j: closed.append(b))
    plain = Advisor(ctx())
    for i in range(1, 9):
        t = i * 5.0
        for s in range(int(t) - 4, int(t) + 1):
            settled.settle_ledger(k.tl, float(s))
        a, b = settled.evaluate(k.tl, t - 4.0), plain.evaluate(k.tl, t - 4.0)
        assert [(f.rule, f.severity, round(f.impact, 6)) for f in a.findings] == \
            [(f.rule, f.severity, round(f.impact, 6)) for f in b.findings]
    # The warm-up's bins were computed (and published), but never go to the run's total.
    assert closed == [] or min(closed) >= 10
    settled.flush_ledger(k.tl, 40.0)
    assert min(closed) == 10


def test_the_zero_series_name_every_cause_the_ledger_gives():
    # Every state under every combination of the figures a bin's causes depend on.
    main_fast = ProcSample(1.0, PID, 1, "main", None, "python", 1.0, "R", 1000, 0.0, 0.0, run_delay=0.0,
                           cpu_main=0.9)
    main_waiting = ProcSample(1.0, PID, 1, "main", None, "python", 0.1, "S", 1000, 0.0, 0.0, run_delay=0.5,
                              cpu_main=0.05)
    views = [ledger_mod._WorkerView(201, parts, 0.5) for parts in (
        {"cpu": 1.0}, {"io": 1.0}, {"contended": 1.0}, {"waiting": 1.0})]
    worker_sets: list = [None, [], *[[v] for v in views]]
    rank_causes: set[str] = set()
    card_causes: set[str] = set()
    for st, main, workers, to_come, multi, gpu, idle in itertools.product(
            [s.value for s in State], [None, main_fast, main_waiting], worker_sets, [None, True, False],
            [False, True], [False, True], [None, True, False]):
        causes, _, split = ledger_mod.rank_bin_causes({st: 1.0}, main, workers, to_come, 2.0, multi, gpu, idle)
        rank_causes |= set(causes)
        _, by_cause = ledger_mod.card_piece_causes(0.5, {st: 1.0}, split)
        card_causes |= set(by_cause)
    _, by_cause = ledger_mod.card_piece_causes(0.5, {"forward": 1.0}, None)
    card_causes |= set(by_cause)
    assert rank_causes <= set(causes_table.RANK_CAUSES), rank_causes - set(causes_table.RANK_CAUSES)
    assert card_causes <= set(causes_table.CARD_CAUSES), card_causes - set(causes_table.CARD_CAUSES)
