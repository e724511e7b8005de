"""``--webhook URL`` / ``--on-finding CMD`` (sattui/notify.py): which findings go out and
when (a fake clock), and delivery to real HTTP servers on 127.0.0.1 (one that answers,
one slower than the timeout, one that answers 500, a refused port) and to a real command."""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sattui.cli import main
from sattui.notify import CLEARED, FIRING, Gate, Notifier, check_webhook_url, message, parse_command
from tests.prom import free_port


def f(rule: str = "input_bound", sev: str = "high", rank: int | None = 0, impact: float = 0.4) -> dict[str, Any]:
    return {"kind": "finding", "t": 1.0, "rule": rule, "severity": sev, "impact": impact, "rank": rank,
            "card": None, "summary": f"{rule} summary", "fix": "more workers", "impact_ci": [0.3, 0.5]}


def states(out: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str, str]]:
    return [(s, r["rule"], r["severity"]) for s, r in out]


def test_fires_at_medium_or_high_once_and_clears():
    g = Gate(600)
    assert g.observe([f(sev="low"), f("healthy", "info")], 0) == []
    assert states(g.observe([f(sev="medium")], 1)) == [(FIRING, "input_bound", "medium")]
    assert g.observe([f(sev="medium")], 2) == []  # still standing: nothing new
    # medium -> high is news, but inside the 10 minutes it is held until they are up
    assert g.observe([f(sev="high")], 3) == []
    assert states(g.observe([f(sev="high")], 601)) == [(FIRING, "input_bound", "high")]
    assert g.observe([f(sev="medium")], 700) == []  # a fall to medium still stands
    # cleared: no longer found (the evaluation's findings are all there is)
    assert states(g.observe([], 1300)) == [(CLEARED, "input_bound", "medium")]
    assert g.observe([], 1301) == []


def test_a_finding_that_flaps_sends_at_most_one_message_per_10_minutes_and_ends_true():
    g = Gate(600)
    sent = []
    t = 0.0
    for i in range(120):  # standing and gone every 5 s for 10 minutes
        sent += [(t, s) for s, _ in g.observe([f()] if i % 2 == 0 else [], t)]
        t += 5
    assert [s for _, s in sent] == [FIRING]
    sent += [(t, s) for s, _ in g.observe([], t)]  # 600 s after the first: it is not standing now
    assert [s for _, s in sent] == [FIRING, CLEARED]
    assert sent[1][0] - sent[0][0] >= 600
    # a clear held by the throttle is still sent when the time is up
    g2 = Gate(600)
    g2.observe([f()], 0)
    assert g2.observe([], 10) == []
    assert states(g2.observe([], 600)) == [(CLEARED, "input_bound", "high")]


def test_findings_are_told_apart_by_rule_card_and_rank():
    g = Gate(600)
    out = g.observe([f(rank=0), f(rank=1), f("straggler", rank=1), f(rank=0)], 0)  # rank 0 twice: the headline
    assert sorted((r["rule"], r["rank"]) for _, r in out) == [("input_bound", 0), ("input_bound", 1),
                                                             ("straggler", 1)]


def test_message_fields_and_slack_text():
    m = message(FIRING, f(), host="node7", recording="/tmp/r.jsonl", job={"slurm_job_id": "12"})
    assert {k: m[k] for k in ("state", "rule", "severity", "impact", "impact_ci", "host", "rank", "card",
                              "recording", "fix")} == {
        "state": "firing", "rule": "input_bound", "severity": "high", "impact": 0.4, "impact_ci": [0.3, 0.5],
        "host": "node7", "rank": 0, "card": None, "recording": "/tmp/r.jsonl", "fix": "more workers"}
    assert m["text"] == ("sattui on node7: HIGH input_bound rank 0, 40% ±10 of wall time: input_bound summary "
                         "Fix: more workers")
    assert m["labels"] == {"slurm_job_id": "12"}
    cleared = message(CLEARED, f(), host="n", recording=None)
    assert cleared["text"] == "sattui on n: cleared input_bound rank 0 (was high)"


@pytest.mark.parametrize("bad", ["ftp://x/", "127.0.0.1:9/", "http://", "http://a b/"])
def test_bad_webhook_url(bad):
    with pytest.raises(ValueError):
        check_webhook_url(bad)


def test_bad_on_finding_command_is_one_line_from_the_cli(capsys):
    with pytest.raises(SystemExit) as e:
        main(["record", "-o", "/tmp/never.jsonl", "--on-finding", "no-such-program-xyz --x", "--", "true"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "no such program" in err and "Traceback" not in err and err.count("\n") == 1
    with pytest.raises(ValueError):
        parse_command("'unclosed")


class _Server:
    """A real HTTP server on 127.0.0.1 in a thread: ``mode`` answer / slow / fail."""

    def __init__(self, mode: str, delay_s: float = 0.0) -> None:
        self.bodies: list[dict[str, Any]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n))
                if mode == "slow":
                    time.sleep(delay_s)
                outer.bodies.append(body)
                try:
                    self.send_response(500 if mode == "fail" else 200)
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass  # the slow one's client has given up and gone

            def log_message(self, *a: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _notifier(url: str, **kw: Any) -> tuple[Notifier, list[tuple[str, str, dict[str, Any]]], list[str]]:
    events: list[tuple[str, str, dict[str, Any]]] = []
    lines: list[str] = []
    n = Notifier(webhook=url, host="n1", on_event=lambda *e: events.append(e), log=lines.append, **kw)
    n.start()
    return n, events, lines


def _wait(cond: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_delivers_to_a_server_that_answers():
    s = _Server("answer")
    try:
        n, events, lines = _notifier(s.url)
        n.observe([f()])
        _wait(lambda: events)
        n.close()
        assert [b["rule"] for b in s.bodies] == ["input_bound"] and s.bodies[0]["state"] == "firing"
        assert s.bodies[0]["text"].startswith("sattui on n1: HIGH input_bound")
        assert [e[0] for e in events] == ["notify_sent"] and lines == []
    finally:
        s.close()


@pytest.mark.parametrize("mode", ["slow", "fail", "refused"])
def test_a_slow_failing_or_dead_endpoint_never_delays_the_caller_and_is_said(mode):
    s = _Server(mode if mode != "refused" else "answer", delay_s=3.0)
    url = s.url if mode != "refused" else f"http://127.0.0.1:{free_port()}/"
    try:
        n, events, lines = _notifier(url, timeout_s=1.0)
        t0 = time.monotonic()
        n.observe([f()])
        n.observe([f(), f("straggler", rank=1)])
        assert time.monotonic() - t0 < 0.1  # the sampling thread only queued them
        _wait(lambda: len(events) >= 2)
        n.close()
        assert [e[0] for e in events] == ["notify_failed", "notify_failed"], events
        why = {"slow": "timed out", "fail": "HTTP 500", "refused": "Connection refused"}[mode]
        assert all(why in e[1] for e in events), events
        assert all("/hook" not in e[1] for e in events)  # a webhook URL's path is its secret: never said
        assert len(lines) == 2 and why in lines[0]
    finally:
        s.close()


def test_on_finding_command_gets_the_finding_in_its_environment(tmp_path):
    out = tmp_path / "got.json"
    script = ("import json, os, sys; json.dump({k: v for k, v in os.environ.items() if k.startswith('SATTUI_')}, "
              f"open({str(out)!r}, 'w'))")
    events: list[tuple[str, str, dict[str, Any]]] = []
    n = Notifier(command=[sys.executable, "-c", script], host="n1", recording="/r.jsonl",
                 on_event=lambda *e: events.append(e))
    n.start()
    n.observe([f(sev="medium", rank=2)])
    _wait(lambda: events)
    n.close()
    env = json.loads(out.read_text())
    assert (env["SATTUI_RULE"], env["SATTUI_SEVERITY"], env["SATTUI_STATE"], env["SATTUI_RANK"],
            env["SATTUI_CARD"], env["SATTUI_HOST"], env["SATTUI_RECORDING"]) == \
        ("input_bound", "medium", "firing", "2", "", "n1", "/r.jsonl")
    assert json.loads(env["SATTUI_FINDING_JSON"])["summary"] == "input_bound summary"
    assert events[0][0] == "notify_sent"


def test_a_failing_or_hanging_command_is_an_event(tmp_path):
    events: list[tuple[str, str, dict[str, Any]]] = []
    n = Notifier(command=[sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1]))", "5"],
                 host="n1", on_event=lambda *e: events.append(e), command_timeout_s=0.5)
    n.start()
    n.observe([f()])
    _wait(lambda: events)
    n.close()
    assert events[0][0] == "notify_failed" and "still running" in events[0][1]
    events.clear()
    n2 = Notifier(command=[sys.executable, "-c", "raise SystemExit(3)"], host="n1",
                  on_event=lambda *e: events.append(e))
    n2.start()
    n2.observe([f()])
    _wait(lambda: events)
    n2.close()
    assert events[0][0] == "notify_failed" and "exit code 3" in events[0][1]


def test_the_monitor_session_sends_its_findings_and_records_the_outcome(monkeypatch, tmp_path):
    """The monitor's path (LiveSession, as `sattui --webhook URL --record FILE` builds it):
    each evaluation's findings reach the notifier; its events reach the recording through
    the engine. The advisor is replaced by one that finds input_bound at once."""
    import sattui.advisor.loop as loop_mod
    from sattui.cli import _notifier_factory
    from sattui.recording import RecordingReader
    from sattui.session import LiveSession
    from sattui.vendors import sim

    monkeypatch.setattr(loop_mod, "ADVISOR_PERIOD_S", 0.2)
    monkeypatch.setattr(loop_mod, "advisor_records", lambda advisor, timeline, t: [{**f(), "t": t}])
    s_ok, dead = _Server("answer"), f"http://127.0.0.1:{free_port()}/"
    out = tmp_path / "live.jsonl"
    sim.set_card_file(str(tmp_path / "none"))
    try:
        for url, rec in ((s_ok.url, out), (dead, tmp_path / "dead.jsonl")):
            s = LiveSession(backend="sim", interval_s=0.1, card_interval_s=0.1, record_path=str(rec),
                            make_notifier=_notifier_factory(url, None, "live-host", str(rec)))
            s.advising.next_t = 0.2
            s.start()
            _wait(lambda s=s: s.notifier is not None and (s.notifier.sent or s.notifier.failed))
            time.sleep(0.3)  # a tick to write the event
            s.stop()
    finally:
        sim.set_card_file(None)
        s_ok.close()
    assert [b["rule"] for b in s_ok.bodies] == ["input_bound"]
    assert s_ok.bodies[0]["host"] == "live-host" and s_ok.bodies[0]["recording"] == str(out)
    for path, typ in ((out, "notify_sent"), (tmp_path / "dead.jsonl", "notify_failed")):
        r = RecordingReader(str(path))
        events = [x for x in r.records() if x["kind"] == "event" and x["type"].startswith("notify_")]
        r.close()
        assert [e["type"] for e in events] == [typ], events
