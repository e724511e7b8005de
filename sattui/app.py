"""The Textual app: screens over one Session, redrawn by a timer at a modest rate.

Threads: the Session samples in its own threads and never touches the UI; after each
batch its ``on_update`` posts a :class:`SessionUpdated` message (``post_message`` is
thread-safe and, unlike ``call_from_thread``, does not make the sampler wait for the UI
loop). The UI redraws on a ``set_interval`` timer (2 Hz by default; 2–4 Hz reads as live),
and only when something changed: new samples, the clock moving the window, a key. Each
redraw copies what it reads of the session under the session's lock
(:meth:`~sattui.view.data.ViewData.take`), then bins and draws without it, once for
the visible screen.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import RenderableType
from textual._compositor import ChopsUpdate, LayoutUpdate
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.markup import escape as escape_markup
from textual.message import Message
from textual.screen import Screen

from sattui.screens.card import CardScreen
from sattui.screens.help import HelpScreen
from sattui.screens.main import MainScreen
from sattui.screens.sattui_screen import SattuiScreen
from sattui.screens.stack_top import StacksScreen
from sattui.screens.workers import WorkersScreen
from sattui.states import strip_css
from sattui.textsafe import clean
from sattui.view import fmt
from sattui.view.binning import BinCache
from sattui.view.data import ViewData
from sattui.view.lines import columns_for
from sattui.view.status_lines import ViewState
from sattui.widgets.cell_diff import CellDiffUpdate, ScreenCells

if TYPE_CHECKING:
    from sattui.session import Session

ZOOMS_S = (30.0, 60.0, 120.0, 300.0, 900.0, 1800.0, 3600.0)
DEFAULT_WINDOW_S = 60.0
DEFAULT_REDRAW_HZ = 2.0
LIVE_STEP_S = 2.0  # a live view's end moves in steps of this (see view_end)


class SessionUpdated(Message):
    """Posted from the session's sampling thread after each batch of samples."""


class SattuiApp(App[int]):
    # Absolute, so that a subclass defined elsewhere (bench/tui_frame.py) finds it too.
    CSS_PATH = str(Path(__file__).with_name("app.tcss"))
    # The state strip's colours live with the states' letters (one home: sattui/states.py).
    CSS = strip_css()
    TITLE = "sattui"
    ENABLE_COMMAND_PALETTE = True

    # The help screen lists these (their tooltips) itself: a pair sharing a tooltip is one line.
    BINDINGS = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "help", key_display="?", tooltip="this help"),
        Binding("w", "workers", "workers", tooltip="workers: every process of the trainer's tree, CPU, state and I/O"),
        Binding("s", "stacks", "stacks", tooltip="stacks: main-thread functions by share of samples, per state"),
        Binding("p", "pause", "pause", tooltip="pause the view (sampling goes on); p again follows now"),
        # One footer entry for the pair: 80 columns hold no more.
        Binding("left_square_bracket", "zoom(-1)", "zoom", key_display="[ ]",
                tooltip="zoom the time window in ([) / out (]): 30s 1m 2m 5m 15m 30m 1h"),
        Binding("right_square_bracket", "zoom(1)", "zoom out", key_display="]", show=False,
                tooltip="zoom the time window in ([) / out (]): 30s 1m 2m 5m 15m 30m 1h"),
        # priority: a focused scroll view would take ← → for sideways scrolling it never needs.
        Binding("left", "scrub(-1)", "time", key_display="← →", priority=True,
                tooltip="move the view back / forward in time (live: pauses; replay: the cursor)"),
        Binding("right", "scrub(1)", "forward in time", key_display="→", show=False, priority=True,
                tooltip="move the view back / forward in time (live: pauses; replay: the cursor)"),
        Binding("space", "play", "play", key_display="␣", tooltip="replay: play / pause"),
        Binding("r", "pick_rank", "rank",
                tooltip="pick a rank for the stacks and workers screens (r again: the next; all ranks first)"),
    ]

    def __init__(self, session: Session, *, redraw_hz: float = DEFAULT_REDRAW_HZ,
                 window_s: float = DEFAULT_WINDOW_S, show_clock: bool = True, start_session: bool = True) -> None:
        super().__init__()
        self.session = session
        self.redraw_hz = redraw_hz
        self.window_s = window_s
        self.show_clock = show_clock
        self.start_session = start_session
        self.paused_at: float | None = None  # live: the frozen end of the view
        self.rank_pid: int | None = None  # the rank picked (its pid); None: all ranks
        self._ranks: list[tuple[int, int | None]] = []
        self.cache = BinCache()
        self._data: ViewData | None = None  # the last redraw's: the next copies only what came since
        self._dirty = True
        self._last_sig: Any = None
        self._last_tick = time.monotonic()
        self.redraws = 0
        self.updates = 0
        self.first_frame_at: float | None = None
        # What the terminal shows: each frame writes only the cells that changed (see
        # sattui/widgets/cell_diff.py; bench/terminal_bytes.py measures it).
        self.screen_cells = ScreenCells()

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def live(self) -> bool:
        return self.session.live

    def first_screen(self) -> Screen:
        """The screen the app opens on (``sattui cluster``'s app opens on its hosts)."""
        return MainScreen()

    def on_mount(self) -> None:
        # Back from a suspend the terminal was someone else's: write every cell again.
        self.app_resume_signal.subscribe(self, lambda _app: self.screen_cells.forget())
        self.push_screen(self.first_screen())
        if self.start_session:
            self.session.start()
        self.set_interval(1.0 / self.redraw_hz, self._on_timer, name="redraw")
        self.call_after_refresh(self._first_frame)

    def _first_frame(self) -> None:
        self.redraw(True)
        self.call_after_refresh(self._painted)

    def _painted(self) -> None:
        # After the first redraw's refresh: the first full frame (bench/tui_frame.py).
        if self.first_frame_at is None:
            self.first_frame_at = time.monotonic()
            self.on_first_frame()

    def on_first_frame(self) -> None:
        """Hook for benchmarks and tests; nothing to do in the app itself."""

    def _display(self, screen: Screen, renderable: RenderableType | None) -> None:
        # Textual's one door to the terminal: its updates go out as cell differences.
        if isinstance(renderable, (ChopsUpdate, LayoutUpdate)) and not self.is_inline:
            renderable = CellDiffUpdate(renderable, self.screen_cells, self.size.width, self.size.height)
        super()._display(screen, renderable)

    def on_session_updated(self, _msg: SessionUpdated) -> None:
        self._dirty = True
        self.updates += 1

    def _on_timer(self) -> None:
        now = time.monotonic()
        dt, self._last_tick = now - self._last_tick, now
        if self.session.playing:
            self.session.tick(dt)
            self._dirty = True
        self.redraw()

    # -- the view -------------------------------------------------------------------------

    def view_end(self) -> float:
        if self.live and self.paused_at is not None:
            return self.paused_at
        now = float(self.session.now())
        if self.live:
            # The view's end moves in steps: every step scrolls each strip, and the cells
            # that moved are written again (bench/terminal_bytes.py). Samples arrive about
            # once a second and py-spy's every two, so a step is at least LIVE_STEP_S; and
            # it is a whole number of the charts' buckets, so every step scrolls the
            # picture by the same columns (steps of 2 s over 0.43-s buckets moved it 4
            # and 5 columns by turns) and the axis needs no rounding of its own.
            step_s = self.live_step_s()
            return math.floor(now / step_s) * step_s
        return now

    def live_step_s(self) -> float:
        """How far a live view's end moves at a time: whole buckets of the charts, at
        least LIVE_STEP_S."""
        bucket_s = self.window_s / columns_for(self.size.width).body if self.size.width else 0.0
        return bucket_s * math.ceil(LIVE_STEP_S / bucket_s - 1e-9) if bucket_s > 0 else LIVE_STEP_S

    def view_state(self) -> ViewState:
        return ViewState(window_s=self.window_s, paused=self.live and self.paused_at is not None,
                         replay=not self.live, playing=self.session.playing,
                         duration=self.session.duration, show_clock=self.show_clock)

    def redraw(self, force: bool = False) -> None:
        """Read the session once and hand that to the visible screen (if it is ours)."""
        if not self.screen_stack:
            # Quitting: Textual empties the stack before the redraw timer stops, and a tick
            # in between would raise ScreenStackError (seen once in CI).
            return
        screen = self.screen
        if not isinstance(screen, SattuiScreen):
            return
        t_end = self.view_end()
        # New live samples set _dirty (SessionUpdated); a replay's data never changes.
        sig = (id(screen), round(t_end, 1), self.window_s, self.paused_at, self.view_state(), self.size,
               self.rank_pid)
        if not force and not self._dirty and sig == self._last_sig:
            return
        self._dirty = False
        self._last_sig = sig
        # The sampler thread appends under this lock, and reading a ring without it could
        # meet a half-appended one: the lock is held to copy what this redraw reads (the
        # series around the window, the header, the newest findings; of each series only
        # the samples new since the last redraw, as a rule), and let go before the binning
        # and drawing, which take far longer (bench/tui_frame.py).
        with self._locked():
            data = self._data = ViewData.take(self.session, t_end, self.window_s, self.cache, span_s=screen.SPAN_S,
                                              rank_pid=self.rank_pid, previous=self._data)
        try:
            self._note_ranks(data)
            screen.refresh_view(data, self.view_state())
        except NoMatches:
            # A resize can land between a screen's push and its compose: draw next tick.
            self._dirty = True
            return
        self.redraws += 1

    def _locked(self) -> threading.RLock:
        return self.session.lock

    def _note_ranks(self, data: ViewData) -> None:
        ranks = data.ranks
        if (len(ranks) > 1) != (len(self._ranks) > 1):
            self.refresh_bindings()  # the rank key shows in the footer only where there are ranks
        self._ranks = ranks

    # -- actions --------------------------------------------------------------------------

    def _main_depth(self) -> int:
        """Screens up to and including the main screen (Textual keeps a default one below)."""
        for i, scr in enumerate(self.screen_stack):
            if isinstance(scr, MainScreen):
                return i + 1
        return len(self.screen_stack)

    def _open(self, screen: Screen) -> None:
        # Keep the stack shallow: every drill-down sits directly on the main screen, so
        # Esc always leads back there.
        depth = self._main_depth()
        while len(self.screen_stack) > depth + 1:
            self.pop_screen()
        if len(self.screen_stack) == depth + 1:
            self.switch_screen(screen)
        else:
            self.push_screen(screen)

    def action_go_back(self) -> None:
        if len(self.screen_stack) > self._main_depth():
            self.pop_screen()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self._open(HelpScreen())

    def action_workers(self) -> None:
        if not isinstance(self.screen, WorkersScreen):
            self._open(WorkersScreen())

    def action_stacks(self) -> None:
        if not isinstance(self.screen, StacksScreen):
            self._open(StacksScreen())

    def action_open_card(self, card: int) -> None:
        with self._locked():
            cards = [c.get("card") for c in (self.session.header or {}).get("cards") or []]
            cards += [k for k in self.session.timeline.keys("card") if k not in cards]
        if card not in cards:
            self.notify(f"no card {card}", severity="warning")
            return
        if isinstance(self.screen, CardScreen) and self.screen.card == card:
            return
        self._open(CardScreen(card))

    def action_zoom(self, step: int) -> None:
        i = min(range(len(ZOOMS_S)), key=lambda k: abs(ZOOMS_S[k] - self.window_s))
        self.window_s = ZOOMS_S[max(0, min(len(ZOOMS_S) - 1, i + step))]
        self.notify(f"window {fmt.window(self.window_s)}", timeout=1.5)
        self.redraw(True)

    def action_pause(self) -> None:
        if not self.live:
            self.action_play()
            return
        self.paused_at = None if self.paused_at is not None else float(self.session.now())
        self.redraw(True)

    def action_play(self) -> None:
        if not self.live:
            self.session.toggle_play()
            self._last_tick = time.monotonic()
            self.redraw(True)

    def action_pick_rank(self) -> None:
        if len(self._ranks) <= 1:
            self.notify("one trainer process: no rank to pick", timeout=2)
            return
        order = [None, *(pid for pid, _ in self._ranks)]
        i = order.index(self.rank_pid) if self.rank_pid in order else 0
        self.rank_pid = order[(i + 1) % len(order)]
        rank = dict(self._ranks).get(self.rank_pid) if self.rank_pid is not None else None
        self.notify("all ranks" if self.rank_pid is None else
                    f"rank {rank}" if rank is not None else f"pid {self.rank_pid}", timeout=1.5)
        self.redraw(True)

    def show_span(self, t0: float, t1: float) -> None:
        """Move the view so ``[t0, t1]`` is in it, a little right of the middle (or at the
        right edge when that is now): live, the view pauses there, so the span stays in
        view; over a recording, the cursor goes there (and stops)."""
        end = max(t1 + 1.0, (t0 + t1) / 2 + self.window_s * 0.4)
        if not self.live:
            if self.session.playing:
                self.session.toggle_play()
            self.session.step(end - float(self.session.now()))
        else:
            self.paused_at = max(0.0, min(end, float(self.session.now())))
        self.redraw(True)

    def action_scrub(self, direction: int) -> None:
        step = max(1.0, self.window_s / 12)
        if not self.live:
            self.session.step(direction * step)
        else:
            now = float(self.session.now())
            t = (self.paused_at if self.paused_at is not None else now) + direction * step
            self.paused_at = None if t >= now else max(0.0, t)
        self.redraw(True)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Space only means something over a recording: keep it out of a live footer.
        if action == "play" and self.live:
            return False
        if action == "pick_rank" and len(self._ranks) <= 1:
            return False
        # The key of the screen you are on would do nothing: keep it out of the footer.
        here = {"workers": WorkersScreen, "stacks": StacksScreen, "help": HelpScreen}.get(action)
        if here is not None and isinstance(self.screen, here):
            return False
        return True

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Help", "Keys and how to read the strips", self.action_help)
        yield SystemCommand("Workers", "Every process of the trainer: CPU, state, I/O", self.action_workers)
        yield SystemCommand("Stacks", "Main-thread functions by share of samples", self.action_stacks)
        yield SystemCommand("Pause / follow", "Freeze the view (sampling goes on)", self.action_pause)
        yield SystemCommand("Zoom in", "Shorter time window", lambda: self.action_zoom(-1))
        yield SystemCommand("Zoom out", "Longer time window", lambda: self.action_zoom(1))
        if len(self._ranks) > 1:
            yield SystemCommand("Next rank", "Show the next rank on the stacks and workers screens",
                                self.action_pick_rank)
        yield SystemCommand("Back in time", "Move the view back", lambda: self.action_scrub(-1))
        yield SystemCommand("Forward in time", "Move the view forward", lambda: self.action_scrub(1))
        if not self.live:
            yield SystemCommand("Play / pause replay", "Start or stop the replay cursor", self.action_play)
        for info in (self.session.header or {}).get("cards") or []:
            c = info.get("card")
            # The palette reads help as markup: the tool's card name is escaped twice over.
            name = escape_markup(clean(info.get("name") or "?", 60))
            yield SystemCommand(f"Card {c}", f"All metrics of card {c} ({name})",
                                lambda c=c: self.action_open_card(c))

    # -- screenshots: Textual's own writers open(path, "w"), following any link there

    def save_screenshot(self, filename: str | None = None, path: str | None = None,
                        time_format: str | None = None) -> str:
        """Textual's ``save_screenshot``, writing a new file only (sattui/safefile.py)."""
        from datetime import datetime

        from sattui.safefile import write_file

        name = filename or f"{self.title}_{datetime.now().strftime(time_format or '%Y-%m-%dT%H_%M_%S')}.svg"
        target = os.path.expanduser(os.path.join(path or "./", name))
        write_file(target, self.export_screenshot())
        return target

    def deliver_screenshot(self, filename: str | None = None, path: str | None = None,
                           time_format: str | None = None) -> str | None:
        """The palette's "Screenshot": saved to the downloads folder, as Textual does, but
        created new (never through a link nor over a file); the outcome is a notice."""
        from platformdirs import user_downloads_path

        from sattui.errors import SattuiError

        try:
            target = self.save_screenshot(filename, str(path or user_downloads_path()), time_format)
        except SattuiError as e:
            self.notify(escape_markup(clean(e, 300)), title="Screenshot", severity="error")
            return None
        self.notify(escape_markup(clean(f"saved to {target}", 300)), title="Screenshot")
        return None


def connect(app: SattuiApp, session: Session) -> None:
    """Point a live session's ``on_update`` (called on its sampling thread) at the app."""
    if session.live:
        # A thread-safe post, never a UI call: the sampler must not wait for the screen.
        def on_update() -> None:
            app.post_message(SessionUpdated())
        session.on_update = on_update


def run_app(session: Session, **kwargs: Any) -> int:
    """Run the monitor over ``session`` until the user quits.

    Starts the session (its sampling threads) once the UI is up and stops it on the way
    out. Returns the trainer's exit code when the session started the trainer and it
    has exited, else 0.
    """
    app = SattuiApp(session, **kwargs)
    connect(app, session)
    try:
        app.run()
    finally:
        session.stop()
    code = None
    try:
        code = session.status().trainer_exit_code
    except Exception:
        code = None
    return int(code) if isinstance(code, int) else 0

