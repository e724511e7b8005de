"""Memory that only grows: the DataLoader workers' and the cards' (rule ``memory_growth``).

Not lost time yet, but a run that ends in an out-of-memory kill: a worker whose private
memory climbs for the whole window (the copy-on-read "leak": every worker touching the
dataset's Python objects makes its copy-on-write pages private, pytorch/pytorch#13246;
or a cache that keeps every item), or a card whose used memory climbs (tensors kept
across steps). Read over the long window, from the samples alone: a worker's USS
(``smaps_rollup`` Private_*, read every ~10 s) where enough reads exist, else its RSS
(every tick); a card's used memory.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sattui.advisor.context import Finding
from sattui.findings import Severity
from sattui.ledger.window import ProcStats, Window

MIB = 1 << 20
GIB = 1 << 30
# A series is judged on at least this many points over at least this long.
MIN_POINTS = 4
MIN_SPAN_S = 20.0
# "Only grows": no fall below an earlier value by more than this share of its range.
MAX_DRAWDOWN = 0.10
# [proposal] The job's workers together: this much steady growth over the window is
# medium, this rate is high (a 64 GB host filled within the next ~8 h).
WORKER_MEDIUM_B = 64 * MIB
WORKER_HIGH_BPH = 8 * GIB
# [proposal] A card: growth of this share of its memory over the window is medium; full
# within this long at the current rate is high.
CARD_MEDIUM_FRAC = 0.05
CARD_MEDIUM_B = 1 * GIB  # where the card's total is unknown
CARD_HIGH_TO_FULL_S = 3600.0
# A worker's USS growing while its RSS stays within this share of that growth: pages it
# shared with the trainer turned private (copy-on-read), not new allocations.
COPY_ON_READ_RSS = 0.25
# [proposal] Copy-on-read's room (what can still turn private) against the host's available
# memory: a quarter of it is medium; where the host's memory is unknown (a recording from
# before sattui read it), this much is.
COW_MEDIUM_OF_AVAILABLE = 0.25
COW_MEDIUM_UNKNOWN_B = 1 * GIB

FIX_WORKERS = {
    "copy-on-read": (
        "The workers' private memory grows while their RSS does not: pages shared with the trainer are being "
        "copied, one worker at a time, because reading Python objects (lists, dicts of Python objects in the "
        "Dataset) updates their reference counts (pytorch/pytorch#13246). Keep the dataset's metadata in numpy "
        "arrays, pandas/pyarrow columns or one serialized bytes buffer instead of Python lists and dicts; "
        "fewer workers multiply it less."),
    "allocation": (
        "Each worker keeps allocating and never frees: look for a cache or list in the Dataset (or its "
        "transforms) that keeps every item it served, and bound it (functools.lru_cache(maxsize=…), a fixed-size "
        "buffer), or cache once outside the workers. persistent_workers=False resets it every epoch, at the cost "
        "of restarting the workers."),
}
FIX_CARD = (
    "The card's memory grows step after step: something keeps tensors across steps — a loss or metric kept "
    "without .item()/.detach() (it holds its whole graph), outputs appended to a list, a growing cache. Keep "
    "scalars with .item(), detach what you keep, and check torch.cuda.memory_summary() between steps; "
    "torch.cuda.memory._record_memory_history() shows where the growth is allocated.")


# A series is thinned to about this many points before it is judged.
MAX_POINTS = 100


@dataclass
class Growth:
    """A series that only grows: its least-squares rate and its growth over its span."""

    rate_Bps: float
    growth_B: float
    first_B: float
    last_B: float
    span_s: float


def steady_growth(points: Sequence[tuple[float, float]]) -> Growth | None:
    """The growth of a series that rises through its whole span, or None.

    "Only grows": at least :data:`MIN_POINTS` points over :data:`MIN_SPAN_S`; the means of
    its three thirds (by time) rise one after the other (growth that stops early — a warm-up,
    an allocator filling its cache — is not it); it never falls below an earlier value by
    more than :data:`MAX_DRAWDOWN` of its range (a sawtooth is not it)."""
    pts = list(points)
    if len(pts) < MIN_POINTS:
        return None
    if len(pts) > MAX_POINTS:
        # Every k-th point (in time order: the series come sorted, sort() below only
        # checks): the shape (thirds, drawdown, slope) of a series over minutes does not
        # need each 1-s sample, and the rule runs at every evaluation.
        pts.sort()
        k = math.ceil(len(pts) / MAX_POINTS)
        pts = pts[::k] if (len(pts) - 1) % k == 0 else pts[::k] + [pts[-1]]
    pts.sort()
    t0, t1 = pts[0][0], pts[-1][0]
    span = t1 - t0
    if span < MIN_SPAN_S:
        return None
    # The thirds by time: the third a point falls in never decreases along the sorted
    # points, so two bisections split them (the rule runs at every evaluation, and most
    # series fail right here).
    def third(p: tuple[float, float]) -> int:
        return min(2, int(3 * (p[0] - t0) / span))

    cut1 = bisect.bisect_left(pts, 1, key=third)
    cut2 = bisect.bisect_left(pts, 2, lo=cut1, key=third)
    vals = [v for _, v in pts]
    thirds = (vals[:cut1], vals[cut1:cut2], vals[cut2:])
    if any(not x for x in thirds):
        return None
    m = [sum(x) / len(x) for x in thirds]
    if not m[0] < m[1] < m[2]:
        return None
    rng = max(vals) - min(vals)
    peak = vals[0]
    for v in vals:
        if peak - v > MAX_DRAWDOWN * rng:
            return None
        peak = max(peak, v)
    n = len(pts)
    mt = sum(t for t, _ in pts) / n
    mv = sum(vals) / n
    den = sum((t - mt) ** 2 for t, _ in pts)
    rate = sum((t - mt) * (v - mv) for t, v in pts) / den if den > 0 else 0.0
    if rate <= 0:
        return None
    return Growth(rate, rate * span, vals[0], vals[-1], span)


def _thinned(samples: Sequence[Any]) -> Sequence[Any]:
    """About :data:`MAX_POINTS` evenly spaced samples and the last one: thinning before the
    points are built, as :func:`steady_growth` would after (the rule reads every worker's
    five minutes at each evaluation)."""
    n = len(samples)
    if n <= MAX_POINTS:
        return samples
    k = math.ceil(n / MAX_POINTS)
    picked = list(samples[::k])
    if (n - 1) % k:
        picked.append(samples[-1])
    return picked


def _worker_growth(p: ProcStats) -> tuple[Growth, str, str] | None:
    """(growth, the signal it was read from, its kind) for one worker, or None."""
    samples = _thinned(p.samples)
    uss_pts = [(s.t, float(s.uss)) for s in samples if s.uss is not None]
    uss = steady_growth(uss_pts)
    rss_pts = [(s.t, float(s.rss)) for s in samples if s.rss is not None]
    rss = steady_growth(rss_pts)
    if uss is not None:
        # RSS over the same span: flat while USS grows means shared pages turned private.
        lo, hi = uss_pts[0][0], uss_pts[-1][0]
        in_span = [v for t, v in rss_pts if lo <= t <= hi]
        rss_growth = (in_span[-1] - in_span[0]) if len(in_span) >= 2 else None
        kind = "copy-on-read" if rss_growth is not None and rss_growth <= COPY_ON_READ_RSS * uss.growth_B \
            else "allocation"
        return uss, "uss", kind
    if rss is not None:
        return rss, "rss", "allocation"
    return None


def _mb(b: float) -> str:
    return f"{b / MIB:.0f} MB" if abs(b) < 10 * GIB else f"{b / GIB:.1f} GB"


def _cow_ceiling(w: Window, p: ProcStats) -> float | None:
    """The most a worker's private memory can reach by copy-on-read: its RSS, or its
    parent's RSS when it was forked if that was larger (pages it has not touched yet)."""
    last = next((s.rss for s in reversed(p.samples) if s.rss is not None), None)
    parent = w.procs.get(p.ppid) if p.ppid is not None else None
    at_birth = None
    if parent is not None:
        near = min(parent.samples, key=lambda s: abs(s.t - p.first_t))
        at_birth = near.rss
    got = [float(v) for v in (last, at_birth) if v is not None]
    return max(got) if got else None


def _host_available(w: Window) -> int | None:
    for h in reversed(w.timeline.window("host", 0, w.t0, w.t1)):
        if h.mem_available is not None:
            return int(h.mem_available)
    return None


def _cow_severity(room_B: float, available_B: int | None, relax: float) -> Severity:
    """Copy-on-read stops when every shared page is private: judged by what is left of that
    (``room_B``) against the memory the host has left, not by extrapolating its rate."""
    if available_B is None:
        return Severity.MEDIUM if room_B >= COW_MEDIUM_UNKNOWN_B * relax else Severity.LOW
    if room_B >= available_B / relax:
        return Severity.HIGH
    return Severity.MEDIUM if room_B >= COW_MEDIUM_OF_AVAILABLE * available_B * relax else Severity.LOW


def memory_growth(w: Window, relax: float = 1.0) -> list[Finding]:
    """memory_growth — memory that only grows: DataLoader workers (USS, else RSS) or a card.

    Anchor: PyTorch's DataLoader memory issue (pytorch/pytorch#13246: workers reading a
    Dataset's Python objects copy the pages they share, "copy-on-read", so each worker's
    private memory climbs through the epoch); the seeds' "memory that only grows".
    Threshold [proposal]: a series rises through the whole long window (≥ 4 points over
    ≥ 20 s, each third's mean above the one before, never falling back by more than 10 % of
    its range); the latest generation of workers together grows ≥ 64 MB. Allocation (RSS
    grows): at ≥ 8 GB/h → high, else medium. Copy-on-read (USS grows, RSS stays): bounded by
    the pages still shared (each worker's RSS, or its parent's at its birth, less its USS):
    that room ≥ the host's available memory → high, ≥ a quarter of it → medium, else low
    (a fresh worker privatising its share of a parent that fits is every forked loader's
    cost, not a leak). A card grows by ≥ 5 % of its memory → medium, full within 1 h at
    that rate → high. Impact 0: nothing is lost until memory runs out.
    """
    out: list[Finding] = []
    # The latest generation of workers: those alive at the end of the window, or the last
    # ones while they ran (the run's end, an epoch's restart). Memory an earlier generation
    # grew was given back when it exited.
    latest_t = max((p.last_t for p in w.workers), default=w.t1)
    alive = latest_t >= w.t1 - 5.0
    grown: dict[str, dict[str, object]] = {}
    total_B = rate_B = room_B = 0.0
    kinds: dict[str, float] = {}
    for p in w.workers:
        if p.last_t < latest_t - 5.0:
            continue
        got = _worker_growth(p)
        if got is None:
            continue
        g, signal, kind = got
        wev: dict[str, object] = {"signal": signal, "kind": kind, "growth_mb": round(g.growth_B / MIB, 1),
                                  "mb_per_min": round(g.rate_Bps * 60 / MIB, 2), "span_s": round(g.span_s, 1),
                                  "last_mb": round(g.last_B / MIB, 1)}
        if kind == "copy-on-read":
            ceiling = _cow_ceiling(w, p)
            if ceiling is not None:
                room_B += max(0.0, ceiling - g.last_B)
                wev["ceiling_mb"] = round(ceiling / MIB, 1)
        grown[str(p.pid)] = wev
        total_B += g.growth_B
        kinds[kind] = kinds.get(kind, 0.0) + g.growth_B
        rate_B += g.rate_Bps
    if grown and total_B >= WORKER_MEDIUM_B * relax:
        kind = max(kinds, key=lambda k: kinds[k])
        evidence: dict[str, object] = {"what": "workers", "kind": kind, "growth_mb": round(total_B / MIB, 1),
                                       "mb_per_hour": round(rate_B * 3600 / MIB), "workers": grown}
        summary = (f"DataLoader workers' memory only grows: +{_mb(total_B)} over {len(grown)} worker(s) "
                   f"({rate_B * 60 / MIB:.0f} MB/min {'now' if alive else 'while the last ones ran'})")
        if kind == "copy-on-read":
            available = _host_available(w)
            sev = _cow_severity(room_B, available, relax)
            # the rate holds only until every shared page is private: how long that is
            to_ceiling_min = room_B / rate_B / 60 if rate_B > 0 else None
            evidence["room_mb"] = round(room_B / MIB, 1)
            evidence["minutes_to_ceiling"] = None if to_ceiling_min is None else round(to_ceiling_min, 1)
            evidence["host_available_mb"] = None if available is None else round(available / MIB)
            summary += (f", copy-on-read: at most {_mb(room_B)} more (the pages still shared"
                        + (f", ~{to_ceiling_min:.0f} min at this rate" if to_ceiling_min is not None else "")
                        + ")" + (f", {_mb(available)} available" if available is not None else ""))
        else:
            sev = Severity.HIGH if rate_B * 3600 >= WORKER_HIGH_BPH * relax else Severity.MEDIUM
        out.append(Finding("memory_growth", sev, 0.0, summary, evidence, FIX_WORKERS[kind]))
    for c in w.job_cards:
        cs = w.cards.get(c)
        if cs is None:
            continue
        card_g = steady_growth([(s.t, float(s.mem_used)) for s in _thinned(cs.samples) if s.mem_used is not None])
        if card_g is None:
            continue
        g = card_g
        total = cs.mem_total
        if total:
            if g.growth_B < CARD_MEDIUM_FRAC * total * relax:
                continue
            to_full = max(0.0, total - g.last_B) / g.rate_Bps
        else:
            if g.growth_B < CARD_MEDIUM_B * relax:
                continue
            to_full = None
        sev = Severity.HIGH if to_full is not None and to_full <= CARD_HIGH_TO_FULL_S / relax else Severity.MEDIUM
        when = f"; full in ~{to_full / 60:.0f} min at this rate" if to_full is not None else ""
        ev: dict[str, object] = {"what": "card", "growth_mb": round(g.growth_B / MIB, 1),
                                 "mb_per_min": round(g.rate_Bps * 60 / MIB, 1), "span_s": round(g.span_s, 1),
                                 "used_mb": round(g.last_B / MIB)}
        if total:
            ev["used_frac"] = round(g.last_B / total, 3)
            ev["minutes_to_full"] = round(to_full / 60, 1) if to_full is not None else None
        out.append(Finding("memory_growth", sev, 0.0,
                           f"card {c}'s memory only grows: +{_mb(g.growth_B)} over {g.span_s:.0f} s{when}",
                           ev, FIX_CARD, card=c))
    return out
