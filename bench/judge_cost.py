"""What judging every second costs: the advisor's CPU per second of a trainer's time.

The live monitor evaluates the advisor every ``ADVISOR_PERIOD_S`` (1 s since the verdict
issue; 5 s before). This replays the records of a recording through the same path the
live session and ``report`` use (``Feed`` → ``Timeline`` → ``Advisor.evaluate``, the
time ledger's bins and the intervals included; sattui/advisor/judge.py), once judging
every second and once every 5 s, alternating, ``--rounds`` times each, and prints the CPU
(this process's, ``time.process_time``) per second of recorded time, in % of one core.
The difference is what judging every second adds to the monitor (issue 23's budget: 1 %
of a core).

    python bench/judge_cost.py [--minutes 10] [--rounds 3] [--recording FILE]

Default recording: bench/report_1h.py's synthetic one (one card at 2 Hz, 5 processes at
1 Hz, stacks at 20 Hz, a worker respawn every 5 minutes), ``--minutes`` long. Reading and
parsing the file is left out (the records are read once, before the clock starts).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(__file__))

from report_1h import generate  # noqa: E402  (bench/report_1h.py)

from sattui.advisor.judge import Judge  # noqa: E402
from sattui.recording import RecordingReader  # noqa: E402


def judge_cpu_s(header: dict, records: list[dict], every_s: float) -> tuple[float, int]:
    judge = Judge(header, every_s=every_s)
    c0 = time.process_time()
    for rec in records:
        judge.add(rec)
    judge.result()
    return time.process_time() - c0, judge.evaluations + judge.collecting


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--recording", default=None, help="a recording to replay instead of the synthetic one")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = args.recording
        if path is None:
            path = os.path.join(d, "synthetic.jsonl")
            generate(path, args.minutes)
        reader = RecordingReader(path)
        header = reader.header
        records = list(reader.records())
    span_s = max(float(r.get("t_end", r["t"])) for r in records if "t" in r)
    got: dict[float, list[float]] = {1.0: [], 5.0: []}
    evals: dict[float, int] = {}
    for _ in range(args.rounds):
        for every in (1.0, 5.0):
            cpu, evals[every] = judge_cpu_s(header, records, every)
            got[every].append(cpu)
    print(f"recording: {span_s:.0f} s of trainer time, {len(records)} records; {args.rounds} rounds each")
    for every in (1.0, 5.0):
        med = statistics.median(got[every])
        print(f"judging every {every:.0f} s: {evals[every]} evaluations, CPU {med:.2f} s "
              f"= {100 * med / span_s:.2f} % of a core (runs: {', '.join(f'{c:.2f}' for c in got[every])})")
    added = (statistics.median(got[1.0]) - statistics.median(got[5.0])) / span_s
    print(f"judging every second adds {100 * added:.2f} % of a core (budget: 1 %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
