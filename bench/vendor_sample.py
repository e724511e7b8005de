"""What one ``sample()`` of each card backend costs, over the shared fixtures.

    python bench/vendor_sample.py             # 20 calls per backend
    python bench/vendor_sample.py --calls 50

Each vendor tool backend runs through the real subprocess path (``run_tool``): a fake
tool on an isolated PATH prints a captured output (the same fakes as
tests/e2e/test_record_backends_cli.py; biren's text is SYNTHETIC). NVML runs in-process
against the fake ``pynvml`` (tests/fixtures/pynvml_shim: an H200 and an A100). drm reads
a fake sysfs tree (as tests/unit/test_vendor_drm.py builds it), once with a fake /proc
holding one client, once walking this machine's real /proc for fdinfo.

Per backend: ``discover()`` once, one warm-up ``sample()``, then ``--calls`` samples back
to back. Printed per call, the median (and the slowest): wall ms; sattui's own CPU ms
(this process: spawning the tool, reading its pipe, parsing); the tool's CPU ms (reaped
children). The fake tools are Python scripts, so "tool CPU" and most of the wall time are
the fake's interpreter start (the "fake tool alone" row), not the vendor tool's real
cost; sattui's own CPU is the part that carries over to a real machine. NVML's PCIe
counters wait ~20 ms each on a real card; the fake answers at once.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sattui.vendors.backend import REGISTRY, Backend, load_all  # noqa: E402
from sattui.vendors.drm import DrmBackend  # noqa: E402
from sattui.vendors.tool import run_tool  # noqa: E402
from tests.e2e.test_record_backends_cli import GMI_S5000, VENDORS  # noqa: E402
from tests.unit.test_vendor_drm import FDINFO, _amdgpu_tree, _proc_fd  # noqa: E402
from tests.vendor_tools import calls, install_tool, isolate_path  # noqa: E402

NVML_SHIM = REPO / "tests" / "fixtures" / "pynvml_shim"

SOURCES = {
    "rocm-smi": "rocm-smi 6.0.2 --json, 4x MI100",
    "amd-smi": "amd-smi 26.2.1 default view, 2x R9700",
    "hygon": "hy-smi concise, 4x K100-AI",
    "hygon-dtk-rocm-smi": "DTK 23.10.1 rocm-smi concise, 4x Z100",
    "ascend": "npu-smi 25.5.1 info, 8x 910B3",
    "cambricon": "cnmon 5.10.13, 2x MLU370-X8",
    "kunlun": "xpu-smi (Kunlunxin), 8x P800",
    "kunlun-4x": "xpu_smi (Kunlunxin 4.33), 4x K200",
    "mthreads": "mthreads-gmi 2.4.1, 8x S5000",
    "intel": "xpu-smi stats -d 0, 1 device",
    "biren": "brsmi SYNTHETIC table, 2 GPUs",
}


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _measure(fn: Callable[[], object], n: int, gap_s: float = 0.0) -> dict[str, list[float]]:
    """``n`` timed calls of ``fn`` after one warm-up, ``gap_s`` apart (the gap is not timed)."""
    fn()  # warm-up (first GPM interval, caches, page cache)
    wall, own, kids = [], [], []
    for _ in range(n):
        time.sleep(gap_s)
        c0, p0, w0 = _children_cpu(), time.process_time(), time.perf_counter()
        fn()
        w1, p1, c1 = time.perf_counter(), time.process_time(), _children_cpu()
        wall.append((w1 - w0) * 1e3)
        own.append((p1 - p0) * 1e3)
        kids.append((c1 - c0) * 1e3)
    return {"wall": wall, "own": own, "kids": kids}


def _row(name: str, source: str, cards: int | str, calls_per: float | str, m: dict[str, list[float]]) -> list[str]:
    def fmt(xs: list[float]) -> str:
        return f"{statistics.median(xs):7.1f} ({max(xs):6.1f})"

    per = f"{calls_per:g}" if isinstance(calls_per, float) else str(calls_per)
    return [name, source, str(cards), per, fmt(m["wall"]), fmt(m["own"]), fmt(m["kids"])]


def bench_tool(label: str, backend: str, setup: Callable[[Path, pytest.MonkeyPatch], None], n: int) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        d = Path(tmp)
        isolate_path(d, mp)
        setup(d, mp)
        be: Backend = REGISTRY[backend]()
        try:
            cards = be.discover()
            tools = [p for p in (d / "bin").iterdir() if p.is_file() and "." not in p.name]
            before = sum(len(calls(t)) for t in tools)
            m = _measure(be.sample, n)
            per = (sum(len(calls(t)) for t in tools) - before) / (n + 1)
        finally:
            be.close()
    return _row(backend, SOURCES[label], len(cards), per, m)


def bench_baseline(n: int) -> list[str]:
    """One fake-tool run through run_tool, nothing parsed: the floor under every tool row."""
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        d = Path(tmp)
        isolate_path(d, mp)
        tool = install_tool(d, mp, "mthreads-gmi", stdout_file=GMI_S5000)
        m = _measure(lambda: run_tool([str(tool)]), n)
    return _row("(baseline)", "fake tool alone: exec + print, no parse", "-", 1.0, m)


def bench_nvml(n: int) -> list[str]:
    saved = sys.modules.pop("pynvml", None)
    sys.path.insert(0, str(NVML_SHIM))
    try:
        importlib.import_module("pynvml")  # the shim puts the fake in sys.modules

        be = REGISTRY["nvml"]()
        try:
            cards = be.discover()
            # GPM takes a new snapshot only >= 100 ms after the last: calls 0.11 s apart
            # measure that path every time (back to back they would reuse the last figures).
            time.sleep(0.11)
            m = _measure(be.sample, n, gap_s=0.11)
        finally:
            be.close()
    finally:
        sys.path.remove(str(NVML_SHIM))
        sys.modules.pop("pynvml", None)
        if saved is not None:
            sys.modules["pynvml"] = saved
    return _row("nvml", "fake pynvml in-process, H200 + A100, 0.11 s apart", len(cards), "0 (lib)", m)


def bench_drm(n: int, real_proc: bool) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        sys_root, proc_root = d / "sys", d / "proc"
        _amdgpu_tree(sys_root)
        fixture = FDINFO.read_text()
        _proc_fd(proc_root, 2217, 99, "/dev/dri/renderD128", fixture)
        _proc_fd(proc_root, 2217, 3, "/home/u/train.log", "pos: 0\nflags: 02\n")
        (proc_root / "self").mkdir()
        be = DrmBackend(sys_root=sys_root, proc_root="/proc" if real_proc else proc_root)
        cards = be.discover()
        m = _measure(be.sample, n)
    if real_proc:
        nproc = sum(1 for p in os.listdir("/proc") if p.isdigit())
        source = f"fake sysfs amdgpu, this machine's /proc ({nproc} procs)"
    else:
        source = "fake sysfs amdgpu + fake /proc, 1 client"
    return _row("drm", source, len(cards), "0 (sysfs)", m)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=20, help="sample() calls per backend (default 20)")
    args = ap.parse_args()
    load_all()
    n = args.calls
    rows = [bench_baseline(n)]
    for label, (backend, setup) in VENDORS.items():
        rows.append(bench_tool(label, backend, setup, n))
    rows.append(bench_nvml(n))
    rows.append(bench_drm(n, real_proc=False))
    rows.append(bench_drm(n, real_proc=True))

    head = ["backend", "source", "cards", "calls/sample", "wall ms", "sattui CPU ms", "tool CPU ms"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print(f"one sample() per backend: median (max) of {n} calls; Python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    print("tool rows: the fake tools are Python scripts (see the baseline row); sattui CPU is what carries "
          "over to the real tools.")


if __name__ == "__main__":
    main()
