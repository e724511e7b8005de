"""The simulated card's model (sattui/vendors/sim.py): busy share, power, temperature lag,
the incremental card-file reader, and the backend over a hand-written card file."""

from __future__ import annotations

import math

import pytest

from sattui.vendors import sim
from sattui.vendors.backend import auto_order, backend_names, open_backend
from sattui.vendors.sim import CardFile, SimBackend, busy_share, power_for, temp_step


def test_busy_share_is_the_covered_share_of_the_window():
    assert busy_share([], 0.0, 1.0) == 0.0
    assert busy_share([(0.0, 1.0)], 0.0, 1.0) == 1.0
    assert busy_share([(0.2, 0.4), (0.6, 0.7)], 0.0, 1.0) == pytest.approx(0.3)
    # clipped to the window on both sides
    assert busy_share([(-5.0, 0.25), (0.75, 9.0)], 0.0, 1.0) == pytest.approx(0.5)
    # overlapping intervals count once (a step still open overlapping a finished one)
    assert busy_share([(0.1, 0.5), (0.3, 0.6), (0.55, 0.58)], 0.0, 1.0) == pytest.approx(0.5)
    # outside the window, empty and reversed intervals add nothing
    assert busy_share([(2.0, 3.0), (0.5, 0.5), (0.6, 0.4)], 0.0, 1.0) == 0.0
    # an empty window is 0, not a division by zero
    assert busy_share([(0.0, 1.0)], 1.0, 1.0) == 0.0


def test_power_is_linear_between_idle_and_the_limit():
    assert power_for(0.0) == sim.IDLE_W
    assert power_for(100.0) == sim.LIMIT_W
    assert power_for(50.0) == pytest.approx((sim.IDLE_W + sim.LIMIT_W) / 2)
    assert power_for(25.0, idle_w=100.0, limit_w=500.0) == pytest.approx(200.0)


def test_temperature_follows_power_with_a_first_order_lag():
    steady = sim.AMBIENT_C + 300.0 * sim.C_PER_W
    t = temp_step(40.0, 300.0, dt=sim.TEMP_TAU_S)  # one time constant: 63.2 % of the way
    assert t == pytest.approx(40.0 + (steady - 40.0) * (1 - math.exp(-1)))
    assert temp_step(40.0, 300.0, dt=0.0) == 40.0
    # many small steps reach the same point as one big one (the lag is exact, not Euler)
    x = 40.0
    for _ in range(100):
        x = temp_step(x, 300.0, dt=sim.TEMP_TAU_S / 100)
    assert x == pytest.approx(t)
    assert temp_step(steady, 300.0, dt=5.0) == pytest.approx(steady)


def test_card_file_reads_new_complete_lines_only(tmp_path):
    p = tmp_path / "card"
    f = CardFile(str(p))
    f.read()  # no file yet: nothing, no error
    assert f.busy(0.0, 1.0) == 0.0 and f.pid is None
    p.write_text("pid 42\nmem 1000\nb 10.0\ne 10.5\nb 11.")
    f.read()
    assert (f.pid, f.mem) == (42, 1000)
    assert list(f.intervals) == [(10.0, 10.5)]
    assert f.open_since is None  # "b 11." is torn: left for the next read
    with open(p, "a") as out:
        out.write("2\n")
    f.read()
    assert f.open_since == 11.2
    # a step still running counts up to the end of the window
    assert f.busy(10.0, 12.0) == pytest.approx((0.5 + 0.8) / 2.0)
    with open(p, "a") as out:
        out.write("e 11.6\nnonsense line here\nb notanumber\n")
    f.read()
    assert list(f.intervals) == [(10.0, 10.5), (11.2, 11.6)] and f.open_since is None
    # truncated (a new demo run): read again from the start
    p.write_text("pid 7\n")
    f.read()
    assert f.pid == 7 and not f.intervals


def test_backend_samples_follow_the_card_file(tmp_path):
    p = tmp_path / "card"
    now = [100.0]
    b = SimBackend(clock=lambda: now[0] - 100.0, path=str(p), mono=lambda: now[0])
    (info,) = b.discover()
    assert info.simulated and "SIMULATED" in (info.name or "") and info.to_record()["simulated"] is True
    (s0,) = b.sample()  # no trainer yet: an idle card, real zeros
    assert (s0.util, s0.mem_used, s0.power_w, s0.procs) == (0.0, 0, sim.IDLE_W, {})
    assert s0.sm_active is None and s0.sm_clock_mhz is None and s0.pcie_rx_Bps is None
    p.write_text("pid 4242\nmem 1000000\nb 100.0\ne 100.25\nb 100.5\n")
    now[0] = 101.0
    (s1,) = b.sample()  # window [100, 101]: 0.25 finished + 0.5 still running
    assert s1.t == pytest.approx(1.0)
    assert s1.util == pytest.approx(75.0)
    assert s1.power_w == pytest.approx(power_for(75.0), abs=0.1)
    assert s1.mem_used == sim.CONTEXT_BYTES + 1000000 and s1.procs == {"4242": s1.mem_used}
    assert s1.temp_c > s0.temp_c  # warming towards the higher steady temperature
    with open(p, "a") as out:
        out.write("e 101.0\n")
    now[0] = 103.0
    (s2,) = b.sample()  # nothing ran in [101, 103]
    assert s2.util == 0.0 and s2.power_w == sim.IDLE_W


def test_registered_but_never_auto(monkeypatch):
    assert "sim" in backend_names() and "sim" not in auto_order()
    monkeypatch.delenv(sim.ENV_VAR, raising=False)
    backend, cards, skipped = open_backend("sim")
    try:
        assert backend is not None and backend.name == "sim" and cards[0].simulated
        assert skipped == []
    finally:
        assert backend is not None
        backend.close()
    _b, _c, auto_skipped = open_backend("auto")
    if _b is not None:
        assert _b.name != "sim"
        _b.close()


def test_card_file_location(monkeypatch, tmp_path):
    monkeypatch.setenv(sim.ENV_VAR, str(tmp_path / "a"))
    assert sim.card_file() == str(tmp_path / "a")
    sim.set_card_file(str(tmp_path / "b"))
    try:
        assert sim.card_file() == str(tmp_path / "b")
        assert SimBackend().file.path == str(tmp_path / "b")
    finally:
        sim.set_card_file(None)
    assert sim.card_file() == str(tmp_path / "a")
