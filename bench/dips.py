"""What the card screen's dips list costs (sattui/view/dips.py).

Over the synthetic recording of bench/report_1h.py (one card at 2 Hz, main thread spans
at 20 Hz, 3 workers; ``--minutes`` long) and the 8-rank fixture
(tests/fixtures/recordings/ranks_fixture.jsonl), prints CPU seconds for:

* ``ledger.build`` over a whole 5-minute window (what redoing the ledger at every
  redraw would cost: why the dips list does not);
* the dips list of the 5 minutes up to the view's end, the first time (every dip's
  cause computed) and at the next redraws (the view moved by half a second: the dips
  found again, their causes kept), with the number of ledger passes
  (``ledger.build_bins`` calls) each made: the view computes the bins no advisor did,
  one pass per run of missing bins, never one per dip;
* the same list of a replay the advisor judged (``--judged``): its bins are read, none
  computed.

    python bench/dips.py [--minutes 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(__file__))

from report_1h import generate  # noqa: E402

from sattui.advisor.context import AdvisorContext  # noqa: E402
from sattui.ledger import bins as ledger  # noqa: E402
from sattui.ledger.window import Window  # noqa: E402
from sattui.session import ReplaySession  # noqa: E402
from sattui.view.binning import BinCache  # noqa: E402
from sattui.view.data import ViewData  # noqa: E402
from sattui.view.dips import DIP_SPAN_S, recent_dips  # noqa: E402

RANKS = os.path.join(ROOT, "tests", "fixtures", "recordings", "ranks_fixture.jsonl")


def cpu(fn, repeat: int = 1) -> float:
    t = time.process_time()
    for _ in range(repeat):
        fn()
    return (time.process_time() - t) / repeat


PASSES = [0]
_build_bins = ledger.build_bins


def counted_build_bins(*a, **kw):
    PASSES[0] += 1
    return _build_bins(*a, **kw)


ledger.build_bins = counted_build_bins


def case(name: str, path: str, t_end: float, card: int = 0, judged: bool = False) -> None:
    s = ReplaySession(path, judge=judged)
    t_end = min(t_end, s.duration)
    ctx = AdvisorContext.from_header(s.header)
    span = min(DIP_SPAN_S, t_end)
    whole = cpu(lambda: ledger.build(Window(s.timeline, ctx, t_end - span, t_end)), repeat=3)
    cache = BinCache()
    got: list = []
    PASSES[0] = 0
    first = cpu(lambda: got.append(recent_dips(ViewData(s, t_end, 60.0, cache), card)))
    first_passes = PASSES[0]
    steps = 20
    later = cpu(lambda: [recent_dips(ViewData(s, t_end - 0.5 * k, 60.0, cache), card) for k in range(1, steps + 1)])
    print(f"{name}{' (judged)' if judged else ''}: ledger.build over {span:.0f} s {whole * 1000:.0f} ms CPU; "
          f"dips list ({len(got[0])} dips): first {first * 1000:.0f} ms ({first_passes} ledger passes), "
          f"then {later / steps * 1000:.1f} ms a redraw ({(PASSES[0] - first_passes) / steps:.1f} passes)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--judged", action="store_true", help="also replays the advisor judged (its bins read)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.jsonl")
        generate(path, args.minutes)
        for judged in (False, True) if args.judged else (False,):
            case(f"synthetic {args.minutes:g} min, 1 card", path, args.minutes * 60.0 - 5.0, judged=judged)
    for judged in (False, True) if args.judged else (False,):
        case("8-rank fixture (75 s), card 5", RANKS, 75.0, card=5, judged=judged)


if __name__ == "__main__":
    main()
