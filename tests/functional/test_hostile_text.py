"""Every screen over a recording whose names carry terminal escapes: what is drawn holds
no control character and shows the escaped form (sattui/textsafe.py), and the
screenshot writers never follow a planted link (sattui/safefile.py).

The real-terminal proof (tmux pane title, a real trainer) is
tests/e2e/test_security.py; this one visits every screen and the palette in a few
seconds, deterministically.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import stat

import pytest
from rich.console import Console

from sattui.app import SattuiApp
from sattui.screens.card import CardScreen
from sattui.screens.stack_top import StacksScreen
from sattui.screens.workers import WorkersScreen
from sattui.session import ReplaySession
from tests.functional.conftest import CURSOR, FIXTURE

OSC = "\x1b]0;PWNED\x07"
CARD = "\x1b]0;CARD\x07Simulated\u202eGPU\n"
PROC = "\x1b[31mpt_data\nworker"
FUNC = "\x1b]0;FUNC\x07Queue.get\n"
FILE = "/opt/\x1b[2Jqueue.py"
EVENT = "card 0 unreadable: tool said \x1b]52;c;cGF5bG9hZA==\x07"
SIZE = (160, 48)
# What the screen may hold: printable text and the newlines between rows.
CONTROLS = [chr(c) for c in range(0x20) if c != 0x0A] + [chr(0x7F)] + [chr(c) for c in range(0x80, 0xA0)] + \
    ["\u202e", "\u2066", "\u200b"]


@pytest.fixture
def hostile(tmp_path) -> ReplaySession:
    out = []
    for line in FIXTURE.read_text().splitlines():
        r = json.loads(line)
        if r["kind"] == "header":
            r["cmdline"] = ["python", "train.py", OSC, "a\nb\tc"]
            r["cards"][0]["name"] = CARD
        elif r["kind"] == "proc" and r["role"] == "worker":
            r["name"] = PROC
        elif r["kind"] == "stacks":
            r["frames"] = [[FUNC, FILE, n] if name == "Queue.get" else [name, f, n] for name, f, n in r["frames"]]
            r["threads"] = {k: v + OSC for k, v in r["threads"].items()}
        elif r["kind"] == "finding":
            r["summary"] = r["summary"] + " " + OSC
            r["evidence"]["top_stack"] = FUNC
        out.append(r)
    out.append({"kind": "event", "t": CURSOR - 1, "type": "card_unreadable", "message": EVENT, "card": 0})
    out.sort(key=lambda r: (r["kind"] != "header", r.get("t", 0)))
    p = tmp_path / "hostile.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in out))
    s = ReplaySession(str(p))
    s.seek(CURSOR)
    return s


def _screen_text(app: SattuiApp) -> str:
    # Every cell of the screen as text, composed as Textual's export_screenshot does.
    console = Console(width=SIZE[0], height=SIZE[1], file=io.StringIO(), record=True, force_terminal=True,
                      color_system=None, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


def _assert_clean(text: str, where: str) -> None:
    bad = sorted({repr(c) for c in text if c in CONTROLS})
    assert not bad, f"{where}: raw control characters on screen: {bad}"


async def _settle(pilot) -> None:
    await pilot.pause()
    pilot.app.redraw(True)
    await pilot.pause()


async def _until(pilot, cond, tries: int = 40) -> None:
    """Redraw until ``cond()`` holds (a loaded box may take several frames to lay a
    screen out); the caller's assertions then say what is missing if it never does."""
    for _ in range(tries):
        if cond():
            return
        await asyncio.sleep(0.05)
        await _settle(pilot)


async def test_every_screen_shows_hostile_names_escaped(hostile):
    app = SattuiApp(hostile, show_clock=False)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(pilot)
        main = _screen_text(app)
        _assert_clean(main, "main")
        assert "'\\x1b]0;PWNED\\x07' 'a\\nb\\tc'" in main  # the command line, flattened
        assert "0 SIMULATED \\x1b]" in main  # the card's label, cut to its column
        assert "card unreadable: card 0 unreadable: tool said \\x1b]52;c;" in main  # the OSC 52 event
        await pilot.press("w")
        await _settle(pilot)
        assert isinstance(app.screen, WorkersScreen)
        workers = _screen_text(app)
        _assert_clean(workers, "workers")
        assert "\\x1b[31mpt_data\\nworker" in workers
        await pilot.press("s")
        await _settle(pilot)
        await _until(pilot, lambda: isinstance(app.screen, StacksScreen) and "Queue.get" in _screen_text(app))
        assert isinstance(app.screen, StacksScreen)
        stacks = _screen_text(app)
        _assert_clean(stacks, "stacks")
        assert "\\x1b]0;FUNC\\x07Queue.get\\n (" in stacks and "/\\x1b[2Jqueue.py:" in stacks
        await pilot.press("escape", "enter")
        await _settle(pilot)
        assert isinstance(app.screen, CardScreen)
        card = _screen_text(app)
        _assert_clean(card, "card")
        assert "\\x1b]0;CARD\\x07Simulated\\u202eGPU\\n" in card
        helps = [c.help for c in app.get_system_commands(app.screen) if c.title.startswith("Card ")]
        assert helps and all(not any(ch in CONTROLS for ch in h) for h in helps), helps


def _victim(tmp_path):
    v = tmp_path / "victim"
    v.write_text("precious\n")
    return v


async def test_screenshots_never_follow_a_planted_link_nor_replace_a_file(hostile, tmp_path):
    from sattui.safefile import OutputError

    victim = _victim(tmp_path)
    (tmp_path / "shot.svg").symlink_to(victim)
    (tmp_path / "old.svg").write_text("old\n")
    app = SattuiApp(hostile, show_clock=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        with pytest.raises(OutputError, match="symbolic link"):
            app.save_screenshot("shot.svg", str(tmp_path))
        with pytest.raises(OutputError, match="the file exists"):
            app.save_screenshot("old.svg", str(tmp_path))
        # The palette's "Screenshot" (deliver_screenshot): refused with a notice, not a crash.
        app.deliver_screenshot("shot.svg", str(tmp_path))
        await pilot.pause()
        assert any("symbolic link" in str(n.message) for n in app._notifications)
        app.deliver_screenshot("new.svg", str(tmp_path))
        await pilot.pause()
    assert victim.read_text() == "precious\n"
    assert (tmp_path / "shot.svg").is_symlink() and (tmp_path / "old.svg").read_text() == "old\n"
    new = tmp_path / "new.svg"
    assert new.read_text().startswith("<svg") and stat.S_IMODE(os.stat(new).st_mode) == 0o600
