"""Functions by share of the main thread's samples, like ``py-spy top`` (no Textual here).

"own": the function is the innermost frame (the thread is in it); "total": the function is
anywhere on the stack (counted once per sample, recursion or not). Samples are py-spy
spans, weighted by how long they held (``dur``), so the shares are shares of time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sattui.frames import frame_label
from sattui.model import StackSample


@dataclass(slots=True)
class FunctionRow:
    label: str
    own_s: float = 0.0
    total_s: float = 0.0
    states: dict[str, float] | None = None

    @property
    def state(self) -> str | None:
        """The state this function's own time is mostly in."""
        return max(self.states.items(), key=lambda kv: kv[1])[0] if self.states else None


def top_functions(samples: Iterable[StackSample], t0: float, t1: float, state: str | None = None,
                  limit: int = 200) -> tuple[float, list[FunctionRow]]:
    """Seconds sampled in ``[t0, t1)`` (startup left out) and the functions, by own time."""
    rows: dict[str, FunctionRow] = {}
    total = 0.0
    for s in samples:
        if s.state == "startup" or (state is not None and s.state != state):
            continue
        dur = min(s.t + s.dur, t1) - max(s.t, t0)
        if dur <= 0 or not s.frames:
            continue
        total += dur
        labels = [frame_label(f) for f in s.frames]
        own = labels[0]
        r = rows.get(own) or rows.setdefault(own, FunctionRow(own))
        r.own_s += dur
        if r.states is None:
            r.states = {}
        act = s.state or "other"
        r.states[act] = r.states.get(act, 0.0) + dur
        for lab in set(labels):
            rr = rows.get(lab) or rows.setdefault(lab, FunctionRow(lab))
            rr.total_s += dur
    ranked = sorted(rows.values(), key=lambda r: (-r.own_s, -r.total_s, r.label))
    return total, ranked[:limit]


def states_present(samples: Iterable[StackSample]) -> list[str]:
    seen: dict[str, float] = {}
    for s in samples:
        if s.state and s.state != "startup":
            seen[s.state] = seen.get(s.state, 0.0) + s.dur
    return [k for k, _ in sorted(seen.items(), key=lambda kv: -kv[1])]
