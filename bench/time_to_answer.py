"""Time to a right headline after attaching the live monitor, per bundled scenario.

For each scenario: start the trainer (the bundled demo trainers, real PyTorch with real
DataLoader workers), wait until it trains (it prints its pid once its model is built, then
2 s more), attach a live session (sattui.session.LiveSession: the engine, py-spy and the
advisor exactly as `sattui --pid` runs them, without the screen), and read its headline
every 0.25 s for ``--watch-s`` seconds. Printed per scenario:

* ``first_right_s``: seconds after attach to the first headline in the scenario's right set
  that stays right to the end of the watch (``-`` if it never settles on a right one);
* ``changes_after``: how often the headline changed after that moment; and
  ``changes_after_first``: after the first headline of any kind (other than ``no_data``),
  so a right answer that a later wrong one replaced for a while counts too;
* ``wrong``: the headlines (other than ``no_data``) that were shown and are not right;
* ``final``: the last headline, with its impact and interval where it has them.

``phase_change`` is a healthy loop whose items turn costly 40 s in: its figures count from
the moment the trainer says its phase changed (watch it for 90 s or more).

    .venv/bin/python bench/time_to_answer.py                 # all nine, 60 s each
    .venv/bin/python bench/time_to_answer.py --only healthy,eval --watch-s 300

Runs one scenario at a time (the machine has 2 cores; a second trainer would change the
first one's figures). The right sets are the end-to-end tests' expectations
(tests/e2e/test_scenarios.py, test_ledger_scenarios.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sattui.session import LiveSession  # noqa: E402

PY = sys.executable
TORCHRUN = [PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


@dataclass(frozen=True)
class Scenario:
    name: str
    cmd: tuple[str, ...]
    right: frozenset[str]
    # a line the trainer prints once it trains (its pid)
    ready: str = r"^(trainer|phase trainer|ckpt trainer|ddp rank \d+/\d+) pid \d+"
    # a line the trainer prints when its phase changes: times are then counted from it
    change: str | None = None


def _demo(scenario: str, *extra: str) -> tuple[str, ...]:
    return (PY, "-m", "sattui.demo.trainer", "--scenario", scenario, "--seconds", "3600",
            "--epoch-items", "65536", *extra)


def _phase(*extra: str) -> tuple[str, ...]:
    return (PY, "-m", "sattui.demo.phase_trainer", "--seconds", "3600", *extra)


SCENARIOS = (
    Scenario("input_bound", _demo("input_bound"), frozenset({"worker_cpu_bound"})),
    Scenario("io_bound", _demo("io_bound"), frozenset({"worker_io_bound"})),
    Scenario("inline", _demo("inline"), frozenset({"main_process_loading"})),
    Scenario("healthy", _phase("--batch", "512", "--width", "2048", "--depth", "8"), frozenset({"healthy"})),
    Scenario("eval", _phase("--width", "1024", "--batch", "128", "--eval-every", "30", "--eval-batches", "10"),
             frozenset({"periodic_stall"})),
    Scenario("checkpoint", (PY, "-m", "sattui.demo.ckpt_trainer", "--seconds", "3600", "--every-s", "5",
                            "--small-tensors", "30000"), frozenset({"periodic_stall"}),
             ),
    # healthy, then input-bound 40 s in (each item of 512 costs 8 ms more in the one worker):
    # the answer is timed from the change, and must follow it
    Scenario("phase_change", _phase("--batch", "512", "--width", "2048", "--depth", "8", "--change-after-s", "40",
                                    "--then-busy-ms", "8"), frozenset({"worker_cpu_bound"}), change=r"^phase change"),
    Scenario("straggler", (*TORCHRUN, "-m", "sattui.demo.ddp_trainer", "--ddp", "--steps", "100000"),
             frozenset({"straggler"})),
    Scenario("balanced", (*TORCHRUN, "-m", "sattui.demo.ddp_trainer", "--ddp", "--steps", "100000",
                          "--sleep-s", "0"), frozenset({"healthy", "comm_bound"})),
)


def _with_arg(cmd: tuple[str, ...], flag: str, value: str) -> tuple[str, ...]:
    i = cmd.index(flag)
    return (*cmd[:i + 1], value, *cmd[i + 2:])


@dataclass
class Result:
    name: str
    heads: list[tuple[float, str, str]] = field(default_factory=list)  # (s after attach, rule, text)
    error: str | None = None
    change_s: float | None = None  # s after attach when the trainer said its phase changed

    def summary(self, right: frozenset[str], watch_s: float) -> dict[str, object]:
        rules = [(t, r) for t, r, _ in self.heads]
        if self.change_s is not None:
            # the headline standing at the change, then those after it, timed from it
            before = [r for t, r in rules if t <= self.change_s][-1:]
            rules = [(0.0, r) for r in before] + [(t - self.change_s, r) for t, r in rules if t > self.change_s]
        first_right = None
        for i, (t, r) in enumerate(rules):
            if r in right and all(r2 in right for _, r2 in rules[i:]):
                first_right = t
                break
        changes = 0
        if first_right is not None:
            after = [r for t, r in rules if t >= first_right]
            changes = sum(1 for a, b in zip(after, after[1:]) if a != b)
        wrong = sorted({r for _, r in rules if r not in right and r != "no_data"})
        first_any = next((t for t, r in rules if r != "no_data"), None)
        changes_any = 0
        if first_any is not None:
            after = [r for t, r in rules if t >= first_any]
            changes_any = sum(1 for a, b in zip(after, after[1:]) if a != b)
        return {"scenario": self.name, "change_s": self.change_s, "first_right_s": first_right,
                "first_headline_s": first_any, "changes_after": changes,
                "changes_after_first": changes_any, "wrong": wrong,
                "final": self.heads[-1][2] if self.heads else None, "watch_s": watch_s, "error": self.error}


def _headline_text(f) -> str:
    ci = getattr(f, "impact_ci", None)
    extra = f" [{ci[0]:.2f},{ci[1]:.2f}]" if ci else ""
    if f.rule == "no_data":
        extra = f" ({f.summary[:70]})"
    return f"{f.rule} {f.severity.value} {f.impact:.2f}{extra}"


def run(sc: Scenario, watch_s: float, poll_s: float = 0.25) -> Result:
    res = Result(sc.name)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "trainer.log"
        with open(log, "w") as out:
            proc = subprocess.Popen(list(sc.cmd), stdout=out, stderr=subprocess.STDOUT, env=env, cwd=d,
                                    start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while not re.search(sc.ready, log.read_text(), re.M):
                if proc.poll() is not None or time.monotonic() > deadline:
                    res.error = f"trainer did not start: {log.read_text()[-300:]}"
                    return res
                time.sleep(0.2)
            time.sleep(2.0)
            session = LiveSession(pid=proc.pid, backend="none")
            session.start()
            t0 = time.monotonic()
            try:
                last = None
                while (t := time.monotonic() - t0) < watch_s:
                    if sc.change is not None and res.change_s is None and re.search(sc.change, log.read_text(),
                                                                                     re.M):
                        res.change_s = round(t, 2)
                    found = session.findings()
                    if found:
                        head = found[0]
                        if last is None or head.t != last:
                            last = head.t
                            res.heads.append((round(t, 2), head.rule, _headline_text(head)))
                    time.sleep(poll_s)
            finally:
                session.stop()
        finally:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)
    return res


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--watch-s", type=float, default=60.0)
    p.add_argument("--only", default=None, help="comma-separated scenario names")
    p.add_argument("--json", action="store_true", help="one JSON line per scenario, with every headline")
    p.add_argument("--change-after-s", type=float, default=None,
                   help="phase_change: the trainer's change this long after its start (default 40; from ~45 s "
                        "after attach the sampler's chunks are 5 s, not 2)")
    args = p.parse_args()
    chosen = [s for s in SCENARIOS if args.only is None or s.name in args.only.split(",")]
    if args.change_after_s is not None:
        chosen = [dataclasses.replace(s, cmd=_with_arg(s.cmd, "--change-after-s", f"{args.change_after_s:g}"))
                  if s.name == "phase_change" else s for s in chosen]
    # changes: after the first right headline / after the first headline of any kind
    print(f"{'scenario':<12} {'first right':>11} {'first any':>9} {'changes':>7}  wrong / final")
    for sc in chosen:
        res = run(sc, args.watch_s)
        s = res.summary(sc.right, args.watch_s)
        if args.json:
            print(json.dumps({**s, "heads": res.heads}), flush=True)
            continue
        fr = "-" if s["first_right_s"] is None else f"{s['first_right_s']:.1f} s"
        if res.change_s is not None:
            fr += f" (after the change at {res.change_s:.0f} s)"
        fa = "-" if s["first_headline_s"] is None else f"{s['first_headline_s']:.1f} s"
        ch = f"{s['changes_after']}/{s['changes_after_first']}"
        print(f"{sc.name:<12} {fr:>11} {fa:>9} {ch:>7}  "
              f"{','.join(s['wrong']) or '-'} / {s['final']}{' ERROR ' + res.error if res.error else ''}",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
