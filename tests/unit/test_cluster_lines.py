"""The cluster screen's lines (sattui/cluster/view.py) at 80×24: four hosts of eight
ranks fit, more scroll with the selected host kept in view; a rank's value is its
window's seconds share; a dcgm-only host says it shows cards only."""

from __future__ import annotations

from sattui.cluster.source import CardData, HostData, JobData, RankData
from sattui.cluster.view import Snapshot, job_lines, status_lines
from sattui.view.binning import Axis
from sattui.view.lines import columns_for

T1 = 1_000_000.0


def job(hosts: int, ranks: int = 8, cards: int = 8, dcgm: int = 0) -> JobData:
    data = JobData(T1 - 60, T1, {}, 2.0)
    for h in range(hosts + dcgm):
        name = f"h{h:02d}"
        hd = data.hosts[name] = HostData(name, h < hosts)
        for c in range(cards):
            hd.cards.append(CardData(name, str(c), util=[(T1 - 60 + 2 * k, 90.0 - c) for k in range(30)]))
        if h < hosts:
            for r in range(ranks):
                steps = [(T1 - 60 + 2 * k, {"forward": 0.8, "backward": 1.2}) for k in range(30)]
                hd.ranks.append(RankData(name, str(h * ranks + r), str(r), "run", steps=steps,
                                         strip=[(t, "backward") for t, _ in steps]))
    return data


def texts(data: JobData, selected: str | None, top: int = 0) -> tuple[list[str], int]:
    cols = columns_for(80)
    axis = Axis.make(T1, 60.0, cols.body)
    snap = Snapshot(data, None, [], None, T1)
    room = 23 - len(status_lines(snap, "http://p:9090", cols.width, T1)) - 1
    lines, _, top = job_lines(snap, axis, cols, room, selected, top)
    assert len(lines) <= room
    out = []
    for ln in lines:
        parts = [ln.full] if ln.full is not None else [ln.label, ln.body, ln.value]
        out.append(" ".join("".join(t for t, _ in p) for p in parts if p))
    return out, top


def test_four_hosts_of_eight_ranks_fit_and_sixteen_scroll():
    lines, top = texts(job(16), "h00")
    hosts = [x.split()[0].lstrip("▸") for x in lines if x.startswith(("▸h", " h", "h"))]
    assert hosts == ["h00", "h01", "h02", "h03"], lines
    assert "hosts 1–4 of 16" in lines[-1]
    assert sum("more ranks" in x for x in lines) >= 3
    # Selecting host 13 scrolls so that it shows.
    lines, top = texts(job(16), "h13", top)
    assert any(x.startswith("▸h13") for x in lines) and not any("h00" in x for x in lines), lines
    assert top > 0 and "of 16" in lines[-1]


def test_rank_value_is_the_windows_share_and_dcgm_hosts_say_cards_only():
    lines, _ = texts(job(1, ranks=1, dcgm=1), "h00")
    rank = next(x for x in lines if "rank 0" in x)
    # 1.2 of every 2 s in backward: 60 %, though every cell shows backward.
    assert rank.rstrip().endswith("backward 60%"), rank
    assert any("h01" in x and "(dcgm)" in x for x in lines)
    assert any("cards only" in x for x in lines)
