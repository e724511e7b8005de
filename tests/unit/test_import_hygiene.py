"""Nothing of sattui pulls torch in at run time, and the headless modules pull in
neither Textual nor Rich (docs/architecture.md).

The layers themselves are import-linter's contracts (pyproject.toml, `make lint`), which
read the import statements; this test checks what importing actually loads, lazy and
dynamic imports included. The modules are found, not listed: a new module is covered the
day it is written.
"""

import pkgutil
import subprocess
import sys

import sattui

# The front end may import Textual (app.py, screens/, widgets/); the demo trainers import
# torch on purpose (they are the bundled PyTorch job, run as their own processes).
FRONT_END = ("sattui.app", "sattui.cluster_app", "sattui.screens", "sattui.widgets")
TORCH_OK = ("sattui.demo.trainer", "sattui.demo.ckpt_trainer", "sattui.demo.ddp_trainer", "sattui.demo.phase_trainer",
            "sattui.demo.framework_trainer")


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(sattui.__path__, "sattui.")
                  if not m.name.endswith("__main__"))


def _pulled_in(mods: list[str]) -> str:
    code = (
        "import sys\n"
        f"for m in {mods!r}: __import__(m)\n"
        "print(','.join(sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'torch', 'rich'})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_the_module_list_is_found_not_kept_by_hand():
    mods = _modules()
    assert {"sattui.ledger.bins", "sattui.view.lines", "sattui.vendors.nvml", "sattui.screens.main"} <= set(mods)


def test_headless_modules_do_not_import_textual_rich_or_torch():
    headless = [m for m in _modules() if not m.startswith(FRONT_END) and m not in TORCH_OK]
    assert _pulled_in(headless) == "", "headless modules pulled these in"


def test_the_front_end_does_not_import_torch():
    front = [m for m in _modules() if m.startswith(FRONT_END)]
    assert "torch" not in _pulled_in(front).split(",")
