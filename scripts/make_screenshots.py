"""Regenerates screenshots/: an SVG and a PNG of every screen, at 80×24 and 200×50
(and the main screen under NO_COLOR at 80×24), and the main and stacks screens of an
8-rank job (``ranks-``; the stacks screen with rank 5 picked).

The screens are drawn over the deterministic fixture recording
(tests/fixtures/recordings/ui_fixture.jsonl: an input-bound trainer on a SIMULATED
card) with the replay cursor at 90 s, so the pictures only change when the UI does.

SVG comes from Textual's own ``export_screenshot``. PNG is made with cairosvg (``pip
install cairosvg``; it needs the system's libcairo2); where cairosvg is missing,
``rsvg-convert`` (apt ``librsvg2-bin``) is used instead. Rich's SVG asks for the "Fira
Code" font, which a bare machine lacks and fontconfig then replaces with a
*proportional* font (the strips come out misaligned); the PNGs are therefore drawn
with "DejaVu Sans Mono" (apt ``fonts-dejavu-core``), which has the block and box glyphs,
one glyph per cell (see ``_one_text_per_cell``).

Run:  python scripts/make_screenshots.py [--out screenshots] [--cursor 90]
"""

from __future__ import annotations

import argparse
import asyncio
import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from rich.cells import cell_len

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sattui.safefile import write_file  # noqa: E402  (after the path is set)

FIXTURE = ROOT / "tests" / "fixtures" / "recordings" / "ui_fixture.jsonl"
# An 8-rank torchrun job (hand-made too, tests/fixtures/recordings/make_ranks_fixture.py),
# drawn at its end: the "ranks-" screens.
RANKS_FIXTURE = FIXTURE.with_name("ranks_fixture.jsonl")
RANKS_CURSOR = 75.0
SIZES = ((80, 24), (200, 50))
# screen name -> keys pressed from the main screen
SCREENS = {"main": [], "card": ["enter"], "workers": ["w"], "stacks": ["s"], "help": ["question_mark"],
           "main-nocolor": [], "ranks-main": [], "ranks-stacks": ["r", "r", "r", "r", "r", "r", "s"]}
PNG_FONT = "DejaVu Sans Mono"
BRAILLE_FONT = "DejaVu Sans"  # has the Braille patterns DejaVu Sans Mono lacks


def replay_session(path: Path, cursor: float):
    """The real ReplaySession when sattui.session has it, else the tests' double."""
    try:
        from sattui.session import ReplaySession
    except ImportError:
        from tests.functional.doubles import ReplayDouble
        return ReplayDouble(str(path), cursor=cursor)
    s = ReplaySession(str(path))
    s.seek(cursor)
    if getattr(s, "playing", False):
        s.toggle_play()
    return s


async def shoot(path: Path, cursor: float, size: tuple[int, int], keys: list[str], no_color: bool = False) -> str:
    from sattui.app import SattuiApp

    old = os.environ.pop("NO_COLOR", None)
    if no_color:
        os.environ["NO_COLOR"] = "1"  # Textual reads it when the App is made
    try:
        app = SattuiApp(replay_session(path, cursor), show_clock=False)
    finally:
        os.environ.pop("NO_COLOR", None)
        if old is not None:
            os.environ["NO_COLOR"] = old
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        for k in keys:
            await pilot.press(k)
            await pilot.pause()
        app.redraw(True)
        await pilot.pause()
        return app.export_screenshot(title=f"sattui {size[0]}x{size[1]}")


PNG_SCALE = 1.5  # below the SVG's own size, thin glyphs at the last column get lost
_TEXT = re.compile(r'<text ([^>]*?)x="([0-9.]+)" ([^>]*?)textLength="([0-9.]+)"([^>]*)>([^<]*)</text>')


def _one_text_per_cell(m: re.Match) -> str:
    """Rich places each run of one style at its cell and relies on ``textLength`` to
    stretch it to the grid; cairosvg ignores textLength, so with any font whose advance is
    not exactly Rich's 0.61 em a long run (a bar of █) ends short of its neighbours. One
    <text> per cell puts every glyph on the grid whatever the font."""
    pre, x, mid, length, post, body = m.groups()
    chars = html.unescape(body)
    cells = cell_len(chars)
    if cells <= 1 and not any(_braille(ch) for ch in chars):
        return m.group(0)
    cw = float(length) / max(1, cells)
    out, col = [], 0
    for ch in chars:
        if ch != " " and ch != "\u00a0":
            # DejaVu Sans Mono has no Braille patterns (the dipped buckets' dots); a
            # terminal falls back to another font for them, and so does the picture.
            font = f' style="font-family: {BRAILLE_FONT}"' if _braille(ch) else ""
            out.append(f'<text {pre}x="{float(x) + col * cw:.2f}" {mid}textLength="{cw * cell_len(ch):.2f}"'
                       f'{post}{font}>{html.escape(ch)}</text>')
        col += cell_len(ch)
    return "".join(out)


def _braille(ch: str) -> bool:
    return "\u2800" <= ch <= "\u28ff"


def for_png(svg: str) -> str:
    svg = svg.replace("font-family: Fira Code, monospace", f"font-family: {PNG_FONT}, monospace") \
             .replace('font-family: "Fira Code"', f'font-family: "{PNG_FONT}"')
    return _TEXT.sub(_one_text_per_cell, svg)


def to_png(svg: str, out: Path) -> str:
    m = re.search(r'viewBox="0 0 ([0-9.]+) ', svg)
    width_px = int(float(m.group(1)) * PNG_SCALE) if m else 1600
    svg = for_png(svg)
    try:
        import cairosvg
    except ImportError:
        exe = shutil.which("rsvg-convert")
        if exe is None:
            raise SystemExit("no SVG→PNG converter: pip install cairosvg, or apt install librsvg2-bin") from None
        png = subprocess.run([exe, "-w", str(width_px)], input=svg.encode(), check=True,
                             stdout=subprocess.PIPE).stdout
        write_file(str(out), png, force=True)
        return "rsvg-convert"
    write_file(str(out), cairosvg.svg2png(bytestring=svg.encode(), output_width=width_px), force=True)
    return "cairosvg"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "screenshots"))
    ap.add_argument("--recording", default=str(FIXTURE))
    ap.add_argument("--cursor", type=float, default=90.0)
    ap.add_argument("--only", nargs="*", help="screen names to make (default: all)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    used = set()
    for w, h in SIZES:
        for name, keys in SCREENS.items():
            if args.only and name not in args.only:
                continue
            if name.endswith("-nocolor") and w != 80:
                continue  # one monochrome picture is enough to show NO_COLOR reads
            ranks = name.startswith("ranks-")
            svg = asyncio.run(shoot(RANKS_FIXTURE if ranks else Path(args.recording),
                                    RANKS_CURSOR if ranks else args.cursor, (w, h), keys,
                                    no_color=name.endswith("-nocolor")))
            stem = f"{name}_{w}x{h}"
            # Replacing the old pictures is the job; a link there is still never followed.
            write_file(str(out / f"{stem}.svg"), svg, force=True)
            used.add(to_png(svg, out / f"{stem}.png"))
            print(f"{out / stem}.svg + .png")
    print(f"PNG via {', '.join(sorted(used))}, font {PNG_FONT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
