"""Findings pushed out from one node with no Prometheus: ``--webhook URL`` (an HTTP POST
of one JSON document, Slack-compatible through its ``text`` field) and ``--on-finding
CMD`` (a command run with the finding in its environment), on the monitor and ``record``.

When a finding reaches medium or high (or rises from medium to high), and when it clears
(drops below medium, or is no longer found), one message goes out: at most one per
finding (rule, card, rank) per ``THROTTLE_S``. A change that comes inside that time is
held, and sent when the time is up if it still holds, so the receiver always ends with
the finding's real state (a finding that fires and clears within the 10 minutes gets its
"cleared" then, not never).

Delivery runs in its own thread, with a timeout on each try (``WEBHOOK_TIMEOUT_S``,
``COMMAND_TIMEOUT_S``): the sampling thread only hands messages over (a bounded queue), so
a slow or dead endpoint never delays sampling. Every outcome is an event
(``notify_sent`` / ``notify_failed``) handed to ``on_event``, which puts it into the
recording and on the screen (sattui/engine.py ``Engine.post_event``).

Headless: no Textual here.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from sattui.errors import SattuiError
from sattui.findings import VERDICT_ONLY_RULES, Severity
from sattui.textsafe import clean

THROTTLE_S = 600.0
WEBHOOK_TIMEOUT_S = 5.0
COMMAND_TIMEOUT_S = 30.0
# Messages waiting for the delivery thread; beyond this (an endpoint far slower than the
# findings change) a message is dropped and said so.
QUEUE_MAX = 64
FIRING = "firing"
CLEARED = "cleared"
_RANK = {Severity.MEDIUM.value: 1, Severity.HIGH.value: 2}

Key = tuple[str, Any, Any]


def check_webhook_url(text: str) -> str:
    """``text`` if it is an http(s) URL with a host; a ``ValueError`` saying why not."""
    u = urllib.parse.urlsplit(text)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"expected an http:// or https:// URL, got {text!r}")
    if any(c.isspace() or not c.isprintable() for c in text):
        raise ValueError(f"not a URL: {text!r}")
    return text


def endpoint(url: str) -> str:
    """Where a webhook goes, for messages and recordings: scheme, host and port only. The
    path of a chat service's webhook URL is its secret (Slack's ``/services/T…/B…/…``), and
    recordings are made to be shared."""
    u = urllib.parse.urlsplit(url)
    host = u.hostname or "?"
    host = f"[{host}]" if ":" in host else host
    return clean(f"{u.scheme}://{host}" + (f":{u.port}" if u.port else ""), 200)


def parse_command(text: str) -> list[str]:
    """``--on-finding CMD`` as argv (shlex; no shell unless CMD names one); a
    ``ValueError`` when it cannot be split or its program is not found."""
    try:
        argv = shlex.split(text)
    except ValueError as e:
        raise ValueError(f"cannot split {text!r}: {e}") from None
    if not argv:
        raise ValueError("empty command")
    if shutil.which(argv[0]) is None:
        raise ValueError(f"{argv[0]!r}: no such program (or not executable)")
    return argv


@dataclass
class _State:
    sent: int = 0  # 0: nothing standing (never sent or cleared); 1 medium; 2 high, as last sent
    sent_at: float | None = None
    last: dict[str, Any] = field(default_factory=dict)  # the finding as last seen standing


class Gate:
    """Which findings to send, when (the throttle and the clear logic); no I/O.

    ``observe(records, now)`` takes the finding records of one evaluation and returns the
    messages due, each ``(FIRING | CLEARED, finding record)``. ``now`` is seconds on any
    monotonic clock."""

    def __init__(self, throttle_s: float = THROTTLE_S) -> None:
        self.throttle_s = throttle_s
        self._by_key: dict[Key, _State] = {}

    def observe(self, records: Iterable[dict[str, Any]], now: float) -> list[tuple[str, dict[str, Any]]]:
        standing: dict[Key, tuple[int, dict[str, Any]]] = {}
        for r in records:
            rule = r.get("rule")
            if not isinstance(rule, str) or rule in VERDICT_ONLY_RULES:
                continue
            level = _RANK.get(str(r.get("severity")), 0)
            key = (rule, r.get("card"), r.get("rank"))
            if level and level > standing.get(key, (0, {}))[0]:
                standing[key] = (level, r)
        out: list[tuple[str, dict[str, Any]]] = []
        for key in sorted(set(standing) | set(self._by_key), key=repr):
            st = self._by_key.setdefault(key, _State())
            level, rec = standing.get(key, (0, {}))
            if level:
                st.last = rec
            # Due: a finding now standing that was not (or was medium and is now high), or
            # one no longer standing that was. A fall from high to medium still stands.
            due = (level > st.sent) or (level == 0 and st.sent > 0)
            if not due:
                continue
            if st.sent_at is not None and now - st.sent_at < self.throttle_s:
                continue  # held: looked at again at every evaluation until the time is up
            st.sent, st.sent_at = level, now
            out.append((FIRING if level else CLEARED, dict(st.last)))
        for key in [k for k, s in self._by_key.items() if s.sent == 0 and k not in standing
                    and (s.sent_at is None or now - s.sent_at >= self.throttle_s)]:
            del self._by_key[key]  # nothing standing, nothing held: forgotten
        return out


def message(state: str, rec: dict[str, Any], *, host: str, recording: str | None,
            job: dict[str, Any] | None = None, wall: float | None = None) -> dict[str, Any]:
    """The JSON document sent for one finding (docs/format.md, "Webhook")."""
    sev = str(rec.get("severity"))
    impact = rec.get("impact")
    ci = rec.get("impact_ci")
    where = " ".join(f"{k} {rec[k]}" for k in ("card", "rank") if rec.get(k) is not None)
    rule = str(rec.get("rule"))
    if state == FIRING:
        share = ""
        if isinstance(impact, (int, float)):
            from sattui.findings import impact_text

            share = f", {impact_text(float(impact), ci)} of wall time"
        at = f" {where}" if where else ""
        text = f"sattui on {host}: {sev.upper()} {rule}{at}{share}: {rec.get('summary') or ''}"
        if rec.get("fix"):
            text += f" Fix: {rec['fix']}"
    else:
        text = f"sattui on {host}: cleared {rule}{' ' + where if where else ''} (was {sev})"
    return {
        "source": "sattui",
        "state": state,
        "rule": rule,
        "severity": sev,
        "impact": impact,
        "impact_ci": ci,
        "summary": rec.get("summary"),
        "fix": rec.get("fix"),
        "host": host,
        "rank": rec.get("rank"),
        "card": rec.get("card"),
        "recording": recording,
        "labels": job,
        "time": datetime.fromtimestamp(time.time() if wall is None else wall, timezone.utc)
        .isoformat(timespec="seconds"),
        "text": clean(text, 3000),
    }


def command_env(msg: dict[str, Any]) -> dict[str, str]:
    """The variables ``--on-finding CMD`` gets, beside sattui's own environment."""
    out = {"SATTUI_FINDING_JSON": json.dumps(msg)}
    for k in ("state", "rule", "severity", "impact", "summary", "fix", "host", "rank", "card", "recording"):
        v = msg.get(k)
        out[f"SATTUI_{k.upper()}"] = "" if v is None else str(v)
    return out


def post_json(url: str, doc: dict[str, Any], timeout_s: float = WEBHOOK_TIMEOUT_S) -> None:
    """POST ``doc``; raises ``OSError`` (refused, timed out, an HTTP error status) on failure."""
    data = json.dumps(doc).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json", "User-Agent": "sattui"})
    with urllib.request.urlopen(req, timeout=timeout_s) as r:
        r.read(65536)


def run_command(argv: list[str], msg: dict[str, Any], timeout_s: float = COMMAND_TIMEOUT_S) -> None:
    """Run ``argv`` with the finding in its environment; raises ``OSError`` on failure."""
    try:
        done = subprocess.run(argv, env={**os.environ, **command_env(msg)}, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise OSError(f"still running after {timeout_s:g} s (stopped)") from None
    if done.returncode != 0:
        raise OSError(f"exit code {done.returncode}")


def _why(e: BaseException) -> str:
    if isinstance(e, urllib.error.HTTPError):
        return f"HTTP {e.code} {e.reason}"
    if isinstance(e, urllib.error.URLError):
        r = e.reason
        return "timed out" if isinstance(r, (socket.timeout, TimeoutError)) else str(getattr(r, "strerror", None) or r)
    if isinstance(e, (socket.timeout, TimeoutError)):
        return "timed out"
    return str(e) or type(e).__name__


class Notifier:
    """Sends findings to ``webhook`` and/or runs ``command`` for them, from its own thread.

    ``observe(records)`` is called on the sampling thread after each evaluation (cheap:
    the gate, then a queue). ``on_event(type, message, data)`` gets each outcome, from
    the delivery thread; ``log`` a line for each failure (None: the screen's header says
    it, from the event)."""

    def __init__(self, *, webhook: str | None = None, command: list[str] | None = None, host: str | None = None,
                 recording: str | None = None, job: dict[str, Any] | None = None,
                 on_event: Callable[[str, str, dict[str, Any]], None] | None = None,
                 log: Callable[[str], None] | None = None, clock: Callable[[], float] = time.monotonic,
                 throttle_s: float = THROTTLE_S, timeout_s: float = WEBHOOK_TIMEOUT_S,
                 command_timeout_s: float = COMMAND_TIMEOUT_S) -> None:
        if webhook is None and not command:
            raise SattuiError("a notifier needs a webhook URL or a command")
        self.webhook = webhook
        self.command = command
        self.host = host or socket.gethostname()
        self.recording = recording
        self.job = job
        self.on_event = on_event
        self.log = log
        self.clock = clock
        self.gate = Gate(throttle_s)
        self.timeout_s = timeout_s
        self.command_timeout_s = command_timeout_s
        self.sent = 0
        self.failed = 0
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(QUEUE_MAX)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="sattui-notify", daemon=True)
            self._thread.start()

    def observe(self, records: Iterable[dict[str, Any]]) -> None:
        for state, rec in self.gate.observe(records, self.clock()):
            msg = message(state, rec, host=self.host, recording=self.recording, job=self.job)
            try:
                self._queue.put_nowait(msg)
            except queue.Full:
                self._failed(msg, "queue", f"{QUEUE_MAX} messages still waiting for the endpoint; this one dropped")

    def close(self, timeout_s: float | None = None) -> None:
        """Deliver what is queued (up to ``timeout_s``), then stop the thread."""
        th = self._thread
        if th is None:
            return
        try:
            self._queue.put(None, timeout=1.0)
        except queue.Full:
            pass
        th.join(self.timeout_s + 1.0 if timeout_s is None else timeout_s)
        self._thread = None

    # -- the delivery thread

    def _run(self) -> None:
        while True:
            msg = self._queue.get()
            if msg is None:
                return
            if self.webhook is not None:
                self._try(msg, "webhook", lambda m: post_json(str(self.webhook), m, self.timeout_s))
            if self.command:
                self._try(msg, "command", self._run_command)

    def _run_command(self, msg: dict[str, Any]) -> None:
        run_command(list(self.command or []), msg, self.command_timeout_s)

    def _try(self, msg: dict[str, Any], target: str, send: Callable[[dict[str, Any]], None]) -> None:
        try:
            send(msg)
        except Exception as e:  # whatever the endpoint does, sampling and the thread go on
            self._failed(msg, target, _why(e))
            return
        self.sent += 1
        self._event("notify_sent", f"{target}: {msg['state']} {msg['rule']} sent",
                    {"target": target, "state": msg["state"], "rule": msg["rule"]})

    def _failed(self, msg: dict[str, Any], target: str, why: str) -> None:
        self.failed += 1
        if self.webhook:
            why = why.replace(self.webhook, endpoint(self.webhook))
        where = f"{target} {endpoint(str(self.webhook))}" if target == "webhook" else target
        text = f"{where}: could not send {msg['state']} {msg['rule']}: {why}"
        self._event("notify_failed", text, {"target": target, "state": msg["state"], "rule": msg["rule"],
                                            "error": why})
        if self.log is not None:
            self.log(text)

    def _event(self, typ: str, text: str, data: dict[str, Any]) -> None:
        if self.on_event is not None:
            try:
                self.on_event(typ, text, data)
            except Exception:
                pass  # the recording's side failing must not stop delivery
