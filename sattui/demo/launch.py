"""``sattui demo``: the bundled PyTorch trainer plus the SIMULATED card it feeds.

Headless (never imports torch or Textual): it only checks that torch is installed and
builds the trainer's command line. The trainer runs as a child process, exactly like
``sattui -- CMD``, and appends its compute intervals to a card file that the ``sim``
backend (sattui/vendors/sim.py) turns into utilization, power and temperature.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass

from sattui.errors import SattuiError

TORCH_PIN = "torch==2.13.0"


@dataclass(frozen=True)
class DemoScenario:
    name: str
    trainer_scenario: str  # sattui.demo.trainer's --scenario
    # The headlines the advisor should reach once it can judge (rule ids; a starved loader
    # may be narrowed to its workers or not): tests/e2e/test_demo.py holds the demos to them.
    expect: tuple[str, ...]
    about: str
    extra_args: tuple[str, ...] = ()  # more trainer flags


SCENARIOS: dict[str, DemoScenario] = {s.name: s for s in (
    DemoScenario("starved", "starved", ("worker_cpu_bound", "too_few_workers", "input_bound"),
                 "one DataLoader worker stalls on every data shard: the card idles while the trainer "
                 "waits for data",
                 # Persistent workers: the waits are the shards' alone, not workers respawned
                 # every epoch (which the advisor would rightly call worker_respawn).
                 ("--persistent-workers",)),
    DemoScenario("healthy", "compute_bound", ("healthy",),
                 "cheap data, a bigger model: the card stays busy"),
    DemoScenario("inline", "inline", ("main_process_loading",),
                 "num_workers=0: the main process loads every batch itself"),
    DemoScenario("io_bound", "io_bound", ("worker_io_bound",),
                 "two workers that wait on (simulated) storage"),
    DemoScenario("slow_worker_start", "slow_worker_start", ("worker_respawn",),
                 "workers restarted every epoch (persistent_workers=False) whose worker_init_fn takes "
                 "1.5 s: the trainer waits for every new generation to start"),
)}
DEFAULT_SCENARIO = "starved"


def require_torch() -> None:
    """The demo trainer needs torch; say how to get it in one line (no import: it is slow)."""
    if importlib.util.find_spec("torch") is None:
        raise SattuiError(f"the demo trainer needs PyTorch: pip install {TORCH_PIN}")


def scenario(name: str) -> DemoScenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise SattuiError(f"unknown demo scenario {name!r}; one of: {', '.join(SCENARIOS)}") from None


def trainer_command(sc: DemoScenario, card_file: str, seconds: float) -> list[str]:
    return [sys.executable, "-m", "sattui.demo.trainer", "--scenario", sc.trainer_scenario,
            "--seconds", f"{seconds:g}", "--sim-card", card_file, *sc.extra_args]


class CardFile:
    """A fresh, private card file for one demo run; ``close()`` removes it."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="sattui-demo-")
        self.path = os.path.join(self.dir, "sim-card")

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> CardFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
