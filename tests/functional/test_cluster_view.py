"""``sattui cluster`` (Pilot) over a real Prometheus scraping sattui's real exporters
(scripted nodes, tests/cluster_nodes.py) and a captured dcgm-exporter page: one block
per host at 80×24 with the verdict on top; Enter opens a host in the one-node screens;
Prometheus going down is said on screen and the last data stays; more hosts scroll."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sattui.cluster.view import ClusterPoller, status_lines
from sattui.cluster_app import ClusterApp
from sattui.screens.cluster import ClusterScreen, ClusterUpdated
from sattui.screens.help import HelpScreen
from sattui.screens.main import MainScreen
from sattui.widgets.header import StatusHeader
from sattui.widgets.timechart import TimeChart
from tests.cluster_nodes import RankScript, ScriptedNode, input_job, straggler_job
from tests.prom import Prometheus, StaticExporter, free_port

REPO = Path(__file__).resolve().parents[2]
DCGM_PAGE = REPO / "tests" / "fixtures" / "vendors" / "dcgm-exporter" / \
    "dcgm-exporter-metrics_a100-mig-1g.5gb_full-gpu-and-gi_nvidia-docs.prom"
SIZE = (80, 24)


def screen_lines(app) -> list[str]:
    return [s.text for s in app.screen.query_one(TimeChart)._strips]


async def until(pilot, cond, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        await pilot.pause(0.2)
        pilot.app.redraw(True)
        if cond():
            return
    raise AssertionError(f"timed out; screen: {screen_lines(pilot.app)}")


@pytest.fixture(scope="module")
def cluster():
    nodes = [*straggler_job(), *input_job()]
    with StaticExporter(DCGM_PAGE.read_text()) as dcgm:
        for n in nodes:
            n.__enter__()
        try:
            with Prometheus({"wtv-job": [n.target for n in nodes] + [f"127.0.0.1:{dcgm.port}"]}) as p:
                p.wait_for('sattui_rank_state_seconds_total{job="wtv-job"} > 0', n=11)
                time.sleep(6)
                yield p
        finally:
            for n in nodes:
                n.__exit__(None, None, None)


async def test_hosts_verdict_and_a_drill_down(cluster):
    poller = ClusterPoller(cluster.url, "wtv-job", window_s=60.0)
    app = ClusterApp(poller, show_clock=False)
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, ClusterScreen)
        # Help over the hosts, and Esc back to them.
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, ClusterScreen)
        # The straggler is named once the asymmetry of the ranks' waits is sure (its
        # interval over the scrapes' buckets): until then the waits read as collectives.
        await until(pilot, lambda: any("ub20-a100-k8s" in x for x in screen_lines(app))
                    and poller.snapshot().verdict is not None and "straggler" in screen_lines(app)[0])
        lines = screen_lines(app)
        assert len(lines) <= 23
        # The verdict on top: rank 1 on n1 is the straggler (the biggest cause here).
        assert lines[0].startswith("HIGH ") and "straggler" in lines[0] and "n1" in lines[0], lines[0]
        assert "5 host(s)" in lines[1]
        text = "\n".join(lines)
        for host in ("b0", "b1", "n0"):
            assert f"{host} " in text or f"▸{host}" in text
        assert "rank 0" in text and "backward" in text
        # b0's card at 55 % and b1's at 95 %: the values column shows each host's cards.
        b0 = next(x for x in lines if "b0" in x)
        assert "1 card" in b0 and "55%" in b0, b0
        # Scroll to the dcgm-only host (the last): its card, "cards only".
        for _ in range(6):
            await pilot.press("down")
        await until(pilot, lambda: any("▸ub20-a100-k8s" in x for x in screen_lines(app)))
        assert any("cards only" in x for x in screen_lines(app))
        assert any("(dcgm)" in x for x in screen_lines(app))
        # Up to n1 and Enter: the one-node main screen, fed from Prometheus.
        for _ in range(6):
            await pilot.press("up")
        await pilot.press("down", "down", "down")
        await until(pilot, lambda: any("▸n1" in x for x in screen_lines(app)))
        await pilot.press("enter")
        assert isinstance(app.screen, MainScreen)
        # n1's rank 1 sleeps most of the time (tests/cluster_nodes.py): its main-thread strip says so.
        await until(pilot, lambda: any(x.startswith("rank1") for x in screen_lines(app))
                    and any("idle" in x for x in screen_lines(app)))
        assert app.session.header["host"] == "n1"
        head = "".join(t for t, _ in app.screen.query_one(StatusHeader)._runs[0])
        assert head.startswith("n1 (sattui) from http://127.0.0.1:") and "via Prometheus" in head, head
        assert "pid" not in head and "py-spy" not in head and " up " not in head, head
        await pilot.press("escape")
        assert isinstance(app.screen, ClusterScreen) and poller.open_host is None
        # A host with cards: b0's card 0 in the main screen.
        await pilot.press("up", "up", "up", "up", "up", "up")
        await until(pilot, lambda: any("▸b0" in x for x in screen_lines(app)))
        await pilot.press("enter")
        await until(pilot, lambda: any(x.startswith("0 H200") and "55%" in x for x in screen_lines(app))
                    and any("data_wait 4" in x for x in screen_lines(app)))
    # Quitting: a redraw tick or a poller's update that falls after the screens are gone
    # draws nothing (it raised ScreenStackError).
    assert not app.screen_stack
    app._on_timer()
    app.on_cluster_updated(ClusterUpdated())


async def test_prometheus_down_is_said_and_the_last_data_stays():
    node = ScriptedNode("solo", [RankScript(0, {"forward": 0.6, "backward": 0.4})])
    with node:
        prom = Prometheus({"wtv-down": [node.target]}, port=free_port())
        prom.__enter__()
        try:
            prom.wait_for('sattui_rank_state_seconds_total{job="wtv-down"} > 0', n=2)
            poller = ClusterPoller(prom.url, "wtv-down", window_s=60.0, timeout_s=2.0)
            app = ClusterApp(poller, show_clock=False)
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: any("solo" in x for x in screen_lines(app)))
                await asyncio.get_running_loop().run_in_executor(None, prom.__exit__, None, None, None)
                await until(pilot, lambda: any("not reachable" in x for x in screen_lines(app)))
                lines = screen_lines(app)
                assert any("solo" in x for x in lines) and any("showing data from" in x for x in lines)
        finally:
            prom.__exit__(None, None, None)


async def test_prometheus_answering_garbage_is_said_on_screen():
    with StaticExporter("<html>not prometheus</html>") as junk:
        poller = ClusterPoller(f"http://127.0.0.1:{junk.port}", window_s=60.0, timeout_s=2.0)
        app = ClusterApp(poller, show_clock=False)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: any("answered something that is not" in x for x in screen_lines(app)),
                        timeout=20)


async def test_sixteen_hosts_scroll_and_the_ui_thread_never_reads_prometheus():
    nodes = [ScriptedNode(f"h{i:02d}", [RankScript(i, {"forward": 0.5, "backward": 0.5})]) for i in range(16)]
    for n in nodes:
        n.__enter__()
    try:
        with Prometheus({"wtv-16": [n.target for n in nodes]}) as prom:
            prom.wait_for('sattui_rank_state_seconds_total{job="wtv-16"} > 0', n=32)
            poller = ClusterPoller(prom.url, "wtv-16", window_s=60.0)
            ui_thread: list[int] = []
            real = poller.client._get

            def spy(*a, **kw):
                ui_thread.append(threading.get_ident())
                return real(*a, **kw)
            poller.client._get = spy  # type: ignore[method-assign]
            app = ClusterApp(poller, show_clock=False)
            async with app.run_test(size=SIZE) as pilot:
                # A host's block: its row and its rank's strip; as many as fit (four at least), the rest scroll.
                await until(pilot, lambda: any("rank 0" in x for x in screen_lines(app))
                            and not any("no rank in this window" in x for x in screen_lines(app)))
                main = threading.get_ident()
                lines = screen_lines(app)
                assert any("h03" in x for x in lines) and not any("h10" in x for x in lines), lines
                assert any("of 16" in x for x in lines)
                # 50/50 forward/backward: the value column gives the window's seconds, not the cells'.
                assert any(x.startswith("  rank 0") and "50%" in x for x in lines), lines
                for _ in range(12):
                    await pilot.press("down")
                await until(pilot, lambda: any("▸h12" in x for x in screen_lines(app)))
                assert not any("h00" in x for x in screen_lines(app))
            assert ui_thread and main not in ui_thread
    finally:
        for n in nodes:
            n.__exit__(None, None, None)


@pytest.mark.parametrize("url, says", [
    ("nope", "not a Prometheus URL"),
    ("http://127.0.0.1:{port}", "is not reachable"),
])
def test_a_bad_or_unreachable_url_is_one_line_and_a_non_zero_exit(url, says):
    p = subprocess.run([sys.executable, "-m", "sattui", "cluster", "--prometheus", url.format(port=free_port())],
                       cwd=REPO, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in p.stderr, p.stderr


def test_the_run_filter_keeps_the_runs_hosts(cluster):
    poller = ClusterPoller(cluster.url, "wtv-job", "run-b", window_s=60.0)
    poller.poll_once()  # the worker's body, called here directly
    snap = poller.snapshot()
    assert snap.error is None and snap.data is not None
    assert sorted(snap.data.hosts) == ["b0", "b1"]


def test_a_slow_prometheus_is_said_and_the_last_data_stays(cluster):
    poller = ClusterPoller(cluster.url, "wtv-job", window_s=60.0, timeout_s=1.0)
    poller.poll_once()
    hosts = sorted(poller.snapshot().data.hosts)
    # Now a server that accepts and never answers.
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    held: list[socket.socket] = []
    t = threading.Thread(target=lambda: held.append(srv.accept()[0]), daemon=True)
    t.start()
    try:
        poller.client.url = f"http://127.0.0.1:{srv.getsockname()[1]}"
        poller.poll_once()
    finally:
        for c in held:
            c.close()
        srv.close()
    snap = poller.snapshot()
    assert snap.error is not None and snap.error.endswith("did not answer within 1 s"), snap.error
    assert sorted(snap.data.hosts) == hosts
    text = [ln.full[0][0] for ln in status_lines(snap, poller.url, 80, time.time()) if ln.full]
    assert any("did not answer within 1 s" in x for x in text) and any("showing data from" in x for x in text), text


def test_a_dcgm_only_hosts_cards_in_the_drill_down(cluster):
    poller = ClusterPoller(cluster.url, "wtv-job", window_s=60.0)
    d = poller.reader.host_detail("ub20-a100-k8s", False, time.time(), 60.0, 2.0)
    # The captured page: one whole GPU (its MIG instances left out), FB used 4845 MiB + free 35690 MiB.
    assert list(d.cards) == ["0"] and not d.ranks
    card = d.cards["0"]
    assert card["mem_used"][-1][1] == 4845 * 2**20 and card["mem_total"][-1][1] == (4845 + 35690) * 2**20, card
    assert card["temp_c"][-1][1] == 61 and card["power_w"][-1][1] > 400
