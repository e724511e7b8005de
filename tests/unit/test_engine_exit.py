"""The tick loop ends with the trainer, not up to a tick later: a pidfd wakes it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from sattui.engine import Engine


def test_the_loop_ends_when_the_trainer_ends_not_at_the_next_tick():
    # ticks 5 s apart; the process lives ~1 s: without the wake, its end is seen at 5 s
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.0)"])
    engine = Engine(child.pid, interval_s=5.0, stacks=False, backend="none", child=child)
    records: list[dict] = []
    engine.open()
    engine.add_sink(records.extend)
    engine.start()
    t0 = time.monotonic()
    try:
        ended_by = engine.run(duration_s=30)
    finally:
        engine.shutdown("test")
    took = time.monotonic() - t0
    assert ended_by == "trainer_exited"
    assert took < 3.0, took
    assert engine.exit_code == 0
    assert [r for r in records if r.get("type") == "trainer_exited"]


def test_a_stop_wakes_the_loop_at_once():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    engine = Engine(child.pid, interval_s=5.0, stacks=False, backend="none", child=child)
    engine.open()
    engine.add_sink(lambda recs: None)
    engine.start()
    try:
        threading.Timer(0.5, engine.request_stop, args=("signal",)).start()
        t0 = time.monotonic()
        assert engine.run(duration_s=30) == "signal"
        assert time.monotonic() - t0 < 2.0
    finally:
        engine.shutdown("test")
        child.kill()
        child.wait()
