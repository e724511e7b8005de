import json

from sattui.frames import short_path
from sattui.model import Frame, StackChunk, StackSample
from sattui.recording import RecordingWriter, make_header, stacks_to_record
from sattui.report import ReportBuilder, build_report, format_text

WAIT = Frame("_MultiProcessingDataLoaderIter._next_data", "/x/site-packages/torch/utils/data/dataloader.py", 1505)
USER = Frame("main", "/home/u/train.py", 42)
FWD = Frame("Module._call_impl", "/x/site-packages/torch/nn/modules/module.py", 1775)
IMP = Frame("_find_and_load", "<frozen importlib._bootstrap>", 1176)


def _chunk(t, specs, pid=100):
    samples = [StackSample(t0, dur, pid, tid, None, tid == pid, frames, state=state)
               for t0, dur, tid, frames, state in specs]
    return stacks_to_record(StackChunk(t, t + 2, pid, 20.0, samples))


def _proc(t, pid, role, cpu, name="python"):
    return {"kind": "proc", "t": t, "pid": pid, "ppid": 1, "role": role, "rank": None, "name": name,
            "cpu": cpu, "state": "R", "rss": 1000, "read_Bps": 10.0, "write_Bps": 0.0}


def test_shares_are_weighted_by_duration_and_exclude_startup_and_other_threads():
    b = ReportBuilder(make_header(pid=100, cmdline=["python", "train.py"], backend=None))
    b.add(_chunk(0.0, [
        (0.0, 1.0, 100, (IMP, USER), "startup"),
        (1.0, 0.6, 100, (WAIT, USER), "data_wait"),
        (1.6, 0.2, 100, (FWD, USER), "forward"),
        (0.0, 2.0, 101, (WAIT,), None),  # another thread: never in the shares
    ]))
    b.add(_chunk(2.0, [(2.0, 0.2, 100, (WAIT, USER), "data_wait")]))
    rep = b.result()
    assert rep["trainer"]["states"] == {"data_wait": 0.8, "forward": 0.2}
    assert rep["trainer"]["startup_excluded_s"] == 1.0
    assert rep["trainer"]["sampled_s"] == 1.0
    top = rep["top_stacks"]
    assert top[0]["state"] == "data_wait" and top[0]["share"] == 0.8
    assert top[0]["leaf"].startswith("_MultiProcessingDataLoaderIter._next_data (torch/utils/data/dataloader.py")
    assert top[0]["user_frame"] == "main (u/train.py:42)"
    assert rep["duration_s"] == 4.0


def test_workers_is_the_most_seen_at_once_and_processes_are_summed():
    b = ReportBuilder(make_header(pid=100, cmdline=None, backend=None))
    for t in range(5):
        b.add(_proc(float(t), 100, "main", 0.5))
        b.add(_proc(float(t), 200 + (t >= 3), "worker", 1.0, "pt_data_worker"))
        if t == 2:
            b.add(_proc(float(t), 300, "worker", 0.2, "pt_data_worker"))
    rep = b.result()
    assert rep["trainer"]["workers"] == 2
    procs = {p["pid"]: p for p in rep["processes"]}
    assert procs[100]["cpu_mean"] == 0.5 and procs[100]["read_bytes"] == 40
    assert procs[201]["first_t"] == 3.0 and procs[201]["role"] == "worker"


def test_cards_only_recording_has_no_trainer_and_card_means(tmp_path):
    p = str(tmp_path / "c.jsonl")
    w = RecordingWriter(p, make_header(pid=None, cmdline=None, backend="sim",
                                       cards=[{"card": 0, "vendor": "nvidia", "name": "X", "simulated": True}]))
    for t, u, pw in ((0.0, 10.0, 100.0), (1.0, 30.0, None), (2.0, None, 200.0)):
        w.write({"kind": "card", "t": t, "card": 0, "util": u, "sm_active": None, "mem_used": 5 + int(t),
                 "power_w": pw})
    w.close()
    rep, warnings = build_report(p)
    assert warnings == []
    assert rep["trainer"] is None and rep["top_stacks"] == []
    (c,) = rep["cards"]
    assert c["util_mean"] == 20.0 and c["sm_active_mean"] is None  # unknown stays unknown
    assert c["mem_used_max"] == 7 and c["power_mean_w"] == 150.0 and c["simulated"] is True
    text = format_text(rep)
    assert "SIMULATED" in text and "cards-only" in text
    json.dumps(rep)


def test_short_path():
    assert short_path("/usr/lib/python3.11/site-packages/torch/optim/sgd.py") == "torch/optim/sgd.py"
    assert short_path("/root/.pyenv/versions/3.11.7/lib/python3.11/selectors.py") == "selectors.py"
    assert short_path("<frozen runpy>") == "<frozen runpy>"


def test_stack_seconds_are_summed_by_frames_whatever_each_record_numbers_them():
    # Each stacks record interns its own frames; the builder sums by the frames
    # themselves and gives them as Frames, in first-seen order.
    b = ReportBuilder(make_header(pid=100, cmdline=["python", "train.py"], backend=None))
    b.add(_chunk(0.0, [(0.0, 0.5, 100, (WAIT, USER), "data_wait"), (0.5, 0.25, 100, (FWD, USER), "forward")]))
    b.add(_chunk(2.0, [(2.0, 0.25, 100, (FWD, USER), "forward"), (2.25, 0.5, 100, (WAIT, USER), "data_wait"),
                       (2.75, 0.5, 100, (WAIT, USER), "forward")]))
    assert b.stack_s == {("data_wait", (WAIT, USER)): 1.0, ("forward", (FWD, USER)): 0.5,
                         ("forward", (WAIT, USER)): 0.5}
    assert list(b.stack_s) == [("data_wait", (WAIT, USER)), ("forward", (FWD, USER)), ("forward", (WAIT, USER))]
