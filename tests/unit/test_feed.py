from sattui.feed import Feed
from sattui.model import CardSample, Event, Frame, ProcSample, StackChunk, StackSample
from sattui.recording import stacks_to_record
from sattui.timeline import Timeline


def test_records_and_live_objects_land_in_the_same_series():
    tl = Timeline(history_s=60)
    feed = Feed(tl)
    feed.add_record(CardSample(1.0, 0, util=50.0, power_w=None).to_record())
    feed.add_card(CardSample(2.0, 0, util=60.0))
    feed.add_record(ProcSample(1.0, 7, 1, "worker", None, "pt_data_worker", 0.9, "R", 5, 0.0, 0.0).to_record())
    fr = (Frame("f", "/a.py", 1),)
    chunk = StackChunk(0.0, 2.0, 7, 20.0, [StackSample(0.5, 1.0, 7, 7, "MainThread", True, fr, "data_wait"),
                                           StackSample(0.5, 1.0, 7, 8, "t", False, fr)])
    feed.add_record(stacks_to_record(chunk))
    feed.add_record(Event(3.0, "trainer_exited", "gone", {"exit_code": 1}).to_record())
    cards = tl.window("card", 0, 0, 10)
    assert [c.util for c in cards] == [50.0, 60.0] and cards[0].power_w is None
    assert tl.window("proc", 7, 0, 10)[0].role == "worker"
    (s,) = tl.window("stack", 7, 0, 10)  # the other thread's sample stays out
    assert s.state == "data_wait" and s.dur == 1.0
    (ev,) = tl.window("event", 0, 0, 10)
    assert ev.type == "trainer_exited" and ev.data == {"exit_code": 1}


def test_host_worker_stack_and_new_proc_fields_reach_the_timeline():
    from sattui.model import HostSample, WorkerStack

    tl = Timeline(history_s=60)
    feed = Feed(tl)
    feed.add_record(HostSample(1.0, cpu_busy=1.2, cg_version=2, cg_throttled_periods=4).to_record())
    fr = (Frame("Items.__getitem__", "/u/ds.py", 56), Frame("fetch", "/t/fetch.py", 54))
    feed.add_record(WorkerStack(1.5, 9, "fetch_wait", fr, active=False).to_record())
    feed.add_record(WorkerStack(6.5, 9, "idle", (), active=None).to_record())
    feed.add_record(ProcSample(2.0, 9, 7, "worker", None, "pt_data_worker", 0.2, "S", 5, 0.0, 0.0,
                               cpu_main=0.1, run_delay=0.3, uss=1 << 20).to_record())
    feed.add_record({"kind": "future_kind", "t": 3.0})  # a kind it does not know: left out
    (h,) = tl.window("host", 0, 0, 10)
    assert (h.cpu_busy, h.cg_version, h.cg_throttled_periods, h.freq_mhz) == (1.2, 2, 4, None)
    assert tl.keys("worker_stack") == [9]
    a, b = tl.window("worker_stack", 9, 0, 10)
    assert (a.state, a.frames, a.active) == ("fetch_wait", fr, False) and (b.state, b.active) == ("idle", None)
    (p,) = tl.window("proc", 9, 0, 10)
    assert (p.cpu_main, p.run_delay, p.uss) == (0.1, 0.3, 1 << 20)
    assert tl.keys("future_kind") == []
