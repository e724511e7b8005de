"""The stack sampler's statuses: the one home of what each means, how the screens word it,
and which recording event records it.

The py-spy sampler (sattui/trainer/stacks.py) moves through these; a live session reads
the sampler's status, a replay rebuilds it from the recording's events (:func:`from_event`),
the header says it in a word and, for the ones that mean "no stacks", in a line with the
fix; the advisor stops guessing causes that need stacks once one of those events came.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

PTRACE_FIX = ("run sattui as root, or as the trainer's user with `sudo sysctl kernel.yama.ptrace_scope=0`; "
              "in a container grant CAP_SYS_PTRACE (`docker run --cap-add SYS_PTRACE`)")


class SamplerStatus(str, Enum):
    STARTING = "starting"
    SAMPLING = "sampling"
    DENIED = "denied"
    NOT_PYTHON = "not_python"
    MISSING = "missing"
    FAILING = "failing"
    TARGET_GONE = "target_gone"
    STOPPED = "stopped"

    def __str__(self) -> str:
        return self.value

    @property
    def word(self) -> str:
        """The header's word for it."""
        return _SAY[self].word

    @property
    def loudness(self) -> str:
        """The header's style for it: dim, value, warn, bad."""
        return _SAY[self].loudness

    @property
    def problem(self) -> str | None:
        """A header line of its own, for the statuses that mean "no stacks"."""
        return _SAY[self].problem

    @property
    def event(self) -> str | None:
        """The recording event that records it."""
        return _SAY[self].event

    @property
    def terminal(self) -> bool:
        """The sampler will not sample again."""
        return _SAY[self].terminal

    @property
    def no_stacks(self) -> bool:
        """Stacks will not come (the advisor must not guess causes that need them)."""
        return self.problem is not None


@dataclass(frozen=True)
class _Say:
    word: str
    loudness: str
    problem: str | None
    event: str | None
    terminal: bool


_SAY = {
    SamplerStatus.STARTING: _Say("starting", "dim", None, None, False),
    SamplerStatus.SAMPLING: _Say("on", "value", None, None, False),
    SamplerStatus.DENIED: _Say("no permission", "bad", "py-spy may not attach (no ptrace permission)",
                               "permission_denied", True),
    SamplerStatus.NOT_PYTHON: _Say("not Python", "warn", "the trainer is not a Python process: no stacks",
                                   "not_python", True),
    SamplerStatus.MISSING: _Say("not installed", "warn", "py-spy is not installed: no stacks", "sampler_missing",
                                True),
    SamplerStatus.FAILING: _Say("failing", "bad", "py-spy keeps failing", "sampler_failing", True),
    SamplerStatus.TARGET_GONE: _Say("target gone", "dim", None, "sampler_stopped", True),
    SamplerStatus.STOPPED: _Say("stopped", "dim", None, None, False),
}

_BY_EVENT = {s.event: s for s in SamplerStatus if s.event is not None}
# Events after which the trainer's stacks will not come (docs/format.md "event").
NO_STACK_EVENTS = tuple(s.event for s in SamplerStatus if s.no_stacks and s.event is not None)


def from_event(event_type: str) -> SamplerStatus | None:
    """The status a recording event leaves the sampler in, or None for other events."""
    return _BY_EVENT.get(event_type)
