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
