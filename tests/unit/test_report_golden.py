"""``sattui report`` of every recording under tests/fixtures/recordings/, text and
--json, byte for byte against the outputs saved before the report was made faster
(tests/fixtures/reports/, issue 25): a speed-up must not change a single character.

After a deliberate change of the report's content, regenerate them with
``python tests/unit/test_report_golden.py --regenerate`` and review the diff."""

from __future__ import annotations

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


def _render(name: str, json_out: bool) -> str:
    # As cmd_report prints it (print adds the final newline).
    rep, _warnings = report.build_report(os.path.join(RECORDINGS, name + ".jsonl"))
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


if __name__ == "__main__" and sys.argv[1:] == ["--regenerate"]:
    for n in NAMES:
        for j in (True, False):
            with open(os.path.join(GOLDEN, f"{n}.{'json' if j else 'txt'}"), "w", encoding="utf-8") as f:
                f.write(_render(n, j))
