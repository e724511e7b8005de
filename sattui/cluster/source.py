"""A whole job as Prometheus holds it: the hosts, their cards and their ranks, read over
a time window with PromQL (the metric names of docs/cluster.md, sattui/metrics/exposition.py).

Hosts that run sattui say so with ``sattui_info``; their cards come from
``sattui_card_*``, their ranks from ``sattui_rank_*``. Hosts that run dcgm-exporter but
not sattui give their cards only (``DCGM_FI_*``, by the ``Hostname`` label; a MIG
instance's series are left out, its card is counted once). ``job`` and ``run_id`` narrow
the job: ``run_id`` keeps the hosts whose ranks carry it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sattui.cluster.prom import PromClient, Series, matcher
from sattui.ledger.causes import STRAGGLER

DCGM_HOST_LABELS = ("Hostname", "hostname", "host", "instance")


@dataclass
class CardData:
    host: str
    card: str
    uuid: str = ""
    vendor: str = ""
    model: str = ""
    source: str = "sattui"  # or "dcgm-exporter"
    util_mean: float | None = None  # percent, as the report's util_mean
    sm_active_mean: float | None = None
    mem_used_max: float | None = None
    power_mean_w: float | None = None
    ledger_s: float = 0.0
    idle_by_state_s: dict[str, float] = field(default_factory=dict)
    idle_by_cause_s: dict[str, float] = field(default_factory=dict)
    util: list[tuple[float, float]] = field(default_factory=list)  # (t, percent) over the view's window

    @property
    def key(self) -> tuple[str, str]:
        return self.host, self.card


@dataclass
class RankData:
    host: str
    rank: str
    local_rank: str = ""
    run_id: str = ""
    states_s: dict[str, float] = field(default_factory=dict)
    causes_s: dict[str, float] = field(default_factory=dict)
    workers: float | None = None
    worker_cpu_s: float | None = None
    strip: list[tuple[float, str | None]] = field(default_factory=list)  # (t, the step's main state)
    steps: list[tuple[float, dict[str, float]]] = field(default_factory=list)  # (t, seconds per state)
    # Per bucket of the window (JobReader._wait_bins), in time order by key: (seconds,
    # seconds waiting for another rank): the straggler rule's bins.
    wait_bins: dict[int, tuple[float, float]] = field(default_factory=dict)

    @property
    def wall_s(self) -> float:
        return sum(self.states_s.values())


@dataclass
class HostData:
    name: str
    sattui: bool
    cards: list[CardData] = field(default_factory=list)
    ranks: list[RankData] = field(default_factory=list)
    findings: list[dict[str, object]] = field(default_factory=list)  # the node's own current findings


@dataclass
class JobData:
    t0: float
    t1: float
    hosts: dict[str, HostData]
    step_s: float | None = None

    @property
    def cards(self) -> list[CardData]:
        return [c for h in self.hosts.values() for c in h.cards]

    @property
    def ranks(self) -> list[RankData]:
        return [r for h in self.hosts.values() for r in h.ranks]


@dataclass
class HostDetail:
    """One host over the view's window: each card's metrics as points, its ranks' strips,
    its node's current findings."""

    host: str
    t0: float
    t1: float
    step_s: float
    cards: dict[str, dict[str, list[tuple[float, float]]]] = field(default_factory=dict)
    card_info: dict[str, dict[str, str]] = field(default_factory=dict)
    ranks: list[RankData] = field(default_factory=list)
    findings: list[dict[str, object]] = field(default_factory=list)


# The straggler rule's bins across hosts: the nodes' ledger counters move as each second
# settles and are scraped every few seconds, so a 5-s bucket holds a few scrapes' increments.
WAIT_STEP_S = 5.0


def _rng(seconds: float) -> str:
    return f"[{max(1, round(seconds))}s]"


class JobReader:
    """Reads one job (``job``: Prometheus's job label; ``run_id``: torchrun's run;
    ``slurm_job``: the Slurm job id every sattui series carries as ``slurm_job_id``) from a
    Prometheus server; each method is a handful of queries."""

    def __init__(self, client: PromClient, job: str | None = None, run_id: str | None = None,
                 host: str | None = None, slurm_job: str | None = None) -> None:
        self.client = client
        self.job = job
        self.run_id = run_id
        self.host = host  # one host's series only (a drill-down)
        self.slurm_job = slurm_job

    def _sel(self, **extra: str | None) -> str:
        if self.host is not None and "host" not in extra:
            extra["host"] = self.host
        if self.slurm_job is not None:
            extra["slurm_job_id"] = self.slurm_job
        return matcher(job=self.job, **extra)

    def summary(self, t1: float, window_s: float) -> JobData:
        """Aggregates over ``[t1 - window_s, t1]``: the report's figures."""
        q = self.client.query
        w = _rng(window_s)
        sel = self._sel()
        data = JobData(t1 - window_s, t1, {})
        for s in q(f"last_over_time(sattui_info{sel}{w})", t1):
            h = s.labels.get("host")
            if h:
                data.hosts.setdefault(h, HostData(h, True))
        rsel = self._sel(run_id=self.run_id)
        ranks = self._ranks(data, q(f"increase(sattui_rank_state_seconds_total{rsel}{w})", t1), "states_s")
        self._ranks(data, q(f"increase(sattui_rank_lost_seconds_total{rsel}{w})", t1), "causes_s", ranks)
        for s in q(f"max_over_time(sattui_dataloader_workers{rsel}{w})", t1):
            r = ranks.get(_rank_key(s))
            if r is not None:
                r.workers = s.last
        for s in q(f"increase(sattui_worker_cpu_seconds_total{rsel}{w})", t1):
            r = ranks.get(_rank_key(s))
            if r is not None:
                r.worker_cpu_s = s.last
        self._wait_bins(ranks, t1, window_s)
        if self.run_id is not None:
            # The run's hosts are those whose ranks carry its id.
            keep = {r.host for r in ranks.values()}
            data.hosts = {k: v for k, v in data.hosts.items() if k in keep}
        cards: dict[tuple[str, str], CardData] = {}
        for metric, fn, attr, scale in (("sattui_card_utilization_ratio", "avg", "util_mean", 100.0),
                                        ("sattui_card_sm_active_ratio", "avg", "sm_active_mean", 100.0),
                                        ("sattui_card_memory_used_bytes", "max", "mem_used_max", 1.0),
                                        ("sattui_card_power_watts", "avg", "power_mean_w", 1.0)):
            for s in q(f"{fn}_over_time({metric}{sel}{w})", t1):
                c = self._card(data, cards, s)
                if c is not None and s.last is not None:
                    setattr(c, attr, s.last * scale)
        for s in q(f"increase(sattui_card_ledger_seconds_total{sel}{w})", t1):
            c = self._card(data, cards, s)
            if c is not None and s.last is not None:
                c.ledger_s = s.last
        for metric, attr, lab in (("sattui_card_idle_seconds_total", "idle_by_state_s", "state"),
                                  ("sattui_card_idle_cause_seconds_total", "idle_by_cause_s", "cause")):
            for s in q(f"increase({metric}{sel}{w})", t1):
                c = self._card(data, cards, s)
                if c is not None and s.last and s.labels.get(lab):
                    getattr(c, attr)[s.labels[lab]] = s.last
        for s in q(f"last_over_time(sattui_finding_impact_ratio{sel}[{max(1, round(min(window_s, 30)))}s])", t1):
            hd = data.hosts.get(s.labels.get("host", ""))
            if hd is not None:
                hd.findings.append({**{k: s.labels.get(k) for k in ("rule", "severity", "card", "rank")},
                                   "impact": s.last})
        if self.run_id is None:
            self._dcgm_summary(data, cards, t1, w)
        return data

    def _dcgm_summary(self, data: JobData, cards: dict[tuple[str, str], CardData], t1: float, w: str) -> None:
        q = self.client.query
        sel = self._sel()
        for metric, fn, attr, scale in (("DCGM_FI_DEV_GPU_UTIL", "avg", "util_mean", 1.0),
                                        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "avg", "util_mean", 100.0),
                                        ("DCGM_FI_PROF_SM_ACTIVE", "avg", "sm_active_mean", 100.0),
                                        ("DCGM_FI_DEV_FB_USED", "max", "mem_used_max", 1024.0 * 1024.0),
                                        ("DCGM_FI_DEV_POWER_USAGE", "avg", "power_mean_w", 1.0)):
            for s in q(f"{fn}_over_time({metric}{sel}{w})", t1):
                c = self._dcgm_card(data, cards, s)
                # GPU_UTIL first; the graphics engine's activity only where it is missing.
                if c is not None and s.last is not None and getattr(c, attr) is None:
                    setattr(c, attr, s.last * scale)

    def _wait_bins(self, ranks: dict[tuple[str, str, str], RankData], t1: float, window_s: float) -> None:
        """Each rank's seconds and waiting seconds per bucket of the window: the raw
        counters' increments from one scrape to the next (not ``increase``, whose windows
        drop or extrapolate the nodes' 5-s jumps; a counter reset leaves its increment
        out), summed into buckets of WAIT_STEP_S — or of the scrapes' spacing where that is
        longer — so the ranks of different hosts, scraped at different moments, fall into
        the same buckets."""
        qr = self.client.query_range
        t0 = t1 - window_s
        step = max(1.0, window_s / 1000.0)  # (Prometheus answers at most 11,000 points a series)
        by = "sum by (host, rank, run_id) "
        walls = qr(f"{by}(sattui_rank_state_seconds_total{self._sel(run_id=self.run_id)})", t0, t1, step)
        waits = {_rank_key(s): dict(s.points) for s in qr(
            f"{by}(sattui_rank_lost_seconds_total{self._sel(run_id=self.run_id, cause=STRAGGLER)})", t0, t1, step)}
        incs: dict[tuple[str, str, str], list[tuple[float, float, float]]] = {}
        for s in walls:
            key = _rank_key(s)
            if key not in ranks:
                continue
            wait_at = waits.get(key, {})
            got = incs[key] = []
            last_wait = 0.0
            prev: tuple[float, float] | None = None
            for t, wall in s.points:
                wait = wait_at.get(t, last_wait)  # no series yet: nothing waited so far
                last_wait = wait
                if prev is not None:
                    d_wall, d_wait = wall - prev[0], wait - prev[1]
                    if d_wall > 0 and 0.0 <= d_wait <= d_wall + 1e-6:
                        got.append((t, d_wall, d_wait))
                prev = (wall, wait)
        gaps = sorted(b[0] - a[0] for got in incs.values() for a, b in zip(got, got[1:], strict=False))
        bucket = max(WAIT_STEP_S, WAIT_STEP_S * math.ceil(gaps[len(gaps) // 2] / WAIT_STEP_S) if gaps else 0.0)
        for key, got in incs.items():
            out = ranks[key].wait_bins
            for t, d_wall, d_wait in got:
                k = math.floor(t / bucket)
                w0, x0 = out.get(k, (0.0, 0.0))
                out[k] = (w0 + d_wall, x0 + d_wait)

    # -- the view's series

    def series(self, t1: float, span_s: float, step_s: float) -> JobData:
        """The view's window: each card's utilization and each rank's main state per step."""
        qr = self.client.query_range
        t0 = t1 - span_s
        data = JobData(t0, t1, {}, step_s)
        sel = self._sel()
        for s in self.client.query(f"last_over_time(sattui_info{sel}{_rng(span_s)})", t1):
            h = s.labels.get("host")
            if h:
                data.hosts.setdefault(h, HostData(h, True))
        cards: dict[tuple[str, str], CardData] = {}
        for s in qr(f"sattui_card_utilization_ratio{sel}", t0, t1, step_s):
            c = self._card(data, cards, s)
            if c is not None:
                c.util = [(t, v * 100.0) for t, v in s.points]
        rsel = self._sel(run_id=self.run_id)
        # The ledger's counters move as each second settles, seen at the scrapes' pace: each
        # step's state is the one with the most seconds over the last 10 s (or the step, if
        # longer), a few scrapes' worth.
        look = _rng(max(10.0, 2 * step_s))
        ranks: dict[tuple[str, str, str], RankData] = {}
        per: dict[tuple[str, str, str], dict[float, dict[str, float]]] = {}
        for s in qr(f"increase(sattui_rank_state_seconds_total{rsel}{look})", t0, t1, step_s):
            key = _rank_key(s)
            r = ranks.get(key)
            if r is None:
                new = self._rank(data, s)
                if new is None:
                    continue
                r = ranks[key] = new
            st = s.labels.get("state", "other")
            for t, v in s.points:
                per.setdefault(key, {}).setdefault(t, {})[st] = v
        for key, by_t in per.items():
            r = ranks[key]
            for t in sorted(by_t):
                got = {k: v for k, v in by_t[t].items() if v > 0}
                r.strip.append((t, max(got, key=lambda k: got[k]) if got else None))
                r.steps.append((t, got))
        if self.run_id is not None:
            keep = {r.host for r in ranks.values() if r is not None}
            data.hosts = {k: v for k, v in data.hosts.items() if k in keep}
        else:
            for metric, scale in (("DCGM_FI_DEV_GPU_UTIL", 1.0), ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 100.0)):
                for s in qr(f"{metric}{sel}", t0, t1, step_s):
                    c = self._dcgm_card(data, cards, s)
                    if c is not None and not c.util:
                        c.util = [(t, v * scale) for t, v in s.points]
        return data

    def host_detail(self, host: str, sattui: bool, t1: float, span_s: float, step_s: float) -> HostDetail:
        """One host's series over the view's window, for the one-node screens. The window
        is whole steps of whole milliseconds (Prometheus's resolution) from the epoch, so
        successive reads answer at the same instants and a host's view adds only the new
        ones (sattui/cluster/hostsession.py)."""
        qr = self.client.query_range
        step_ms = max(1, round(step_s * 1000))
        t1_ms = math.floor(t1 * 1000) // step_ms * step_ms
        span_ms = -(-math.ceil(span_s * 1000) // step_ms) * step_ms
        t1, span_s, step_s = t1_ms / 1000, span_ms / 1000, step_ms / 1000
        t0 = (t1_ms - span_ms) / 1000
        out = HostDetail(host, t0, t1, step_s)
        if sattui:
            sel = self._sel(host=host)
            for metric, attr, scale in (("sattui_card_utilization_ratio", "util", 100.0),
                                        ("sattui_card_sm_active_ratio", "sm_active", 100.0),
                                        ("sattui_card_memory_used_bytes", "mem_used", 1.0),
                                        ("sattui_card_memory_total_bytes", "mem_total", 1.0),
                                        ("sattui_card_power_watts", "power_w", 1.0),
                                        ("sattui_card_temperature_celsius", "temp_c", 1.0)):
                for s in qr(f"{metric}{sel}", t0, t1, step_s):
                    c = s.labels.get("card")
                    if c is None:
                        continue
                    out.card_info.setdefault(c, {"uuid": s.labels.get("uuid", ""), "vendor": s.labels.get("vendor", ""),
                                                 "model": s.labels.get("model", "")})
                    out.cards.setdefault(c, {})[attr] = [(t, v * scale) for t, v in s.points]
            one_host = JobReader(self.client, self.job, self.run_id, host=host, slurm_job=self.slurm_job)
            data = one_host.series(t1, span_s, step_s)
            h = data.hosts.get(host)
            out.ranks = h.ranks if h is not None else []
            for s in self.client.query(f"sattui_finding_impact_ratio{sel}", t1):
                out.findings.append({**{k: s.labels.get(k) for k in ("rule", "severity", "card", "rank")},
                                     "impact": s.last})
        else:
            for metric, attr, scale in (("DCGM_FI_DEV_GPU_UTIL", "util", 1.0),
                                        ("DCGM_FI_PROF_SM_ACTIVE", "sm_active", 100.0),
                                        ("DCGM_FI_DEV_FB_USED", "mem_used", 1024.0 * 1024.0),
                                        ("DCGM_FI_DEV_POWER_USAGE", "power_w", 1.0),
                                        ("DCGM_FI_DEV_GPU_TEMP", "temp_c", 1.0),
                                        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "util", 100.0),
                                        # dcgm-exporter gives no total: used + free (same labels)
                                        ("DCGM_FI_DEV_FB_USED{sel} + DCGM_FI_DEV_FB_FREE", "mem_total",
                                         1024.0 * 1024.0)):
                for hl in ("Hostname", "hostname"):
                    sel = self._sel(**{hl: host})
                    for s in qr(f"{metric.replace('{sel}', sel)}{sel}", t0, t1, step_s):
                        if "GPU_I_ID" in s.labels or "gpu" not in s.labels:
                            continue
                        c = s.labels["gpu"]
                        out.card_info.setdefault(c, {"uuid": s.labels.get("UUID", ""), "vendor": "nvidia",
                                                     "model": s.labels.get("modelName", "")})
                        out.cards.setdefault(c, {}).setdefault(attr, [(t, v * scale) for t, v in s.points])
                    if out.cards:
                        break
        return out

    # -- building

    def _ranks(self, data: JobData, got: list[Series], attr: str,
               ranks: dict[tuple[str, str, str], RankData] | None = None) -> dict[tuple[str, str, str], RankData]:
        ranks = {} if ranks is None else ranks
        lab = "state" if attr == "states_s" else "cause"
        for s in got:
            key = _rank_key(s)
            r = ranks.get(key)
            if r is None:
                r = self._rank(data, s)
                if r is None:
                    continue
                ranks[key] = r
            if s.last and s.labels.get(lab):
                getattr(r, attr)[s.labels[lab]] = s.last
        return ranks

    @staticmethod
    def _rank(data: JobData, s: Series) -> RankData | None:
        host = s.labels.get("host")
        if not host:
            return None
        h = data.hosts.setdefault(host, HostData(host, True))
        r = RankData(host, s.labels.get("rank", ""), s.labels.get("local_rank", ""), s.labels.get("run_id", ""))
        h.ranks.append(r)
        return r

    @staticmethod
    def _card(data: JobData, cards: dict[tuple[str, str], CardData], s: Series) -> CardData | None:
        host, card = s.labels.get("host"), s.labels.get("card")
        if not host or card is None or (host not in data.hosts):
            return None
        c = cards.get((host, card))
        if c is None:
            c = cards[(host, card)] = CardData(host, card, s.labels.get("uuid", ""), s.labels.get("vendor", ""),
                                               s.labels.get("model", ""))
            data.hosts[host].cards.append(c)
        return c

    @staticmethod
    def _dcgm_card(data: JobData, cards: dict[tuple[str, str], CardData], s: Series) -> CardData | None:
        if "GPU_I_ID" in s.labels or "gpu" not in s.labels:
            return None  # a MIG instance: its card is the whole-GPU series
        host = next((s.labels[k] for k in DCGM_HOST_LABELS if s.labels.get(k)), None)
        if host is None:
            return None
        h = data.hosts.get(host)
        if h is not None and h.sattui:
            return None  # sattui's own DCGM_* copies of its cards: counted once, as sattui's
        if h is None:
            h = data.hosts[host] = HostData(host, False)
        key = (host, s.labels["gpu"])
        c = cards.get(key)
        if c is None:
            c = cards[key] = CardData(host, s.labels["gpu"], s.labels.get("UUID", ""), "nvidia",
                                      s.labels.get("modelName", ""), source="dcgm-exporter")
            h.cards.append(c)
        return c


def _rank_key(s: Series) -> tuple[str, str, str]:
    return s.labels.get("host", ""), s.labels.get("rank", ""), s.labels.get("run_id", "")
