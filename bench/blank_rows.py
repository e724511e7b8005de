"""Blank rows per screen and terminal size: how much of the window the monitor leaves
unused (issue 26: at most one row in ten blank at 120×40 and 200×50 once the window holds
data; 80×24 stays as it is).

Each case draws the real app headless (Textual's Pilot) over a replay of a fixture
recording, the cursor where the window is full: one card (ui_fixture.jsonl at 90 s) and
eight cards with eight ranks (ranks_fixture.jsonl at 75 s). A row is blank when every
cell of it is a space, whatever its background.

Run:  python bench/blank_rows.py [--sizes 80x24 120x40 200x50] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RECORDINGS = ROOT / "tests" / "fixtures" / "recordings"
FIXTURES = {"1 card": (RECORDINGS / "ui_fixture.jsonl", 90.0), "8 cards": (RECORDINGS / "ranks_fixture.jsonl", 75.0)}
SCREENS = {"main": [], "card": ["enter"], "workers": ["w"]}
SIZES = ((80, 24), (120, 40), (200, 50))


def screen_rows(app) -> list[str]:
    """The text of every row of the screen as the terminal would show it."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def blank_count(rows: list[str]) -> int:
    return sum(1 for r in rows if not r.strip())


async def measure(path: Path, cursor: float, size: tuple[int, int], keys: list[str]) -> tuple[int, list[str]]:
    from sattui.app import SattuiApp
    from sattui.session import ReplaySession

    session = ReplaySession(str(path))
    session.seek(cursor)
    app = SattuiApp(session, show_clock=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        for k in keys:
            await pilot.press(k)
            await pilot.pause()
        for _ in range(3):
            app.redraw(True)
            await pilot.pause()
        rows = screen_rows(app)
    return blank_count(rows), rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="*", default=[f"{w}x{h}" for w, h in SIZES])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--show", help="print the rows of one case: 'main 200x50 8 cards'")
    args = ap.parse_args(argv)
    try:
        sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes]
    except ValueError:
        print(f"blank_rows: sizes are COLSxROWS, got {args.sizes}", file=sys.stderr)
        return 2
    out = []
    for fixture, (path, cursor) in FIXTURES.items():
        for screen, keys in SCREENS.items():
            for w, h in sizes:
                blank, rows = asyncio.run(measure(path, cursor, (w, h), keys))
                out.append({"fixture": fixture, "screen": screen, "size": f"{w}x{h}", "blank": blank, "rows": h})
                if args.show == f"{screen} {w}x{h} {fixture}":
                    print("\n".join(f"{i:2d}|{r}" for i, r in enumerate(rows)))
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"{'fixture':<8} {'screen':<8} {'size':<7} blank rows")
        for r in out:
            flag = "" if r["size"] == "80x24" or r["blank"] * 10 <= r["rows"] else "  > 1 in 10"
            print(f"{r['fixture']:<8} {r['screen']:<8} {r['size']:<7} {r['blank']:>3} of {r['rows']}{flag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
