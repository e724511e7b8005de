"""Records into the Timeline: the one path from samples (live or replayed) to windows.

Series keys in the Timeline:

========================  =================================  ===================
kind                      key                                item
========================  =================================  ===================
``card``                  card index                         ``CardSample``
``proc``                  pid (pin thread: its tid)          ``ProcSample``
``stack``                 pid of the sampled process         ``StackSample`` (main thread only)
``event``                 ``0``                              ``Event``
``finding``               ``0``                              ``Finding``
``host``                  ``0``                              ``HostSample``
``worker_stack``          pid of the DataLoader worker       ``WorkerStack``
========================  =================================  ===================

Records of a kind not listed here are left out (the reader has warned about them).

Only main-thread stack samples go to the Timeline: they carry the trainer's state and
are what the strips and rules read; other threads stay in the recording.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from sattui.findings import Finding
from sattui.model import CardSample, Event, Frame, HostSample, ProcSample, StackSample, WorkerStack
from sattui.recording import samples_from_record
from sattui.timeline import Timeline

_CARD_FIELDS = tuple(f.name for f in fields(CardSample))
_PROC_FIELDS = tuple(f.name for f in fields(ProcSample))
_HOST_FIELDS = tuple(f.name for f in fields(HostSample))
_EVENT_KEYS = ("kind", "t", "type", "message")


def card_from_record(rec: dict[str, Any]) -> CardSample:
    # The reader has checked each field's type (sattui/recording/schema.py). Positional
    # arguments in the dataclass's field order: no dict built per record.
    values: list[Any] = list(map(rec.get, _CARD_FIELDS))
    return CardSample(*values)


def proc_from_record(rec: dict[str, Any]) -> ProcSample:
    values: list[Any] = list(map(rec.get, _PROC_FIELDS))
    return ProcSample(*values)


def host_from_record(rec: dict[str, Any]) -> HostSample:
    values: list[Any] = list(map(rec.get, _HOST_FIELDS))
    return HostSample(*values)


def worker_stack_from_record(rec: dict[str, Any]) -> WorkerStack:
    return WorkerStack(t=float(rec["t"]), pid=int(rec["pid"]), state=str(rec["state"]),
                       frames=tuple(Frame(n, fn, ln) for n, fn, ln in rec["frames"]), active=rec.get("active"))


def event_from_record(rec: dict[str, Any]) -> Event:
    return Event(float(rec["t"]), str(rec.get("type")), str(rec.get("message") or ""),
                 {k: v for k, v in rec.items() if k not in _EVENT_KEYS})


class Feed:
    """Adds records (dicts, as in a recording) or live model objects to a Timeline."""

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline

    def add_record(self, rec: dict[str, Any]) -> None:
        kind = rec.get("kind")
        if kind == "card":
            self.add_card(card_from_record(rec))
        elif kind == "proc":
            self.add_proc(proc_from_record(rec))
        elif kind == "stacks":
            pid = int(rec["pid"])
            self.timeline.add_many("stack", pid, samples_from_record(rec, only_tid=pid))
        elif kind == "event":
            self.add_event(event_from_record(rec))
        elif kind == "finding":
            self.timeline.add("finding", 0, float(rec["t"]), Finding.from_record(rec))
        elif kind == "host":
            self.timeline.add("host", 0, float(rec["t"]), host_from_record(rec))
        elif kind == "worker_stack":
            ws = worker_stack_from_record(rec)
            self.timeline.add("worker_stack", ws.pid, ws.t, ws)

    def add_card(self, s: CardSample) -> None:
        self.timeline.add("card", s.card, s.t, s)

    def add_proc(self, s: ProcSample) -> None:
        self.timeline.add("proc", s.pid, s.t, s)

    def add_event(self, ev: Event) -> None:
        self.timeline.add("event", 0, ev.t, ev)

    def add_stack(self, s: StackSample) -> None:
        """One main-thread stack sample (or a span of one state) of process ``s.pid``."""
        self.timeline.add("stack", s.pid, s.t, s)

    def add_finding(self, f: Finding) -> None:
        self.timeline.add("finding", 0, f.t, f)
