"""`sattui report`: a recording summed up, as text or as ``sattui.report/1`` JSON.

The report streams the recording once and keeps only aggregates, so its memory does
not grow with the file's length (only with the number of distinct stacks, which is
capped).
"""

from __future__ import annotations

import gc
import json
import textwrap
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sattui.findings import Severity, evidence_text, impact_text
from sattui.frames import frame_label, user_frame
from sattui.job import JobIdentity
from sattui.ledger import steps as step_seen
from sattui.ledger.bins import JobLedger
from sattui.ledger.causes import UNKNOWN
from sattui.model import TRAINER_ROLES, Frame
from sattui.recording import RecordingReader
from sattui.sampler_status import NO_STACK_EVENTS
from sattui.states import COUNTED_NAMES, State
from sattui.textsafe import clean, clean_argv, clean_lines

REPORT_FORMAT = "sattui.report/1"
MAX_DISTINCT_STACKS = 20000
TOP_STACKS = 10
MAX_PAST_PROCS = 10000  # rows kept for processes whose pid was taken again later
MAX_FOUND = 100  # trainers found below a launcher, kept for the report
# The text report quotes names other users chose (command line, process, frame and card
# names): every line is escaped and cut here (sattui/textsafe.py); --json keeps them exact.
TEXT_LINE_MAX = 1000

@dataclass
class _ProcAgg:
    pid: int
    ppid: int | None
    role: str
    rank: int | None
    name: str
    first_t: float
    last_t: float
    cpu_sum: float = 0.0
    cpu_n: int = 0
    cpu_max: float = 0.0
    rss_max: int | None = None
    read_bytes: float = 0.0
    write_bytes: float = 0.0
    states: dict[str, int] = field(default_factory=lambda: defaultdict(int))


@dataclass
class _CardAgg:
    card: int
    util_sum: float = 0.0
    util_n: int = 0
    sm_sum: float = 0.0
    sm_n: int = 0
    mem_used_max: int | None = None
    power_sum: float = 0.0
    power_n: int = 0
    lost_at_s: float | None = None  # a card_lost event: its means cover only the time before


class ReportBuilder:
    """Feed it records in order with :meth:`add`; :meth:`result` gives the report."""

    def __init__(self, header: dict[str, Any]) -> None:
        self.header = header
        self.t_max = 0.0
        self.procs: dict[int, _ProcAgg] = {}
        # Processes whose pid a later process took (a reused pid): kept, so each has its row.
        self.past_procs: list[_ProcAgg] = []
        self._exited_pids: set[int] = set()
        self._tick_workers: dict[float, int] = defaultdict(int)
        self.state_s: dict[str, float] = defaultdict(float)
        self.startup_s = 0.0
        self.sampled_s = 0.0
        # Seconds per (state, stack), the stack as the recording's [name, filename, line]
        # triples: hashing tuples of strings is C work, where Frame objects cost a Python
        # __init__ and __hash__ per frame (0.035 s of 0.056 s in _add_stacks on the
        # 1-hour bench recording). ``stack_s`` gives them with Frames.
        self._stack_raw_s: dict[tuple[str, tuple[tuple[Any, ...], ...]], float] = defaultdict(float)
        self.stack_chunks = 0
        self.stack_pids: set[int] = set()
        self.rates: set[float] = set()
        self.cards: dict[int, _CardAgg] = {}
        self.events: list[dict[str, Any]] = []
        self.found: list[dict[str, Any]] = []  # trainers found below a launcher

    def add(self, rec: dict[str, Any]) -> None:
        t = float(rec["t"])
        kind = rec["kind"]
        end = float(rec.get("t_end", t))
        if end > self.t_max:  # max(t_max, end) without the call: 27,000 records an hour
            self.t_max = end
        if kind == "proc":
            self._add_proc(rec, t)
        elif kind == "stacks":
            self._add_stacks(rec)
        elif kind == "card":
            self._add_card(rec)
        elif kind == "event":
            if len(self.events) < 1000:
                self.events.append(rec)
            if rec.get("type") == "trainer_found" and len(self.found) < MAX_FOUND:
                self.found.append({k: rec.get(k) for k in ("t", "pid", "rank", "under", "launcher", "reason",
                                                           "message")})
            if rec.get("type") == "proc_exited" and isinstance(rec.get("pid"), int):
                self._exited_pids.add(rec["pid"])
            if rec.get("type") in ("card_lost", "card_recovered") and isinstance(rec.get("card"), int):
                agg = self.cards.setdefault(rec["card"], _CardAgg(rec["card"]))
                agg.lost_at_s = t if rec["type"] == "card_lost" else None

    def _add_proc(self, rec: dict[str, Any], t: float) -> None:
        pid = int(rec["pid"])
        agg = self.procs.get(pid)
        name = rec.get("name")
        # A proc_exited event for this pid came first: whatever shows up under the pid now
        # is another process (the recorder writes a tick's events before its proc records).
        exited = pid in self._exited_pids
        reused = exited or (agg is not None and agg.name != name and t - agg.last_t > 5)
        if agg is not None and reused and len(self.past_procs) < MAX_PAST_PROCS:
            self.past_procs.append(agg)
        if exited:
            self._exited_pids.discard(pid)
        if agg is None or reused:
            agg = self.procs[pid] = _ProcAgg(pid, rec.get("ppid"), rec.get("role", "other"), rec.get("rank"),
                                             name or "?", t, t)
        agg.role = rec.get("role", agg.role)
        agg.name = name or agg.name
        agg.rank = rec.get("rank", agg.rank)
        prev_t = agg.last_t
        agg.last_t = t
        # The reader has checked the types (numbers or null): None is what "unknown" looks like.
        cpu = rec.get("cpu")
        if cpu is not None:
            agg.cpu_sum += cpu
            agg.cpu_n += 1
            if cpu > agg.cpu_max:
                agg.cpu_max = cpu
        rss = rec.get("rss")
        if rss is not None and (agg.rss_max is None or rss > agg.rss_max):
            agg.rss_max = rss
        dt = t - prev_t
        if dt > 0:
            v = rec.get("read_Bps")
            if v is not None:
                agg.read_bytes += v * dt
            v = rec.get("write_Bps")
            if v is not None:
                agg.write_bytes += v * dt
        state = rec.get("state")
        if state:
            agg.states[state] += 1
        if agg.role == "worker":
            self._tick_workers[round(t, 1)] += 1

    def _add_stacks(self, rec: dict[str, Any]) -> None:
        pid = int(rec["pid"])
        self.stack_chunks += 1
        self.stack_pids.add(pid)
        if isinstance(rec.get("rate_hz"), (int, float)):
            self.rates.add(float(rec["rate_hz"]))
        local: dict[tuple[str, int], float] = defaultdict(float)
        startup = State.STARTUP
        for _t, dur, tid, si, state in rec["samples"]:
            if tid != pid or state is None:
                continue
            if state == startup:
                self.startup_s += dur
                continue
            local[(state, si)] += dur
        for (state, _si), dur in local.items():
            self.sampled_s += dur
            self.state_s[state] += dur
        # Hashing a whole stack per sample is the cost here: once per distinct stack, and
        # only for the stacks the main thread used.
        frames_raw, stacks_raw = rec["frames"], rec["stacks"]
        sums = self._stack_raw_s
        for (state, si), dur in local.items():
            key = (state, tuple([tuple(frames_raw[i]) for i in stacks_raw[si]]))
            if key in sums or len(sums) < MAX_DISTINCT_STACKS:
                sums[key] += dur

    def _add_card(self, rec: dict[str, Any]) -> None:
        c = int(rec["card"])
        agg = self.cards.get(c)
        if agg is None:
            agg = self.cards[c] = _CardAgg(c)
        # The reader has checked the types (util, sm_active, power_w numbers or null,
        # mem_used an int or null): None is what "unknown" looks like, as in _add_proc.
        v = rec.get("util")
        if v is not None:
            agg.util_sum += v
            agg.util_n += 1
        v = rec.get("sm_active")
        if v is not None:
            agg.sm_sum += v
            agg.sm_n += 1
        v = rec.get("mem_used")
        if v is not None and (agg.mem_used_max is None or v > agg.mem_used_max):
            agg.mem_used_max = v
        v = rec.get("power_w")
        if v is not None:
            agg.power_sum += v
            agg.power_n += 1

    # -- results -------------------------------------------------------------------

    @property
    def stack_s(self) -> dict[tuple[str, tuple[Frame, ...]], float]:
        """The main thread's seconds per (state, stack), in first-seen order. The reader
        has checked each frame (two strings, an int or null), so two stacks are the same
        as triples exactly when they are the same as Frames."""
        out: dict[tuple[str, tuple[Frame, ...]], float] = {}
        for (state, raw), secs in self._stack_raw_s.items():
            key = (state, tuple(Frame(str(n), str(fn), ln if isinstance(ln, int) else None) for n, fn, ln in raw))
            out[key] = out[key] + secs if key in out else secs
        return out

    def states(self) -> dict[str, float]:
        if self.sampled_s <= 0:
            return {}
        return {k: round(self.state_s[k] / self.sampled_s, 4) for k in COUNTED_NAMES if self.state_s.get(k)}

    def workers(self) -> int:
        return max(self._tick_workers.values(), default=0)

    def top_stacks(self, n: int = TOP_STACKS) -> list[dict[str, Any]]:
        """The main thread's time by (state, innermost frame, innermost user frame).

        Whole stacks differ in a line number deep inside a library and would split one
        wait into many rows; the leaf and the user's own line are what a person acts on.
        """
        total = self.sampled_s or 1.0
        groups: dict[tuple[str, str | None, str | None], list[Any]] = {}
        for (state, frames), secs in self.stack_s.items():
            user = user_frame(frames)
            leaf = frame_label(frames[0]) if frames else None
            key = (state, leaf, frame_label(user) if user else None)
            g = groups.setdefault(key, [0.0, frames, 0.0])
            g[0] += secs
            if secs > g[2]:  # keep the most frequent full stack as the example
                g[1], g[2] = frames, secs
        best = sorted(groups.items(), key=lambda kv: kv[1][0], reverse=True)[:n]
        return [{
            "state": state,
            "share": round(secs / total, 4),
            "leaf": leaf,
            "user_frame": user,
            "frames": [frame_label(f) for f in frames],
        } for (state, leaf, user), (secs, frames, _) in best]

    def result(self) -> dict[str, Any]:
        h = self.header
        trainer = None
        if h.get("pid") is not None:
            trainer = {
                "pid": h.get("pid"),
                "cmdline": h.get("cmdline"),
                "workers": self.workers(),
                "states": self.states(),
                "sampled_s": round(self.sampled_s, 2),
                "startup_excluded_s": round(self.startup_s, 2),
                "sampler": self._sampler_status(),
            }
            if h.get("launcher") or self.found:
                trainer["launcher"] = h.get("launcher")
                trainer["found"] = self.found
        cards = []
        infos = {c.get("card"): c for c in h.get("cards") or []}
        for c in sorted(set(infos) | set(self.cards), key=lambda x: (x is None, x)):
            agg = self.cards.get(c) or _CardAgg(c)
            info = infos.get(c, {})
            cards.append({
                "card": c,
                "vendor": info.get("vendor"),
                "name": info.get("name"),
                "util_mean": round(agg.util_sum / agg.util_n, 2) if agg.util_n else None,
                "sm_active_mean": round(agg.sm_sum / agg.sm_n, 2) if agg.sm_n else None,
                "mem_used_max": agg.mem_used_max,
                "power_mean_w": round(agg.power_sum / agg.power_n, 2) if agg.power_n else None,
                **({"simulated": True} if info.get("simulated") else {}),
                **({"lost_at_s": round(agg.lost_at_s, 2)} if agg.lost_at_s is not None else {}),
            })
        return {
            "format": REPORT_FORMAT,
            "duration_s": round(self.t_max, 2),
            "started_at": h.get("started_at"),
            "host": h.get("host"),
            # the trainer's scheduler and orchestrator identity (CONTRACT.md): every field,
            # empty when unknown (recordings made before it have none: all empty)
            "labels": JobIdentity.from_record(h.get("labels")).to_record(),
            "trainer": trainer,
            "cards": cards,
            "processes": [self._proc_dict(p) for p in sorted([*self.past_procs, *self.procs.values()],
                                                             key=lambda p: (p.first_t, p.pid))],
            "top_stacks": self.top_stacks() if trainer else [],
            "events": [{k: v for k, v in e.items() if k != "kind"} for e in self.events],
        }

    def _sampler_status(self) -> dict[str, Any]:
        problems = [e for e in self.events if e.get("type") in NO_STACK_EVENTS]
        problem = problems[-1].get("message") if problems else None
        launcher = self.header.get("launcher")
        if problem is None and launcher and not self.found and not self.stack_chunks:
            what = "not a Python process" if launcher not in ("torchrun", "accelerate", "deepspeed") else "a launcher"
            problem = f"{what} ({launcher}), and no trainer was found below it"
        return {
            "rate_hz": max(self.rates) if self.rates else None,
            "chunks": self.stack_chunks,
            "problem": problem,
        }

    @staticmethod
    def _proc_dict(p: _ProcAgg) -> dict[str, Any]:
        span = max(p.last_t - p.first_t, 0.0)
        return {
            "pid": p.pid, "ppid": p.ppid, "role": p.role, "rank": p.rank, "name": p.name,
            "first_t": round(p.first_t, 2), "last_t": round(p.last_t, 2),
            "cpu_mean": round(p.cpu_sum / p.cpu_n, 3) if p.cpu_n else None,
            "cpu_max": round(p.cpu_max, 3) if p.cpu_n else None,
            "rss_max": p.rss_max,
            "read_bytes": int(p.read_bytes) if span else None,
            "write_bytes": int(p.write_bytes) if span else None,
            "state_mostly": max(p.states, key=p.states.__getitem__) if p.states else None,
        }


@contextmanager
def _few_collections() -> Iterator[None]:
    """Python's cyclic collector, told that the report's objects rarely form cycles: the
    objects alive before it (modules, classes) frozen out of its passes, and a young
    generation 30x the default. The report makes ~200,000 short-lived objects an hour of
    recording, nearly all freed by reference counting; each collection walked the Timeline's
    and the ledger's live ones (0.92x the CPU without, 15 alternating rounds; same peak RSS).
    Memory stays bounded: the cycles there are still collected, only later."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def build_report(path: str) -> tuple[dict[str, Any], list[str]]:
    """The report of a recording: aggregates, plus the advisor's verdict, findings and
    efficiency from replaying it (sattui/advisor/judge.py). One pass over the file."""
    with _few_collections():
        return _build_report(path)


def _build_report(path: str) -> tuple[dict[str, Any], list[str]]:
    from sattui.advisor.judge import Judge, every_s_for

    reader = RecordingReader(path)
    builder = ReportBuilder(reader.header)
    judge = Judge(reader.header, every_s=every_s_for(reader.last_t()))
    for rec in reader.records():
        builder.add(rec)
        judge.add(rec)
    rep = builder.result()
    rep.update(judge.result())
    add_ledger(rep, judge.ledger)
    return rep, reader.warnings


def add_ledger(rep: dict[str, Any], ledger: JobLedger) -> None:
    """The whole run's ledger into the report: ``trainer.ranks`` (each rank's states and
    lost time) and ``cards[].idle`` (README, "the report")."""
    tr = rep.get("trainer")
    if tr is not None:
        rate = (tr.get("sampler") or {}).get("rate_hz")
        ranks = []
        rows = [r for r in ledger.ranks.values() if r.wall_s > 0]
        # A launcher sampled as the trainer until its ranks were seen (mp.spawn's parent,
        # waiting in join() for a second) is no rank: the run's end knows it by its role.
        procs = rep.get("processes") or []
        trainers = {p["pid"] for p in procs if p.get("role") in TRAINER_ROLES}
        launchers = {p["pid"] for p in procs if p["pid"] not in trainers}
        if any(r.pid not in launchers for r in rows):
            rows = [r for r in rows if r.rank is not None or r.pid not in launchers]
        for r in sorted(rows, key=lambda r: (r.rank is None, r.rank, r.pid)):
            ranks.append({"rank": r.rank, "pid": r.pid,
                          "states": {k: round(v / r.wall_s, 4) for k, v in _ordered(r.states_s)},
                          "lost": {k: round(v / r.wall_s, 4) for k, v in
                                   sorted(r.causes_s.items(), key=lambda kv: -kv[1])},
                          "sampled_s": round(r.wall_s, 2),
                          **step_seen.figures(r.steps, r.step_hist, r.wall_s, rate, r.phases_seen)})
        tr["ranks"] = ranks
    for c in rep.get("cards") or []:
        cl = ledger.cards.get(c["card"])
        if cl is not None and cl.wall_s > 0:
            c["idle"] = {"share": round(cl.idle_s / cl.wall_s, 4),
                         "by_state": {k: round(v / cl.wall_s, 4) for k, v in
                                      sorted(cl.by_state_s.items(), key=lambda kv: -kv[1])},
                         "by_cause": {k: round(v / cl.wall_s, 4) for k, v in
                                      sorted(cl.by_cause_s.items(), key=lambda kv: -kv[1])}}
        elif c.get("util_mean") is not None:
            share = round(1.0 - c["util_mean"] / 100.0, 4)  # not the job's card: no rank's state to split by
            c["idle"] = {"share": share, "by_state": {UNKNOWN: share}, "by_cause": {UNKNOWN: share}}
        else:
            c["idle"] = None


def _ordered(states: dict[str, float]) -> list[tuple[str, float]]:
    order = {s: i for i, s in enumerate(COUNTED_NAMES)}
    return sorted(states.items(), key=lambda kv: order.get(kv[0], 99))


def _fmt_bytes(n: float | None) -> str:
    if n is None:
        return "n/a"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} TB"


def _fmt_cpu(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _wrap(text: str, indent: str, width: int = 100) -> list[str]:
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent) or [indent]


def _verdict_lines(rep: dict[str, Any]) -> list[str]:
    v = rep.get("verdict")
    if not v:
        return []
    where = "".join(f" {k} {v[k]}" for k in ("card", "rank")
                    if v.get(k) is not None and f"{k} {v[k]}" not in v["summary"])
    led = ""
    if v.get("evaluations"):
        led = f" (led {v.get('led_share', 0) * 100:.0f}% of {v['evaluations']} evaluations"
        head = next((f for f in rep.get("findings") or [] if (f["rule"], f.get("card"), f.get("rank"))
                     == (v["rule"], v.get("card"), v.get("rank"))), None)
        ci = head.get("impact_ci") if head else None
        led += f", impact {impact_text(v['impact'], ci)}" if v.get("impact") else ""
        led += f", decided after {v['decided_after_s']:.0f} s)" if v.get("decided_after_s") is not None else ")"
    lines = [f"verdict     {Severity(v['severity']).label} {v['rule']}{where}: {v['summary']}{led}"]
    eff = (rep.get("efficiency") or {}).get("job")
    if eff:
        lines.append(f"efficiency  job η {eff['eta']:.2f} ({eff['method']}), "
                     f"{eff['idle_card_hours']:.2f} idle card-hours")
    return lines


def _finding_lines(rep: dict[str, Any]) -> list[str]:
    fs = [f for f in rep.get("findings") or [] if f["rule"] != "no_data"]
    lines: list[str] = []
    if fs:
        lines += ["", "findings (severity, impact = share of wall time a fix would recover)"]
        for f in fs:
            where = "".join(f" {k} {f[k]}" for k in ("card", "rank")
                            if f.get(k) is not None and f"{k} {f[k]}" not in f["summary"])
            seen = (f" [{f['evaluations']} eval., {f['first_t']:.0f}–{f['last_t']:.0f} s]"
                    if f.get("evaluations") else "")
            if f.get("impact_ci"):
                seen += f" [interval {impact_text(f['impact'], f['impact_ci'])}]"
            lines.append(f"  {Severity(f['severity']).label:<6} {f['impact'] * 100:3.0f}%  "
                         f"{f['rule']}{where}{seen}")
            lines += _wrap(f["summary"], "          ")
            ev = evidence_text(f.get("evidence"))
            if ev:
                lines += _wrap("evidence: " + ev, "          ")
            if f.get("fix"):
                lines += _wrap("fix: " + f["fix"], "          ")
    cj = rep.get("cannot_judge") or []
    if cj:
        lines += ["", "cannot judge"]
        by_reason: dict[str, list[str]] = {}
        for c in cj:
            by_reason.setdefault(c["reason"], []).append(c["rule"])
        for reason, rules in by_reason.items():
            lines += _wrap(f"{', '.join(rules)}: {reason}", "  ")
    return lines


def job_text(job: object) -> str:
    """The trainer's Slurm job, pod and torchrun run in one line ("" when none is known)."""
    j = JobIdentity.from_record(job)
    parts = []
    if j.slurm_job_id or j.slurm_job_name:
        slurm = f"Slurm job {j.slurm_job_id or '?'}" + (f" ({j.slurm_job_name})" if j.slurm_job_name else "")
        parts.append(slurm + (f", task {j.slurm_procid}" if j.slurm_procid else ""))
    if j.pod or j.pod_uid or j.namespace:
        pod = f"pod {j.namespace + '/' if j.namespace else ''}{j.pod or '?'}"
        parts.append(pod + (f" (uid {j.pod_uid})" if j.pod_uid else ""))
    if j.run_id:
        parts.append(f"torchrun run {j.run_id}")
    return clean("; ".join(parts), 300)


def format_text(rep: dict[str, Any]) -> str:
    lines = _verdict_lines(rep)
    lines.append(f"recording   {rep['duration_s']:.1f} s, started {rep.get('started_at') or '?'} "
                 f"on {rep.get('host') or '?'}")
    tr = rep.get("trainer")
    if tr:
        cmd = clean_argv(tr.get("cmdline")) or "?"
        lines.append(f"trainer     pid {tr['pid']}: {cmd}")
        job = job_text(rep.get("labels"))
        if job:
            lines.append(f"job         {job}")
        for f in tr.get("found") or []:
            lines.append(f"            {f['t']:.0f} s: {f['message']}")
        if tr.get("launcher") and not tr.get("found"):
            lines.append(f"            no trainer found below it ({tr['launcher']}): no Python process with torch "
                         "loaded, no rank, none owning DataLoader workers")
        lines.append(f"workers     {tr['workers']} DataLoader worker(s) at most at once")
    else:
        lines.append("trainer     none (cards-only recording)")
    etas = {e["card"]: e for e in (rep.get("efficiency") or {}).get("cards") or []}
    for c in rep.get("cards") or []:
        sim = " SIMULATED" if c.get("simulated") else ""
        util = "n/a" if c["util_mean"] is None else f"{c['util_mean']:.1f} %"
        extra = ""
        if c.get("sm_active_mean") is not None:
            extra += f", SM {c['sm_active_mean']:.1f} %"
        if c.get("power_mean_w") is not None:
            extra += f", power {c['power_mean_w']:.0f} W"
        e = etas.get(c["card"])
        if e and e.get("eta") is not None:
            extra += f", η {e['eta']:.2f} ({e['method']})"
        lost = f", LOST at {c['lost_at_s']:.1f} s" if c.get("lost_at_s") is not None else ""
        lines.append(f"card {c['card']}{sim}  {c.get('name') or '?'}: util mean {util}{extra}, "
                     f"mem max {_fmt_bytes(c['mem_used_max'])}{lost}")
    lines += _finding_lines(rep)
    procs = rep.get("processes") or []
    if procs:
        lines += ["", "processes (cpu in cores, mean / max)"]
        lines.append(f"  {'pid':>7} {'role':<7} {'name':<16} {'cpu':>5} {'max':>5} {'state':<5} {'rss max':>9} "
                     f"{'read':>9}  seen")
        for p in procs[:40]:
            rank = f"{p['role']}{p['rank']}" if p["rank"] is not None else p["role"]
            lines.append(f"  {p['pid']:>7} {rank:<7} {clean(p['name'], 16):<16} {_fmt_cpu(p['cpu_mean']):>5} "
                         f"{_fmt_cpu(p['cpu_max']):>5} {p['state_mostly'] or '?':<5} {_fmt_bytes(p['rss_max']):>9} "
                         f"{_fmt_bytes(p['read_bytes']):>9}  {p['first_t']:.0f}–{p['last_t']:.0f} s")
        if len(procs) > 40:
            lines.append(f"  … {len(procs) - 40} more")
    if tr:
        samp = tr["sampler"]
        lines += ["", f"main thread (py-spy {samp['rate_hz'] or '?'} Hz, {tr['sampled_s']:.1f} s sampled, "
                      f"{tr['startup_excluded_s']:.1f} s of imports excluded)"]
        if samp.get("problem"):
            lines.append(f"  no stacks: {samp['problem']}")
        states = tr.get("states") or {}
        for k, v in sorted(states.items(), key=lambda kv: kv[1], reverse=True):
            bar = "█" * round(v * 30)
            lines.append(f"  {k:<12} {v * 100:5.1f} %  {bar}")
        for r in tr.get("ranks") or []:
            who = f"rank {r['rank']}" if r.get("rank") is not None else f"pid {r['pid']}"
            if r.get("steps_per_s") is not None:
                lines.append(f"  steps       {who}: {r['steps_per_s']:.2f}/s, step p50 {r['step_s_p50']:.3f} s, "
                             f"p90 {r['step_s_p90']:.3f} s (seen from outside)")
            elif r.get("steps_null_reason"):
                lines.append(f"  steps       {who}: {r['steps_null_reason']}")
        tops = rep.get("top_stacks") or []
        if tops:
            lines += ["", "top stacks (share of main-thread time)"]
            for s in tops:
                where = s["leaf"] or "?"
                if s["user_frame"] and s["user_frame"] != s["leaf"]:
                    where += f"  ← {s['user_frame']}"
                lines.append(f"  {s['share'] * 100:5.1f} %  {s['state']:<11} {where}")
    evs = rep.get("events") or []
    if evs:
        lines += ["", "events"]
        for e in evs[:20]:
            lines.append(f"  {e['t']:7.1f} s  {e.get('type')}: {e.get('message')}")
        if len(evs) > 20:
            lines.append(f"  … {len(evs) - 20} more")
    return clean_lines(lines, TEXT_LINE_MAX)


def format_json(rep: dict[str, Any]) -> str:
    return json.dumps(rep, indent=2)
