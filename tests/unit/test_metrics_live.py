"""The live monitor's exporter is fed from its session's sampling thread: the session's
card samples and the advisor's findings reach the node's metrics without a screen."""

from __future__ import annotations

import time

import pytest

from sattui.metrics.node import NodeMetrics
from sattui.session import LiveSession
from sattui.vendors import sim


def _wait(cond, timeout: float = 15.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_live_session_feeds_the_exporter(monkeypatch, tmp_path):
    import sattui.advisor.loop as loop_mod

    monkeypatch.setattr(loop_mod, "ADVISOR_PERIOD_S", 0.3)
    monkeypatch.setattr(loop_mod, "advisor_lag_s", lambda: 0.1)
    sim.set_card_file(str(tmp_path / "none"))
    node = NodeMetrics("live-host")
    try:
        s = LiveSession(backend="sim", interval_s=0.1, card_interval_s=0.1, metrics=node)
        s.advising.next_t = 0.3
        s.start()
        assert _wait(lambda: bool(node.snapshot().findings) and node.snapshot().cards[0].sample is not None)
        s.stop()
    finally:
        sim.set_card_file(None)
    snap = node.snapshot()
    assert snap.backend == "sim" and snap.host == "live-host"
    assert snap.cards[0].info["vendor"] == "sim" and snap.cards[0].sample["util"] == pytest.approx(0.0)
    assert snap.findings[0]["rule"] == "no_data"  # warming up
