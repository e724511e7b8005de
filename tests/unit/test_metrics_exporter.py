"""The exporter's facts and names (sattui/metrics/node.py, exposition.py): CONTRACT.md's
"Prometheus metrics" table, from the records a recording holds and the advisor's ledger."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sattui.ledger import bins as ledger
from sattui.metrics.exposition import NodeCollector
from sattui.metrics.node import NodeMetrics
from sattui.metrics.server import parse_address
from tests.unit.test_advisor_kit import TL, ctx

HEADER = {"kind": "header", "backend": "nvml", "pid": 100, "env": {},
          "cards": [{"card": 0, "vendor": "nvidia", "name": "NVIDIA H200", "uuid": "GPU-0", "mem_total": 1000},
                    {"card": 1, "vendor": "amd", "name": "MI300X", "uuid": "AMD-1", "mem_total": 2000}]}


def scrape(node: NodeMetrics) -> dict[str, list[tuple[dict[str, str], float]]]:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(NodeCollector(node))
    text = generate_latest(reg).decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def one(got: dict, name: str, **labels: str) -> float:
    rows = [v for lab, v in got.get(name, []) if all(lab.get(k) == x for k, x in labels.items())]
    assert len(rows) == 1, (name, labels, got.get(name))
    return rows[0]


def test_cards_in_base_units_and_ratios_and_missing_is_absent():
    node = NodeMetrics("n1")
    node.set_header(HEADER)
    node.sink([{"kind": "card", "t": 1.0, "card": 0, "util": 98.0, "sm_active": 85.0, "mem_used": 700,
                "mem_total": 1000, "power_w": 690.0, "temp_c": 71.0, "sm_clock_mhz": 1755, "tensor_active": 35.0,
                "dram_active": None},
               {"kind": "card", "t": 1.0, "card": 1, "util": 40.0, "sm_active": None, "mem_used": 100,
                "power_w": None, "temp_c": 50.0}])
    got = scrape(node)
    assert one(got, "sattui_info", host="n1", backend="nvml") == 1.0
    assert one(got, "sattui_card_utilization_ratio", card="0", host="n1", vendor="nvidia", model="NVIDIA H200",
               uuid="GPU-0") == pytest.approx(0.98)
    assert one(got, "sattui_card_utilization_ratio", card="1") == pytest.approx(0.40)
    assert one(got, "sattui_card_sm_active_ratio", card="0") == pytest.approx(0.85)
    assert one(got, "sattui_card_memory_total_bytes", card="1") == 2000  # from discovery when a sample has none
    # What the card does not give is no series at all (missing is never 0).
    assert [lab["card"] for lab, _ in got["sattui_card_sm_active_ratio"]] == ["0"]
    assert [lab["card"] for lab, _ in got["sattui_card_power_watts"]] == ["0"]
    # NVIDIA cards only, under dcgm-exporter's names, units and labels.
    assert one(got, "DCGM_FI_DEV_GPU_UTIL", gpu="0", UUID="GPU-0", modelName="NVIDIA H200", Hostname="n1",
               hostname="n1") == 98.0
    assert one(got, "DCGM_FI_DEV_FB_USED", gpu="0") == pytest.approx(700 / 2 ** 20)
    assert one(got, "DCGM_FI_PROF_SM_ACTIVE", gpu="0") == pytest.approx(0.85)
    assert one(got, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", gpu="0") == pytest.approx(0.35)
    assert one(got, "DCGM_FI_DEV_SM_CLOCK", gpu="0") == 1755
    assert "DCGM_FI_PROF_DRAM_ACTIVE" not in got
    assert all(lab["gpu"] == "0" for rows in got.values() for lab, _ in rows if "gpu" in lab)


def _ddp_bins():
    # Two ranks of a CPU DDP job: rank 0 waits in backward with its own CPU idle, rank 1 sleeps.
    k = TL().main(cpu=0.0).proc(501, "rank", 0.05, state="S", rank=0, cpu_main=0.04)
    k.proc(502, "rank", 0.3, state="S", rank=1, cpu_main=0.3)
    k.stacks({"backward": 0.9, "forward": 0.1}, pid=501)
    k.stacks({"idle": 0.7, "backward": 0.2, "forward": 0.1}, pid=502)
    w = k.window(ctx())
    return ledger.build_bins(w, 10.0, 40.0)


def test_rank_state_and_lost_seconds_are_the_ledgers_and_never_counted_twice():
    node = NodeMetrics("n1")
    # the engine's rank records, with their start-up environment's labels, come first
    node.sink([{"kind": "proc", "t": 9.0, "pid": 501 + r, "role": "rank", "rank": r, "cpu": 0.1,
                "local_rank": r, "world_size": 2, "run_id": "job7"} for r in (0, 1)])
    got_bins = sorted(_ddp_bins().items())
    node.add_ledger(got_bins[:10])
    node.add_ledger(got_bins[:20])  # the first ten again: skipped
    node.add_ledger(got_bins[20:])
    got = scrape(node)
    total = ledger.total(v for _, v in got_bins)
    r0 = next(r for r in total.ranks.values() if r.rank == 0)
    assert one(got, "sattui_rank_state_seconds_total", rank="0", local_rank="0", run_id="job7", host="n1",
               state="backward") == pytest.approx(r0.states_s["backward"])
    assert one(got, "sattui_rank_state_seconds_total", rank="1", state="idle") == pytest.approx(21.0, abs=0.5)
    assert one(got, "sattui_rank_lost_seconds_total", rank="0", cause="straggler") == pytest.approx(
        r0.causes_s["straggler"])
    assert sum(v for lab, v in got["sattui_rank_state_seconds_total"] if lab["rank"] == "0") == pytest.approx(30.0)


def test_card_idle_ledger_by_state():
    k = TL().main().proc(201, "worker", 0.95)
    k.cards(dt=0.25, fn=lambda t: {"util": 0.0 if ((t - 0.25) % 0.5) < 0.25 - 1e-9 else 100.0})
    k.stacks({"data_wait": 0.5, "forward": 0.5})
    bins = ledger.build_bins(k.window(ctx(cpu_count=2)), 10.0, 40.0)
    node = NodeMetrics("n1")
    node.set_header(HEADER)
    node.add_ledger(bins.items())
    got = scrape(node)
    idle = one(got, "sattui_card_idle_seconds_total", card="0", state="data_wait", model="NVIDIA H200")
    covered = one(got, "sattui_card_ledger_seconds_total", card="0")
    assert covered == pytest.approx(30.0, abs=0.6)
    assert idle / covered == pytest.approx(0.5, abs=0.05)
    assert one(got, "sattui_card_idle_cause_seconds_total", card="0", cause="worker_busy") == pytest.approx(idle)


def test_workers_and_their_cpu_seconds_per_rank():
    node = NodeMetrics("n1")
    recs = []
    for i in range(5):
        t = float(i)
        recs += [{"kind": "proc", "t": t, "pid": 100, "role": "main", "rank": None, "cpu": 0.5},
                 {"kind": "proc", "t": t, "pid": 201, "role": "worker", "rank": None, "cpu": 0.8},
                 {"kind": "proc", "t": t, "pid": 202, "role": "worker", "rank": None, "cpu": 0.2}]
    for i in range(5):
        node.sink([r for r in recs if r["t"] == float(i)])
    got = scrape(node)
    assert one(got, "sattui_dataloader_workers", rank="", local_rank="", run_id="") == 2
    assert one(got, "sattui_worker_cpu_seconds_total", rank="") == pytest.approx(4 * 1.0)
    # A worker gone for a few ticks is no longer live.
    node.sink([{"kind": "proc", "t": 9.0, "pid": 201, "role": "worker", "rank": None, "cpu": 0.8}])
    assert one(scrape(node), "sattui_dataloader_workers", rank="") == 1


def test_current_findings_replace_the_previous_and_a_cleared_one_disappears():
    node = NodeMetrics("n1")
    f = {"kind": "finding", "rule": "input_bound", "severity": "high", "impact": 0.7, "card": None, "rank": None}
    node.sink([{**f, "t": 5.0}, {**f, "t": 5.0, "rule": "throttled", "severity": "medium", "impact": 0.1,
                                 "card": 0}])
    got = scrape(node)
    assert one(got, "sattui_finding_impact_ratio", rule="input_bound", severity="high", card="", rank="") == 0.7
    assert one(got, "sattui_finding_impact_ratio", rule="throttled", card="0") == 0.1
    node.sink([{**f, "t": 10.0, "impact": 0.6}])
    got = scrape(node)
    assert [lab["rule"] for lab, _ in got["sattui_finding_impact_ratio"]] == ["input_bound"]
    node.set_findings([])
    assert "sattui_finding_impact_ratio" not in scrape(node)


def test_a_findings_interval_is_served_beside_its_impact():
    node = NodeMetrics("n1")
    f = {"kind": "finding", "t": 5.0, "rule": "input_bound", "severity": "high", "impact": 0.7, "card": None,
         "rank": None, "impact_ci": [0.62, 0.79]}
    node.sink([f, {**f, "rule": "throttled", "severity": "medium", "impact": 0.1, "card": 0, "impact_ci": None}])
    got = scrape(node)
    labels = {"rule": "input_bound", "severity": "high", "card": "", "rank": ""}
    assert one(got, "sattui_finding_impact_lower_ratio", **labels) == 0.62
    assert one(got, "sattui_finding_impact_upper_ratio", **labels) == 0.79
    # a finding without an interval has its impact only: an unknown bound is no series
    assert [lab["rule"] for lab, _ in got["sattui_finding_impact_lower_ratio"]] == ["input_bound"]
    assert len(got["sattui_finding_impact_ratio"]) == 2
    node.set_findings([])
    assert "sattui_finding_impact_lower_ratio" not in scrape(node)


def test_hostile_label_values_are_escaped_in_the_exposition():
    node = NodeMetrics('evil"\n\\host')
    bad = 'Card "X"\n# HELP fake\x1b[2J'
    node.set_header({**HEADER, "cards": [{"card": 0, "vendor": "nvidia", "name": bad, "uuid": "u"}]})
    node.sink([{"kind": "card", "t": 1.0, "card": 0, "util": 50.0}])
    reg = CollectorRegistry(auto_describe=False)
    reg.register(NodeCollector(node))
    text = generate_latest(reg).decode()
    assert "\n# HELP fake" not in text  # no line of its own: the new line is escaped
    got = scrape(node)
    assert one(got, "sattui_card_utilization_ratio", model=bad, host='evil"\n\\host') == 0.5


def test_run_id_and_local_rank_come_from_the_ranks_environment_through_the_engines_records():
    # The engine's process sampler reads the trainer's start-up environment through its
    # allow-list and writes the labels in its proc records; the exporter reads only those.
    from sattui.trainer.procs import ProcessTree

    env = {**os.environ, "RANK": "3", "LOCAL_RANK": "1", "TORCHELASTIC_RUN_ID": "run-42", "WORLD_SIZE": "4",
           "WANDB_API_KEY": "secret-value"}
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        deadline = time.monotonic() + 20
        while b"time.sleep" not in open(f"/proc/{p.pid}/cmdline", "rb").read() and time.monotonic() < deadline:
            time.sleep(0.05)
        samples, _events = ProcessTree(p.pid, time.monotonic).sample()
        recs = [s.to_record() for s in samples if s.pid == p.pid]
        assert recs and (recs[0]["rank"], recs[0]["local_rank"], recs[0]["world_size"], recs[0]["run_id"]) == (
            3, 1, 4, "run-42"), recs
        node = NodeMetrics("n1")
        node.sink([{**r, "role": "rank"} for r in recs])
        got = scrape(node)
        assert len(got["sattui_dataloader_workers"]) == 1
        lab = got["sattui_dataloader_workers"][0][0]
        assert (lab["rank"], lab["local_rank"], lab["run_id"]) == ("3", "1", "run-42")
        assert node.world_size == 4
        assert "secret-value" not in repr(node.__dict__) and "secret-value" not in repr(recs)
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("text, want", [("127.0.0.1:9400", ("127.0.0.1", 9400)), ("[::1]:80", ("::1", 80)),
                                        ("node-1.local:9400", ("node-1.local", 9400))])
def test_metrics_address(text, want):
    assert parse_address(text) == want


@pytest.mark.parametrize("text", [":9400", "9400", "127.0.0.1:0", "127.0.0.1:70000", "::1:80", "h:x", "a b:1"])
def test_bad_metrics_address(text):
    with pytest.raises(ValueError):
        parse_address(text)



def test_one_rank_of_a_multi_node_job_waits_for_the_others_in_backward():
    # The node sees one rank; its WORLD_SIZE says the job has more, so its backward() with
    # the main thread's own CPU idle is a wait for another rank (the cluster report sums it).
    def one_rank():
        return TL().main(cpu=0.0).proc(501, "rank", 0.05, state="S", rank=0, cpu_main=0.04).stacks(
            {"backward": 0.9, "forward": 0.1}, pid=501)

    alone = ledger.build(one_rank().window(ctx()))
    assert "straggler" not in alone.cause_shares()
    c = ctx()
    c.env["WORLD_SIZE"] = "2"
    of_two = ledger.build(one_rank().window(c)).cause_shares()
    assert of_two["straggler"] == pytest.approx(0.9 * 0.96, abs=0.03)
