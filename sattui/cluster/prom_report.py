"""``sattui report --prometheus URL``: the report for a whole job over a time range
(docs/format.md's ``sattui.report/1``, with a ``host`` on each rank, card and finding), read
from Prometheus (sattui/cluster/source.py) and judged across hosts (judge.py)."""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from typing import Any

from sattui.cluster.across_hosts import finding_dict, judge
from sattui.cluster.prom import PromClient, PromError
from sattui.cluster.source import JobData, JobReader
from sattui.errors import SattuiError
from sattui.findings import Severity
from sattui.ledger.causes import UNKNOWN
from sattui.report import REPORT_FORMAT, _ordered
from sattui.states import COUNTED_NAMES
from sattui.textsafe import clean, clean_lines

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DEFAULT_SINCE = "30m"


def parse_duration(text: str) -> float:
    """``90s``, ``30m``, ``2h``, ``1d`` (or plain seconds) -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"not a duration (e.g. 90s, 30m, 2h): {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def build(url: str, job: str | None = None, run_id: str | None = None, since_s: float = 1800.0,
          now: float | None = None, timeout_s: float = 10.0, slurm_job: str | None = None) -> dict[str, Any]:
    t1 = time.time() if now is None else now
    reader = JobReader(PromClient(url, timeout_s), job, run_id, slurm_job=slurm_job)
    data = reader.summary(t1, since_s)
    if not data.hosts:
        what = f"job {clean(job, 100)!s}" if job else "any job"
        if run_id:
            what += f" run {clean(run_id, 100)}"
        if slurm_job:
            what += f" Slurm job {clean(slurm_job, 100)}"
        raise SattuiError(f"Prometheus at {clean(reader.client.url, 200)} has no sattui or dcgm-exporter series "
                          f"for {what} over the last {since_s:g} s")
    rep = report_of(data, url, job, run_id, since_s)
    rep["source"]["slurm_job_id"] = slurm_job
    return rep


def report_of(data: JobData, url: str, job: str | None, run_id: str | None, since_s: float) -> dict[str, Any]:
    head, found = judge(data)
    ranks: list[dict[str, Any]] = []
    for r in sorted(data.ranks, key=lambda r: (r.host, _num(r.rank), r.rank)):
        wall = r.wall_s
        if wall <= 0:
            continue
        ranks.append({"rank": _int(r.rank), "pid": None, "host": r.host, "local_rank": _int(r.local_rank),
                      "run_id": r.run_id or None,
                      "states": {k: round(v / wall, 4) for k, v in _ordered(r.states_s)},
                      "lost": {k: round(v / wall, 4) for k, v in sorted(r.causes_s.items(), key=lambda kv: -kv[1])},
                      "sampled_s": round(wall, 2), "workers": r.workers,
                      "worker_cpu_s": None if r.worker_cpu_s is None else round(r.worker_cpu_s, 2)})
    trainer = None
    if ranks:
        mean: dict[str, float] = {}
        for rk in ranks:
            for k, v in rk["states"].items():
                mean[k] = mean.get(k, 0.0) + v / len(ranks)
        trainer = {"pid": None, "cmdline": None,
                   "workers": int(sum(r["workers"] or 0 for r in ranks)),
                   "states": {k: round(mean[k], 4) for k in COUNTED_NAMES if mean.get(k)}, "ranks": ranks}
    cards = []
    for c in sorted(data.cards, key=lambda c: (c.host, _num(c.card), c.card)):
        idle = None
        if c.ledger_s > 0:
            idle = {"share": round(sum(c.idle_by_state_s.values()) / c.ledger_s, 4),
                    "by_state": {k: round(v / c.ledger_s, 4) for k, v in
                                 sorted(c.idle_by_state_s.items(), key=lambda kv: -kv[1])},
                    "by_cause": {k: round(v / c.ledger_s, 4) for k, v in
                                 sorted(c.idle_by_cause_s.items(), key=lambda kv: -kv[1])}}
        elif c.util_mean is not None:
            share = round(1.0 - c.util_mean / 100.0, 4)
            idle = {"share": share, "by_state": {UNKNOWN: share}, "by_cause": {UNKNOWN: share}}
        cards.append({"card": _int(c.card), "host": c.host, "vendor": c.vendor or None, "name": c.model or None,
                      "uuid": c.uuid or None, "source": c.source,
                      "util_mean": _r(c.util_mean), "sm_active_mean": _r(c.sm_active_mean),
                      "mem_used_max": None if c.mem_used_max is None else int(c.mem_used_max),
                      "power_mean_w": _r(c.power_mean_w), "idle": idle})
    verdict = None
    if head is not None:
        verdict = {**finding_dict(head), "from": "prometheus"}
        verdict.pop("evidence", None)
        verdict.pop("fix", None)
    return {
        "format": REPORT_FORMAT,
        "duration_s": round(since_s, 2),
        "started_at": datetime.fromtimestamp(data.t0, timezone.utc).isoformat(timespec="seconds"),
        "host": None,
        "source": {"prometheus": url, "job": job, "run_id": run_id, "until": round(data.t1, 3)},
        "hosts": [{"host": h.name, "sattui": h.sattui, "cards": len(h.cards), "ranks": len(h.ranks)}
                  for h in sorted(data.hosts.values(), key=lambda h: h.name)],
        "trainer": trainer,
        "cards": cards,
        "verdict": verdict,
        "findings": [finding_dict(f) for f in found],
        "processes": [], "top_stacks": [], "events": [],
    }


def format_text(rep: dict[str, Any]) -> str:
    src = rep["source"]
    lines = []
    v = rep.get("verdict")
    if v:
        where = "".join(f" {k} {v[k]}" for k in ("host", "rank", "card") if v.get(k) is not None
                        and f"{k} {v[k]}" not in v["summary"])
        lines.append(f"verdict     {Severity(v['severity']).label} {v['rule']}{where}: {v['summary']}")
    job = f"job {src['job']}" if src.get("job") else "all jobs"
    if src.get("run_id"):
        job += f", run {src['run_id']}"
    if src.get("slurm_job_id"):
        job += f", Slurm job {src['slurm_job_id']}"
    lines.append(f"prometheus  {src['prometheus']} ({job}), the last {rep['duration_s']:.0f} s from "
                 f"{rep['started_at']}")
    for h in rep["hosts"]:
        what = "sattui" if h["sattui"] else "dcgm-exporter (cards only)"
        lines.append(f"host        {h['host']}: {h['cards']} card(s), {h['ranks']} rank(s) — {what}")
    tr = rep.get("trainer")
    if tr:
        lines += ["", "ranks (main-thread states, share of sampled time)"]
        for r in tr["ranks"]:
            top = ", ".join(f"{k} {val * 100:.0f}%" for k, val in sorted(r["states"].items(), key=lambda kv: -kv[1])
                            if val >= 0.01)
            name = f"rank {r['rank']}" if r["rank"] is not None else "rank ?"
            lines.append(f"  {r['host']:<16} {name:<8} {top}")
    if rep["cards"]:
        lines += ["", "cards"]
        for c in rep["cards"]:
            util = "n/a" if c["util_mean"] is None else f"{c['util_mean']:.1f} %"
            idle = c.get("idle")
            extra = ""
            if idle and idle["by_state"]:
                top = max(idle["by_state"], key=lambda k: idle["by_state"][k])
                extra = f", idle {idle['share'] * 100:.0f}% (mostly {top})"
            lines.append(f"  {c['host']:<16} card {c['card']}  {c.get('name') or '?'}: util mean {util}{extra}")
    fs = [f for f in rep["findings"] if f["rule"] not in ("healthy", "no_data")]
    if fs:
        lines += ["", "findings (severity, impact = share of the job's wall time a fix would recover)"]
        for f in fs:
            where = "".join(f" {k} {f[k]}" for k in ("host", "rank", "card") if f.get(k) is not None)
            lines.append(f"  {Severity(f['severity']).label:<6} {f['impact'] * 100:3.0f}%  {f['rule']}{where}")
            lines.append(f"          {f['summary']}")
            if f.get("fix"):
                lines.append(f"          fix: {f['fix']}")
    return clean_lines(lines, 1000)


def cmd(url: str, job: str | None, run_id: str | None, since: str, as_json: bool,
        slurm_job: str | None = None) -> str:
    from sattui.report import format_json

    try:
        since_s = parse_duration(since)
    except ValueError as e:
        raise SattuiError(str(e)) from None
    try:
        rep = build(url, job, run_id, since_s, slurm_job=slurm_job)
    except PromError:
        raise
    return format_json(rep) if as_json else format_text(rep)


def _int(text: str) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _num(text: str) -> float:
    v = _int(text)
    return float(v) if v is not None else float("inf")


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 2)
