"""Headless code never imports Textual (DESIGN.md: sources never import Textual)."""

import subprocess
import sys

HEADLESS = [
    "sattui.cli", "sattui.model", "sattui.timeline", "sattui.recording", "sattui.report", "sattui.recorder",
    "sattui.doctor", "sattui.trainer.procs", "sattui.trainer.stacks", "sattui.trainer.classifier",
    "sattui.trainer.env", "sattui.session", "sattui.vendors.sim", "sattui.demo.launch", "sattui.feed",
    "sattui.metrics.node", "sattui.metrics.exposition", "sattui.metrics.server", "sattui.metrics.feed",
    "sattui.cluster.prom", "sattui.cluster.source", "sattui.cluster.judge", "sattui.cluster.report",
]


def test_headless_modules_do_not_import_textual_or_torch():
    code = (
        "import sys\n"
        f"for m in {HEADLESS!r}: __import__(m)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'torch', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"headless modules pulled in: {out.stdout.strip()}"
