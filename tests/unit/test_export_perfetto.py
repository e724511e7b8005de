"""`sattui export FILE --perfetto OUT.json`: the recording as a Trace Event Format trace."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sattui.errors import SattuiError
from sattui.export_perfetto import CARD_PID_BASE, PerfettoExporter, export_perfetto
from sattui.model import Frame, StackChunk, StackSample
from sattui.recording import RecordingReader, make_header, stacks_to_record
from sattui.report import build_report
from tests.perfetto_check import check_events, load_trace, shares, state_seconds

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "recordings"
WAIT = Frame("_MultiProcessingDataLoaderIter._next_data", "/x/site-packages/torch/utils/data/dataloader.py", 1505)
USER = Frame("main", "/home/u/train.py", 42)
FWD = Frame("Module._call_impl", "/x/site-packages/torch/nn/modules/module.py", 1775)


def _chunk(t, specs, pid=100):
    samples = [StackSample(t0, dur, pid, tid, None, tid == pid, frames, state=state)
               for t0, dur, tid, frames, state in specs]
    return stacks_to_record(StackChunk(t, t + 2, pid, 10.0, samples))


def _proc(t, pid, role, cpu, rank=None, name="python"):
    return {"kind": "proc", "t": t, "pid": pid, "ppid": 1, "role": role, "rank": rank, "name": name,
            "cpu": cpu, "state": "R", "rss": 1000, "read_Bps": None, "write_Bps": None}


def _export(records, header=None):
    header = header or make_header(pid=100, cmdline=["python", "train.py"], backend=None, cards=[])
    out = io.StringIO()
    exp = PerfettoExporter(out, header)
    for r in records:
        exp.add(r)
    exp.close()
    obj = json.loads(out.getvalue())
    check_events(obj["traceEvents"], nested=False)
    return obj


def test_consecutive_samples_of_one_state_are_one_slice_and_unknown_ends_it():
    obj = _export([
        _chunk(0.0, [(0.0, 0.5, 100, (WAIT, USER), "data_wait"),
                     (0.5, 0.3, 100, (WAIT,), "data_wait"),  # another stack, same state: merged
                     (0.8, 0.2, 100, (FWD, USER), "forward"),
                     (0.0, 2.0, 101, (WAIT,), None)]),  # another thread: no slice
        # the next chunk goes on where the last one ended: still one forward slice
        _chunk(1.0, [(1.0, 0.4, 100, (FWD, USER), "forward"),
                     (1.4, 0.1, 100, (), None),  # a torn read: the slice ends
                     (1.5, 0.5, 100, (FWD, USER), "forward")]),
    ])
    xs = [(e["name"], e["ts"], e["dur"]) for e in obj["traceEvents"] if e["ph"] == "X"]
    assert xs == [("data_wait", 0.0, 800000.0), ("forward", 800000.0, 600000.0), ("forward", 1500000.0, 500000.0)]
    first = next(e for e in obj["traceEvents"] if e["ph"] == "X")
    assert first["pid"] == first["tid"] == 100
    # the slice names the longest sample's own frame, the user's line before library frames
    assert first["args"] == {"samples": 2, "where": "main (u/train.py:42)"}


def test_a_gap_splits_a_state_and_an_overlap_is_clipped():
    obj = _export([
        _chunk(0.0, [(0.0, 1.0, 100, (FWD,), "forward")]),
        _chunk(1.0, [(0.9, 0.6, 100, (FWD,), "backward"),  # starts before the last ended
                     (2.0, 1.0, 100, (FWD,), "backward")]),  # 0.5 s later: a new slice
    ])
    xs = [(e["name"], e["ts"], e["dur"]) for e in obj["traceEvents"] if e["ph"] == "X"]
    assert xs == [("forward", 0.0, 1e6), ("backward", 1e6, 5e5), ("backward", 2e6, 1e6)]


def test_card_counters_skip_missing_values_and_cards_get_their_own_named_track():
    header = make_header(pid=None, cmdline=None, backend="nvml",
                         cards=[{"card": 0, "vendor": "nvidia", "name": "NVIDIA H200"}])
    obj = _export([
        {"kind": "card", "t": 0.5, "card": 0, "util": 97.0, "sm_active": None, "mem_used": 7 * 2 ** 30,
         "power_w": 650.5},
        {"kind": "card", "t": 1.0, "card": 1, "util": 0.0, "sm_active": 12.5, "mem_used": None, "power_w": None},
    ], header)
    ev = obj["traceEvents"]
    counters = sorted((e["pid"] - CARD_PID_BASE, e["ts"], e["name"], e["args"]) for e in ev if e["ph"] == "C")
    assert counters == [
        (0, 500000.0, "memory used", {"bytes": 7 * 2 ** 30}),
        (0, 500000.0, "power", {"watts": 650.5}),
        (0, 500000.0, "utilization", {"percent": 97.0}),
        (1, 1000000.0, "SM activity", {"percent": 12.5}),
        (1, 1000000.0, "utilization", {"percent": 0.0}),  # 0 is a value; null is no point
    ]
    names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert names[CARD_PID_BASE] == "card 0: NVIDIA H200"
    assert names[CARD_PID_BASE + 1] == "card 1: ?"


def test_ranks_get_a_track_each_and_workers_are_drawn_under_their_rank():
    header = make_header(pid=50, cmdline=["torchrun", "--nproc-per-node", "2", "train.py"], backend=None,
                         launcher="torchrun")
    obj = _export([
        _proc(1.0, 50, "other", 0.01, name="pt_elastic"),
        _proc(1.0, 60, "rank", 0.9, rank=0),
        _proc(1.0, 61, "rank", 0.8, rank=1),
        _proc(1.0, 70, "worker", 0.5, rank=1, name="pt_data_worker"),
        _proc(1.0, 71, "pin", None, rank=0, name="pt_data_pin"),  # no cpu yet: no point
        _chunk(0.0, [(0.0, 1.0, 60, (FWD,), "forward")], pid=60),
        _chunk(0.0, [(0.0, 1.0, 61, (WAIT,), "data_wait")], pid=61),
        {"kind": "event", "t": 2.0, "type": "proc_exited", "message": "worker 70 exited", "pid": 70,
         "role": "worker"},
        {"kind": "event", "t": 2.0, "type": "trainer_exited", "message": "rank 61 exited", "pid": 61},
        {"kind": "finding", "t": 5.0, "rule": "input_bound", "severity": "high", "impact": 0.5,
         "summary": "waits", "card": None, "rank": 1, "evidence": {"share": 0.5}, "fix": "more workers"},
    ], header)
    ev = obj["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert names[60].startswith("rank 0 pid 60") and names[61].startswith("rank 1 pid 61")
    assert 50 not in {e["pid"] for e in ev if e["ph"] in ("X", "C")}  # the launcher draws nothing
    cpu = {(e["pid"], e["name"]): e["args"]["cores"] for e in ev if e["ph"] == "C"}
    assert cpu == {(60, "CPU"): 0.9, (61, "CPU"): 0.8, (61, "worker 70 CPU"): 0.5}
    assert {(e["pid"], e["name"]) for e in ev if e["ph"] == "X"} == {(60, "forward"), (61, "data_wait")}
    inst = {e["name"]: e for e in ev if e["ph"] == "i"}
    assert inst["trainer_exited"]["s"] == "p" and inst["trainer_exited"]["pid"] == 61
    assert inst["proc_exited"]["s"] == "g"  # a worker has no track of its own
    f = inst["input_bound (high)"]
    assert f["s"] == "g" and f["cat"] == "finding" and f["args"]["rank"] == 1 and f["args"]["fix"] == "more workers"


def test_the_exporter_streams_what_it_reads():
    """Events are written as records come, not gathered until the end."""
    out = io.StringIO()
    exp = PerfettoExporter(out, make_header(pid=100, cmdline=["python"], backend=None))
    sizes = []
    for i in range(50):
        exp.add({"kind": "card", "t": float(i), "card": 0, "util": 50.0})
        sizes.append(len(out.getvalue()))
    assert all(b > a for a, b in zip(sizes, sizes[1:]))
    assert len(exp.open) == 0 and len(exp.names) == 2


@pytest.mark.parametrize("name", ["replay_starved.jsonl", "replay_healthy.jsonl", "ui_fixture.jsonl",
                                  "gpu_imbalance.jsonl", "gpu_input_bound.jsonl"])
def test_fixture_recordings_export_to_valid_traces_that_agree_with_the_report(tmp_path, name):
    rec = FIXTURES / name
    out = tmp_path / "trace.json"
    counts = export_perfetto(str(rec), str(out))
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    ev = load_trace(str(out))["traceEvents"]
    check_events(ev, nested=False)
    report, _ = build_report(str(rec))
    records = list(RecordingReader(str(rec)).records())

    # state slices: the same shares as the report's (which sums the same samples)
    want = (report.get("trainer") or {}).get("states") or {}
    got = shares(state_seconds(ev))
    assert set(got) == set(want)
    for k, v in want.items():
        assert got[k] == pytest.approx(v, abs=0.005), (k, got, want)
    assert counts["slices"] == sum(1 for e in ev if e["ph"] == "X")

    # every card sample's values are counter points at its time, and nothing else is
    want_c = sorted((CARD_PID_BASE + r["card"], round(r["t"] * 1e6, 3), f, r[f]) for r in records
                    if r["kind"] == "card" for f in ("util", "sm_active", "mem_used", "power_w")
                    if r.get(f) is not None)
    unit = {"utilization": "util", "SM activity": "sm_active", "memory used": "mem_used", "power": "power_w"}
    got_c = sorted((e["pid"], e["ts"], unit[e["name"]], next(iter(e["args"].values()))) for e in ev
                   if e["ph"] == "C" and e.get("cat") == "card")
    assert got_c == want_c

    # every worker's CPU sample is a point too
    want_w = sorted((r["pid"], round(r["t"] * 1e6, 3), r["cpu"]) for r in records
                    if r["kind"] == "proc" and r["role"] == "worker" and r["cpu"] is not None)
    got_w = sorted((int(e["name"].split()[1]), e["ts"], e["args"]["cores"]) for e in ev
                   if e["ph"] == "C" and e["name"].startswith("worker "))
    assert got_w == want_w

    # findings and events are instants
    n_inst = sum(1 for r in records if r["kind"] in ("finding", "event"))
    assert sum(1 for e in ev if e["ph"] == "i") == n_inst == counts["instants"]


def test_the_demo_recording_names_the_trainer_and_the_simulated_card(tmp_path):
    out = tmp_path / "t.json"
    export_perfetto(str(FIXTURES / "replay_starved.jsonl"), str(out))
    obj = load_trace(str(out))
    names = {e["pid"]: e["args"]["name"] for e in obj["traceEvents"] if e["name"] == "process_name"}
    header = RecordingReader(str(FIXTURES / "replay_starved.jsonl")).header
    assert names[header["pid"]].startswith(f"trainer pid {header['pid']}: python -m sattui.demo.trainer")
    assert names[header["pid"]].endswith(f" on {header['host']}") or "…" in names[header["pid"]]
    assert "SIMULATED" in names[CARD_PID_BASE]
    assert obj["otherData"]["host"] == header["host"] and obj["otherData"]["started_at"] == header["started_at"]


# -- the output file --------------------------------------------------------------------

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "sattui", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=60)


def test_an_existing_file_is_refused_unless_force_and_a_link_always(tmp_path):
    """The output is created as every sattui output is (sattui/safefile.py)."""
    rec = str(FIXTURES / "replay_starved.jsonl")
    out = tmp_path / "out.json"
    out.write_text("old")
    r = _cli("export", rec, "--perfetto", str(out))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--force" in r.stderr, r.stderr
    assert out.read_text() == "old"
    r = _cli("export", rec, "--perfetto", str(out), "--force")
    assert r.returncode == 0, r.stderr
    check_events(load_trace(str(out))["traceEvents"], nested=False)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    # a planted link is never written through, not even with --force; nor a dangling one
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    link = tmp_path / "link.json"
    link.symlink_to(victim)
    for extra in ([], ["--force"]):
        r = _cli("export", rec, "--perfetto", str(link), *extra)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "symbolic link" in r.stderr, r.stderr
    assert victim.read_text() == "keep me" and link.is_symlink()
    dangling = tmp_path / "d.json"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(SattuiError, match="symbolic link"):
        export_perfetto(rec, str(dangling))
    assert not (tmp_path / "nowhere").exists()


def test_bad_input_is_one_line_and_leaves_no_trace_behind(tmp_path):
    bad = tmp_path / "bad.jsonl"
    good = (FIXTURES / "replay_starved.jsonl").read_text().splitlines()
    bad.write_text("\n".join(good[:20] + ["{not json"] + good[20:]) + "\n")
    out = tmp_path / "o.json"
    r = _cli("export", str(bad), "--perfetto", str(out))
    assert r.returncode == 2 and "line 21" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not out.exists()
    r = _cli("export", str(tmp_path / "missing.jsonl"), "--perfetto", str(out))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and not out.exists()
    r = _cli("export", str(FIXTURES / "replay_starved.jsonl"), "--perfetto", str(tmp_path / "no" / "o.json"))
    assert r.returncode == 2 and "cannot write" in r.stderr and r.stderr.count("\n") == 1
    r = _cli("export", str(FIXTURES / "replay_starved.jsonl"))
    assert r.returncode == 2 and "--perfetto" in r.stderr


def test_nan_in_a_recording_never_makes_invalid_json(tmp_path):
    """The recording's reader accepts NaN (Python's json does); the trace must stay JSON."""
    rec = tmp_path / "nan.jsonl"
    header = make_header(pid=100, cmdline=["python"], backend="nvml", cards=[{"card": 0, "name": "x"}])
    lines = [json.dumps(header),
             '{"kind":"card","t":1.0,"card":0,"util":NaN,"power_w":Infinity,"mem_used":5}',
             '{"kind":"proc","t":1.0,"pid":100,"ppid":1,"role":"main","rank":null,"name":"python","cpu":NaN}',
             '{"kind":"finding","t":5.0,"rule":"x","severity":"low","impact":NaN,"summary":"s","evidence":{"a":NaN}}',
             json.dumps(_chunk(0.0, [(0.0, 1.0, 100, (FWD,), "forward")]))]
    rec.write_text("\n".join(lines) + "\n")
    out = tmp_path / "o.json"
    export_perfetto(str(rec), str(out))
    ev = load_trace(str(out))["traceEvents"]  # strict: NaN/Infinity would fail here
    check_events(ev, nested=False)
    assert [e["args"] for e in ev if e["ph"] == "C"] == [{"bytes": 5}]
    assert next(e for e in ev if e["ph"] == "i")["args"]["impact"] is None


def test_a_trainer_found_below_a_launcher_gets_the_track_and_its_command_line():
    header = make_header(pid=100, cmdline=["bash", "train.sh"], backend=None, launcher="bash")
    obj = _export([
        _proc(1.0, 100, "main", 0.0, name="bash"),  # main until a trainer shows up below it
        {"kind": "event", "t": 2.0, "type": "trainer_found", "message": "trainer: pid 200 …", "pid": 200,
         "rank": None, "under": 100, "launcher": "bash", "reason": "libtorch_cpu.so loaded",
         "cmdline": ["/usr/bin/python3", "train.py", "--lr", "0.1"]},
        _proc(2.0, 100, "other", 0.0, name="bash"),
        _proc(2.0, 200, "main", 0.9),
        _proc(2.0, 201, "worker", 0.5, name="pt_data_worker"),
        _chunk(2.0, [(2.0, 1.0, 200, (FWD,), "forward")], pid=200),
    ], header)
    ev = obj["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert names[200].startswith("trainer pid 200: python3 train.py --lr 0.1")
    assert {(e["pid"], e["name"]) for e in ev if e["ph"] == "X"} == {(200, "forward")}
    cpu = {(e["pid"], e["name"]) for e in ev if e["ph"] == "C" and e["ts"] == 2e6}
    assert cpu == {(200, "CPU"), (200, "worker 201 CPU")}
