"""Small helpers that turn samples into evidence a person can act on (file:line, shares)."""

from __future__ import annotations

from collections.abc import Sequence

from sattui.frames import frame_label, read_source_line, user_frame
from sattui.model import Frame, StackSample


def top_sites(samples: Sequence[StackSample], of_share: float, limit: int = 3,
              leaf: bool = False, source: bool = False) -> list[dict[str, object]]:
    """Where ``samples`` spent their time: grouped by innermost user frame (or by leaf).

    ``samples`` may be thinned; ``of_share`` is the share of main-thread time they stand
    for, so each site's share is of the whole main thread. ``source`` adds the line's
    text when it can be read on this machine."""
    secs: dict[Frame | None, float] = {}
    seen: dict[int, Frame | None] = {}  # samples of one chunk share their stack tuple
    for s in samples:
        k = id(s.frames)
        if k not in seen:
            seen[k] = (s.frames[0] if s.frames else None) if leaf else user_frame(s.frames)
        key = seen[k]
        secs[key] = secs.get(key, 0.0) + s.dur
    picked = sum(secs.values()) or 1.0
    out: list[dict[str, object]] = []
    for f, v in sorted(secs.items(), key=lambda kv: -kv[1])[:limit]:
        row: dict[str, object] = {"site": frame_label(f) if f else "?", "share": round(v / picked * of_share, 4)}
        if source and f is not None and f.line is not None:
            text = read_source_line(f.filename, f.line)
            if text:
                row["source"] = text[:120]
        out.append(row)
    return out
