"""The host's CPU clock while the DataLoader workers compute (rule ``cpu_frequency_low``).

A worker that computes on a core clocked at half its maximum takes twice as long: the
data wait it causes is partly the clock's. The host record (sattui/host_sampler.py) gives
the mean current clock of the trainer's CPUs and their maximum each tick; the ledger
keeps that ratio for the seconds the loop waited on busy workers (``clock_ratio_s`` /
``clock_known_s`` in the ``worker_busy`` detail), so the rule reads the clock at the
moments it mattered, not over the whole run.
"""

from __future__ import annotations

from sattui.advisor.context import Finding, severity_for, share_text
from sattui.ledger.causes import WORKER_BUSY
from sattui.ledger.window import Window

# [proposal] Below this share of the maximum clock: under the all-core turbo and the base
# clock of server CPUs (commonly 55–80 % of the single-core maximum that cpuinfo_max_freq
# gives), so a busy host at its normal clocks does not fire it.
CLOCK_LOW = 0.6
# The clock must be known for at least this share of the busy workers' seconds.
MIN_KNOWN = 0.5
SHOWN_FROM = 0.03

FIX_CLOCK = (
    "The CPUs run well below their maximum clock while the DataLoader workers compute, so every sample costs "
    "more: set the cpufreq governor to performance (cpupower frequency-set -g performance, or the tuned/BIOS "
    "power profile: 'performance' instead of 'powersave'/'balanced'), check the host's power capping and "
    "thermal state; in a VM or container ask the administrator. Then make samples cheaper if the wait stays.")


def _host_clocks(w: Window) -> tuple[float | None, float | None, str | None]:
    """The window's mean current and maximum clock (MHz) and the governors seen."""
    cur: list[float] = []
    top: list[float] = []
    govs: set[str] = set()
    for h in w.timeline.window("host", 0, w.t0, w.t1):
        if h.freq_mhz is not None:
            cur.append(h.freq_mhz)
        if h.freq_max_mhz is not None:
            top.append(h.freq_max_mhz)
        if h.governor:
            govs.update(h.governor.split(","))
    return (sum(cur) / len(cur) if cur else None, sum(top) / len(top) if top else None,
            ",".join(sorted(govs)) or None)


def cpu_frequency_low(w: Window, relax: float = 1.0) -> list[Finding]:
    """cpu_frequency_low — the host's CPUs are clocked down while the workers are CPU-bound.

    Anchor: the Linux kernel's CPU performance scaling (cpufreq: ``scaling_cur_freq``
    against ``cpuinfo_max_freq``; the ``powersave`` governor of the generic drivers holds
    the lowest clock); the seeds' "host CPU frequency scaled down". Threshold [proposal]:
    over the seconds the loop waited on DataLoader workers busy computing (the ledger's
    ``worker_busy``), the trainer's CPUs ran at ≤ 60 % of their maximum clock on average
    (known for ≥ half of those seconds). Impact: that wait's share of the job's wall time ×
    (1 − clock ratio), what running the workers at full clock would recover; ≥ 5 % medium,
    ≥ 20 % high (shown from 3 %).
    """
    job = w.ledger
    if job is None:
        return []
    busy_s = known = ratio_s = 0.0
    for r in job.ranks.values():
        busy_s += r.causes_s.get(WORKER_BUSY, 0.0)
        det = r.detail.get(WORKER_BUSY, {})
        known += det.get("clock_known_s", 0.0)
        ratio_s += det.get("clock_ratio_s", 0.0)
    if busy_s <= 0 or known < MIN_KNOWN * busy_s:
        return []
    ratio = ratio_s / known
    if ratio > CLOCK_LOW / relax:
        return []
    busy = job.cause_shares().get(WORKER_BUSY, 0.0)
    impact = busy * (1.0 - ratio)
    if impact < SHOWN_FROM * relax:
        return []
    cur, top, gov = _host_clocks(w)
    ev: dict[str, object] = {"clock_ratio": round(ratio, 3), "worker_busy_share": round(busy, 4),
                             "freq_mhz": None if cur is None else round(cur), "freq_max_mhz": None if top is None
                             else round(top), "governor": gov}
    return [Finding("cpu_frequency_low", severity_for(impact), impact,
                    f"the CPUs run at {share_text(ratio)} of their maximum clock while the training loop waits "
                    f"{share_text(busy)} "
                    f"of the time for busy DataLoader workers" + (f" (governor {gov})" if gov else ""),
                    ev, FIX_CLOCK)]
