"""A node's facts (:class:`sattui.metrics.node.Snapshot`) as Prometheus metric families:
sattui's own names (docs/cluster.md: base units, ratios 0–1, counters ending in
``_total``) and, for NVIDIA cards, dcgm-exporter's names, labels and units, so
dashboards built on dcgm-exporter work unchanged.

Every family is on the page from the first scrape (docs/cluster.md). A counter starts at
0: each known rank has a series for every state and cause, each known card for every
state and cause of its idle ledger, before their first second counts (so ``rate()`` and
``increase()`` see the first seconds, and a family is never missing). A gauge whose value
is not known (a card that does not give it, no finding standing) has no series: its
family's ``# HELP``/``# TYPE`` lines alone, never a 0 standing in for unknown.

Label values are other people's text (card names from a vendor tool, the run id from
the trainer's environment, ``--host``): prometheus_client escapes them in the exposition
(backslash, double quote, new line); readers escape the rest before a terminal
(sattui/textsafe.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from sattui.job import LABELS as JOB_LABELS
from sattui.ledger.causes import CARD_CAUSES, RANK_CAUSES, UNKNOWN
from sattui.metrics.node import CardState, NodeMetrics, Snapshot
from sattui.states import COUNTED_NAMES

CARD_LABELS = ("host", "card", "uuid", "vendor", "model")
RANK_LABELS = ("host", "rank", "local_rank", "run_id")
# dcgm-exporter's labels, and ``host`` as every sattui series has.
DCGM_LABELS = ("gpu", "UUID", "modelName", "Hostname", "hostname", "host")
MIB = 1024 * 1024

# (metric, help, record field, scale): the card gauges. Percentages become ratios.
CARD_GAUGES: list[tuple[str, str, str, float]] = [
    ("sattui_card_utilization_ratio", "Card utilization (time a kernel ran), 0-1.", "util", 0.01),
    ("sattui_card_sm_active_ratio", "Share of SM cycles with a warp resident, 0-1, where the card gives it.",
     "sm_active", 0.01),
    ("sattui_card_memory_used_bytes", "Device memory in use, bytes.", "mem_used", 1.0),
    ("sattui_card_memory_total_bytes", "Device memory in all, bytes.", "mem_total", 1.0),
    ("sattui_card_power_watts", "Board power draw, watts.", "power_w", 1.0),
    ("sattui_card_temperature_celsius", "Card temperature, degrees Celsius.", "temp_c", 1.0),
]

# dcgm-exporter's fields: (name, help as dcgm-exporter writes it, record field, scale).
DCGM_GAUGES: list[tuple[str, str, str, float]] = [
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "util", 1.0),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "mem_used", 1.0 / MIB),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "power_w", 1.0),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "temp_c", 1.0),
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "sm_clock_mhz", 1.0),
    ("DCGM_FI_PROF_SM_ACTIVE", "Ratio of cycles an SM has at least 1 warp assigned (in %).", "sm_active", 0.01),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active (in %).",
     "tensor_active", 0.01),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active sending or receiving "
     "data (in %).", "dram_active", 0.01),
]


@dataclass(frozen=True, eq=False)  # hashed by identity: a cache key at every series of every scrape
class Family:
    """One metric family: its name (counters without ``_total``, as prometheus_client
    takes them), type, help and label names. Every family also has the trainer's job
    labels (``JOB_LABELS``: Slurm job id, pod, namespace) after its own, so any series can
    be tied to a job or a pod (empty where not known: Prometheus reads that as no label)."""

    name: str
    type: str  # "gauge" or "counter"
    help: str
    labels: tuple[str, ...]

    def metric(self, samples: Iterable[tuple[tuple[str, ...], float]]) -> Metric:
        cls = CounterMetricFamily if self.type == "counter" else GaugeMetricFamily
        m = cls(self.name, self.help, labels=list(self.labels + JOB_LABELS))
        for values, v in samples:
            m.add_metric(list(values), v)
        return m


Samples = list[tuple[tuple[str, ...], float]]
Rows = list[tuple[Family, Samples]]

INFO = Family("sattui_info", "gauge", "One per sattui: its version and card backend.", ("host", "version", "backend"))
CARD_FAMILIES = [Family(name, "gauge", help_, CARD_LABELS) for name, help_, _, _ in CARD_GAUGES]
IDLE = Family("sattui_card_idle_seconds", "counter", "Card not-busy seconds (1 - util) by the main-thread state of "
              "the rank using it at the same moments (the idle ledger).", CARD_LABELS + ("state",))
IDLE_CAUSE = Family("sattui_card_idle_cause_seconds", "counter", "Card not-busy seconds by the cause the advisor's "
                    "ledger gives them.", CARD_LABELS + ("cause",))
COVERED = Family("sattui_card_ledger_seconds", "counter", "Seconds of the card the idle ledger covers (the "
                 "denominator of its shares).", CARD_LABELS)
STATES = Family("sattui_rank_state_seconds", "counter", "Main-thread seconds of each rank per state (py-spy "
                "samples, start-up left out).", RANK_LABELS + ("state",))
LOST = Family("sattui_rank_lost_seconds", "counter", "Main-thread seconds of each rank lost, by the cause the "
              "advisor's ledger gives them.", RANK_LABELS + ("cause",))
WORKERS = Family("sattui_dataloader_workers", "gauge", "Live DataLoader worker processes of each rank.",
                 RANK_LABELS)
WORKER_CPU = Family("sattui_worker_cpu_seconds", "counter", "CPU seconds used by each rank's DataLoader workers.",
                    RANK_LABELS)
FINDINGS = Family("sattui_finding_impact_ratio", "gauge", "Current advisor findings: the share of the job's wall "
                  "time a fix would recover, 0-1 (absent when cleared).", ("host", "rule", "severity", "card", "rank"))
FINDINGS_LOWER = Family("sattui_finding_impact_lower_ratio", "gauge", "Lower end of the interval of a current "
                        "finding's impact, 0-1 (absent when cleared or not known).", FINDINGS.labels)
FINDINGS_UPPER = Family("sattui_finding_impact_upper_ratio", "gauge", "Upper end of the interval of a current "
                        "finding's impact, 0-1 (absent when cleared or not known).", FINDINGS.labels)
DCGM_FAMILIES = [Family(name, "gauge", help_, DCGM_LABELS) for name, help_, _, _ in DCGM_GAUGES]


def _card_labels(host: str, c: CardState) -> tuple[str, ...]:
    i = c.info
    return (host, str(i.get("card")), str(i.get("uuid") or ""), str(i.get("vendor") or ""), str(i.get("name") or ""))


def _num(sample: dict[str, Any] | None, key: str) -> float | None:
    if sample is None:
        return None
    v = sample.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


# The label values each counter starts at 0 (the card's idle ledger says "unknown" where
# no stacks were sampled).
RANK_STATES = COUNTED_NAMES
CARD_STATES = (*COUNTED_NAMES, UNKNOWN)


def _from_zero(names: Iterable[str], got: dict[str, float]) -> list[tuple[str, float]]:
    """``got`` with every one of ``names`` it lacks at 0, sorted by name."""
    return sorted({**dict.fromkeys(names, 0.0), **got}.items())


def rows(s: Snapshot) -> Rows:
    """Every family of one snapshot with its samples ``(label values, value)``, each family
    always (with no samples where nothing is known). A gauge value the card does not give
    is left out (missing is not 0); the counters of a known card or rank start at 0."""
    out: Rows = [(INFO, [((s.host, s.version, s.backend or ""), 1.0)])]
    card_labels = [_card_labels(s.host, c) for c in s.cards]
    for fam, (_, _, key, scale) in zip(CARD_FAMILIES, CARD_GAUGES):
        got = []
        for c, lab in zip(s.cards, card_labels):
            v = _num(c.sample, key)
            if v is None and key == "mem_total":
                v = _num(c.info, "mem_total")
            if v is not None:
                got.append((lab, v * scale))
        out.append((fam, got))
    idle: Samples = []
    cause: Samples = []
    covered: Samples = []
    for c, lab in zip(s.cards, card_labels):
        covered.append((lab, c.ledger_s))
        idle += [(lab + (k,), v) for k, v in _from_zero(CARD_STATES, c.idle_by_state_s)]
        cause += [(lab + (k,), v) for k, v in _from_zero(CARD_CAUSES, c.idle_by_cause_s)]
    out += [(IDLE, idle), (IDLE_CAUSE, cause), (COVERED, covered)]

    states: Samples = []
    lost: Samples = []
    workers: Samples = []
    wcpu: Samples = []
    for r in sorted(s.ranks, key=lambda r: (r.labels.rank, r.labels.run_id)):
        lab = (s.host, r.labels.rank, r.labels.local_rank, r.labels.run_id)
        states += [(lab + (k,), v) for k, v in _from_zero(RANK_STATES, r.states_s)]
        lost += [(lab + (k,), v) for k, v in _from_zero(RANK_CAUSES, r.causes_s)]
        workers.append((lab, float(r.workers)))
        wcpu.append((lab, r.worker_cpu_s))
    out += [(STATES, states), (LOST, lost), (WORKERS, workers), (WORKER_CPU, wcpu)]

    found: Samples = []
    lower: Samples = []
    upper: Samples = []
    seen: set[tuple[str, str, str]] = set()
    for f in s.findings:
        fkey = (f["rule"], f["card"], f["rank"])
        if fkey not in seen:  # one series per finding (a headline is also in the list)
            seen.add(fkey)
            lab = (s.host, f["rule"], f["severity"], f["card"], f["rank"])
            found.append((lab, f["impact"]))
            ci = f.get("impact_ci")
            if ci is not None:
                lower.append((lab, ci[0]))
                upper.append((lab, ci[1]))
    out += [(FINDINGS, found), (FINDINGS_LOWER, lower), (FINDINGS_UPPER, upper)]

    nvidia = [c for c in s.cards if c.info.get("vendor") == "nvidia"]
    if nvidia:
        for fam, (_, _, key, scale) in zip(DCGM_FAMILIES, DCGM_GAUGES):
            got = []
            for c in nvidia:
                v = _num(c.sample, key)
                if v is not None:
                    got.append(((str(c.info.get("card")), str(c.info.get("uuid") or ""),
                                 str(c.info.get("name") or ""), s.host, s.host, s.host), v * scale))
            out.append((fam, got))
    return [(fam, [(values + s.job, v) for values, v in samples]) for fam, samples in out]


def families(s: Snapshot) -> list[Metric]:
    """The snapshot as prometheus_client metric families."""
    return [fam.metric(samples) for fam, samples in rows(s)]


class NodeCollector(Collector):
    """A prometheus_client collector reading a :class:`NodeMetrics` at each scrape."""

    def __init__(self, node: NodeMetrics) -> None:
        self.node = node

    def collect(self) -> Iterator[Metric]:
        yield from families(self.node.snapshot())


class _Fixed(Collector):
    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        yield from self.metrics


# Distinct series kept rendered; past this the cache starts again (label sets churn only
# when ranks, cards or findings come and go).
MAX_CACHED = 20000


class Renderer:
    """The text exposition of metric families, as ``prometheus_client.generate_latest``
    writes it, at a fraction of its cost per scrape.

    generate_latest validates and escapes every label of every sample at every scrape
    (about 20 µs a series; a node with 8 cards and 8 ranks has ~450 series: ~10 ms, 1 %
    of a core at one scrape a second, bench/metrics_scrape.py). A series' name and labels
    do not change between scrapes, only its value: each family's HELP/TYPE lines and each
    series' ``name{labels} `` part are written once by generate_latest itself (so the
    names and the label-value escaping are the library's), kept, and joined with the
    values at each scrape.
    """

    def __init__(self) -> None:
        self._heads: dict[Family, str] = {}
        self._prefixes: dict[tuple[Family, tuple[str, ...]], str] = {}

    def render(self, got: Rows) -> bytes:
        out: list[str] = []
        for fam, samples in got:
            head = self._heads.get(fam)
            if head is None:
                head = self._heads[fam] = generate_latest(_Fixed([fam.metric([])])).decode()
            out.append(head)
            for values, v in samples:
                prefix = self._prefixes.get((fam, values))
                if prefix is None:
                    prefix = self._prefix(fam, values)
                out.append(prefix)
                out.append(floatToGoString(v))
                out.append("\n")
        return "".join(out).encode()

    def _prefix(self, fam: Family, values: tuple[str, ...]) -> str:
        text = generate_latest(_Fixed([fam.metric([(values, 0.0)])])).decode()
        line = [x for x in text.splitlines() if x and not x.startswith("#")][0]
        prefix = line[:line.rindex(" ") + 1]
        if len(self._prefixes) >= MAX_CACHED:
            self._prefixes.clear()
        self._prefixes[(fam, values)] = prefix
        return prefix
