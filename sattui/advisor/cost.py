"""The cost view: efficiency η per card and for the job, and the seeds' "consider
stopping" alerts as findings (low_utilization, memory_swing, pcie_saturated_sm_idle).

η of a card, from the best signal it reports (docs/rules.md "Efficiency"):

* ``sm_active``: mean SM activity / 100 — DCGM ``SM_ACTIVE``, the share of SMs with a
  resident warp, averaged over time: the closest outside measure of the chip working.
* ``util×power``: mean over samples of util/100 × min(1, power / power limit) — the
  duty cycle weighted by how hard the chip draws against its limit (a spinning or tiny
  kernel keeps util at 100 % but power low).
* ``util``: mean util / 100 — an upper bound, when nothing else is reported.

η of the job is the mean over the job's cards (each card costs the same per hour).
"""

from __future__ import annotations

import statistics
from typing import Any

from sattui.advisor.context import Finding, severity_for, share_text
from sattui.advisor.rules_system import card_in_use
from sattui.findings import Severity
from sattui.ledger.window import CardStats, Window, link_bw_Bps, pstdev

FIX_LOW_UTIL = ("Consider stopping the job until it can use the card: fix what starves it (see the other "
                "findings), or share the card / use a smaller one.{headroom}")
FIX_SWING = ("Device memory swings by more than half the card with no pattern: look for variable batch or sequence "
             "sizes, torch.cuda.empty_cache() calls, or another process sharing the card; consider stopping the job "
             "if it is not making progress.")
FIX_PCIE_IDLE = ("The card spends its time moving data, not computing: keep data resident on the GPU, pin host "
                 "memory and overlap copies with compute, send compact dtypes; consider stopping the job until the "
                 "input path is fixed.")


class EfficiencyMeter:
    """Streaming η per card: add card samples (records or CardSample), read ``result()``.

    Memory is a few numbers per card, whatever the recording's length.
    """

    def __init__(self, cards: list[dict[str, Any]] | None = None, from_t: float = 0.0) -> None:
        self.info = {c.get("card"): c for c in cards or []}
        self.from_t = from_t
        self._acc: dict[int, dict[str, float]] = {}

    def add(self, s: Any) -> None:
        get = s.get if isinstance(s, dict) else (lambda k, _s=s: getattr(_s, k, None))
        t = get("t")
        if t is None or t < self.from_t:
            return
        card = get("card")
        if not isinstance(card, int):
            return
        c = card
        a = self._acc.get(c)
        if a is None:  # not setdefault: that built this dict for each of 7,200 card records an hour
            a = self._acc[c] = {"n": 0, "t0": t, "t1": t, "sm": 0.0, "n_sm": 0, "u": 0.0, "n_u": 0,
                                "up": 0.0, "n_up": 0, "p": 0.0, "n_p": 0}
        a["n"] += 1
        if t > a["t1"]:  # max and min without the calls
            a["t1"] = t
        if t < a["t0"]:
            a["t0"] = t
        sm, u, p = get("sm_active"), get("util"), get("power_w")
        limit = get("power_limit_w") or self.info.get(c, {}).get("power_limit_w")
        if sm is not None:
            a["sm"] += sm
            a["n_sm"] += 1
        if u is not None:
            a["u"] += u
            a["n_u"] += 1
            if p is not None and limit:
                a["up"] += u / 100.0 * min(1.0, p / limit)
                a["n_up"] += 1
        if p is not None and limit:
            a["p"] += p / limit
            a["n_p"] += 1

    def card(self, c: int) -> dict[str, Any]:
        a = self._acc.get(c)
        if a is None:
            return {"card": c, "eta": None, "method": None}
        # The best signal must cover most samples; a card that reports SM activity only
        # sometimes is judged by what it reports all the time.
        if a["n_sm"] >= 0.8 * a["n"] and a["n_sm"]:
            eta, method = a["sm"] / a["n_sm"] / 100.0, "sm_active"
        elif a["n_up"] >= 0.8 * a["n"] and a["n_up"]:
            eta, method = a["up"] / a["n_up"], "util×power"
        elif a["n_u"]:
            eta, method = a["u"] / a["n_u"] / 100.0, "util"
        else:
            eta, method = None, None
        hours = max(0.0, a["t1"] - a["t0"]) / 3600.0
        return {"card": c, "eta": None if eta is None else round(min(1.0, eta), 4), "method": method,
                "util_mean": round(a["u"] / a["n_u"], 2) if a["n_u"] else None,
                "sm_active_mean": round(a["sm"] / a["n_sm"], 2) if a["n_sm"] else None,
                "power_frac_mean": round(a["p"] / a["n_p"], 4) if a["n_p"] else None,
                "card_hours": round(hours, 4),
                "idle_card_hours": None if eta is None else round(hours * (1.0 - min(1.0, eta)), 4)}

    def result(self, job_cards: list[int] | None = None) -> dict[str, Any]:
        cards = [self.card(c) for c in sorted(self._acc)]
        mine = [c for c in cards if (job_cards is None or c["card"] in job_cards) and c["eta"] is not None]
        job = None
        if mine:
            methods = sorted({c["method"] for c in mine})
            job = {"eta": round(sum(c["eta"] for c in mine) / len(mine), 4), "method": "+".join(methods),
                   "cards": [c["card"] for c in mine],
                   "idle_card_hours": round(sum(c["idle_card_hours"] or 0.0 for c in mine), 4)}
        return {"job": job, "cards": cards,
                "definition": "eta = mean SM activity where reported, else mean util x min(1, power/limit), "
                              "else mean util; job = mean over its cards (docs/rules.md)"}


def efficiency(w: Window) -> dict[str, Any]:
    """η over a window (the live view)."""
    meter = EfficiencyMeter(w.ctx.cards, from_t=w.t0)
    for cs in w.cards.values():
        for s in cs.samples:
            meter.add(s)
    return meter.result(w.job_cards or None)


def _cards(w: Window) -> list[CardStats]:
    return [w.cards[c] for c in w.job_cards if w.card_ok(c) and card_in_use(w, w.cards[c])]


def _thirds(cs: CardStats, w: Window) -> list[float]:
    step = w.length_s / 3.0
    out = []
    for i in range(3):
        vals = [s.util for s in cs.samples if s.util is not None and w.t0 + i * step <= s.t < w.t0 + (i + 1) * step]
        if vals:
            out.append(sum(vals) / len(vals))
    return out


def low_utilization(w: Window, relax: float = 1.0) -> list[Finding]:
    """low_utilization — "consider stopping": utilization below 30 % sustained.

    Anchor: the seeds ("utilization below 30 % sustained"); torch-tb-profiler's low-util
    rule (< 50 %) for the headroom hint. Threshold: mean util < 30 % in each third of the
    window (sustained, and bursty cards count by their mean). Impact = 1 − U/100, at
    most medium (an alert about cost, not a cause).
    """
    out = []
    for cs in _cards(w):
        if cs.util is None or cs.util >= 30.0 / relax:
            continue
        thirds = _thirds(cs, w)
        if len(thirds) < 3 or max(thirds) >= 30.0 / relax:
            continue  # "sustained": every third of the window, not one long dip
        below = sum(1 for u in cs.utils if u < 30.0) / len(cs.utils)
        impact = 1.0 - cs.util / 100.0
        mem = cs.mem_frac(cs.mem_used_max)
        headroom = mem is not None and mem < 0.5
        ev = {"util": round(cs.util, 1), "below_30_share": round(below, 3), "mem_frac_max": None if mem is None
              else round(mem, 3), "headroom": headroom, "window_s": round(w.length_s, 1)}
        hint = " Memory has headroom: a larger batch may raise utilization (torch-tb-profiler)." if headroom else ""
        out.append(Finding("low_utilization", severity_for(impact, cap="medium"), impact,
                           f"card {cs.card} below 30% utilization for {w.length_s:.0f} s (mean {cs.util:.0f}%): "
                           "consider stopping it", ev, FIX_LOW_UTIL.format(headroom=hint), card=cs.card))
    return out


def memory_swing(w: Window, relax: float = 1.0) -> list[Finding]:
    """memory_swing — "consider stopping": device memory swings over 50 % with no pattern
    (long window).

    Anchor: the seeds. Threshold: max − min of used memory ≥ 50 % of the card, and the
    swings are not periodic (fewer than 3 downward crossings of the midpoint, or their
    spacing's coefficient of variation > 0.3 — a regular sawtooth is R10's case).
    Severity low, impact 0 (a symptom, not a measured loss).
    """
    out = []
    for c in w.job_cards:
        cs = w.cards[c]
        hi, lo, total, rng = cs.mem_used_max, cs.mem_used_min, cs.mem_total, cs.mem_swing
        if hi is None or lo is None or not total or rng is None or len(cs.mems) < 8:
            continue
        if rng < 0.5 * relax or not w.card_ok(c) or not card_in_use(w, cs):
            continue
        mid = (hi + lo) / 2.0
        ts = [s.t for s in cs.samples if s.mem_used is not None]
        downs = [t for t, a, b in zip(ts[1:], cs.mems, cs.mems[1:]) if a >= mid > b]
        gaps = [b - a for a, b in zip(downs, downs[1:])]
        if len(downs) >= 3 and statistics.mean(gaps) > 0 and pstdev(gaps) / statistics.mean(gaps) <= 0.3:
            continue
        ev = {"min_frac": round(lo / total, 3), "max_frac": round(hi / total, 3),
              "swing": round(rng, 3), "downward_crossings": len(downs)}
        out.append(Finding("memory_swing", Severity.LOW, 0.0,
                           f"card {cs.card}: device memory swings by {share_text(rng)} of the card "
                           "with no regular pattern",
                           ev, FIX_SWING, card=cs.card))
    return out


def pcie_saturated_sm_idle(w: Window, relax: float = 1.0) -> list[Finding]:
    """pcie_saturated_sm_idle — "consider stopping": PCIe over 80 % while SM activity is
    below 40 %.

    Anchor: the seeds; KempnerPulse "I/O or data-loading" (PCIe busy, SM < 30 %).
    Threshold: max(RX, TX) > 80 % of the current link's per-direction bandwidth in
    ≥ 50 % of samples, and mean SM < 40 %. Impact = that share × (1 − SM/100), at most
    medium. Needs SM activity and PCIe counters.
    """
    out = []
    for cs in _cards(w):
        if cs.sm is None or cs.sm >= 40.0:
            continue
        gmax, wmax = cs.link_max()
        rows: list[tuple[float, float]] = []
        for s in cs.samples:
            if s.pcie_rx_Bps is None and s.pcie_tx_Bps is None:
                continue
            bw = link_bw_Bps(s.pcie_gen or gmax, s.pcie_width or wmax)
            if bw:
                rows.append((max(s.pcie_rx_Bps or 0.0, s.pcie_tx_Bps or 0.0), bw))
        if not rows:
            continue
        hi = sum(1 for b, bw in rows if b > 0.8 * bw) / len(rows)
        if hi < 0.5 * relax:
            continue
        impact = hi * (1.0 - cs.sm / 100.0)
        ev = {"pcie_over_80_share": round(hi, 3), "sm_active": round(cs.sm, 1),
              "peak_GBps": round(max(b for b, _ in rows) / 1e9, 2), "link_GBps": round(rows[-1][1] / 1e9, 1)}
        out.append(Finding("pcie_saturated_sm_idle", severity_for(impact, cap="medium"), impact,
                           f"card {cs.card}: PCIe over 80% of the link {share_text(hi)} of the time "
                           "while SM activity is "
                           f"{cs.sm:.0f}%", ev, FIX_PCIE_IDLE, card=cs.card))
    return out
