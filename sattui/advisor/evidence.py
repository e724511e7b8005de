"""Small helpers that turn samples into evidence a person can act on (file:line, shares)."""

from __future__ import annotations

from collections.abc import Sequence

from sattui.model import Frame, StackSample
from sattui.trainer.states import is_user_frame, read_source_line


def short_file(filename: str) -> str:
    """The last two path components: enough to find the file, short enough to read."""
    norm = filename.replace("\\", "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in norm:
            return norm.rsplit(marker, 1)[1]
    parts = norm.rsplit("/", 2)
    return "/".join(parts[-2:]) if len(parts) > 2 else norm


def frame_where(f: Frame) -> str:
    where = short_file(f.filename)
    return f"{where}:{f.line} {f.name}" if f.line is not None else f"{where} {f.name}"


def user_frame(frames: Sequence[Frame]) -> Frame | None:
    """The innermost frame in the user's own code (where they would change something)."""
    for f in frames:
        if is_user_frame(f.filename):
            return f
    return None


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
        row: dict[str, object] = {"site": frame_where(f) if f else "?", "share": round(v / picked * of_share, 4)}
        if source and f is not None and f.line is not None:
            text = read_source_line(f.filename, f.line)
            if text:
                row["source"] = text[:120]
        out.append(row)
    return out
