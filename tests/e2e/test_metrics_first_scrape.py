"""The exporter from the first scrape (issue 23, item 9), on a real trainer: ``sattui
record --metrics`` scraped over HTTP every 0.5 s from its start. The first page that
answers has every family of CONTRACT.md's table; the rank's state seconds come as the
ledger's bins settle (a second after the newest stack sample that has arrived,
StackBinner.settled_t), not after the advisor's
warm-up and its first 20 s of ledger (a user saw none at all 20 s after start)."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import EXPORTER_TRAINER_S, ExporterRun
from tests.unit.test_metrics_first_scrape import CONTRACT_FAMILIES

pytestmark = pytest.mark.e2e


def _records(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_every_family_from_the_first_scrape_and_state_seconds_as_the_ledger_settles(exporter_run: ExporterRun):
    # The exporter's one run (conftest.py: test_notify_labels_live.py judges it too)
    said, pages, born, out = exporter_run.said, exporter_run.pages, exporter_run.born, exporter_run.out
    assert exporter_run.code == 0, said[-3000:]
    assert "Traceback" not in said, said[-3000:]
    assert pages, said[-3000:]

    # The first page that answered has every family (a counter's name without _total).
    first = pages[0][1]
    assert CONTRACT_FAMILIES.keys() <= first.keys(), sorted(CONTRACT_FAMILIES.keys() - first.keys())
    assert first["sattui_info"], "sattui_info has its series from the start"

    recs = _records(out)
    # The recording's clock on the wall clock: a process born while sattui watched says
    # when, on the recording's clock (started_t), and psutil said when on the wall clock.
    offsets = [born[r["pid"]] - r["started_t"] for r in recs
               if r.get("kind") == "proc" and r.get("started_t") is not None and r["pid"] in born]
    assert offsets, "no process born during the run to set the clocks by"
    offset = sorted(offsets)[len(offsets) // 2]
    main = recs[0]["pid"]
    stacks = [r for r in recs if r.get("kind") == "stacks" and r.get("pid") == main]
    assert stacks, "no stack samples of the trainer"
    first_stacks_t = stacks[0]["t"]
    counted = [s[0] for r in stacks for s in r["samples"] if s[4] not in (None, "startup") and s[1] > 0]
    first_counted_t = min(counted)

    def rank_seconds(page: dict[str, list]) -> float:
        return sum(s.value for s in page.get("sattui_rank_state_seconds", []) if s.name.endswith("_total"))

    shown = [(wall - offset, pg) for wall, pg in pages if rank_seconds(pg) > 0]
    assert shown, f"no rank state seconds on any page of a {EXPORTER_TRAINER_S}-s run"
    t_shown = shown[0][0]
    print(f"first stacks record t={first_stacks_t:.2f}, first counted sample t={first_counted_t:.2f}, "
          f"state seconds on the page at t={t_shown:.2f}: {t_shown - first_stacks_t:.2f} s after the first "
          f"stacks record, {t_shown - first_counted_t:.2f} s after the first counted sample; "
          f"first page at t={pages[0][0] - offset:.2f}")
    # A bin is counted a second after the newest sample that has arrived: py-spy's first
    # chunk (2 s) arrives ~2.3 s after its first sample, the engine ticks every second, the
    # scrape every 0.5 s. Issue 23 asks for 5 s (the scrape's period on top): 4.4 s on a
    # loaded 2-core run. Before issue 23: ~25 s after the start at best; with bins settled a
    # fixed LAG_S (6 s) late, 8 s.
    assert t_shown - first_counted_t <= 5.0 + 0.5
    # The lost seconds by cause come with them (the same bins).
    lost = [s for s in shown[0][1]["sattui_rank_lost_seconds"] if s.name.endswith("_total")]
    assert {s.labels["rank"] for s in lost} == {""} and len(lost) >= 10
    last_lost = sum(s.value for s in pages[-1][1]["sattui_rank_lost_seconds"] if s.name.endswith("_total"))
    assert last_lost > 0, "an input-bound trainer loses seconds to its data"
