"""Sessions: what the full-screen monitor watches, live or replayed (never imports Textual).

Three modules, one job each: :mod:`.session` (the base class and its status line),
:mod:`.live` (a trainer watched now) and :mod:`.replay` (a recording with a cursor).

A :class:`Session` owns a :class:`Timeline` (filled through a :class:`Feed`), the
recording header, and a status line's worth of facts (:class:`SessionStatus`). The UI
reads windows ``[t0, t1)`` of the timeline with ``now()`` as the right edge of its time
axis, and never samples anything itself.

* :class:`LiveSession` runs the same :class:`sattui.engine.Engine` as ``sattui record``
  in a background thread: process tree, py-spy chunks and card samples go into the Feed
  (and into a recording when ``record_path`` is given), and ``on_update()`` is called
  after every batch, from that thread (the UI posts itself a message from it).
* :class:`ReplaySession` loads a whole recording and moves a cursor through it.

Threads: the sampling thread appends to the timeline while the UI thread reads it. Hold
``session.lock`` while reading windows: it is held for every batch appended, so a reader
never sees a half-appended ring.
"""

from __future__ import annotations

from sattui.session.live import LiveSession
from sattui.session.replay import ReplaySession
from sattui.session.session import Session, SessionStatus, after

__all__ = ["LiveSession", "ReplaySession", "Session", "SessionStatus", "after"]
