"""``sattui cluster``'s model, without Textual: a poller reading Prometheus off the UI
thread, and the lines of the job's screen (one block per host on one time axis).

The poller (:class:`ClusterPoller`; the app runs :meth:`ClusterPoller.run` as a Textual
thread worker) reads the job's series every ``POLL_S``, the verdict's aggregates every
``VERDICT_S`` (judge.py over the view's window), and the open host's detail for its
one-node screens. A failed read (Prometheus down, slow, garbage) is kept as ``error``
and said on screen; the last good data stays.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sattui.cluster.across_hosts import judge
from sattui.cluster.hostsession import HostSession
from sattui.cluster.prom import PromClient, PromError
from sattui.cluster.source import HostData, JobData, JobReader
from sattui.findings import Finding
from sattui.states import State
from sattui.textsafe import clean
from sattui.view.binning import Axis, bin_values
from sattui.view.lines import Columns, Line, band, fit, spark, state_cells, text

POLL_S = 2.0
VERDICT_S = 10.0
MIN_STEP_S = 1.0


@dataclass
class Snapshot:
    data: JobData | None
    verdict: Finding | None
    findings: list[Finding]
    error: str | None
    read_at: float | None  # Unix time of the last good read


class ClusterPoller:
    """Reads the job in :meth:`run` (the app runs it as a Textual thread worker); the UI
    takes :meth:`snapshot` (cheap, locked)."""

    def __init__(self, url: str, job: str | None = None, run_id: str | None = None, *,
                 timeout_s: float = 5.0, on_update: Callable[[], None] | None = None,
                 window_s: float = 120.0, columns: int = 42, slurm_job: str | None = None) -> None:
        self.client = PromClient(url, timeout_s)
        self.reader = JobReader(self.client, job, run_id, slurm_job=slurm_job)
        self.url = self.client.url
        self.on_update = on_update
        self.window_s = window_s
        self.columns = columns
        self.open_host: HostSession | None = None
        self.reads = 0
        self._lock = threading.Lock()
        self._snap = Snapshot(None, None, [], None, None)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._next_verdict = 0.0

    def stop(self) -> None:
        """End :meth:`run` (within one read's timeout)."""
        self._stop.set()
        self._wake.set()

    def poke(self) -> None:
        """Read now (a host was opened, the window changed)."""
        self._next_verdict = 0.0
        self._wake.set()

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snap

    def step_s(self) -> float:
        return max(MIN_STEP_S, self.window_s / max(8, self.columns))

    def poll_once(self) -> None:
        now = time.time()
        step = self.step_s()
        try:
            data = self.reader.series(now, self.window_s, step)
            verdict, findings = self._snap.verdict, self._snap.findings
            if now >= self._next_verdict:
                head, found = judge(self.reader.summary(now, self.window_s))
                verdict, findings = head, found
                self._next_verdict = now + VERDICT_S
            host = self.open_host
            if host is not None:
                h = data.hosts.get(host.host)
                host.load(self.reader.host_detail(host.host, h.sattui if h else host.sattui, now, self.window_s,
                                                  step))
                host.error = None
            snap = Snapshot(data, verdict, findings, None, now)
        except PromError as e:
            old = self._snap
            snap = Snapshot(old.data, old.verdict, old.findings, str(e), old.read_at)
            if self.open_host is not None:
                self.open_host.error = str(e)
        with self._lock:
            self._snap = snap
            self.reads += 1
        if self.on_update is not None:
            self.on_update()

    def run(self, cancelled: threading.Event | None = None) -> None:
        """Read every ``POLL_S`` until :meth:`stop` or ``cancelled`` (the Textual worker's
        cancel event): the body of the app's thread worker, never the UI thread."""
        def done() -> bool:
            return self._stop.is_set() or (cancelled is not None and cancelled.is_set())

        while not done():
            try:
                self.poll_once()
            except Exception as e:  # a bug here must say so on screen, not end the reads silently
                with self._lock:
                    old = self._snap
                    self._snap = Snapshot(old.data, old.verdict, old.findings,
                                          f"reading Prometheus failed: {type(e).__name__}: {e}", old.read_at)
                if self.on_update is not None:
                    self.on_update()
            # In slices, so that a cancel (the app quitting) ends the loop promptly.
            end = time.monotonic() + POLL_S
            while not done() and not self._wake.is_set() and time.monotonic() < end:
                self._wake.wait(min(0.25, max(0.0, end - time.monotonic())))
            self._wake.clear()


# -- the screen's lines ------------------------------------------------------------------


def status_lines(snap: Snapshot, url: str, width: int, now: float) -> list[Line]:
    """The job's verdict, then what is read from where (and a failing read, said plainly)."""
    out = []
    v = snap.verdict
    if v is not None:
        where = "".join(f" {k} {val}" for k, val in (("host", v.evidence.get("host")), ("rank", v.rank))
                        if val is not None and f"{k} {val}" not in v.summary)
        sev_style = {"high": "bad", "medium": "warn"}.get(v.severity.value, "head")
        out.append(Line(full=((f"{v.severity.label} ", sev_style),
                              (fit(f"{v.rule}{where}: {v.summary}", width - 8), "value"))))
    elif snap.data is None and snap.error is None:
        out.append(Line(full=text(fit("reading Prometheus …", width), "dim")))
    else:
        out.append(Line(full=text(fit("verdict: collecting (the window's first counters)", width), "dim")))
    n = len(snap.data.hosts) if snap.data is not None else 0
    src = f"{n} host(s) from {url}"
    if snap.error is not None:
        out.append(Line(full=text(fit(clean(snap.error), width), "bad-tag")))
        if snap.read_at:
            out.append(Line(full=text(fit(f"showing data from {now - snap.read_at:.0f} s ago ({src})", width),
                                      "dim")))
    else:
        out.append(Line(full=text(fit(src, width), "dim")))
    return out


def host_block(h: HostData, axis: Axis, cols: Columns, selected: bool, max_ranks: int) -> list[Line]:
    """A host: its cards' utilization (each bucket's lowest card: a dip on any card shows)
    and each rank's state strip under it on the same axis."""
    mark = "▸" if selected else " "
    label_style = "selected" if selected else "label"
    times: dict[float, list[float]] = {}
    for c in h.cards:
        for t, v in c.util:
            times.setdefault(t, []).append(v)
    ts = sorted(times)
    mins = [min(times[t]) for t in ts]
    if ts:
        hold = 2.5 * ((ts[-1] - ts[0]) / max(1, len(ts) - 1) if len(ts) > 1 else axis.bw)
        lo, _, _ = bin_values(ts, mins, axis, hold)
        body = spark(lo, 100.0, band)
    else:
        body = text(" " * axis.n, "nodata")
    last = [c.util[-1][1] for c in h.cards if c.util]
    what = f"{len(h.cards)} card{'s' if len(h.cards) != 1 else ''}"
    if last:
        value = f"{what} {sum(last) / len(last):3.0f}%"
    else:
        value = what if h.cards else "no cards"
    if not h.sattui:
        value += " (dcgm)"
    out = [Line(label=text(fit(f"{mark}{h.name}", cols.label), label_style), body=body,
                value=text(fit(value, cols.value), "value"), key=f"host:{h.name}")]
    ranks = sorted(h.ranks, key=lambda r: (len(r.rank), r.rank))
    shown = ranks if len(ranks) <= max_ranks else ranks[: max(0, max_ranks - 1)]
    for r in shown:
        states = _strip_cells(r.strip, axis)
        top = _top(r.steps)
        out.append(Line(label=text(fit(f"  rank {r.rank or '-'}", cols.label), "dim"), body=state_cells(states),
                        value=text(fit(top, cols.value), "dim"), key=f"host:{h.name}"))
    if len(shown) < len(ranks):
        out.append(Line(label=text("", ""), body=text(fit(f"  … {len(ranks) - len(shown)} more ranks (Enter)",
                                                          axis.n), "dim"), key=f"host:{h.name}"))
    elif not h.sattui:
        out.append(Line(label=text("", ""), body=text(fit("  cards only: no sattui on this host", axis.n), "dim"),
                        key=f"host:{h.name}"))
    elif not ranks:
        # A host's block keeps its height while its ranks' counters fill the look-back.
        out.append(Line(label=text("", ""), body=text(fit("  no rank in this window yet", axis.n), "dim"),
                        key=f"host:{h.name}"))
    return out


def _strip_cells(strip: list[tuple[float, str | None]], axis: Axis) -> list[str | None]:
    cells: list[str | None] = [None] * axis.n
    for t, st in strip:
        k = axis.col(t)
        if 0 <= k < axis.n and st is not None:
            cells[k] = st
    # Steps wider than a bucket: carry a state over the buckets its step covers.
    step = (strip[1][0] - strip[0][0]) if len(strip) > 1 else axis.bw
    span = max(1, round(step / axis.bw))
    for k in range(axis.n - 1, -1, -1):
        if cells[k] is None:
            for j in range(1, span):
                if k + j < axis.n and cells[k + j] is not None:
                    cells[k] = cells[k + j]
                    break
    return cells


def _top(steps: list[tuple[float, dict[str, float]]]) -> str:
    """The state with the most seconds over the window, and its share of them (a strip
    cell shows each step's biggest state only: 50/50 forward/backward is half each here)."""
    secs: dict[str, float] = {}
    for _, by in steps:
        for st, v in by.items():
            secs[st] = secs.get(st, 0.0) + v
    total = sum(secs.values())
    if total <= 0:
        return "no stacks"
    best = max(secs, key=lambda k: secs[k])
    try:
        name = State(best).value
    except ValueError:
        name = best
    return f"{name} {secs[best] / total:.0%}"


def ranks_per_host(room: int, hosts: int) -> int:
    """Rank rows per host so that four hosts (or all, if fewer) fit ``room`` lines."""
    shown = max(1, min(4, hosts))
    return max(1, room // shown - 1)


def job_lines(snap: Snapshot, axis: Axis, cols: Columns, room: int, selected: str | None,
              top: int = 0) -> tuple[list[Line], list[str], int]:
    """The hosts' blocks that fit ``room`` lines, starting so that ``selected`` shows;
    returns the lines, the host order and the first host shown."""
    data = snap.data
    if data is None or not data.hosts:
        msg = "no hosts yet" if data is None else "Prometheus has no sattui or dcgm-exporter series for this job"
        return [Line(full=text(fit(msg, cols.width), "dim"))], [], 0
    hosts = sorted(data.hosts.values(), key=lambda h: (not h.sattui, h.name))
    names = [h.name for h in hosts]
    per = ranks_per_host(room, len(hosts))
    blocks = [host_block(h, axis, cols, h.name == selected, per) for h in hosts]
    sel = names.index(selected) if selected in names else 0
    top = min(max(0, top), sel)
    # Scroll down until the selected host's block fits.
    while top < sel and sum(len(b) for b in blocks[top: sel + 1]) > room:
        top += 1
    out: list[Line] = []
    for b in blocks[top:]:
        if len(out) + len(b) > room:
            break
        out += b
    if top > 0 or len(out) < sum(len(b) for b in blocks):
        rest = len(hosts) - top - sum(1 for b in blocks[top:] if b[0] in out)
        more = f"hosts {top + 1}–{top + sum(1 for b in blocks[top:] if b[0] in out)} of {len(hosts)}"
        if rest > 0 or top > 0:
            out = out[: max(0, room - 1)] + [Line(full=text(fit(f"  {more} (↑/↓ scroll)", cols.width), "dim"))]
    return out, names, top
