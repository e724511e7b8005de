"""The Advisor: runs every rule over the windows, applies hysteresis, suppression and
precedence, and picks the headline (docs/rules.md: "How rules are evaluated", "Headline").

Per evaluation (every ~5 s):

1. windows: W = the last 30 s, W_L = the last 300 s, both cut at the end of the warm-up
   (the first 10 s after attach: imports, first allocations);
2. every rule whose signals exist runs on its window (raw findings);
3. hysteresis per (rule, card, rank): raised after 2 consecutive evaluations over the
   threshold, kept while over 0.8 × the threshold, cleared after 3 consecutive
   evaluations below that (event-like rules — debug settings, anomalies — skip it);
4. suppression: a finding explained by another is dropped (a straggler explains the
   waiting cards' low SM activity and the cards' imbalance; throttling explains a
   straggler on the same card; a degraded link explains PCIe-boundness; an allocator
   sawtooth or worker respawns explain periodic stalls that coincide; any cause
   ≥ medium explains "starved, cause unknown");
5. headline: the top cause ≥ medium by (severity, impact, precedence); else, while a
   cause ≥ medium fired but is not raised yet, no_data ("confirming"); else "healthy"
   when its condition holds; else the top remaining finding; else no_data.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from sattui.advisor import anomaly, cost, rules_gpu, rules_host, rules_ledger, rules_memory, rules_system
from sattui.advisor.base import AdvisorContext, Finding, Verdict, severity_for
from sattui.advisor.ledger import BIN_S, JobLedger, LedgerBook
from sattui.advisor.rules_system import healthy, no_data
from sattui.advisor.window import StackBinner, Window
from sattui.timeline import Timeline

RuleFn = Callable[[Window, float], list[Finding]]

RAISE_AFTER = 2
CLEAR_AFTER = 3
HOLD_RELAX = 0.8


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


# Causes of lost time come from the ledger (rules_ledger, window "ledger"): one scale, the
# share of the job's wall time, so they compare with each other and the headline is the
# largest. The card rules judge the cards' own figures.
RULES: tuple[RuleSpec, ...] = (
    RuleSpec("debug_settings", "R18", rules_system.debug_settings, hysteresis=False),
    RuleSpec("straggler", "R14", rules_ledger.straggler, window="ledger", needs=("stacks",)),
    RuleSpec("comm_bound", "R14b", rules_ledger.comm_bound, window="ledger", needs=("stacks",)),
    RuleSpec("periodic_stall", "R15", rules_ledger.periodic_stall, window="ledger", needs=("stacks",)),
    RuleSpec("worker_respawn", "R16", rules_ledger.worker_respawn, window="ledger", needs=("stacks",)),
    RuleSpec("main_process_loading", "R05", rules_ledger.main_process_loading, window="ledger", needs=("stacks",)),
    RuleSpec("worker_cpu_bound", "R02", rules_ledger.worker_cpu_bound, window="ledger", needs=("stacks",)),
    RuleSpec("too_few_workers", "R03", rules_ledger.too_few_workers, window="ledger",
             needs=("stacks", "cpu_count")),
    RuleSpec("cpu_frequency_low", "new", rules_host.cpu_frequency_low, window="ledger", needs=("stacks",)),
    RuleSpec("worker_io_bound", "R04", rules_ledger.worker_io_bound, window="ledger", needs=("stacks",)),
    RuleSpec("cpu_contention", "R17", rules_ledger.cpu_contention, window="ledger", needs=("stacks",)),
    RuleSpec("input_bound", "R01", rules_ledger.input_bound, window="ledger", needs=("stacks",)),
    RuleSpec("host_sync_stall", "R06", rules_ledger.host_sync_stall, window="ledger", needs=("stacks", "cards")),
    RuleSpec("link_degraded", "R13b", rules_gpu.link_degraded, needs=("cards", "pcie_link"), per_card=True),
    RuleSpec("pcie_bound", "R13", rules_gpu.pcie_bound, needs=("cards", "pcie"), per_card=True),
    RuleSpec("host_overhead_bound", "R07", rules_ledger.host_overhead_bound, window="ledger",
             needs=("stacks", "cards")),
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
    on: int = 0
    off: int = 0
    active: bool = False
    last: Finding | None = None


class Advisor:
    """Evaluates the rules over a Timeline; keeps the hysteresis state between calls.

    ``evaluate`` is meant to be called every ~``EVERY_S`` seconds with the session's
    current time, always on the same Timeline and with a non-decreasing ``t_now`` (it
    caches binned stack samples and the hysteresis state; a replay that seeks backwards
    takes a new Advisor). The context (``ctx``) is shared, not copied: events seen in the
    Timeline that say stacks will not come (no permission …) are noted on it.
    """

    EVERY_S = 5.0
    WINDOW_S = 30.0
    # The ledger's causes are judged over the last two minutes: long enough for an
    # evaluation pass or a worker restart every few steps to show at its true share,
    # short enough that a fix shows within a couple of minutes.
    LEDGER_WINDOW_S = 120.0
    # Evidence: a cause is judged on at least this many seconds of the ledger.
    LEDGER_MIN_S = 20.0

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

    def windows(self, timeline: Timeline, t_now: float) -> tuple[Window, Window]:
        start = self.warmup_s
        w = Window(timeline, self.ctx, max(t_now - self.window_s, start), t_now)
        wl = Window(timeline, self.ctx, max(t_now - self.long_window_s, start), t_now, binner=self._binner, like=w)
        return w, wl

    def ledger_window(self, timeline: Timeline, t_now: float, w: Window, wl: Window) -> Window:
        """The Window the ledger's rules read, with the ledger of its settled bins."""
        settled = t_now - StackBinner.LAG_S
        self.book.update(w, wl, settled)
        lw = Window(timeline, self.ctx, max(t_now - self.ledger_window_s, self.warmup_s), t_now, binner=self._binner,
                    like=w)
        job = self.book.window(lw.t0, settled, gpu_job=w.gpu_job)
        self.ledger_s = max([r.wall_s for r in job.ranks.values()] + [c.wall_s for c in job.cards.values()],
                            default=0.0)
        lw.ledger = job if self.ledger_s >= self.LEDGER_MIN_S * 0.95 else None
        return lw

    def settle_ledger(self, timeline: Timeline, t_now: float) -> None:
        """Compute the ledger's bins up to ``StackBinner.LAG_S`` before ``t_now`` at once,
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
        self.book.update(w, wl, t_now - StackBinner.LAG_S)

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
        active = self._hysteresis(raw, windows)
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
        # A cause at medium or above that fired but is not raised yet (hysteresis) is still
        # a cause: "healthy" beside it would be withdrawn an evaluation later.
        active_keys = {f.key() for f in active}
        confirming = any(k not in active_keys and SPECS[f.rule].category == "cause" and f.severity.at_least("medium")
                         for k, f in raw.items())
        h = None if blocking or confirming else healthy(w)
        if h is not None:
            h.t = t_now
        if blocking:
            headline = blocking[0]
        elif h is not None:
            headline = h
        elif kept and not confirming:
            headline = kept[0]
        else:
            headline = self._inconclusive(t_now, w, lw)
        findings = kept + ([h] if h is not None else [])
        if headline not in findings:
            findings.insert(0, headline)
        return Verdict(headline, findings, t=t_now, cannot_judge=cannot_judge(w))

    def _inconclusive(self, t_now: float, w: Window, lw: Window) -> Finding:
        """The headline when no finding stands: say what is still coming, if anything. The
        ledger's rules (most causes) need LEDGER_MIN_S of settled seconds, which lag the
        stacks by StackBinner.LAG_S; a rule that fired once is raised at its second firing.
        Until then "nothing conclusive" would tell a starved job's user nothing is wrong."""
        u = w.job_util
        ev: dict[str, object] = {"util": None if u is None else round(u, 1)}
        filling = t_now - self.warmup_s <= self.LEDGER_MIN_S + 2 * StackBinner.LAG_S
        if lw.ledger is None and 0.0 < self.ledger_s and filling:
            ev["ledger_s"] = round(self.ledger_s, 1)
            return no_data(t_now, f"collecting: the time ledger has {self.ledger_s:.0f} s of the "
                                  f"{self.LEDGER_MIN_S:.0f} s it judges from (stacks settle {StackBinner.LAG_S:.0f} s "
                                  f"late)", ev)
        pending = sorted({k[0] for k, st in self._hyst.items() if not st.active and SPECS[k[0]].category == "cause"})
        if pending:
            ev["pending"] = pending
            return no_data(t_now, f"confirming: {', '.join(pending)} fired once; a finding is raised when it "
                                  f"holds for {RAISE_AFTER} evaluations in a row", ev)
        return no_data(t_now, "nothing conclusive: no rule fired" +
                       (f" and the cards are not saturated ({u:.0f}% util)" if u is not None else ""), ev)

    def _hysteresis(self, raw: dict[tuple[str, int | None, int | None], Finding],
                    windows: dict[str, Window]) -> list[Finding]:
        held_cache: dict[str, dict[tuple[str, int | None, int | None], Finding]] = {}
        out = []
        for key, f in raw.items():
            st = self._hyst.setdefault(key, _Hyst())
            st.on += 1
            st.off = 0
            st.last = f
            if not SPECS[f.rule].hysteresis or st.on >= RAISE_AFTER:
                st.active = True
        for key, st in list(self._hyst.items()):
            spec = SPECS[key[0]]
            if key in raw:
                if st.active:
                    out.append(raw[key])
                continue
            st.on = 0
            if not st.active or not spec.hysteresis:
                del self._hyst[key]
                continue
            if spec.id not in held_cache:
                assert spec.fn is not None
                held_cache[spec.id] = {
                    f.key(): job_scaled(f, len(windows["short"].job_cards)) if spec.per_card else f
                    for f in spec.fn(windows[spec.window], HOLD_RELAX)}
            held = held_cache[spec.id].get(key)
            if held is not None:
                st.off = 0
                st.last = held
                out.append(held)
                continue
            st.off += 1
            if st.off >= CLEAR_AFTER:
                del self._hyst[key]
                continue
            assert st.last is not None
            out.append(dataclasses.replace(st.last, evidence={**st.last.evidence, "fading": True}))
        return out
