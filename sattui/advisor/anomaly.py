"""util_anomaly: unusual dips and level shifts in a card's utilization, online.

Method: a robust baseline — median and MAD (median absolute deviation, σ ≈ 1.4826 ×
MAD, at least 2 points) of the utilization over the two minutes before the last 15 s —
and two tests at every evaluation (docs/rules.md "Anomalies" says why not an LSTM); a
level shift is tested first, a dip that lasts being one:

* **dip** (a Hampel-filter test): ≥ 2 consecutive samples of the newest 5 s below
  median − max(20 points, 4σ), while the 10 s before them were still at the usual level;
* **level shift** (a two-segment median change-point test): the median of the last
  15 s differs from the baseline's by ≥ max(15 points, 4σ), the new segment is itself
  steady (its σ ≤ max(5, 1.5 × the baseline's)), and the 10 s before it still sat at
  the old level — so a shift is reported when it happens, not for the next 5 minutes.

Medians and MADs ignore the stalls and spikes they are meant to find (50 % breakdown
point), need no training, no warm-up beyond ~15 s of baseline (30 samples), cost a
sort of a few hundred numbers, and say in plain numbers why they fired.
"""

from __future__ import annotations

import bisect
import statistics

from sattui.advisor.context import Finding
from sattui.findings import Severity
from sattui.ledger.window import Window, bisect_t

NEW_S = 5.0
SHIFT_S = 15.0
BASE_S = 120.0  # the baseline: two minutes are plenty for a robust median, and cheaper
MIN_BASE = 30

FIX_ANOMALY = ("An unusual change in utilization: look at what the job did at that time (the other findings, the "
               "main-thread strip, events such as a worker respawn or another process on the card).")


def _robust(values: list[float]) -> tuple[float, float]:
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    return med, max(2.0, 1.4826 * mad)  # a floor: integer-percent counters make MAD 0 on flat series


def _level_shift(ts: list[float], us: list[float], t1: float, med_o: float, sig_o: float,
                 relax: float) -> tuple[str, float, str, dict[str, object]] | None:
    """A new steady level in the last 15 s that began there (not earlier); ``ts``/``us``:
    the samples' times (sorted) and utilizations."""
    i_shift = bisect.bisect_left(ts, t1 - SHIFT_S)
    recent = us[i_shift:]
    before = us[bisect.bisect_left(ts, t1 - SHIFT_S - 10.0, hi=i_shift):i_shift]
    if len(recent) < 10 or len(before) < 4:
        return None
    med_r, sig_r = _robust(recent)
    d = med_r - med_o
    thr = max(15.0, 4.0 * sig_o) * relax
    if abs(d) < thr or sig_r > max(5.0, 1.5 * sig_o) or abs(statistics.median(before) - med_o) >= thr / 2:
        return None
    down = d < 0
    return ("low" if down else "info", min(1.0, -d / 100.0) if down else 0.0,
            f"utilization shifted from ~{med_o:.0f}% to ~{med_r:.0f}%",
            {"kind": "level_shift", "from": round(med_o, 1), "to": round(med_r, 1), "sigma": round(sig_o, 1),
             "method": "two-segment median change point"})


def util_anomaly(w: Window, relax: float = 1.0) -> list[Finding]:
    """util_anomaly — an unusual dip or level shift of a card's utilization (long window).

    Anchor: Hampel filter / robust z-score (median ± k·1.4826·MAD, k = 4 here, stricter
    than the usual 3 because NVML util is coarse); a two-segment median change-point
    test. Threshold: dip below median − max(20, 4σ) for ≥ 2 samples in the newest 5 s;
    or a level shift ≥ max(15, 4σ) in the last 15 s. Severity info (a downward shift:
    low, impact = the drop). Reported when detected, without hysteresis.
    """
    out = []
    for c in w.job_cards:
        cs = w.cards.get(c)
        if cs is None:
            continue
        t_base = w.t1 - BASE_S
        pts = [(s.t, s.util) for s in cs.samples[bisect_t(cs.samples, t_base):] if s.util is not None]
        # Times sorted, so each stretch below is a slice (the rule runs every evaluation).
        ts = [t for t, _ in pts]
        us = [u for _, u in pts]
        i_shift, i_new = bisect.bisect_left(ts, w.t1 - SHIFT_S), bisect.bisect_left(ts, w.t1 - NEW_S)
        # One baseline for both tests: everything before the last 15 s.
        older = us[:i_shift]
        new = us[i_new:]
        if len(older) < MIN_BASE or len(new) < 2:
            continue
        med, sigma = _robust(older)
        shift = _level_shift(ts, us, w.t1, med, sigma, relax)
        if shift is not None:
            out.append(Finding("util_anomaly", Severity(shift[0]), shift[1], f"card {c}: {shift[2]}", shift[3],
                               FIX_ANOMALY, card=c))
            continue
        thr = max(20.0, 4.0 * sigma) * relax
        run = best = 0
        for u in new:
            run = run + 1 if u < med - thr else 0
            best = max(best, run)
        # A dip is new: the 10 s before it still sat at the usual level (a low level that
        # lasts was reported as a level shift when it began).
        lead = us[i_shift:i_new]
        if best >= 2 and (not lead or statistics.median(lead) >= med - thr):
            low = min(new)
            out.append(Finding("util_anomaly", Severity.INFO, 0.0,
                               f"card {c}: utilization dipped to {low:.0f}% against a usual {med:.0f}%",
                               {"kind": "dip", "baseline_median": round(med, 1), "sigma": round(sigma, 1),
                                "min": round(low, 1), "samples_below": best, "method": "median/MAD (Hampel)"},
                               FIX_ANOMALY, card=c))
    return out
