"""Judging a recording: replay it through a Timeline, evaluate the Advisor every 5 s as
the live monitor would (a recording longer than 20 minutes less often: :func:`every_s_for`),
then aggregate.

* verdict: the headline that led most evaluations after the warm-up (ties: the higher
  mean impact, then precedence) — except that a problem at medium or higher that led at
  least a third of them wins over ``healthy``/``no_data`` (long-window rules need
  several episodes before they can fire);
* findings: every (rule, card, rank) that fired, with its highest severity, its mean
  impact over the evaluations where it fired, and the summary and evidence of a
  representative evaluation (at that severity, impact nearest the mean);
* efficiency: η per card and for the job over the whole recording after the warm-up
  (streamed, so memory does not grow with the file).

``finding`` records already in the file (written live) are ignored and recomputed: the
result depends only on the samples, so it is the same every time. The Timeline keeps
the long window only, so memory is bounded whatever the recording's length.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from sattui.advisor.context import AdvisorContext, Finding, Verdict
from sattui.advisor.cost import EfficiencyMeter
from sattui.advisor.intervals.sequential import ShareInterval, ShareStream
from sattui.advisor.verdict import PRECEDENCE, RULES, SPECS, Advisor, explains, level_of
from sattui.feed import Feed
from sattui.findings import Severity
from sattui.ledger.bins import JobLedger
from sattui.ledger.causes import RULE_CAUSE
from sattui.ledger.window import Window
from sattui.recording import RecordingReader
from sattui.timeline import Timeline

# A record may arrive a little after later ones (py-spy chunks are written when they
# end, ~2 s; the writer flushes once a second): evaluate time T once records past
# T + LAG_S are read.
LAG_S = 4.0

# A recording up to 20 minutes long is judged every 5 s, as live. A longer one is judged
# at most this many times, but at least every 15 s: half the 30-s window, so each moment
# is still judged in two overlapping windows. The verdict comes from the ledger, which
# accounts for every second once whatever the step; the step sets how finely a finding's
# first and last time and its share of evaluations are known, and the hysteresis's
# timescale (raised after two evaluations). Judging a 1-hour recording every 5 s spent
# 720 evaluations on windows that overlap six times over.
MAX_EVALUATIONS = 240
# No recording is 30 years long: a time past this is a damaged record's (float steps of
# a second are lost around 1e16, and an evaluation loop would never reach it).
MAX_T_S = 1e9
MAX_EVERY_S = 15.0


def every_s_for(duration_s: float | None, every_s: float = Advisor.EVERY_S) -> float:
    """How often the report judges a recording of ``duration_s`` (unknown: as live)."""
    if duration_s is None:
        return every_s
    return max(every_s, min(MAX_EVERY_S, round(duration_s / MAX_EVALUATIONS * 2) / 2))  # to half seconds


@dataclass
class _Agg:
    first: Finding
    n: int = 0
    impact_sum: float = 0.0
    best: Finding | None = None
    first_t: float = 0.0
    last_t: float = 0.0

    def add(self, f: Finding) -> None:
        if self.n == 0:
            self.first_t = f.t
        self.n += 1
        self.impact_sum += f.impact
        self.last_t = f.t
        # The shown summary and evidence: from an evaluation at the highest severity,
        # the one whose impact is nearest the running mean (representative, not the
        # outlier), so the text agrees with the reported mean impact.
        b = self.best
        if b is None or f.severity.rank > b.severity.rank:
            self.best = f
        elif f.severity.rank == b.severity.rank:
            m = self.mean_impact
            if abs(f.impact - m) <= abs(b.impact - m):
                self.best = f

    @property
    def mean_impact(self) -> float:
        return self.impact_sum / self.n if self.n else 0.0


class Judge:
    """Feed it a recording's records in file order (``add``), then call ``result``."""

    def __init__(self, header: dict[str, Any], every_s: float = Advisor.EVERY_S, window_s: float = Advisor.WINDOW_S,
                 long_window_s: float = 300.0, warmup_s: float = 10.0) -> None:
        self.ctx = AdvisorContext.from_header(header)
        self.every_s = every_s
        self.timeline = Timeline(history_s=long_window_s + 2 * LAG_S + window_s)
        self.feed = Feed(self.timeline)
        # Every one-second bin of the ledger, once, as the advisor finishes with it: the
        # whole run's accounting, in bounded memory.
        self.ledger = JobLedger()
        # each bin's weight and cause shares, in time order: the whole run's intervals
        self.bin_rows: list[tuple[float, dict[str, float]]] = []
        self._whole_run: dict[str, ShareInterval | None] = {}  # read after the last bin
        self.advisor = Advisor(self.ctx, window_s=window_s, long_window_s=long_window_s, warmup_s=warmup_s,
                               on_ledger_bin=self._closed_bin)
        self.settings = {"every_s": every_s, "window_s": window_s, "long_window_s": long_window_s,
                         "warmup_s": warmup_s}
        self.meter = EfficiencyMeter(self.ctx.cards, from_t=warmup_s)
        self.next_t = every_s
        self.max_t = 0.0
        self.evaluations = 0
        self.collecting = 0
        self.heads: Counter[tuple[str, int | None, int | None]] = Counter()
        self.head_impact: dict[tuple[str, int | None, int | None], float] = {}
        self.aggs: dict[tuple[str, int | None, int | None], _Agg] = {}
        self.cannot: dict[str, str] = {}
        self.job_cards: set[int] = set()
        self.last_no_data: Finding | None = None
        self._flushed = False

    def _closed_bin(self, _b: int, j: JobLedger) -> None:
        self.ledger.merge(j)
        row = j.settled_weight_shares()
        if row[0] > 0.0:
            self.bin_rows.append(row)
            self._whole_run.clear()

    def whole_run_interval(self, cause: str) -> ShareInterval | None:
        """A cause's share of the whole run's ledger, with its interval (each cause's
        stream read once over the run's bins, however many findings ask)."""
        if cause not in self._whole_run:
            stream = ShareStream()
            for w, shares in self.bin_rows:
                stream.add(shares.get(cause, 0.0), w)
            self._whole_run[cause] = stream.interval()
        return self._whole_run[cause]

    def add(self, rec: dict[str, Any]) -> None:
        kind = rec.get("kind")
        if kind == "finding":
            return
        t = float(rec["t"])
        if not -MAX_T_S < t < MAX_T_S:
            return  # a damaged record's time: judging up to it would never end
        self._skip_gap(t - LAG_S)
        while self.next_t <= t - LAG_S:
            self._evaluate(self.next_t)
            self.next_t += self.every_s
        self.feed.add_record(rec)
        if kind == "card":
            self.meter.add(rec)
        end = rec.get("t_end", t)
        if self.max_t < end < MAX_T_S:
            self.max_t = float(end)

    def _evaluate(self, t: float) -> None:
        v = self.advisor.evaluate(self.timeline, t)
        self.timeline.drop_stale("proc", t - self.advisor.long_window_s)
        self.cannot.update(v.cannot_judge)
        self._count(v)

    def _count(self, v: Verdict) -> None:
        if v.collecting or v.headline is None:
            self.collecting += 1
            self.last_no_data = v.headline
            return
        self.evaluations += 1
        if self.advisor.last_windows is not None:
            self.job_cards.update(self.advisor.last_windows[0].job_cards)
        h = v.headline
        self.heads[h.key()] += 1
        self.head_impact[h.key()] = self.head_impact.get(h.key(), 0.0) + h.impact
        for f in v.findings:
            agg = self.aggs.get(f.key())
            if agg is None:
                agg = self.aggs[f.key()] = _Agg(f)
            agg.add(f)

    def _skip_gap(self, until: float) -> None:
        """Over a stretch with no records longer than the long window (a paused trainer, or
        a damaged record's far-off time), evaluations would judge empty windows one after
        another: move on to the last long window before ``until`` at once, on the same grid."""
        gap = until - self.next_t - self.advisor.long_window_s
        if gap > self.every_s:
            self.next_t += (gap // self.every_s) * self.every_s

    def finish(self) -> None:
        self._skip_gap(self.max_t)
        while self.next_t <= self.max_t + 1e-9:
            self._evaluate(self.next_t)
            self.next_t += self.every_s
        if not self._flushed:
            self._flushed = True
            self.advisor.flush_ledger(self.timeline, self.max_t)

    def result(self) -> dict[str, Any]:
        self.finish()
        # The report applies the live suppression once more over the whole recording: a
        # finding shown only until its explanation was raised (hysteresis needs two
        # evaluations) is dropped when that explanation fired too.
        bests = {k: (a.best or a.first) for k, a in self.aggs.items() if k[0] != "no_data"}
        why: dict[tuple[str, int | None, int | None], set[str]] = {}
        dropped = set()
        for kb, b in bests.items():
            for ka, a in bests.items():
                if ka != kb and explains(a, b):
                    dropped.add(kb)
                    why.setdefault(ka, set()).add(b.rule)
        findings = []
        for key, agg in self.aggs.items():
            if key[0] == "no_data" or key in dropped:
                continue
            d = self._finding_dict(agg)
            if key in why:
                d["evidence"] = {**d["evidence"], "explains": sorted(why[key] | set(d["evidence"].get("explains", [])))}
            findings.append(d)
        findings = self._with_ledger(findings)
        findings.sort(key=lambda f: (-Severity(f["severity"]).rank, -f["impact"], PRECEDENCE.get(f["rule"], 99)))
        led = self._ledger_headline(findings)
        if led is not None:
            verdict = {"rule": led["rule"], "severity": led["severity"], "impact": led["impact"],
                       "summary": led["summary"], "card": led["card"], "rank": led["rank"],
                       "led_share": round(self.heads.get((led["rule"], led["card"], led["rank"]), 0)
                                          / self.evaluations, 4) if self.evaluations else 0.0,
                       "evaluations": self.evaluations, "from": "ledger"}
        elif self.heads:
            candidates = list(self.heads)
            # A problem that led at least a third of the evaluations at medium or higher is
            # not outvoted by "healthy"/"no_data": long-window rules (periodic stalls) need
            # several episodes before they can fire, so the early evaluations could not see it.
            problems = [k for k in candidates if k[0] not in ("healthy", "no_data")
                        and self.heads[k] >= self.evaluations / 3
                        and (self.aggs[k].best or self.aggs[k].first).severity.at_least(Severity.MEDIUM)]
            if problems:
                candidates = problems
            key = max(candidates, key=lambda k: (self.heads[k], self.head_impact[k] / self.heads[k],
                                                 -PRECEDENCE.get(k[0], 99)))
            agg = self.aggs[key]
            best = agg.best or agg.first
            verdict = {"rule": key[0], "severity": best.severity, "impact": round(agg.mean_impact, 4),
                       "summary": best.summary, "card": key[1], "rank": key[2],
                       "led_share": round(self.heads[key] / self.evaluations, 4), "evaluations": self.evaluations}
            if key[0] == "no_data":
                findings.insert(0, self._finding_dict(agg))
        else:
            nd = self.last_no_data
            summary = ("too little data to judge: " + (nd.summary if nd is not None else "the recording is empty")
                       + f" ({self.max_t:.0f} s recorded)")
            verdict = {"rule": "no_data", "severity": "info", "impact": 0.0, "summary": summary, "card": None,
                       "rank": None, "led_share": 1.0, "evaluations": 0}
            findings.insert(0, {"rule": "no_data", "severity": "info", "impact": 0.0, "card": None, "rank": None,
                                "summary": summary, "evidence": {}, "fix": nd.fix if nd else "", "first_t": None,
                                "last_t": None, "evaluations": 0, "share": 0.0})
        # Seconds of data the verdict needed: from the start of judging to the first time
        # its finding was shown (None: never shown live, only in the whole run's ledger).
        head = self.aggs.get((verdict["rule"], verdict["card"], verdict["rank"]))
        verdict["decided_after_s"] = (round(max(0.0, head.first_t - self.settings["warmup_s"]), 1)
                                      if head is not None and verdict["rule"] != "no_data" else None)
        cannot = [{"rule": r, "reason": why} for r, why in sorted(self.cannot.items(),
                                                                  key=lambda kv: PRECEDENCE.get(kv[0], 99))]
        return {"verdict": verdict, "findings": findings,
                "efficiency": self.meter.result(sorted(self.job_cards) or None),
                "cannot_judge": cannot,
                "advisor": {**self.settings, "evaluations": self.evaluations, "collecting": self.collecting,
                            "stacks": self.ctx.has_stacks, "no_stacks_reason": self.ctx.no_stacks_reason}}

    def _with_ledger(self, findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The causes of lost time judged once more over the whole run's ledger: their
        impact is the share of the run's wall time, not a mean of windows. A cause the
        live windows never held up long enough still counts if the run's ledger has it.
        ``healthy`` does not stand beside a cause at medium or above."""
        lw = Window(self.timeline, self.ctx, self.settings["warmup_s"], self.max_t + 1e-6)
        lw.ledger = self.ledger
        whole: dict[tuple[str, int | None, int | None], Finding] = {}
        if self.ledger.ranks or self.ledger.cards:
            for spec in RULES:
                if spec.window != "ledger" or spec.fn is None:
                    continue
                for f in spec.fn(lw, 1.0):
                    gated = self._gated(f)
                    if gated is not None:
                        whole[f.key()] = gated
        out = []
        for d in findings:
            key = (d["rule"], d["card"], d["rank"])
            if SPECS.get(d["rule"]) is not None and SPECS[d["rule"]].window == "ledger":
                if key not in whole:
                    continue  # the whole run does not bear it out
                f = whole.pop(key)
                d = {**d, "severity": f.severity, "impact": round(f.impact, 4), "summary": f.summary,
                     "evidence": f.evidence, "fix": f.fix, "impact_ci": self._ci(f)}
            out.append(d)
        others = [Finding.from_record(d) for d in out]
        for f in whole.values():
            if any(explains(a, f) for a in others):
                continue  # e.g. the cards' idle time, unattributed, that a card rule explains
            ci = self._ci(f)
            out.append({"rule": f.rule, "severity": self._sure_severity(f, ci), "impact": round(f.impact, 4),
                        "card": f.card, "rank": f.rank, "summary": f.summary, "evidence": f.evidence, "fix": f.fix,
                        "first_t": None, "last_t": None, "evaluations": 0, "share": 0.0,
                        "impact_ci": ci, "since_s": None})
        if any(SPECS.get(d["rule"]) is not None and SPECS[d["rule"]].category == "cause"
               and Severity(d["severity"]).at_least(Severity.MEDIUM) for d in out):
            out = [d for d in out if d["rule"] != "healthy"]
        return out

    def _gated(self, f: Finding) -> Finding | None:
        """A whole-run ledger finding, when the run holds enough bins for an interval at
        all (None: too few). Its severity stays the point estimate's: the run is over, and
        its interval (``impact_ci``, printed beside it) says how sure that is — a phase of
        whole seconds every few seconds (a checkpoint) is plain in a 40-s run's share while
        its one-second bins, all-or-nothing, keep the interval wide."""
        if f.impact_ci is not None:
            return f
        return f if self.whole_run_interval(RULE_CAUSE.get(f.rule, f.rule)) is not None else None

    @staticmethod
    def _sure_severity(f: Finding, ci: list[float] | None) -> Severity:
        """A cause that only the whole run's ledger holds (no live evaluation showed it):
        at most the severity its interval's lower bound clears, else low. A 16-s HF job,
        6 s judged, read input_bound MEDIUM 12 % with an interval of 0–50 % and made it the
        verdict; a cause the evaluations showed keeps its point estimate (a checkpoint's
        stalls are plain in a 40-s run while the interval of its all-or-nothing bins is wide)."""
        sure = level_of(ci[0]) if ci is not None else None
        if sure is None:
            return Severity.LOW if f.severity.at_least(Severity.LOW) else f.severity
        return f.severity if f.severity.rank <= sure.rank else sure

    def _ci(self, f: Finding) -> list[float] | None:
        """A whole-run ledger finding's interval: its cause's, around its impact."""
        if f.impact_ci is not None:
            return [round(x, 4) for x in f.impact_ci]
        iv = self.whole_run_interval(RULE_CAUSE.get(f.rule, f.rule))
        return None if iv is None else [round(x, 4) for x in iv.around(f.impact)]

    @staticmethod
    def _ledger_headline(findings: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The largest cause of lost time, when it is at least medium."""
        causes = [d for d in findings if SPECS.get(d["rule"]) is not None and SPECS[d["rule"]].category == "cause"
                  and Severity(d["severity"]).at_least(Severity.MEDIUM)]
        if not causes:
            return None
        return max(causes, key=lambda d: (d["impact"], -PRECEDENCE.get(d["rule"], 99)))

    def _finding_dict(self, agg: _Agg) -> dict[str, Any]:
        best = agg.best or agg.first
        since = agg.first.since_s if agg.first.since_s is not None else agg.first_t - self.settings["warmup_s"]
        return {"rule": best.rule, "severity": best.severity, "impact": round(agg.mean_impact, 4),
                "card": best.card, "rank": best.rank, "summary": best.summary, "evidence": best.evidence,
                "fix": best.fix, "first_t": round(agg.first_t, 1), "last_t": round(agg.last_t, 1),
                "evaluations": agg.n, "share": round(agg.n / self.evaluations, 4) if self.evaluations else 0.0,
                "impact_ci": None if best.impact_ci is None else [round(x, 4) for x in best.impact_ci],
                "since_s": round(max(0.0, since), 1)}


def judge_recording(path: str) -> dict[str, Any]:
    """``{"verdict", "findings", "efficiency", "cannot_judge", "advisor"}`` of a recording."""
    reader = RecordingReader(path)
    judge = Judge(reader.header, every_s=every_s_for(reader.last_t()))
    for rec in reader.records():
        judge.add(rec)
    return judge.result()
