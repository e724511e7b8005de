"""The Advisor: runs every rule over the windows, applies hysteresis, suppression and
precedence, and picks the headline (docs/rules.md: "How rules are evaluated", "Headline").

Per evaluation (every second live):

1. windows: W = the last 30 s, W_L = the last 300 s, both cut at the end of the warm-up
   (what the caller asks: 1 s live, the report's 10 s for a recording that starts with the
   trainer's imports);
2. every rule whose signals exist runs on its window (raw findings);
3. when to speak, per (rule, card, rank):
   * a cause of lost time (the ledger's rules) carries an interval on its share
     (sattui/advisor/intervals/sequential.py: autocorrelation accounted for, valid at every look);
     it is shown at the severity its interval's lower end clears, raised as soon as the
     lower end clears a higher threshold, and lowered only when the upper end falls below
     its threshold: the interval is the hysteresis;
   * the other rules (a card's own figures): raised once they fired for 5 s, kept while
     over 0.8 × the threshold, cleared 10 s after they stopped (event-like rules — debug
     settings, anomalies — skip it);
4. suppression: a finding explained by another is dropped (a straggler explains the
   waiting cards' low SM activity and the cards' imbalance; throttling explains a
   straggler on the same card; a degraded link explains PCIe-boundness; an allocator
   sawtooth or worker respawns explain periodic stalls that coincide; any cause
   ≥ medium explains "starved, cause unknown");
5. headline: the top cause ≥ medium by (severity, impact, precedence); else, while a
   cause ≥ medium fired but its interval does not clear yet, no_data ("judging: data
   wait leads, 62–91 %, 4 s"); else "healthy" when its condition holds; else the top
   remaining finding; else no_data.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass

from sattui.advisor import anomaly, cost, rules_gpu, rules_host, rules_ledger, rules_memory, rules_system
from sattui.advisor.context import HIGH_IMPACT, MEDIUM_IMPACT, AdvisorContext, Finding, Verdict, severity_for
from sattui.advisor.intervals.change import PhaseChange, find_change
from sattui.advisor.intervals.sequential import ShareInterval, ShareStream
from sattui.advisor.rules_ledger import SHOWN_FROM
from sattui.advisor.rules_system import healthy, no_data
from sattui.findings import Severity
from sattui.ledger.bins import BIN_S, JobLedger, LedgerBook
from sattui.ledger.causes import CAUSE_WORDS, PASS_CAUSES, RULE_CAUSE
from sattui.ledger.window import StackBinner, Window
from sattui.timeline import Timeline

RuleFn = Callable[[Window, float], list[Finding]]

# The card rules' hysteresis, in seconds (it was two evaluations 5 s apart to raise, three
# to clear: the same at any evaluation period).
RAISE_AFTER_S = 5.0
CLEAR_AFTER_S = 10.0
HOLD_RELAX = 0.8
# A cause's severity from its interval: each level's threshold (rules_ledger: shown from 3 %).
LEVELS = ((Severity.HIGH, HIGH_IMPACT), (Severity.MEDIUM, MEDIUM_IMPACT), (Severity.LOW, SHOWN_FROM))


def level_of(share: float) -> Severity | None:
    """The highest severity whose threshold ``share`` reaches (None: under every one)."""
    for sev, thr in LEVELS:
        if share >= thr - 1e-12:
            return sev
    return None


def _min_sev(a: Severity, b: Severity) -> Severity:
    return a if a.rank <= b.rank else b


@dataclass(frozen=True)
class RuleSpec:
    id: str
    anchor_id: str          # the rule catalogue's number (R01 …, docs/rules.md) or "new"
    fn: RuleFn | None       # None: decided in the decision step (healthy, no_data)
    window: str = "short"   # "short" (30 s), "long" (300 s) or "ledger" (the time ledger's window)
    category: str = "cause"  # cause | modifier | info | cost
    hysteresis: bool = True
    needs: tuple[str, ...] = ()  # signals; see cannot_judge()
    # The rule's impact is a share of one card's time: the Advisor scales it to the job
    # (a cause on one card of eight counts an eighth), so impacts compare across rules.
    per_card: bool = False
    # It judges from the time ledger alone, so it also judges a job's ledger summed from
    # Prometheus across hosts (sattui/cluster/across_hosts.py), with no process or card samples.
    across_hosts: bool = False


# Causes of lost time come from the ledger (rules_ledger, window "ledger"): one scale, the
# share of the job's wall time, so they compare with each other and the headline is the
# largest. The card rules judge the cards' own figures.
RULES: tuple[RuleSpec, ...] = (
    RuleSpec("debug_settings", "R18", rules_system.debug_settings, hysteresis=False),
    RuleSpec("straggler", "R14", rules_ledger.straggler, window="ledger", needs=("stacks",), across_hosts=True),
    RuleSpec("comm_bound", "R14b", rules_ledger.comm_bound, window="ledger", needs=("stacks",), across_hosts=True),
    RuleSpec("periodic_stall", "R15", rules_ledger.periodic_stall, window="ledger",
             needs=("stacks",), across_hosts=True),
    RuleSpec("worker_respawn", "R16", rules_ledger.worker_respawn, window="ledger",
             needs=("stacks",), across_hosts=True),
    RuleSpec("main_process_loading", "R05", rules_ledger.main_process_loading, window="ledger",
             needs=("stacks",), across_hosts=True),
    RuleSpec("worker_cpu_bound", "R02", rules_ledger.worker_cpu_bound, window="ledger",
             needs=("stacks",), across_hosts=True),
    RuleSpec("too_few_workers", "R03", rules_ledger.too_few_workers, window="ledger",
             needs=("stacks", "cpu_count")),
    RuleSpec("cpu_frequency_low", "new", rules_host.cpu_frequency_low, window="ledger", needs=("stacks",)),
    RuleSpec("worker_io_bound", "R04", rules_ledger.worker_io_bound, window="ledger",
             needs=("stacks",), across_hosts=True),
    RuleSpec("cpu_contention", "R17", rules_ledger.cpu_contention, window="ledger",
             needs=("stacks",), across_hosts=True),
    RuleSpec("input_bound", "R01", rules_ledger.input_bound, window="ledger", needs=("stacks",), across_hosts=True),
    RuleSpec("host_sync_stall", "R06", rules_ledger.host_sync_stall, window="ledger",
             needs=("stacks", "cards"), across_hosts=True),
    RuleSpec("link_degraded", "R13b", rules_gpu.link_degraded, needs=("cards", "pcie_link"), per_card=True),
    RuleSpec("pcie_bound", "R13", rules_gpu.pcie_bound, needs=("cards", "pcie"), per_card=True),
    RuleSpec("host_overhead_bound", "R07", rules_ledger.host_overhead_bound, window="ledger",
             needs=("stacks", "cards"), across_hosts=True),
    RuleSpec("throttled", "R12", rules_gpu.throttled, needs=("cards", "clocks"), per_card=True),
    RuleSpec("util_high_sm_low", "R08", rules_gpu.util_high_sm_low, needs=("cards", "sm"), per_card=True),
    RuleSpec("allocator_thrash", "R10", rules_gpu.allocator_thrash, window="long", needs=("cards",), per_card=True),
    RuleSpec("card_imbalance", "new", rules_gpu.card_imbalance, needs=("cards",)),
    RuleSpec("low_tensor_core_use", "R09", rules_gpu.low_tensor_core_use, category="modifier",
             needs=("cards", "sm", "tensor")),
    # Memory that only grows loses no time yet (impact 0), but a run heading for an
    # out-of-memory kill is not healthy: a cause, so at medium it blocks ``healthy``.
    RuleSpec("memory_growth", "new", rules_memory.memory_growth, window="long"),
    RuleSpec("memory_near_full", "R11", rules_gpu.memory_near_full, category="info", needs=("cards",)),
    RuleSpec("starved_unattributed", "R19", rules_ledger.starved_unattributed, window="ledger", needs=("cards",)),
    RuleSpec("low_utilization", "new", cost.low_utilization, category="cost", needs=("cards",), per_card=True),
    RuleSpec("pcie_saturated_sm_idle", "new", cost.pcie_saturated_sm_idle, category="cost",
             needs=("cards", "sm", "pcie"), per_card=True),
    RuleSpec("memory_swing", "new", cost.memory_swing, window="long", category="cost", needs=("cards",), per_card=True),
    RuleSpec("util_anomaly", "new", anomaly.util_anomaly, window="long", category="info", hysteresis=False,
             needs=("cards",), per_card=True),
    RuleSpec("healthy", "R00", None, category="info", hysteresis=False),
    RuleSpec("no_data", "new", None, category="info", hysteresis=False),
)
SPECS = {s.id: s for s in RULES}
# docs/rules.md's "Headline (precedence)" order, with the new ids slotted in; the list order of
# RULES above is that order.
PRECEDENCE = {s.id: i for i, s in enumerate(RULES)}

# Rules that read the trainer's stacks (said "cannot judge" without them).
STACK_RULES = ("input_bound", "worker_cpu_bound", "too_few_workers", "worker_io_bound", "main_process_loading",
               "host_sync_stall", "host_overhead_bound", "comm_bound")


def job_scaled(f: Finding, n_cards: int) -> Finding:
    """A per-card finding on the job's scale: its impact over ``n_cards`` job cards, its
    severity lowered to match (never raised past what the rule said)."""
    if n_cards <= 1 or f.card is None:
        return f
    impact = f.impact / n_cards
    sev = severity_for(impact, cap=f.severity) if f.impact > 0 else f.severity
    return dataclasses.replace(f, impact=impact, severity=sev,
                               evidence={**f.evidence, "card_impact": round(f.impact, 4), "job_cards": n_cards})


def rank_key(f: Finding) -> tuple[int, float, int]:
    return (-f.severity.rank, -round(f.impact, 4), PRECEDENCE.get(f.rule, 99))


def _same_card(a: Finding, b: Finding) -> bool:
    return a.card is None or b.card is None or a.card == b.card


def _coincide(a: Finding, b: Finding, tol_s: float = 3.0) -> bool:
    """At least half of b's events lie within ``tol_s`` of one of a's."""
    ta = a.evidence.get("event_times") or []
    tb = b.evidence.get("event_times") or []
    if not ta or not tb:
        return False
    hits = sum(1 for t in tb if any(abs(t - x) <= tol_s for x in ta))
    return hits >= 0.5 * len(tb)


def explains(a: Finding, b: Finding) -> bool:
    """True when finding ``a`` is the reason for finding ``b`` (so b is not shown)."""
    if a is b or a.rule == b.rule:
        return False
    if b.rule == "starved_unattributed":
        spec = SPECS.get(a.rule)
        return (spec is not None and spec.category == "cause" and a.severity.at_least("medium")
                and _same_card(a, b))
    if a.rule == "straggler" and b.rule == "util_high_sm_low":
        return a.card is None or b.card != a.card
    if a.rule == "straggler" and b.rule == "card_imbalance":
        return True
    if a.rule == "throttled" and b.rule == "straggler":
        return a.card is not None and a.card == b.card
    if a.rule == "link_degraded" and b.rule == "pcie_bound":
        return a.card == b.card and bool(a.evidence.get("pcie_limited"))
    if a.rule in ("allocator_thrash", "worker_respawn") and b.rule == "periodic_stall":
        return _same_card(a, b) and _coincide(a, b)
    if b.rule == "util_anomaly" and a.rule in ("periodic_stall", "allocator_thrash", "worker_respawn", "throttled"):
        return _same_card(a, b)
    return False


def cannot_judge(w: Window) -> dict[str, str]:
    """Rules whose signals this session does not have, and why (never guessed)."""
    out: dict[str, str] = {}
    if w.has_stacks is False:
        why = f"no stack samples ({w.ctx.no_stacks_reason or 'not sampled'})"
        for r in STACK_RULES:
            out[r] = why
    if w.trainer_pids and not w.ctx.cpu_count_known:
        for r in ("too_few_workers", "cpu_contention"):
            out.setdefault(r, "the recording does not say how many CPUs the trainer could use")
    hosts = w.timeline.window("host", 0, w.t0, w.t1)
    if hosts and all(h.freq_mhz is None for h in hosts):
        out["cpu_frequency_low"] = "the host exposes no CPU clock (no cpufreq: many VMs and containers)"
    cards = [w.cards[c] for c in w.job_cards if c in w.cards]
    if not cards:
        return out
    if all(cs.sm is None for cs in cards):
        for r in ("util_high_sm_low", "low_tensor_core_use", "pcie_saturated_sm_idle"):
            out[r] = "the card reports no SM activity (needs NVML GPM on Hopper+ or DCGM profiling)"
    elif all(cs.tensor is None for cs in cards):
        out["low_tensor_core_use"] = "the card reports no tensor-core activity"
    if all(s.clock_reasons is None for cs in cards for s in cs.samples):
        out["throttled"] = "the card reports no clock-event reasons"
    if all(s.pcie_rx_Bps is None and s.pcie_tx_Bps is None for cs in cards for s in cs.samples):
        out["pcie_bound"] = "the card reports no PCIe throughput"
        out.setdefault("pcie_saturated_sm_idle", "the card reports no PCIe throughput")
    if all(not cs.link_max()[0] for cs in cards):
        out["link_degraded"] = "the card reports no PCIe link generation/width"
    return out


@dataclass
class _Hyst:
    on_since: float | None = None   # fired continuously since (card rules)
    off_since: float | None = None  # stopped firing since
    active: bool = False
    last: Finding | None = None
    level: Severity | None = None   # a cause's level from its interval
    held_since: float | None = None  # shown since

class Advisor:
    """Evaluates the rules over a Timeline; keeps the hysteresis state between calls.

    ``evaluate`` is meant to be called every ~``EVERY_S`` seconds with the session's
    current time, always on the same Timeline and with a non-decreasing ``t_now`` (it
    caches binned stack samples and the hysteresis state; a replay that seeks backwards
    takes a new Advisor). The context (``ctx``) is shared, not copied: events seen in the
    Timeline that say stacks will not come (no permission …) are noted on it.
    """

    EVERY_S = 1.0
    WINDOW_S = 30.0
    # The ledger's causes are judged over the last two minutes: long enough for an
    # evaluation pass or a worker restart every few steps to show at its true share,
    # short enough that a fix shows within a couple of minutes.
    LEDGER_WINDOW_S = 120.0
    # Evidence: how much is enough is the intervals' to say (sequential.py); the ledger
    # is handed to the rules from its first settled bins.
    LEDGER_MIN_S = 0.0

    def __init__(self, ctx: AdvisorContext, window_s: float = 30.0, long_window_s: float = 300.0,
                 warmup_s: float = 10.0, ledger_window_s: float = LEDGER_WINDOW_S,
                 on_ledger_bin: Callable[[int, JobLedger], None] | None = None) -> None:
        self.ctx = ctx
        self.window_s = window_s
        self.long_window_s = long_window_s
        self.ledger_window_s = min(ledger_window_s, long_window_s)
        self.warmup_s = warmup_s
        self._hyst: dict[tuple[str, int | None, int | None], _Hyst] = {}
        self._binner = StackBinner()
        self._settle_binner = StackBinner()  # settle_ledger's
        self.on_ledger_bin = on_ledger_bin
        self.book = LedgerBook(on_close=self._ledger_bin_closed if on_ledger_bin is not None else None)
        self.ledger_s = 0.0  # the longest rank's or card's settled seconds in the latest ledger window
        self._events_seen_t = 0.0
        self.last_windows: tuple[Window, Window] | None = None  # of the latest evaluate (for callers' views)
        # the ledger window's settled bins (bin, weight, cause shares), oldest first, and each
        # cause's interval stream over them (sequential.py's observations), sliding with it
        self._rows: deque[tuple[int, float, dict[str, float]]] = deque()
        self._streams: dict[str, ShareStream] = {}
        self._present: Counter[str] = Counter()  # the window's bins each cause is in
        self._next_bin = -(10**9)  # the first bin not yet read
        self.intervals: dict[str, ShareInterval] = {}  # of the latest evaluation, by ledger cause
        # the latest change of phase seen (intervals/change.py): the ledger window starts
        # at it, so the new phase is judged on its own bins
        self.phase_t0 = 0.0
        self.phase_change: PhaseChange | None = None
        # when the ranks' stacks began (kept once known: a ring drops its oldest samples)
        self.stacks_t0: float | None = None

    def windows(self, timeline: Timeline, t_now: float) -> tuple[Window, Window]:
        start = self.warmup_s
        w = Window(timeline, self.ctx, max(t_now - self.window_s, start), t_now)
        wl = Window(timeline, self.ctx, max(t_now - self.long_window_s, start), t_now, binner=self._binner, like=w)
        return w, wl

    def ledger_window(self, timeline: Timeline, t_now: float, w: Window, wl: Window) -> Window:
        """The Window the ledger's rules read, with the ledger of its settled bins."""
        settled = self._settled(timeline, w, t_now)
        self.book.update(w, wl, settled)
        t0 = max(t_now - self.ledger_window_s, self.warmup_s, self.phase_t0, self._stacks_start(timeline, w))
        self.intervals = self._cause_intervals(t0, settled)
        change = find_change([(bw, shares) for _b, bw, shares in self._rows], PASS_CAUSES)
        if change is not None:
            self.phase_change = change
            self.phase_t0 = self._rows[change.at][0] * BIN_S
            t0 = max(t0, self.phase_t0)
            self.intervals = self._cause_intervals(t0, settled)
        lw = Window(timeline, self.ctx, t0, t_now, binner=self._binner, like=w)
        job = self.book.window(lw.t0, settled, gpu_job=w.gpu_job)
        self.ledger_s = max([r.wall_s for r in job.ranks.values()] + [c.wall_s for c in job.cards.values()],
                            default=0.0)
        lw.ledger = job if self.ledger_s > 0.0 and self.ledger_s >= self.LEDGER_MIN_S * 0.95 else None
        return lw

    def _stacks_start(self, timeline: Timeline, w: Window) -> float:
        """Where the ledger window may begin: once every rank that has stacks has its
        first one. Before it, a card's idle seconds have no rank state to say why; they
        are seconds not yet observed, not seconds of an unknown cause (the live monitor
        judges from 1 s after attach; py-spy's first chunk comes ~2 s later, and a trainer
        still importing has none). 0 while no rank has stacks (none may ever come:
        permission, --no-stacks), so the window then starts where it did."""
        if self.stacks_t0 is None:
            firsts = [t for p in w.trainer_pids
                      if (ring := timeline.series("stack", p)) is not None and (t := ring.first_t()) is not None]
            if not firsts:
                return 0.0
            self.stacks_t0 = max(firsts)
        return self.stacks_t0

    def _cause_intervals(self, t0: float, t1: float) -> dict[str, ShareInterval]:
        """Each ledger cause's share over the ledger window's settled bins, with its
        interval (the bins' own shares are the observations).

        The streams slide with the window: a settled bin is added once and dropped once
        (an evaluation costs what the new bins cost, not the window), and a cause seen for
        the first time gets a stream of the window's bins so far. A bin is read when it
        has settled, and a settled bin never changes."""
        lo, hi = math.floor(t0), math.floor(t1)
        rows = self._rows
        if rows and rows[0][0] < lo or self._next_bin > hi:
            if self._next_bin > hi:  # the window went back (a new Judge would): start again
                rows.clear()
                self._streams.clear()
                self._present.clear()
                self._next_bin = lo
            while rows and rows[0][0] < lo:
                _b, _w, gone = rows.popleft()
                for stream in self._streams.values():
                    stream.drop_oldest()
                for c in gone:
                    self._present[c] -= 1
                    if self._present[c] <= 0:  # no longer in the window: no interval, no stream
                        del self._present[c]
                        del self._streams[c]
        for b in range(max(lo, self._next_bin), hi):
            j = self.book.bin(b)
            if j is None:
                continue
            w, shares = j.settled_weight_shares()
            if w <= 0.0:
                continue
            for c in shares:
                if c not in self._streams:
                    stream = self._streams[c] = ShareStream()
                    for _b, w0, _sh in rows:
                        stream.add(0.0, w0)
            for c, stream in self._streams.items():
                stream.add(shares.get(c, 0.0), w)
            self._present.update(shares.keys())
            rows.append((b, w, shares))
        self._next_bin = max(self._next_bin, hi)
        out = {}
        for c, stream in self._streams.items():
            iv = stream.interval()
            if iv is not None:
                out[c] = iv
        return out

    def settle_ledger(self, timeline: Timeline, t_now: float) -> None:
        """Compute the ledger's bins as far as they have settled at once (each pid's up to a
        second before its newest stack sample, StackBinner.settled_t),
        without judging, warm-up included: an exporter publishes each bin as soon as it
        settles (``book.settled``), not after the warm-up and at the evaluations' pace.

        The evaluations read the same bins (each is computed once) and still judge only
        those after the warm-up; bins of the warm-up never reach ``on_ledger_bin``. Call it
        with a non-decreasing ``t_now``, on the Timeline ``evaluate`` gets.
        """
        # Its own binner: the evaluations' forgets the bins before their long window, which
        # starts after the warm-up, while the warm-up's last seconds are still settling.
        w = Window(timeline, self.ctx, max(t_now - self.window_s, 0.0), t_now)
        wl = Window(timeline, self.ctx, max(t_now - self.long_window_s, 0.0), t_now, binner=self._settle_binner,
                    like=w)
        self.book.update(w, wl, self._settled(timeline, w, t_now))

    def _settled(self, timeline: Timeline, w: Window, t_now: float) -> float:
        pids = [p for p in w.trainer_pids if timeline.series("stack", p) is not None]
        return min((StackBinner.settled_t(timeline, p, t_now) for p in pids), default=t_now - StackBinner.LAG_S)

    def _ledger_bin_closed(self, b: int, job: JobLedger) -> None:
        # The warm-up's bins exist only where settle_ledger computed them (an exporter's):
        # the run's total (the report's) leaves the warm-up out, as the windows do.
        if self.on_ledger_bin is not None and b >= math.floor(self.warmup_s / BIN_S):
            self.on_ledger_bin(b, job)

    def flush_ledger(self, timeline: Timeline, t_end: float) -> None:
        """At the end of a recording: the last bins (those the lag held back) and every
        bin still kept go to ``on_ledger_bin``."""
        if self.last_windows is None or t_end <= self.warmup_s:
            return
        w, _ = self.windows(timeline, t_end)
        # The binner settles a window's stacks up to LAG_S before its end: this one ends
        # LAG_S after the recording, so its last seconds are counted too (without it the
        # ranks lost them, and the cards' idle time in them was "unknown": a 30-s demo
        # read as starved_unattributed 23 %).
        late = t_end + StackBinner.LAG_S
        wl = Window(timeline, self.ctx, max(late - self.long_window_s, self.warmup_s), late, binner=self._binner,
                    like=w)
        self.book.update(w, wl, late)
        self.book.close_all()

    def _note_events(self, timeline: Timeline, t_now: float) -> None:
        for ev in timeline.window("event", 0, max(0.0, self._events_seen_t - self.window_s), t_now + 1e-9):
            self.ctx.note_event(ev)
        self._events_seen_t = t_now

    def evaluate(self, timeline: Timeline, t_now: float) -> Verdict:
        self._note_events(timeline, t_now)
        if t_now <= self.warmup_s:
            f = no_data(t_now, f"warming up: the first {self.warmup_s:.0f} s after attach are not judged")
            return Verdict(f, [f], t=t_now, collecting=True)
        w, wl = self.windows(timeline, t_now)
        self.last_windows = (w, wl)
        if not w.cards_ok and not w.judged_pids:
            f = no_data(t_now, "collecting: too few card or stack samples in the window yet",
                        {"window_s": round(w.length_s, 1), "cards": len(w.cards),
                         "stack_pids": [p for p in w.trainer_pids if w.stack(p) is not None]})
            return Verdict(f, [f], t=t_now, collecting=True, cannot_judge=cannot_judge(w))

        lw = self.ledger_window(timeline, t_now, w, wl)
        windows = {"short": w, "long": wl, "ledger": lw}
        raw: dict[tuple[str, int | None, int | None], Finding] = {}
        for spec in RULES:
            if spec.fn is None:
                continue
            for f in spec.fn(windows[spec.window], 1.0):
                raw[f.key()] = job_scaled(f, len(w.job_cards)) if spec.per_card else f
        active = self._hysteresis(raw, windows, t_now)
        for f in active:
            f.t = t_now

        gone = [b for b in active if any(explains(a, b) for a in active)]
        kept = []
        for a in active:
            if any(a is b for b in gone):
                continue
            why = sorted({b.rule for b in gone if explains(a, b)})
            kept.append(dataclasses.replace(a, evidence={**a.evidence, "explains": why}) if why else a)
        kept.sort(key=rank_key)

        blocking = [f for f in kept if SPECS[f.rule].category == "cause" and f.severity.at_least("medium")]
        # A cause whose share reads medium or above but whose interval does not clear it
        # yet is still a cause: "healthy" beside it would be withdrawn a moment later.
        shown = {f.key() for f in kept if f.severity.at_least("medium")}
        pending = [f for k, f in raw.items() if k not in shown and SPECS[f.rule].category == "cause"
                   and f.severity.at_least("medium")]
        h = None if blocking or pending else healthy(w)
        if h is not None:
            h.t = t_now
            h.since_s = self._held_since(("healthy", None, None), t_now)
        else:
            self._hyst.pop(("healthy", None, None), None)
        if blocking:
            headline = blocking[0]
        elif h is not None:
            headline = h
        elif kept and not pending:
            headline = kept[0]
        else:
            headline = self._inconclusive(t_now, w, lw, pending)
        findings = kept + ([h] if h is not None else [])
        if headline not in findings:
            findings.insert(0, headline)
        return Verdict(headline, findings, t=t_now, cannot_judge=cannot_judge(w))

    def _held_since(self, key: tuple[str, int | None, int | None], t_now: float) -> float:
        st = self._hyst.setdefault(key, _Hyst(active=True))
        if st.held_since is None:
            st.held_since = t_now
        return st.held_since - self.warmup_s

    def interval_of(self, f: Finding) -> ShareInterval | None:
        """The interval behind a ledger rule's finding (its cause's share), if any."""
        if SPECS[f.rule].window != "ledger":
            return None
        return self.intervals.get(RULE_CAUSE.get(f.rule, f.rule))

    def _inconclusive(self, t_now: float, w: Window, lw: Window, pending: list[Finding]) -> Finding:
        """The headline when no finding stands: say what is still coming, if anything —
        which cause leads and how sure that is so far, never a bare "no data" while
        samples flow."""
        u = w.job_util
        ev: dict[str, object] = {"util": None if u is None else round(u, 1)}
        if pending:
            lead = max(pending, key=lambda f: f.impact)
            ev["pending"] = sorted({f.rule for f in pending})
            ev["leading"] = lead.rule
            iv = self.interval_of(lead)
            cause = RULE_CAUSE.get(lead.rule, lead.rule)
            words = CAUSE_WORDS.get(cause, lead.rule.replace("_", " "))
            if iv is not None:
                lo, hi = iv.around(lead.impact)
                ev["leading_ci"] = [round(lo, 4), round(hi, 4)]
                ev["ledger_s"] = round(iv.seconds, 1)
                since = "after"
                if self.phase_change is not None and self.phase_t0 > t_now - self.ledger_window_s:
                    ev["phase_from_t"] = round(self.phase_t0, 1)
                    since = "in the new phase's"
                return no_data(t_now, f"judging: {words} leads, {lo * 100:.0f}–{hi * 100:.0f} % "
                                      f"{since} {iv.seconds:.0f} s", ev)
            return no_data(t_now, f"judging: {words} leads ({lead.impact * 100:.0f} %), gathering evidence", ev)
        if lw.ledger is None and w.judged_pids:
            ev["ledger_s"] = round(self.ledger_s, 1)
            return no_data(t_now, f"judging: stacks settle as they arrive; {self.ledger_s:.0f} s of the time "
                                  f"ledger so far", ev)
        return no_data(t_now, "nothing conclusive: no rule fired" +
                       (f" and the cards are not saturated ({u:.0f}% util)" if u is not None else ""), ev)

    def _hysteresis(self, raw: dict[tuple[str, int | None, int | None], Finding],
                    windows: dict[str, Window], t_now: float) -> list[Finding]:
        """The findings shown at ``t_now``: causes by their intervals, the rest by time
        (the module's docstring, step 3)."""
        held_cache: dict[str, dict[tuple[str, int | None, int | None], Finding]] = {}
        out = []
        for key in set(raw) | set(self._hyst):
            if key[0] == "healthy":
                continue
            spec = SPECS[key[0]]
            f = raw.get(key)
            st = self._hyst.get(key)
            if st is None:
                st = self._hyst[key] = _Hyst()
            basis = f if f is not None else st.last
            iv = self.interval_of(basis) if basis is not None else None
            own = f is not None and f.impact_ci is not None  # the rule's own interval (the straggler's asymmetry)
            if (iv is not None or own) and spec.hysteresis:
                shown = self._by_interval(st, f, iv, t_now)
            else:
                shown = self._by_time(st, spec, key, f, windows, held_cache, t_now)
            if shown is None:
                if not st.active and f is None:
                    del self._hyst[key]
                continue
            out.append(shown)
        return out

    def _by_interval(self, st: _Hyst, f: Finding | None, iv: ShareInterval | None, t_now: float) -> Finding | None:
        if f is not None and f.impact_ci is not None:
            lo, hi = f.impact_ci
            st.last = f
        elif f is not None and iv is not None:
            lo, hi = iv.around(f.impact)
            st.last = f
        elif iv is not None:
            # the rule no longer fires (under its 3 %): its cause's interval says how far
            lo, hi = iv.lo, iv.hi
        else:
            lo = hi = 0.0  # its own interval gone with it: nothing left to show
        sure, could = level_of(lo), level_of(hi)
        if st.level is None:
            st.level = sure
        elif sure is not None and sure.rank > st.level.rank:
            st.level = sure
        elif could is None or could.rank < st.level.rank:
            st.level = could
        if st.level is None or st.last is None:
            st.active = False
            st.level = None
            st.held_since = None
            return None
        st.active = True
        if st.held_since is None:
            st.held_since = t_now
        base = f if f is not None else dataclasses.replace(
            st.last, impact=iv.share if iv is not None else st.last.impact,
            evidence={**st.last.evidence, "fading": True})
        ev = dict(base.evidence)
        if iv is not None:
            ev.update({"seconds": round(iv.seconds, 1), "bins": iv.bins, "n_eff": round(iv.n_eff, 1)})
        return dataclasses.replace(base, severity=_min_sev(st.level, base.severity), impact_ci=(lo, hi),
                                   since_s=st.held_since - self.warmup_s, evidence=ev)

    def _by_time(self, st: _Hyst, spec: RuleSpec, key: tuple[str, int | None, int | None], f: Finding | None,
                 windows: dict[str, Window], held_cache: dict[str, dict[tuple[str, int | None, int | None], Finding]],
                 t_now: float) -> Finding | None:
        if f is not None:
            st.off_since = None
            if st.on_since is None:
                st.on_since = t_now
            st.last = f
            if not spec.hysteresis or t_now - st.on_since >= RAISE_AFTER_S - 1e-6:
                st.active = True
            if not st.active:
                return None
            if st.held_since is None:
                st.held_since = t_now
            return dataclasses.replace(f, since_s=st.held_since - self.warmup_s)
        st.on_since = None
        if not st.active or not spec.hysteresis:
            st.active = False
            return None
        if spec.id not in held_cache:
            assert spec.fn is not None
            held_cache[spec.id] = {
                g.key(): job_scaled(g, len(windows["short"].job_cards)) if spec.per_card else g
                for g in spec.fn(windows[spec.window], HOLD_RELAX)}
        held = held_cache[spec.id].get(key)
        since = None if st.held_since is None else st.held_since - self.warmup_s
        if held is not None:
            st.off_since = None
            st.last = held
            return dataclasses.replace(held, since_s=since)
        if st.off_since is None:
            st.off_since = t_now
        if t_now - st.off_since >= CLEAR_AFTER_S - 1e-6:
            st.active = False
            st.held_since = None
            return None
        assert st.last is not None
        return dataclasses.replace(st.last, evidence={**st.last.evidence, "fading": True}, since_s=since)
