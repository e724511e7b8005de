"""One redraw's read of the session (no Textual here).

Every screen draws from a :class:`ViewData`: the window's end ``t_end`` (now, the paused
moment, or the replay cursor) and length, and the session's data read once per redraw
and bounded by ``t_end`` (a replay may hold samples past its cursor; they must not show).

The app makes one with :meth:`ViewData.take`, under the session's lock: it copies what a
redraw reads (each series' samples around the window, the header, the newest findings)
and the lock is let go before any binning or drawing, so the sampler thread never waits
for the screen. A ``ViewData`` made directly reads the session itself, lazily.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from sattui.findings import Finding, Severity, view_order
from sattui.model import CardSample, Event, ProcSample, StackSample
from sattui.sampler_status import SamplerStatus
from sattui.timeline import TimelineCopy
from sattui.view.binning import BinCache

if TYPE_CHECKING:  # session.py is the session helper's; only its API is used here
    from sattui.ledger.bins import JobLedger
    from sattui.session import Session, SessionStatus

EPS = 1e-6
ROLE_ORDER = {"main": 0, "rank": 1, "worker": 2, "pin": 3, "compile": 4, "other": 5}
# Events that put a line in the header while they hold (a later "recovered" clears them).
PROBLEM_EVENTS = {
    "card_lost": "card_recovered",
    "card_unreadable": "card_recovered",
    "backend_failing": "backend_recovered",
    "backend_degraded": "backend_recovered",
    "permission_denied": None,
    "not_python": None,
    "sampler_missing": None,
    "sampler_failing": "sampler_restart",
    "no_accelerator": None,
    # --webhook / --on-finding: a finding could not be delivered, until one is (sattui/notify.py)
    "notify_failed": "notify_sent",
}
# How far a redraw's reads reach past its span (:meth:`ViewData.take` copies that much
# more each side): the dips' ledger looks 92 s before a dip (sattui/view/dips.py PAD_S,
# sattui/ledger/restarts.py MAX_START_S + RHYTHM_LOOKBACK_S) and up to a minute after it,
# the stack strips 30 s back, the step counts 15 s. A read beyond the copy is still
# right (it reads the session, locked; TimelineCopy.misses counts it).
REACH_S = 120.0


@dataclass
class ViewData:
    session: Session
    t_end: float
    window_s: float
    cache: BinCache = field(default_factory=BinCache)
    # The rank picked (its pid) for the stacks and workers screens; None: all ranks.
    rank_pid: int | None = None
    # Set by take(): the copies read instead of the session.
    copied: TimelineCopy | None = None
    copied_findings: list[Finding] | None = None
    copied_header: dict[str, Any] | None = None
    copied_bins: dict[int, JobLedger] | None = None

    @classmethod
    def take(cls, session: Session, t_end: float, window_s: float, cache: BinCache, *,
             span_s: float = 0.0, rank_pid: int | None = None, previous: ViewData | None = None) -> ViewData:
        """A ViewData reading copies of what a redraw needs, taken at once: every series'
        samples over ``[t_end - max(window_s, span_s) - REACH_S, t_end + REACH_S)`` (``span_s``:
        what a screen reads before its window, as the dips' five minutes; the events: all of
        them, the header lists those still in force), the header and the newest findings.
        With ``previous`` (the last redraw's), each series copies only the samples that came
        since (``previous`` is used up). Call it holding ``session.lock``; read the result
        without it."""
        reach = max(window_s, span_s) + REACH_S
        copied = TimelineCopy(session.timeline, t_end - reach, t_end + REACH_S, lock=session.lock,
                              skip=("finding",), whole=("event",),
                              previous=previous.copied if previous is not None else None)
        bins = session.ledger_bins(math.floor(t_end - reach), math.ceil(t_end + REACH_S))
        return cls(session, t_end, window_s, cache, rank_pid=rank_pid, copied=copied,
                   copied_findings=cls._read_findings(session), copied_header=dict(session.header or {}),
                   copied_bins=bins)

    @staticmethod
    def _read_findings(session: Session) -> list[Finding]:
        try:
            found = list(session.findings())
        except Exception as e:  # an advisor bug must not take the monitor down
            return [Finding("advisor_error", Severity.INFO, 0.0, f"the advisor failed: {e}")]
        return view_order(found)

    @property
    def timeline(self) -> Any:
        return self.copied if self.copied is not None else self.session.timeline

    def ledger_bins(self, lo: int, hi: int) -> dict[int, JobLedger]:
        """The session advisor's ledger bins ``[lo, hi)`` (Session.ledger_bins), from the
        copy where there is one."""
        if self.copied_bins is not None:
            return {b: j for b, j in self.copied_bins.items() if lo <= b < hi}
        with self.session.lock:
            return self.session.ledger_bins(lo, hi)

    @property
    def live(self) -> bool:
        return self.session.live

    @cached_property
    def header(self) -> dict[str, Any]:
        if self.copied_header is not None:
            return self.copied_header
        return dict(self.session.header or {})

    @cached_property
    def status(self) -> SessionStatus:
        return self.session.status()

    @cached_property
    def findings(self) -> list[Finding]:
        if self.copied_findings is not None:
            return self.copied_findings
        return self._read_findings(self.session)

    @cached_property
    def verdict(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    @cached_property
    def events(self) -> list[Event]:
        return self.timeline.window("event", 0, float("-inf"), self.t_end + EPS)

    @cached_property
    def problems(self) -> list[tuple[str, dict[str, Any]]]:
        """Events still in force at ``t_end``: (type, event), oldest first, one per type and card."""
        live: dict[tuple[str, Any], Event] = {}
        for ev in self.events:
            key_card = ev.data.get("card")
            if ev.type in PROBLEM_EVENTS:
                live[(ev.type, key_card)] = ev
            for typ, cleared_by in PROBLEM_EVENTS.items():
                if cleared_by == ev.type:
                    live.pop((typ, key_card), None)
        return [(k[0], {"message": e.message, "t": e.t, **e.data}) for k, e in live.items()]

    def lost_cards(self) -> set[int]:
        return {d["card"] for typ, d in self.problems if typ == "card_lost" and isinstance(d.get("card"), int)}

    @cached_property
    def trainer_exit(self) -> dict[str, Any] | None:
        """The ``trainer_exited`` event up to ``t_end`` (with ``exit_code``), else None."""
        for ev in reversed(self.events):
            if ev.type == "trainer_exited":
                return {"t": ev.t, "message": ev.message, **ev.data}
        st = self.status
        if st is not None and st.trainer_alive is False:
            return {"t": None, "message": "trainer exited", "exit_code": st.trainer_exit_code}
        return None

    # -- cards ----------------------------------------------------------------------

    @cached_property
    def cards(self) -> list[dict[str, Any]]:
        """The header's cards, plus any card that reports without being announced."""
        infos = {c.get("card"): dict(c) for c in self.header.get("cards") or [] if c.get("card") is not None}
        for k in self.timeline.keys("card"):
            infos.setdefault(k, {"card": k, "name": None, "vendor": None})
        return [infos[k] for k in sorted(infos)]

    def last_card(self, card: int) -> CardSample | None:
        """The newest sample at or before ``t_end`` (kept when the card stops reporting)."""
        ring = self.timeline.series("card", card)
        if ring is None or not len(ring):
            return None
        w = ring.window(float("-inf"), self.t_end + EPS) if len(ring) < 64 else \
            ring.window(self.t_end - 120.0, self.t_end + EPS)
        return w[-1] if w else None

    def simulated(self, info: dict[str, Any]) -> bool:
        return bool(info.get("simulated")) or info.get("vendor") == "sim" or self.header.get("backend") == "sim"

    # -- windows, read lazily ------------------------------------------------------------

    def quantum(self, axis: Any) -> int:
        """Which quarter-bucket ``t_end`` is in. Bins are cached under it: they are
        recomputed when the view moves by a quarter of a bucket, not on every redraw, so a
        1 h window (35 s buckets) bins 8 cards once every ~9 s instead of twice a second,
        and a 1 min window (1.4 s buckets) still rebins on every redraw. Live samples
        newer than the last rebin show at the next one."""
        return math.floor(self.t_end / (axis.bw / 4))

    def has_data(self, kind: str, key: Any, t0: float) -> bool:
        ring = self.timeline.series(kind, key)
        if ring is None or not len(ring):
            return False
        return ring.last_t() >= t0 and ring.first_t() <= self.t_end + EPS

    def window(self, kind: str, key: Any, t0: float) -> list[Any]:
        """Samples of one series in ``[t0, t_end]`` (memoised for this redraw)."""
        k = (kind, key, t0)
        got = self._windows.get(k)
        if got is None:
            got = self._windows[k] = self.timeline.window(kind, key, t0, self.t_end + EPS)
        return got

    @cached_property
    def _windows(self) -> dict[tuple[Any, ...], list[Any]]:
        return {}

    # -- processes --------------------------------------------------------------------

    def proc_index(self, t0: float) -> list[tuple[int, ProcSample]]:
        """Every process with a sample in ``[t0, t_end]`` and its newest sample there: main
        first, then ranks, workers … Reads a few recent samples per process, not the window."""
        k = ("proc_index", t0)
        got = self._windows.get(k)
        if got is not None:
            return got
        out = []
        for pid in list(self.timeline.keys("proc")):
            if not self.has_data("proc", pid, t0):
                continue
            ring = self.timeline.series("proc", pid)
            recent = ring.window(max(t0, self.t_end - 30.0), self.t_end + EPS) or \
                ring.window(t0, self.t_end + EPS)
            if recent:
                out.append((int(pid), recent[-1]))
        out.sort(key=lambda kv: (ROLE_ORDER.get(kv[1].role, 9), kv[1].rank if kv[1].rank is not None else -1, kv[0]))
        self._windows[k] = out
        return out

    def processes(self, t0: float) -> dict[int, list[ProcSample]]:
        """Every process's samples in ``[t0, t_end]``, in :meth:`proc_index` order."""
        return {pid: self.window("proc", pid, t0) for pid, _ in self.proc_index(t0)}

    @cached_property
    def stack_rate_hz(self) -> float | None:
        """py-spy's sampling rate (None: not known; steps are then not checked against it)."""
        v = self.header.get("stack_rate_hz")
        return float(v) if isinstance(v, (int, float)) and v > 0 else None

    @cached_property
    def proc_interval(self) -> float:
        v = self.header.get("interval_s")
        return float(v) if isinstance(v, (int, float)) and v > 0 else 1.0

    def proc_gone(self, last: ProcSample) -> bool:
        return last.t < self.t_end - 3.5 * self.proc_interval

    # -- stacks -----------------------------------------------------------------------

    STACK_LOOKBACK_S = 30.0  # a span starts before the window yet may reach into it

    def stack_pids(self, t0: float) -> list[int]:
        return [k for k in list(self.timeline.keys("stack"))
                if self.has_data("stack", k, t0 - self.STACK_LOOKBACK_S)]

    def stack_spans_for(self, pid: int, t0: float) -> list[tuple[float, float, str | None]]:
        """Main-thread ``(t, dur, state)`` spans of one sampled pid, clipped to ``t_end``."""
        spans = []
        for s in self.window("stack", pid, t0 - self.STACK_LOOKBACK_S):
            if s.t + s.dur <= t0:
                continue
            spans.append((s.t, max(min(s.dur, self.t_end - s.t), 0.0), s.state))
        return spans

    def stack_samples(self, t0: float) -> list[StackSample]:
        """Main-thread samples from ``t0``: the picked rank's only, when one is picked."""
        return [s for pid in self.stack_pids(t0) if self.rank_pid is None or pid == self.rank_pid
                for s in self.window("stack", pid, t0)]

    # -- ranks ------------------------------------------------------------------------

    @cached_property
    def ranks(self) -> list[tuple[int, int | None]]:
        """Every trainer process whose main thread was sampled up to ``t_end`` (a torchrun
        job's ranks, else the trainer): ``(pid, rank)`` in rank order."""
        out = []
        for pid in list(self.timeline.keys("stack")):
            ring = self.timeline.series("stack", pid)
            if ring is None or not len(ring) or ring.first_t() > self.t_end + EPS:
                continue
            out.append((int(pid), self.rank_of(int(pid))))
        out.sort(key=lambda pr: (pr[1] is None, pr[1] if pr[1] is not None else 0, pr[0]))
        return out

    def rank_of(self, pid: int) -> int | None:
        """The rank of a process, from its process records (its ``RANK``)."""
        ring = self.timeline.series("proc", pid)
        return ring[-1].rank if ring is not None and len(ring) else None

    def trainer_label(self, pid: int) -> str:
        """``rank N``; ``main thread`` for the one trainer of a single-process job."""
        rank = self.rank_of(pid)
        if rank is not None:
            return f"rank {rank}"
        return "main thread" if len(self.ranks) <= 1 else f"pid {pid} main"

    @property
    def rank_label(self) -> str | None:
        """What the stacks and workers screens show: ``rank 3`` or ``all ranks``; None for
        a single-process job (nothing to pick)."""
        if self.rank_pid is not None:
            return self.trainer_label(self.rank_pid)
        return "all ranks" if len(self.ranks) > 1 else None

    def of_rank(self, s: ProcSample) -> bool:
        """Whether a process belongs to the picked rank: the rank itself, the workers and
        threads it started, or a process carrying its rank (always true with none picked)."""
        pick = self.rank_pid
        if pick is None or s.pid == pick or s.ppid == pick:
            return True
        rank = self.rank_of(pick)
        return rank is not None and s.rank == rank and s.role != "rank"

    @cached_property
    def sampler_note(self) -> str | None:
        """Why there are no stacks, when there are none to show."""
        st = self.status
        if st is None:
            return None
        if st.sampler == SamplerStatus.DENIED:
            return "no stacks: py-spy has no ptrace permission (see the header)"
        if st.sampler is not None and (st.sampler.terminal or st.sampler == SamplerStatus.STOPPED):
            return "no stacks: " + (st.sampler_message or f"py-spy {st.sampler.word}")
        if st.sampler == SamplerStatus.STARTING:
            return "waiting for the first stack samples"
        return None
