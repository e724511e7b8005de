"""The stack sampler's statuses: the one home of what each means, how the screens word it,
and which recording event records it.

The py-spy sampler (sattui/trainer/stacks.py) moves through these; a live session reads
the sampler's status, a replay rebuilds it from the recording's events (:func:`from_event`),
the header says it in a word and, for the ones that mean "no stacks", in a line with the
fix; the advisor stops guessing causes that need stacks once one of those events came.
"""

from __future__ import annotations

from enum import Enum

PTRACE_FIX = ("run sattui as root, or as the trainer's user with `sudo sysctl kernel.yama.ptrace_scope=0`; "
              "in a container grant CAP_SYS_PTRACE (`docker run --cap-add SYS_PTRACE`)")


class SamplerStatus(str, Enum):
    word: str
    loudness: str
    problem: str | None
    event: str | None
    terminal: bool

    def __new__(cls, value: str, word: str, loudness: str, problem: str | None, event: str | None,
                terminal: bool) -> SamplerStatus:
        obj = str.__new__(cls, value)
        obj._value_ = value
        obj.word = word            # the header's word for it
        obj.loudness = loudness    # the header's style: dim, warn, bad
        obj.problem = problem      # a header line of its own, for statuses that mean "no stacks"
        obj.event = event          # the recording event that records it
        obj.terminal = terminal    # the sampler will not sample again
        return obj

    STARTING = ("starting", "starting", "dim", None, None, False)
    SAMPLING = ("sampling", "on", "value", None, None, False)
    DENIED = ("denied", "no permission", "bad", "py-spy may not attach (no ptrace permission)",
              "permission_denied", True)
    NOT_PYTHON = ("not_python", "not Python", "warn", "the trainer is not a Python process: no stacks",
                  "not_python", True)
    MISSING = ("missing", "not installed", "warn", "py-spy is not installed: no stacks", "sampler_missing", True)
    FAILING = ("failing", "failing", "bad", "py-spy keeps failing", "sampler_failing", True)
    TARGET_GONE = ("target_gone", "target gone", "dim", None, "sampler_stopped", True)
    STOPPED = ("stopped", "stopped", "dim", None, None, False)

    def __str__(self) -> str:
        return self.value

    @property
    def no_stacks(self) -> bool:
        """Stacks will not come (the advisor must not guess causes that need them)."""
        return self.problem is not None


_BY_EVENT = {s.event: s for s in SamplerStatus if s.event is not None}
# Events after which the trainer's stacks will not come (docs/format.md "event").
NO_STACK_EVENTS = tuple(s.event for s in SamplerStatus if s.no_stacks and s.event is not None)


def from_event(event_type: str) -> SamplerStatus | None:
    """The status a recording event leaves the sampler in, or None for other events."""
    return _BY_EVENT.get(event_type)
