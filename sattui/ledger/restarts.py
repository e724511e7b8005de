"""DataLoader worker restarts, by timing: which worker generation started when, and how
much of the rank's data wait its start took (the ledger's ``worker_respawn``,
sattui/ledger/bins.py).

A loader without ``persistent_workers`` starts a new generation of workers every epoch.
A generation's start runs from the birth of its first worker until the first batch is
seen to reach the main thread (its stacks leaving the wait, or unpickling the batch) or
one of its workers is seen in its fetch loop
(:class:`Start`); the part of it longer than a batch's usual wait is the restart's.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sattui.frames import norm_path
from sattui.ledger.window import bisect_t
from sattui.states import State

# Workers born within this of the one before are one generation (a loader starts its
# workers one after the other; spawn's take tens of ms each).
GENERATION_GAP_S = 1.0
# How long batches usually take to show up while the main thread waits: its waits' lengths
# (from the first sighting in the wait to the first sighting out of it) over this look-back,
# this quantile of them, once there are MIN_WAITS. A generation's start counts as a restart
# only where it is longer than that: a forked worker is in its fetch loop within
# milliseconds, and the first batch it serves is the data's wait, not the restart's (with
# compute steps shorter than the sampling period, "out of the wait" is seen late at
# random: the quantile holds that noise too). With fewer waits seen the usual wait is not
# known, and no start counts by timing: a bin is computed once, and a trainer slowed at
# start-up reaches its first restart after two or three waits (read as "no wait at all",
# every start was a restart: the io_bound demo on a loaded box read worker_respawn 3-6 %,
# all of it from a first restart seen after three or four waits).
RHYTHM_LOOKBACK_S = 30.0
RHYTHM_QUANTILE = 0.9
MIN_WAITS = 5
# How far the main thread's stack times and the workers' births (/proc start times, in
# whole clock ticks) can disagree: each py-spy run's clock origin is bounded from its
# start and its exit (docs/sampling.md), tens of ms apart on a loaded box. The main thread
# seen out of its wait this soon after a birth may be the old epoch's last step placed a
# little late, not the new generation's first batch: on a loaded CI box a backward
# sample 0.04 s after a birth ended that start at once, the 0.8-s wait that was the real
# start then counted as a usual wait, and two such made the usual wait 0.4 s, which cut
# every other start in half (worker_respawn 0.23 of a true 0.53, behind the workers'
# figures). Forked workers' first batches take longer than this to arrive.
CLOCK_SLACK_S = 0.15
# A start not seen to end after this long is not followed further (an hour-long "start"
# is a loader that does not restart; its wait is classed by the workers' figures).
MAX_START_S = 60.0


@dataclass
class Start:
    """One worker generation's start, by timing: from the birth of its first worker
    (``born``, /proc's start time) until the first batch is seen to reach the main thread
    (its first stack out of the data wait after the birth, or one unpickling a batch in
    it) or one of its workers is seen in its fetch loop (a worker_stack look), whichever
    comes first (``ended``; None: not seen yet). The rank's wait over ``[born,
    counted_to)`` is the restart's: the start less what a batch usually takes to show up
    (:func:`usual_wait_s`); none of it (``counted_to == born``) while that is not known."""

    born: float
    ended: float | None
    counted_to: float

    @property
    def seen_s(self) -> float | None:
        """Birth to first batch (or loop), as seen: the generation's start time."""
        return None if self.ended is None else self.ended - self.born


def torn_in_loader(span: Any) -> bool:
    """A stack py-spy read without its outer frames (nonblocking, it can catch the
    interpreter mid-call) whose outermost frame left is the DataLoader's own code: no
    main thread starts there, so the sample is inside the loader's machinery."""
    frames: Sequence[Any] = getattr(span, "frames", None) or ()
    return bool(frames) and "torch/utils/data/" in norm_path(frames[-1].filename)


# Where the main thread unpickles what a worker sent: torch's tensor rebuilders and the
# file-descriptor hand-over they call. A sample there, inside the data wait, is a batch that
# has reached the main thread, although the wait goes on (the next batch): on a loaded box
# a step's compute can fall between two samples, and only these say the batch came (the
# slow-start demo on a loaded CI machine read one start as 3.9 s, to the end of the next
# generation's, where its first batch was seen arriving after 1.6 s).
_RECEIPT_FILES = ("torch/multiprocessing/reductions.py", "multiprocessing/resource_sharer.py")


def receiving_batch(span: Any) -> bool:
    """The main thread seen unpickling a batch a worker sent (tensor storage being rebuilt
    or its file descriptor handed over)."""
    frames: Sequence[Any] = getattr(span, "frames", None) or ()
    return any(norm_path(f.filename).endswith(_RECEIPT_FILES) for f in frames)


def first_receipt(spans: Sequence[Any], after: float, before: float) -> float | None:
    """When the main thread was first seen receiving a batch inside its data wait in
    ``(after, before)`` (``spans`` in time order; only those are read: a report of an hour
    looks at each start's few seconds, not at every span for each)."""
    wait = State.DATA_WAIT
    for i in range(bisect_t(spans, after), len(spans)):
        s = spans[i]
        if s.t >= before:
            break
        if s.t > after and s.state == wait and receiving_batch(s):
            return float(s.t)
    return None


def wait_runs(spans: Sequence[Any]) -> list[tuple[float, float]]:
    """The main thread's data waits as seen: ``(first sighting in the wait, first
    sighting out of it)`` for each run of data_wait spans that ends in another state (a
    sample without a stack says nothing: it neither ends a wait nor begins one; nor does
    a torn one inside the loader ends it — a lone ``RandomSampler.__iter__`` in the
    loader's restart, read as ``other``, ended two of 22 restarts a few ms after their
    birth, and their whole start went to the workers' figures)."""
    out: list[tuple[float, float]] = []
    began: float | None = None
    wait, startup = State.DATA_WAIT, State.STARTUP
    for s in spans:
        st = s.state
        if st is None or (began is not None and st != wait and torn_in_loader(s)):
            continue
        if st == startup:
            began = None
            continue
        if st == wait:
            if began is None:
                began = s.t
        elif began is not None:
            out.append((began, s.t))
            began = None
    return out


def usual_wait_s(runs: Sequence[tuple[float, float]], births: Sequence[float]) -> float | None:
    """How long the rank's batches usually take to show up: the RHYTHM_QUANTILE of its
    waits' lengths, each generation's start left out (:func:`start_wait`; None with fewer
    than MIN_WAITS waits: nothing to go by)."""
    leaves = [z for _a, z in runs]
    starts = {start_wait(leaves, tb) for tb in births}
    lengths = sorted(z - a for i, (a, z) in enumerate(runs) if i not in starts)
    if len(lengths) < MIN_WAITS:
        return None
    return lengths[min(len(lengths) - 1, int(RHYTHM_QUANTILE * len(lengths)))]


def start_wait(leaves: Sequence[float], born: float) -> int:
    """Index of the wait a generation's start is (``leaves``: the waits' ends in time
    order): the first to end later than CLOCK_SLACK_S after the birth."""
    return bisect.bisect_right(leaves, born + CLOCK_SLACK_S)


def generations(births: dict[int, float]) -> list[tuple[float, list[int]]]:
    """Workers grouped by birth (``pid -> born``): ``(first birth, pids)`` oldest first; a
    worker born within GENERATION_GAP_S of the one before joins its generation."""
    out: list[tuple[float, list[int]]] = []
    last = -math.inf
    for pid, t in sorted(births.items(), key=lambda kv: kv[1]):
        if not math.isfinite(t):
            continue
        if out and t - last <= GENERATION_GAP_S:
            out[-1][1].append(pid)
        else:
            out.append((t, [pid]))
        last = t
    return out


def find_starts(births: dict[int, float], spans: Sequence[Any], in_loop_from: dict[int, float],
                known_to: float) -> list[Start]:
    """Each worker generation's start after the first (the first is the job's start-up,
    not a restart), from the main thread's ``spans`` (time order) and the workers' first
    sightings in their fetch loop; ``known_to``: how far the spans are known (a start not
    seen to end by then counts up to there)."""
    gens = generations(births)
    if len(gens) < 2:
        return []
    runs = wait_runs(spans)
    usual = usual_wait_s(runs, [g[0] for g in gens])
    leaves = [z for _a, z in runs]
    out = []
    for born, pids in gens[1:]:
        ends = [t for t in (in_loop_from.get(p) for p in pids) if t is not None and t > born]
        i = start_wait(leaves, born)
        if i < len(leaves):
            ends.append(leaves[i])
        got = first_receipt(spans, born + CLOCK_SLACK_S, min(ends) if ends else born + MAX_START_S)
        if got is not None:
            ends.append(got)
        ended = min(ends) if ends else None
        if ended is not None and ended - born > MAX_START_S:
            ended = None
        if usual is None:
            # seen (the evidence's restarts and start time), but not told from a batch's wait
            out.append(Start(born, ended, born))
            continue
        to = ended if ended is not None else min(known_to, born + MAX_START_S)
        out.append(Start(born, ended, max(born, to - usual)))
    return out
