"""One host of a job, read from Prometheus, as a :class:`~sattui.session.Session`: the
one-node screens (main, card, help) draw it as they draw a live node.

Each :class:`~sattui.cluster.source.HostDetail` the cluster's poller reads (never on the
UI thread) goes into the session's one Timeline through its :class:`~sattui.feed.Feed`,
the one path into a Timeline: the cards' metrics become card samples, each rank's
seconds per state in a step spans of those states in their shares of the step (the strip
is as fine as the exporter's ledger, ~5 s, and ~10 s behind the cards, as the node's
advisor judges settled seconds); the node's current findings are its findings. A read
covers the whole window, on a grid of whole steps (``JobReader.host_detail``), so
successive reads share their points: a poll adds only the points newer than what each
series holds (a point Prometheus has answered once is not asked again). A read with
another step (the window changed) starts a fresh Timeline. Times are seconds since
``origin`` (Unix time).
"""

from __future__ import annotations

import math
import time
from typing import Any

from sattui.cluster.source import HostDetail
from sattui.feed import Feed
from sattui.findings import Finding, Severity
from sattui.model import CardSample, ProcSample, StackSample
from sattui.sampler_status import SamplerStatus
from sattui.session import Session, SessionStatus
from sattui.timeline import Timeline

HISTORY_S = 3900.0
# Rank rows need a process id; these stand for rank N (no pid crosses hosts).
RANK_PID_BASE = 1_000_000


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


class HostSession(Session):
    def __init__(self, host: str, sattui: bool, origin: float | None = None, url: str = "") -> None:
        self.host = host
        self.sattui = sattui
        self.origin = time.time() - HISTORY_S if origin is None else origin
        self.url = url
        self.error: str | None = None
        # the step of the points in the Timeline, and each series' newest point (its time)
        self._step_s: float | None = None
        self._last: dict[tuple[str, int], float] = {}
        self._findings: list[Finding] = []
        super().__init__(Timeline(HISTORY_S), self._header([], None), live=True)

    def _header(self, cards: list[dict[str, Any]], pid: int | None) -> dict[str, Any]:
        return {"kind": "header", "format": "sattui/1", "host": self.host, "pid": pid,
                "cmdline": [self.host],
                # The header shows this instead of a pid and an uptime (rank pids here are stand-ins).
                "remote": f"{self.host} ({'sattui' if self.sattui else 'dcgm-exporter: cards only'}) from {self.url}",
                "backend": "prometheus", "cards": cards}

    def load(self, d: HostDetail) -> None:
        """Add the points of ``d`` newer than those already in the Timeline (the poller's
        thread, under the lock the UI reads under; a new step starts afresh)."""
        with self.lock:
            if d.step_s != self._step_s:
                self.timeline = Timeline(HISTORY_S)
                self.feed = Feed(self.timeline)
                self._step_s = d.step_s
                self._last.clear()
            cards = []
            for c in sorted(d.cards, key=lambda c: (_int(c) is None, _int(c) or 0, c)):
                n = _int(c)
                if n is None:
                    continue
                info = d.card_info.get(c, {})
                cards.append({"card": n, "vendor": info.get("vendor") or None, "name": info.get("model") or None,
                              "uuid": info.get("uuid") or None})
                self._add_card(n, d.cards[c])
            pid = None
            for r in sorted(d.ranks, key=lambda r: (_int(r.rank) is None, _int(r.rank) or 0)):
                rank = _int(r.rank)
                rpid = RANK_PID_BASE + (rank if rank is not None else 0)
                pid = rpid if pid is None else pid
                self._add_rank(r.rank, rank, rpid, r.steps, d.step_s)
            t_f = d.t1 - self.origin
            found = []
            for f in d.findings:
                try:
                    sev = Severity(f.get("severity"))
                except ValueError:
                    sev = Severity.INFO
                imp = f.get("impact")
                found.append(Finding(str(f.get("rule")), sev, float(imp) if isinstance(imp, float) else 0.0,
                                     f"{f.get('rule')} on {self.host} (the node's own advisor)",
                                     card=_int(str(f.get("card") or "")), rank=_int(str(f.get("rank") or "")),
                                     t=t_f))
            self._findings = found
            self.header = self._header(cards, pid)

    def _add_card(self, n: int, metrics: dict[str, list[tuple[float, float]]]) -> None:
        last = self._last.get(("card", n), -math.inf)
        times = sorted({t for pts in metrics.values() for t, _ in pts if t - self.origin > last})
        if not times:
            return
        by: dict[str, dict[float, float]] = {k: dict(v) for k, v in metrics.items()}
        for t in times:
            mu, mt = by.get("mem_used", {}).get(t), by.get("mem_total", {}).get(t)
            self.feed.add_card(CardSample(
                t - self.origin, n, util=by.get("util", {}).get(t), sm_active=by.get("sm_active", {}).get(t),
                mem_used=None if mu is None else int(mu), mem_total=None if mt is None else int(mt),
                power_w=by.get("power_w", {}).get(t), temp_c=by.get("temp_c", {}).get(t)))
        self._last[("card", n)] = times[-1] - self.origin

    def _add_rank(self, label: str, rank: int | None, rpid: int, steps: list[tuple[float, dict[str, float]]],
                  step_s: float) -> None:
        last = self._last.get(("rank", rpid), -math.inf)
        for t, secs in steps:
            tt = t - self.origin
            if tt <= last:
                continue
            self.feed.add_proc(ProcSample(tt, rpid, None, "rank" if rank is not None else "main", rank,
                                          f"rank {label}" if label else "trainer", None, None, None, None, None))
            # The step's seconds per state as consecutive spans, in their shares of it.
            total = sum(secs.values())
            a = tt - step_s
            for st, v in sorted(secs.items(), key=lambda kv: -kv[1]):
                dur = step_s * v / total
                self.feed.add_stack(StackSample(a, dur, rpid, rpid, None, True, (), st))
                a += dur
            last = tt
        self._last[("rank", rpid)] = last

    # -- Session

    def now(self) -> float:
        return time.time() - self.origin

    def findings(self) -> list[Finding]:
        """The node's findings of the latest read (its exporter's current ones)."""
        with self.lock:
            return list(self._findings)

    def status(self) -> SessionStatus:
        has = self.header.get("pid") is not None
        return SessionStatus(sampler=SamplerStatus.SAMPLING if has else None,
                             sampler_message=None, sampler_rate_hz=None, trainer_alive=True if has else None,
                             trainer_exit_code=None, backend="prometheus",
                             backend_message=self.error, recording_path=None)

    def start(self) -> None:
        """The cluster's poller fills this session; nothing runs here."""

    def stop(self) -> None:
        """Nothing to stop."""
