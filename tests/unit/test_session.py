"""Sessions (sattui/session/): a replay over the committed demo recordings and hand-made
ones; live sessions over a real process and over the simulated card, started and stopped
without leaving a thread or a child behind."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from sattui.errors import RecordingError, SattuiError, TargetError
from sattui.recording import RecordingReader
from sattui.session import LiveSession, ReplaySession, SessionStatus
from sattui.vendors import sim

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "recordings"
STARVED = FIXTURES / "replay_starved.jsonl"
HEALTHY = FIXTURES / "replay_healthy.jsonl"


def _write(path: Path, header: dict, records: list[dict]) -> str:
    base = {"kind": "header", "format": "sattui/1", "started_at": "2026-01-01T00:00:00+00:00", "host": "h",
            "cmdline": ["python", "train.py"], "cards": []}
    lines = [json.dumps({**base, **header})] + [json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _ev(t: float, type_: str, message: str = "", **data) -> dict:
    return {"kind": "event", "t": t, "type": type_, "message": message or type_, **data}


def _finding(t: float, rule: str) -> dict:
    return {"kind": "finding", "t": t, "rule": rule, "severity": "high", "impact": 0.5, "summary": rule,
            "card": None, "rank": None, "evidence": {}, "fix": "f"}


# ---------------------------------------------------------------------------- replay


def test_replay_loads_the_whole_recording():
    s = ReplaySession(str(STARVED))
    assert not s.live and s.simulated
    assert s.header["backend"] == "sim"
    assert 50 < s.duration < 90
    assert s.cursor == s.duration and s.now() == s.duration and not s.playing
    # every card sample of the file is in the timeline (history sized to the recording)
    n_cards = sum(1 for r in RecordingReader(str(STARVED)).records() if r["kind"] == "card")
    with s.lock:
        cards = s.timeline.window("card", 0, 0.0, s.duration + 1)
    assert len(cards) == n_cards > 20
    assert any(c.util and c.util > 50 for c in cards) and any(c.util == 0.0 for c in cards)
    pid = s.header["pid"]
    stacks = s.timeline.window("stack", pid, 0.0, s.duration + 1)
    assert stacks and {x.state for x in stacks} >= {"data_wait", "backward"}
    procs = s.processes(0.0, s.duration + 1)
    assert pid in procs and {p.role for ps in procs.values() for p in ps} >= {"main", "worker"}
    assert all(isinstance(k, int) for k in procs)
    s.start()
    s.stop()  # nothing runs in a replay: both are harmless


def test_replay_cursor_seek_step_play():
    s = ReplaySession(str(HEALTHY))
    d = s.duration
    s.seek(5.0)
    assert s.now() == 5.0
    s.step(-10.0)
    assert s.cursor == 0.0
    s.step(1e6)
    assert s.cursor == d
    s.tick(1.0)  # not playing: the cursor stays
    assert s.cursor == d
    s.toggle_play()  # at the end: play starts over
    assert s.playing and s.cursor == 0.0
    s.tick(1.5)
    s.tick(0.5)
    assert s.cursor == pytest.approx(2.0)
    s.toggle_play()
    assert not s.playing
    s.tick(1.0)
    assert s.cursor == pytest.approx(2.0)
    s.toggle_play()
    s.tick(d)  # past the end: stops there
    assert s.cursor == d and not s.playing


def test_replay_status_follows_the_cursor():
    s = ReplaySession(str(STARVED))
    st = s.status()
    assert isinstance(st, SessionStatus)
    assert (st.backend, st.backend_message, st.recording_path) == ("sim", None, str(STARVED))
    assert st.trainer_alive is True and st.trainer_exit_code is None
    assert st.sampler == "stopped"  # the recording ended
    s.seek(0.0)
    assert s.status().sampler == "starting"  # no stacks before the first chunk
    s.seek(s.duration / 2)
    mid = s.status()
    assert mid.sampler == "sampling" and mid.sampler_rate_hz == 10.0


def test_replay_status_from_events(tmp_path):
    path = _write(tmp_path / "r.jsonl", {"pid": 10, "backend": "nvml", "stack_rate_hz": 10.0}, [
        _ev(1.0, "backend_failing", "nvml: NVMLError_Unknown; cards are stale", backend="nvml"),
        _ev(2.0, "backend_recovered", backend="nvml"),
        _ev(3.0, "permission_denied", "no permission to read the stacks of pid 10: run sattui as root",
            hint="h", pid=10),
        _ev(4.0, "sampler_rate", rate_hz=5.0, pid=10),
        _ev(6.0, "trainer_exited", "trainer exited with code 3", pid=10, exit_code=3),
    ])
    s = ReplaySession(path)
    s.seek(1.5)
    st = s.status()
    assert st.backend == "nvml" and "cards are stale" in (st.backend_message or "")
    assert st.sampler == "starting" and st.trainer_alive is True
    s.seek(2.0)  # an event exactly at the cursor counts
    assert s.status().backend_message is None
    s.seek(3.5)
    st = s.status()
    assert st.sampler == "denied" and "root" in (st.sampler_message or "") and st.sampler_rate_hz is None
    s.seek(6.0)
    st = s.status()
    assert st.trainer_alive is False and st.trainer_exit_code == 3


def test_replay_status_cards_only_and_no_stacks(tmp_path):
    s = ReplaySession(_write(tmp_path / "c.jsonl", {"pid": None, "backend": None}, [
        _ev(0.1, "no_accelerator", "no accelerator found: nvml: library not found")]))
    st = s.status()
    assert st.sampler is None and st.trainer_alive is None
    assert st.backend is None and "no accelerator" in (st.backend_message or "")
    s2 = ReplaySession(_write(tmp_path / "n.jsonl", {"pid": 5, "backend": None, "stack_rate_hz": None},
                              [{"kind": "proc", "t": 1.0, "pid": 5, "ppid": 1, "role": "main", "rank": None,
                                "name": "python", "cpu": 1.0, "state": "R", "rss": 1, "read_Bps": 0.0,
                                "write_Bps": 0.0}]))
    assert s2.status().sampler == "stopped" and "--no-stacks" in (s2.status().sampler_message or "")


def test_findings_are_the_newest_evaluation_up_to_the_cursor(tmp_path):
    s = ReplaySession(_write(tmp_path / "f.jsonl", {"pid": None, "backend": "sim"}, [
        _finding(5.0, "input_bound"), _finding(5.0, "worker_cpu_bound"), _finding(10.0, "healthy"),
        _ev(12.0, "recording_ended")]))
    assert not s.findings_computed  # recorded findings are used as they are
    assert [f.rule for f in s.findings()] == ["healthy"]
    s.seek(7.0)
    assert [f.rule for f in s.findings()] == ["input_bound", "worker_cpu_bound"]
    s.seek(5.0)
    assert len(s.findings()) == 2
    s.seek(4.9)
    assert s.findings() == []


def test_replay_judges_a_headless_recording():
    s = ReplaySession(str(STARVED))
    assert s.findings_computed
    rules = [f.rule for f in s.findings()]
    assert rules and rules[0] == "worker_cpu_bound"  # the headline (the data wait's cause) comes first
    h = ReplaySession(str(HEALTHY))
    assert [f.rule for f in h.findings()][0] == "healthy"
    h.seek(0.5)
    assert h.findings() == []  # before the first evaluation (every second, as live)


def test_a_loaded_replay_is_out_of_the_cyclic_collectors_sight():
    # a full collection must not walk every sample of the run (it may land while the UI
    # thread holds the session's lock); what comes after the load is still collected
    s = ReplaySession(str(HEALTHY), judge=False)
    sample = s.timeline.series("card", 0)[0]
    assert gc.is_tracked(sample) and not any(o is sample for o in gc.get_objects())
    later = [sample]
    assert any(o is later for o in gc.get_objects())


def test_replay_refuses_a_foreign_file(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text('{"hello": "world"}\n')
    with pytest.raises(RecordingError, match="not a sattui"):
        ReplaySession(str(f))
    with pytest.raises(RecordingError, match="cannot read"):
        ReplaySession(str(tmp_path / "missing.jsonl"))


# ------------------------------------------------------------------------------ live


def _session_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("sattui-")]


def _wait(cond, timeout: float = 15.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


@pytest.fixture
def sleeper():
    p = subprocess.Popen(["sleep", "60"])
    yield p
    p.kill()
    p.wait()


def test_live_session_over_a_running_process(sleeper, tmp_path):
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    updates = []
    out = tmp_path / "live.jsonl"
    s = LiveSession(pid=sleeper.pid, backend="none", interval_s=0.2, record_path=str(out),
                    on_update=lambda: updates.append(time.monotonic()))
    assert s.live and not s.simulated and s.status().trainer_alive is True
    t0 = time.monotonic()
    s.start()
    assert time.monotonic() - t0 < 0.5  # never blocks the caller
    assert _wait(lambda: len(updates) >= 3 and bool(s.processes(0, s.now() + 1)))
    procs = s.processes(0.0, s.now() + 1)
    assert procs[sleeper.pid][0].role == "main" and procs[sleeper.pid][0].name == "sleep"
    st = s.status()
    assert st.trainer_alive is True and st.backend is None and st.recording_path == str(out)
    assert "--backend none" in (st.backend_message or "")
    assert st.sampler in ("starting", "sampling", "not_python", "failing")
    assert s.now() > 0
    s.stop()
    assert not s.running and not _session_threads()
    # the process was not ours: it runs on; py-spy runs of ours are gone
    assert sleeper.poll() is None
    left = {c.pid for c in psutil.Process().children(recursive=True)} - before
    assert left == set(), left
    header = RecordingReader(str(out)).header
    kinds = [r["kind"] for r in RecordingReader(str(out)).records()]
    assert header["pid"] == sleeper.pid and "proc" in kinds
    s.stop()  # idempotent


def test_live_session_started_command_is_stopped(tmp_path):
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    log = tmp_path / "trainer.log"
    s = LiveSession(command=[sys.executable, "-c", "import time; print('hi', flush=True); time.sleep(60)"],
                    backend="none", interval_s=0.2, trainer_log=str(log))
    s.start()
    assert s.pid is not None
    pid = s.pid
    assert _wait(lambda: pid in s.processes(0.0, s.now() + 1))
    # its output went to the log, not to our terminal (wait: Python takes a moment to start)
    assert _wait(lambda: "hi" in log.read_text())
    assert s.status().trainer_alive is True
    s.stop()
    st = s.status()
    assert st.trainer_alive is False and st.trainer_exit_code is not None
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert {c.pid for c in psutil.Process().children(recursive=True)} - before == set()
    assert not _session_threads()


def test_live_session_keeps_the_exit_code_and_the_data(tmp_path):
    s = LiveSession(command=["sh", "-c", "sleep 0.6; exit 3"], backend="none", interval_s=0.2, stacks=False)
    s.start()
    assert _wait(lambda: s.status().trainer_alive is False)
    assert _wait(lambda: s.status().trainer_exit_code == 3)
    assert any(e.type == "trainer_exited" for e in s.events())
    assert s.running  # a screen keeps showing the last data after the trainer exits
    assert s.processes(0.0, s.now() + 1)
    s.stop()
    assert s.status().trainer_exit_code == 3 and not _session_threads()


def test_live_session_on_the_sim_card_without_a_trainer(tmp_path):
    card = tmp_path / "card"
    start = time.monotonic()
    # a trainer computing 80 % of every 100 ms, written ahead of time
    lines = ["pid 4242", "mem 1000000"]
    for i in range(100):
        t = start - 1.0 + i * 0.1
        lines += [f"b {t:.6f}", f"e {t + 0.08:.6f}"]
    card.write_text("\n".join(lines) + "\n")
    sim.set_card_file(str(card))
    updates: list[float] = []
    out = tmp_path / "cards.jsonl"
    try:
        s = LiveSession(backend="sim", interval_s=0.2, card_interval_s=0.2, record_path=str(out),
                        on_update=lambda: updates.append(1.0))
        s.start()
        assert _wait(lambda: len(s.timeline.window("card", 0, 0.0, s.now() + 1)) >= 4)
        assert s.simulated
        st = s.status()
        assert st.sampler is None and st.trainer_alive is None and st.backend == "sim"
        cards = s.timeline.window("card", 0, 0.0, s.now() + 1)
        # the first window may straddle the start; the later ones are 80 % busy
        assert all(c.util == pytest.approx(80.0, abs=6.0) for c in cards[1:]), [c.util for c in cards]
        assert cards[-1].mem_used == sim.CONTEXT_BYTES + 1000000
        s.stop()
    finally:
        sim.set_card_file(None)
    assert updates and not _session_threads()
    header = RecordingReader(str(out)).header
    assert header["backend"] == "sim" and header["cards"][0]["simulated"] is True
    recs = list(RecordingReader(str(out)).records())
    assert recs[-1]["type"] == "recording_ended"


def test_live_session_writes_advisor_findings(monkeypatch, tmp_path):
    import sattui.advisor.loop as loop_mod

    monkeypatch.setattr(loop_mod, "ADVISOR_PERIOD_S", 0.3)
    monkeypatch.setattr(loop_mod, "advisor_lag_s", lambda: 0.1)
    sim.set_card_file(str(tmp_path / "none"))
    out = tmp_path / "f.jsonl"
    try:
        s = LiveSession(backend="sim", interval_s=0.1, card_interval_s=0.1, record_path=str(out))
        s.advising.next_t = 0.3
        s.start()
        assert _wait(lambda: bool(s.findings()), timeout=10)
        f = s.findings()
        assert f[0].rule == "no_data"  # warming up
        s.stop()
    finally:
        sim.set_card_file(None)
    assert any(r["kind"] == "finding" for r in RecordingReader(str(out)).records())


def test_live_session_bad_input(tmp_path, sleeper):
    dead = subprocess.Popen(["true"])
    dead.wait()
    with pytest.raises(TargetError, match="no such process"):
        LiveSession(pid=dead.pid)
    with pytest.raises(SattuiError, match="cannot write"):
        LiveSession(pid=sleeper.pid, record_path=str(tmp_path / "missing" / "f.jsonl"))
    with pytest.raises(SattuiError, match="not both"):
        LiveSession(pid=sleeper.pid, command=["sleep", "1"])
    s = LiveSession(command=[str(tmp_path / "no-such-program")], backend="none")
    with pytest.raises(SattuiError, match="cannot start"):
        s.start()
    s.stop()
    assert not _session_threads()


def test_live_session_forced_backend_that_fails_still_watches_the_trainer(sleeper, monkeypatch):
    from sattui.vendors import backend as base

    class Broken(sim.SimBackend):
        name = "broken"

        def discover(self):
            raise base.BackendUnavailable("broken: no such library")

    monkeypatch.setitem(base.REGISTRY, "broken", Broken)
    s = LiveSession(pid=sleeper.pid, backend="broken", interval_s=0.2, stacks=False)
    s.start()
    try:
        assert _wait(lambda: bool(s.processes(0.0, s.now() + 1)))
        st = s.status()
        assert st.backend is None and "no such library" in (st.backend_message or "")
    finally:
        s.stop()
