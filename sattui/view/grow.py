"""Sharing a screen's spare rows out among its charts (no Textual here).

A screen first lays out every chart at its least height; what the window has left is
handed out here, group by group in the screen's order of what matters most. A group is
a kind of chart (the cards' utilization, the processes' CPU …) with one member per chart
and a cap on each member's extra rows. Within a group the rows go round one at a time,
so charts of one kind stay the same height; an ``even`` group only takes whole rounds
(eight cards grow together or not at all), the rest take what is left.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Group:
    members: tuple[Hashable, ...]
    cap: int  # extra rows a member may have in all, after this group
    even: bool = True
    # A member's own ceiling, below ``cap`` (a chart whose values never reach its upper
    # rows would draw them blank).
    most: Mapping[Hashable, int] | None = None

    def cap_of(self, member: Hashable) -> int:
        return self.cap if self.most is None else min(self.cap, self.most.get(member, self.cap))


def share_rows(spare: int, groups: Sequence[Group]) -> tuple[dict[Hashable, int], int]:
    """``(extra rows per member, rows left over)`` for ``spare`` rows handed out to
    ``groups`` in order. A member named in several groups keeps growing towards the
    later group's cap (a first group to 4 rows, a later one to 8)."""
    extra: dict[Hashable, int] = {}
    left = max(0, spare)
    for g in groups:
        while left > 0:
            hungry = [m for m in g.members if extra.get(m, 0) < g.cap_of(m)]
            if not hungry or (g.even and len(hungry) > left):
                break
            for m in hungry[:left]:
                extra[m] = extra.get(m, 0) + 1
            left -= min(len(hungry), left)
    return extra, left
