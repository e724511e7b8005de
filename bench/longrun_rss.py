"""24 hours of samples at the default rates through the Timeline on a simulated clock.

Prints the process RSS at hours 1, 6, 12 and 24: it must stay flat once the rings are
full (the default history is one hour). Run: python bench/longrun_rss.py [HOURS]
Two cards, the main process plus one DataLoader worker whose pid changes every 5 s
(drop_stale forgets the dead ones, as the live session does every tick).
"""

from __future__ import annotations

import resource
import sys
import time

import psutil

from sattui.model import CardSample, Event, ProcSample  # noqa: F401  (realistic imports)
from sattui.timeline import DEFAULT_RATES_HZ, Timeline


def rss_mib() -> float:
    return psutil.Process().memory_info().rss / 2**20


def main(hours: float = 24.0) -> None:
    tl = Timeline()
    card_dt = 1.0 / DEFAULT_RATES_HZ["card"]
    stack_dt = 1.0 / DEFAULT_RATES_HZ["stack"]
    marks = {int(h * 3600) for h in (1, 6, 12, 24) if h <= hours}
    t_start = time.monotonic()
    print(f"{'hour':>5} {'rss MiB':>8} {'samples':>9} {'series':>7}")
    for sec in range(int(hours * 3600)):
        t = float(sec)
        tl.add("proc", 1, t, (t, 1.0, 1e9))
        tl.add("proc", 100000 + sec // 5, t, (t, 0.5, 2e8))
        for i in range(int(DEFAULT_RATES_HZ["card"])):
            for card in (0, 1):
                tl.add("card", card, t + i * card_dt, (t, 97.0, 300.0))
        for i in range(int(DEFAULT_RATES_HZ["stack"])):
            tl.add("stack", 1, t + i * stack_dt, (t, "compute"))
        tl.add("event", 0, t, (t, "tick"))
        if sec % 10 == 0:
            tl.drop_stale("proc", t - 30)
        if sec + 1 in marks:
            n_series = sum(len(tl.keys(k)) for k in ("proc", "card", "stack", "event"))
            print(f"{(sec + 1) / 3600:5.0f} {rss_mib():8.1f} {tl.sample_count():9d} {n_series:7d}", flush=True)
    print(f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MiB; "
          f"{hours:g} h simulated in {time.monotonic() - t_start:.0f} s")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 24.0)
