"""Time ``sattui export --perfetto`` on synthetic recordings at the default rates.

The recordings are bench/report_1h.py's (one card at 2 Hz, five processes at 1 Hz,
py-spy chunks of 2 s at 20 Hz whose every sample is a new span, a worker respawn every
5 minutes), 1 hour and 2 hours long: a flat peak RSS between the two shows the export
streams.

    python bench/export.py [--minutes 60 120] [--keep DIR]

Prints, per recording, the wall and CPU time, the peak RSS of the ``sattui export``
process (VmHWM) and the trace's size. Target: a 1-hour recording in seconds, memory
that does not grow with the recording.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from report_1h import generate  # noqa: E402  (the same synthetic recording as the report bench)

_WRAP = """
import sys
from sattui.cli import main
try:
    rc = main(sys.argv[1:])
finally:
    hwm = next((l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')), '0')
    sys.stderr.write('VmHWM_kB=' + hwm + '\\n')
sys.exit(rc)
"""


def run_export(rec: str, out: str) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of one ``sattui export`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _WRAP, "export", rec, "--perfetto", out], cwd=ROOT,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit("sattui export failed: " + proc.stderr)
    hwm = [ln for ln in proc.stderr.splitlines() if ln.startswith("VmHWM_kB=")]
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, cpu, int(hwm[-1].split("=")[1]) / 1024.0 if hwm else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, nargs="+", default=[60.0, 120.0])
    ap.add_argument("--keep", metavar="DIR", help="keep the recordings and traces in DIR")
    args = ap.parse_args()
    tmp = args.keep or tempfile.mkdtemp(prefix="sattui-bench-export-")
    os.makedirs(tmp, exist_ok=True)
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}; load {os.getloadavg()[0]:.2f}")
    try:
        for minutes in args.minutes:
            rec = os.path.join(tmp, f"rec_{minutes:g}min.jsonl")
            out = os.path.join(tmp, f"rec_{minutes:g}min.trace.json")
            if os.path.exists(out):
                os.remove(out)
            n = generate(rec, minutes)
            wall, cpu, rss = run_export(rec, out)
            print(f"{minutes:4.0f} min: recording {n} lines, {os.path.getsize(rec) / 1e6:.1f} MB -> trace "
                  f"{os.path.getsize(out) / 1e6:.1f} MB; export {wall:.2f} s wall, {cpu:.2f} s CPU, "
                  f"peak RSS {rss:.0f} MiB", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
