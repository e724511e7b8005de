"""``sattui report`` of every recording under tests/fixtures/recordings/, text and
--json, byte for byte against the outputs saved before the report was made faster
(tests/fixtures/reports/, issue 25): a speed-up must not change a single character.
The same for 10 minutes of bench/report_1h.py's synthetic recording (generated here, from
its fixed seed: 10 MB an hour is too large to keep), the recording the report is timed on:
every ledger bin and evaluation of a steady job with a worker respawn.

After a deliberate change of the report's content, regenerate them with
``python tests/unit/test_report_golden.py --regenerate`` and review the diff."""

from __future__ import annotations

import importlib.util
import io
import os
import sys
from contextlib import redirect_stdout

import pytest

from sattui import report

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDINGS = os.path.join(HERE, "..", "fixtures", "recordings")
GOLDEN = os.path.join(HERE, "..", "fixtures", "reports")
NAMES = sorted(f[:-len(".jsonl")] for f in os.listdir(RECORDINGS) if f.endswith(".jsonl"))
BENCH = "bench_10min"
BENCH_MINUTES = 10.0


def _bench_recording(path: str) -> str:
    spec = importlib.util.spec_from_file_location("report_1h", os.path.join(HERE, "..", "..", "bench", "report_1h.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.generate(path, BENCH_MINUTES)
    return path


def _render(name: str, json_out: bool, path: str | None = None) -> str:
    # As cmd_report prints it (print adds the final newline).
    rep, _warnings = report.build_report(path or os.path.join(RECORDINGS, name + ".jsonl"))
    buf = io.StringIO()
    with redirect_stdout(buf):
        print(report.format_json(rep) if json_out else report.format_text(rep))
    return buf.getvalue()


def test_every_recording_has_golden_outputs():
    assert NAMES
    for name in NAMES:
        for ext in ("json", "txt"):
            assert os.path.exists(os.path.join(GOLDEN, f"{name}.{ext}")), f"no golden {name}.{ext}"


@pytest.mark.parametrize("json_out", [True, False], ids=["json", "text"])
@pytest.mark.parametrize("name", NAMES)
def test_report_is_byte_for_byte_the_saved_one(name, json_out):
    with open(os.path.join(GOLDEN, f"{name}.{'json' if json_out else 'txt'}"), encoding="utf-8") as f:
        want = f.read()
    assert _render(name, json_out) == want


@pytest.mark.parametrize("json_out", [True, False], ids=["json", "text"])
def test_bench_recording_report_is_byte_for_byte_the_saved_one(tmp_path, json_out):
    path = _bench_recording(str(tmp_path / "bench.jsonl"))
    with open(os.path.join(GOLDEN, f"{BENCH}.{'json' if json_out else 'txt'}"), encoding="utf-8") as f:
        want = f.read()
    got = _render(BENCH, json_out, path)
    assert "host_overhead_bound" in got  # (a report with findings, not an empty one)
    assert got == want


if __name__ == "__main__" and sys.argv[1:] == ["--regenerate"]:
    for n in NAMES:
        for j in (True, False):
            with open(os.path.join(GOLDEN, f"{n}.{'json' if j else 'txt'}"), "w", encoding="utf-8") as f:
                f.write(_render(n, j))
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        bench_path = _bench_recording(os.path.join(d, "bench.jsonl"))
        for j in (True, False):
            with open(os.path.join(GOLDEN, f"{BENCH}.{'json' if j else 'txt'}"), "w", encoding="utf-8") as f:
                f.write(_render(BENCH, j, bench_path))
