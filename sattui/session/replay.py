"""A recording in memory with a cursor the UI moves; judged here when it holds no findings."""

from __future__ import annotations

import gc
import math
from typing import Any

from sattui import sampler_status
from sattui.advisor.loop import ADVISOR_PERIOD_S, advisor_records, make_advisor
from sattui.errors import RecordingError
from sattui.ledger.bins import JobLedger
from sattui.recording import RecordingReader
from sattui.sampler_status import SamplerStatus
from sattui.session.session import Session, SessionStatus, after
from sattui.timeline import Timeline


class ReplaySession(Session):
    """A whole recording in memory, with a cursor (``now()``) the UI moves.

    The cursor starts at the end (the whole recording in view, as reviewing a finished
    run wants); ``toggle_play()`` at the end starts again from the beginning.

    A recording made by a live session holds the findings it showed. One made headless
    (``sattui record``) holds none: the advisor then judges it here, every
    ``ADVISOR_PERIOD_S`` over the loaded timeline, as ``sattui report`` does, so the
    replay shows the verdicts a live screen would have (``findings_computed``);
    ``judge=False`` leaves such a recording without findings (a snapshot test that must
    not change whenever a rule does).
    """

    def __init__(self, path: str, *, judge: bool = True) -> None:
        reader = RecordingReader(path)
        try:
            records = list(reader.records())
        except RecordingError:
            reader.close()
            raise
        self.path = path
        self.warnings = list(reader.warnings)
        duration = 0.0
        per_series: dict[tuple[str, Any], int] = {}
        self._stack_times: list[float] = []
        for r in records:
            t = float(r["t"])
            kind = r["kind"]
            end = float(r.get("t_end") or t) if kind == "stacks" else t
            duration = max(duration, t, end)
            if kind == "stacks":
                key: tuple[str, Any] = ("stack", r.get("pid"))
                per_series[key] = per_series.get(key, 0) + len(r.get("samples") or [])
                self._stack_times.append(t)
            else:
                k = {"card": r.get("card"), "proc": r.get("pid"), "worker_stack": r.get("pid")}.get(kind, 0)
                per_series[(kind, k)] = per_series.get((kind, k), 0) + 1
        history = max(duration, 1.0)
        # Rates from the recording itself, so every series fits whole in its ring.
        rates: dict[str, float] = {}
        for (kind, _k), n in per_series.items():
            rates[kind] = max(rates.get(kind, 0.0), n / history)
        super().__init__(Timeline(history, rates), reader.header, live=False)
        for r in records:
            self.feed.add_record(r)
        self._stack_times.sort()
        self._duration = duration
        self.cursor = duration
        self._playing = False
        self.findings_computed = False
        self._bins: dict[int, JobLedger] = {}
        if judge and ("finding", 0) not in per_series:
            self._judge()
        # The loaded recording lives as long as the replay and forms no cycles: out of the
        # cyclic collector's sight (gc.freeze), a full collection walks only what came
        # since, not every sample of the run; one that lands while the UI thread holds the
        # session's lock took ~200 ms over an hour of 8 ranks (bench/tui_frame.py). The
        # young generations are collected first, so the load's own cycles are not kept.
        gc.collect(1)
        gc.freeze()

    def _judge(self) -> None:
        from sattui.advisor.judge import every_s_for

        advisor = make_advisor(self.header)

        # As `sattui report` judges it: a long recording less often (docs/rules.md), so an
        # hour opens in a third of the time.
        step = every_s_for(self._duration, ADVISOR_PERIOD_S)
        t = step
        while t <= self._duration + 1e-9:
            # All records are loaded, so no lag is needed: every stack of [t-30, t) is here.
            for rec in advisor_records(advisor, self.timeline, t):
                self.feed.add_record(rec)
            t += step
        # The ledger's bins its book still holds (its long window, where the cursor starts)
        # are kept for the views (the card screen's dips); not every bin of the run: an
        # hour's are ~14 MB a card, and a view computes the few it needs elsewhere.
        self._bins.update(advisor.book.settled())
        self.findings_computed = True

    # -- Session

    def now(self) -> float:
        return self.cursor

    def ledger_bins(self, lo: int, hi: int) -> dict[int, JobLedger]:
        """The bins the advisor computed judging this replay (none when the recording held
        its findings)."""
        bins = self._bins
        if hi - lo < len(bins):
            return {b: bins[b] for b in range(lo, hi) if b in bins}
        return {b: j for b, j in bins.items() if lo <= b < hi}

    @property
    def playing(self) -> bool:
        return self._playing

    @property
    def duration(self) -> float:
        return self._duration

    def start(self) -> None:
        """Nothing runs in a replay; the UI moves the cursor."""

    def stop(self) -> None:
        self._playing = False

    def seek(self, t: float) -> None:
        self.cursor = min(max(0.0, float(t)), self._duration)

    def step(self, dt: float) -> None:
        self.seek(self.cursor + dt)

    def toggle_play(self) -> None:
        if not self._playing and self.cursor >= self._duration:
            self.cursor = 0.0
        self._playing = not self._playing

    def tick(self, dt: float) -> None:
        """Advance the cursor by ``dt`` while playing (the UI calls this from a timer)."""
        if not self._playing:
            return
        self.seek(self.cursor + dt)
        if self.cursor >= self._duration:
            self._playing = False

    def status(self) -> SessionStatus:
        h = self.header
        t_hi = after(self.cursor)
        events = self.timeline.window("event", 0, -math.inf, t_hi)
        has_trainer = h.get("pid") is not None
        sampler: SamplerStatus | None = None
        smsg: str | None = None
        rate: float | None = None
        alive: bool | None = None
        exit_code: int | None = None
        if has_trainer:
            rate = h.get("stack_rate_hz")
            if "stack_rate_hz" in h and rate is None:
                sampler, smsg = SamplerStatus.STOPPED, "stacks were not sampled (--no-stacks)"
            else:
                import bisect

                sampler = SamplerStatus.SAMPLING if bisect.bisect_right(self._stack_times, self.cursor) \
                    else SamplerStatus.STARTING
            alive = True
        backend = h.get("backend")
        bmsg: str | None = None
        for ev in events:
            st = sampler_status.from_event(ev.type)
            if st is not None and has_trainer:
                sampler, smsg = st, ev.message
            elif ev.type == "sampler_rate" and isinstance(ev.data.get("rate_hz"), (int, float)):
                rate = float(ev.data["rate_hz"])
            elif ev.type == "trainer_exited":
                alive = False
                code = ev.data.get("exit_code")
                exit_code = code if isinstance(code, int) else None
            elif ev.type == "no_accelerator":
                bmsg = ev.message
            elif ev.type == "backend_failing":
                bmsg = ev.message
            elif ev.type == "backend_recovered":
                bmsg = None
            elif ev.type == "recording_ended" and sampler in (SamplerStatus.SAMPLING, SamplerStatus.STARTING):
                sampler = SamplerStatus.STOPPED
        if sampler != SamplerStatus.SAMPLING:
            rate = None
        if backend is None and bmsg is None:
            bmsg = "no card backend in this recording"
        return SessionStatus(sampler=sampler, sampler_message=smsg, sampler_rate_hz=rate, trainer_alive=alive,
                             trainer_exit_code=exit_code, backend=backend, backend_message=bmsg,
                             recording_path=self.path)

