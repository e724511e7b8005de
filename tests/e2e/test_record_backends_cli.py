"""The real ``sattui`` CLI over every card backend, with fake vendor tools on PATH.

Done when (the issue): with a fake tool on PATH printing a shared fixture,
``sattui record --backend X --duration 3 -o f.jsonl`` writes card records whose values
match the file; ``sattui doctor`` explains every backend; a hung or garbage-printing
tool never stops the others.

Every fake tool is an executable printing a real captured output
(tests/vendor_tools.py; PATH is isolated, so only the fakes are found). Biren's text is
SYNTHETIC (no real ``brsmi`` output is public; tests/unit/test_vendor_biren.py). NVML
runs the CLI with ``PYTHONPATH=tests/fixtures/pynvml_shim:<repo>``, where ``pynvml``
is tests/fakes/fake_pynvml.py's H200 + A100. Expected numbers are literal, read by hand
from the fixtures (the same ones the unit tests assert); the comment by each says where.

No torch and no accelerator needed. Every CLI run is set up first, then all run at once
(they mostly wait out their 3 s), so the file takes ~20 s, not the ~80 s of one by one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sattui.cards import DEFAULT_CARD_INTERVAL_S
from sattui.recording import RecordingReader
from sattui.vendors.backend import auto_order
from sattui.vendors.tool import DEFAULT_TOOL_TIMEOUT_S
from tests.unit.test_vendor_biren import SYNTHETIC_TABLE as BIREN_SYNTHETIC_TABLE
from tests.unit.test_vendor_hygon import HY_SMI_VERSION
from tests.unit.test_vendor_intel import XPU_SMI_VERSION
from tests.unit.test_vendor_rocm import AMD_SMI_VERSION, ROCM_SMI_VERSION
from tests.vendor_tools import install_tool, isolate_path

# e2e: real CLI processes whose timing is asserted (a hung tool must cost at most its
# timeout, each card sampled twice in 3 s): run alone, not beside parallel unit tests.
pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
AUTO_ORDER = auto_order()
FIX = REPO / "tests" / "fixtures" / "vendors"
NVML_SHIM = REPO / "tests" / "fixtures" / "pynvml_shim"
NVML_SHIM_FAULTS = REPO / "tests" / "fixtures" / "pynvml_shim_faults"  # cards failing mid-run
NO_PYNVML = NVML_SHIM / "absent"  # hides a real nvidia-ml-py (auto must reach the fake tool)
MiB = 1 << 20
DURATION = 3
TOOL_TIMEOUT_S = DEFAULT_TOOL_TIMEOUT_S  # 5 s: what the CLI gives a tool (not settable there)
VERSION_TIMEOUT_S = 3.0  # version_probe's, run by rocm/hygon probes
SLACK_S = 5.0  # interpreter start, imports, a loaded 2-core CI box

MI100 = FIX / "amd" / "rocm-smi-json_4x-mi100_rocm6.0.2.json"
AMDSMI_DEFAULT = FIX / "amd" / "amd-smi_default-view_2x-radeon-ai-pro-r9700_amdsmi26.2.1.txt"
HY_CONCISE = FIX / "hygon" / "hy-smi_4x-K100-AI_dtk24.04.1_concise.txt"
DTK_ROCM_SMI = FIX / "hygon" / "rocm-smi_4x-Z100_dtk23.10.1_concise.txt"
NPU_8CARD = FIX / "ascend" / "npu-smi_910B3-8card_v25.5.1_info-overview.txt"
NPU_COMMON = FIX / "ascend" / "npu-smi_910B3-8card_v25.5.1_t-common_i-0.txt"
NPU_USAGES = FIX / "ascend" / "npu-smi_910B3-8card_v25.5.1_t-usages_i-0.txt"
NPU_PROCMEM = FIX / "ascend" / "npu-smi_910B3-8card_v25.5.1_t-proc-mem_i-0.txt"
CNMON = FIX / "cambricon" / "cnmon_2x-MLU370-X8_cnmon-v5.10.13_sriov-column-NA.txt"
KUNLUN_8X = FIX / "kunlun" / "xpu_smi_8x-P800-OAM_drv5.0.21.26.txt"
KUNLUN_K200 = FIX / "kunlun" / "xpu_smi_4x-K200_drv4.33_test-procs.txt"
GMI_S5000 = FIX / "moorethreads" / "mthreads-gmi_8x-S5000_gmi2.4.1_drv5.1.0-server.txt"
GMI_S80 = FIX / "moorethreads" / "mthreads-gmi_1x-S80_gmi2.0.0_drv3.0.0_two-procs.txt"
XPU_DISCOVERY_J = FIX / "intel" / "xpu-smi-discovery-j_1x-0x020a.json"
XPU_DISCOVERY_D = FIX / "intel" / "xpu-smi-discovery-d0_detail.txt"
XPU_STATS = FIX / "intel" / "xpu-smi-stats-d0_blank-fields.txt"
# BUSY captures (utilization above 0): 16x 910B2C from vllm-ascend issue 4013, a Flex 170
# at ~99.5 % from XPU Manager's README (each .source.md says where).
NPU_BUSY16 = FIX / "ascend" / "npu-smi-info_16x-910B2C_npusmi24.1.rc2_busy-aicore100.txt"
XPU_DUMP_BUSY = FIX / "intel" / "xpumcli-dump-d0-m0123_flex170-0x56c0_busy.csv"
# DERIVED, not a capture: the guide's idle stats table with its utilization cells made 73
# (no busy stats table is public; its .source.md says what was edited).
XPU_STATS_BUSY = FIX / "intel" / "xpu-smi-stats-d0_busy-util73_DERIVED.txt"

GARBAGE = "\x00\x01 totally not a table {[ ]\n"
NVML_FAULTS_DURATION = 7  # room for a late pynvml import on a loaded box (the shim clock starts then)
CARD_DT = DEFAULT_CARD_INTERVAL_S  # the CLI's card interval (0.5 s; nvml is not slowed)
TICK_SLACK_S = 0.3  # a card tick running late on a loaded 2-core box


# -- the fake tools, one function per vendor (tmp dir, monkeypatch) ---------------------------

def _rocm_smi(d: Path, mp: pytest.MonkeyPatch) -> None:
    install_tool(d, mp, "rocm-smi", stdout_file=MI100, by_args={"--version": ROCM_SMI_VERSION})


def _amd_smi(d: Path, mp: pytest.MonkeyPatch) -> None:
    # Every argv but --version prints the captured default view: "metric --json" does not
    # parse, so the backend reads the table (as test_amd_smi_default_view).
    install_tool(d, mp, "amd-smi", stdout_file=AMDSMI_DEFAULT, by_args={"--version": AMD_SMI_VERSION})


def _hy_smi(d: Path, mp: pytest.MonkeyPatch) -> None:
    install_tool(d, mp, "hy-smi", stdout_file=HY_CONCISE, by_args={"--version": HY_SMI_VERSION})


def _dtk_rocm_smi(d: Path, mp: pytest.MonkeyPatch) -> None:
    # Hygon DTK without hy-smi: its rocm-smi on PATH, told from AMD's by what it prints.
    install_tool(d, mp, "rocm-smi", stdout_file=DTK_ROCM_SMI)


def _npu_smi(d: Path, mp: pytest.MonkeyPatch) -> None:
    # npu-smi is called several ways: the overview, and -t common/usages/proc-mem per NPU.
    install_tool(d, mp, "npu-smi", by_args={"info": NPU_8CARD, "info -t common -i 0": NPU_COMMON,
                                            "info -t usages -i 0": NPU_USAGES,
                                            "info -t proc-mem -i 0": NPU_PROCMEM})


def _npu_smi_busy(d: Path, mp: pytest.MonkeyPatch) -> None:
    # Only the overview was captured: "-t common -i 0" answers nothing here, so the rated
    # clock stays unknown (one backend_degraded event), the overview is read every tick.
    install_tool(d, mp, "npu-smi", by_args={"info": NPU_BUSY16})


def _cnmon(d: Path, mp: pytest.MonkeyPatch) -> None:
    install_tool(d, mp, "cnmon", stdout_file=CNMON)


def _kunlun(name: str = "xpu-smi", fixture: Path = KUNLUN_8X) -> Callable[[Path, pytest.MonkeyPatch], None]:
    def setup(d: Path, mp: pytest.MonkeyPatch) -> None:
        install_tool(d, mp, name, stdout_file=fixture)
    return setup


def _gmi(fixture: Path) -> Callable[[Path, pytest.MonkeyPatch], None]:
    def setup(d: Path, mp: pytest.MonkeyPatch) -> None:
        install_tool(d, mp, "mthreads-gmi", stdout_file=fixture)
    return setup


def _xpu_smi_intel(d: Path, mp: pytest.MonkeyPatch) -> None:
    install_tool(d, mp, "xpu-smi", stdout_text="", by_args={
        "-v": XPU_SMI_VERSION, "discovery -j": XPU_DISCOVERY_J, "discovery -d 0": XPU_DISCOVERY_D,
        "stats -d 0": XPU_STATS})


def _xpu_smi_intel_busy(d: Path, mp: pytest.MonkeyPatch) -> None:
    # Discovery from the guide's captures (another card); stats prints nothing readable,
    # so every tick reads the busy card's dump CSV.
    install_tool(d, mp, "xpu-smi", stdout_text="", by_args={
        "-v": XPU_SMI_VERSION, "discovery -j": XPU_DISCOVERY_J, "discovery -d 0": XPU_DISCOVERY_D,
        "stats -d 0": "", "dump -d 0": XPU_DUMP_BUSY})


def _xpu_smi_intel_busy_stats(d: Path, mp: pytest.MonkeyPatch) -> None:
    # The stats view (the backend's first choice) of a busy card: DERIVED, see XPU_STATS_BUSY.
    install_tool(d, mp, "xpu-smi", stdout_text="", by_args={
        "-v": XPU_SMI_VERSION, "discovery -j": XPU_DISCOVERY_J, "discovery -d 0": XPU_DISCOVERY_D,
        "stats -d 0": XPU_STATS_BUSY})


def _brsmi(d: Path, mp: pytest.MonkeyPatch) -> None:
    install_tool(d, mp, "brsmi", stdout_text=BIREN_SYNTHETIC_TABLE)  # SYNTHETIC, not a capture


def _no_tools(d: Path, mp: pytest.MonkeyPatch) -> None:
    pass


def _garbage(name: str) -> Callable[[Path, pytest.MonkeyPatch], None]:
    def setup(d: Path, mp: pytest.MonkeyPatch) -> None:
        install_tool(d, mp, name, stdout_text=GARBAGE)
    return setup


def _hung(name: str, fixture: Path) -> Callable[[Path, pytest.MonkeyPatch], None]:
    def setup(d: Path, mp: pytest.MonkeyPatch) -> None:
        install_tool(d, mp, name, stdout_file=fixture, sleep_s=30)
    return setup


_FLAKY = '''#!{python}
# A fake {name!r} (tests/e2e/test_record_backends_cli.py): the fixture for the first
# {good_calls} calls, then {then}.
import sys, time
with open({counter!r}, "a") as f:
    f.write("call\\n")
with open({counter!r}) as f:
    n = sum(1 for _ in f)
if n <= {good_calls}:
    with open({fixture!r}, "rb") as f:
        sys.stdout.buffer.write(f.read())
elif {then!r} == "hang":
    time.sleep(30)
else:
    sys.stdout.write({garbage!r})
'''


def _flaky(name: str, fixture: Path, good_calls: int, then: str) -> Callable[[Path, pytest.MonkeyPatch], None]:
    """A tool that answers like the fixture ``good_calls`` times, then hangs or prints garbage.

    install_tool's fakes are stateless; this one counts its calls in a file next to it.
    """
    def setup(d: Path, mp: pytest.MonkeyPatch) -> None:
        bindir = d / "bin"
        bindir.mkdir(parents=True, exist_ok=True)
        script = bindir / name
        script.write_text(_FLAKY.format(python=sys.executable, name=name, good_calls=good_calls, then=then,
                                        counter=str(script) + ".count", fixture=str(fixture), garbage=GARBAGE))
        script.chmod(0o755)
        mp.setenv("PATH", os.pathsep.join([str(bindir), os.environ["PATH"]]))
    return setup


def _all(*setups: Callable[[Path, pytest.MonkeyPatch], None]) -> Callable[[Path, pytest.MonkeyPatch], None]:
    def setup(d: Path, mp: pytest.MonkeyPatch) -> None:
        for s in setups:
            s(d, mp)
    return setup


# -- the runs -----------------------------------------------------------------------------------

@dataclass
class Case:
    """One CLI invocation: ``args`` after ``python -m sattui`` ("{out}" is the recording)."""

    args: list[str]
    tools: Callable[[Path, pytest.MonkeyPatch], None]
    pythonpath: tuple[Path, ...] = ()


@dataclass
class Result:
    name: str
    rc: int
    stdout: str
    stderr: str
    wall_s: float
    out: Path
    header: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)

    def cards(self) -> dict[int, list[dict[str, Any]]]:
        by: dict[int, list[dict[str, Any]]] = {}
        for r in self.records:
            if r["kind"] == "card":
                by.setdefault(r["card"], []).append(r)
        return by

    def events(self, type_: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.records if r["kind"] == "event" and (type_ is None or r["type"] == type_)]

    def doctor(self) -> dict[str, dict[str, Any]]:
        d = json.loads(self.stdout)
        assert d["format"] == "sattui.doctor/1"
        return {b["name"]: b for b in d["backends"]}


def _record(backend: str) -> list[str]:
    return ["record", "--backend", backend, "--duration", str(DURATION), "-o", "{out}"]


# Vendor name → (backend, fake tools): the plain recordings, one per vendor tool layout.
VENDORS: dict[str, tuple[str, Callable[[Path, pytest.MonkeyPatch], None]]] = {
    "rocm-smi": ("rocm", _rocm_smi),
    "amd-smi": ("rocm", _amd_smi),
    "hygon": ("hygon", _hy_smi),
    "hygon-dtk-rocm-smi": ("hygon", _dtk_rocm_smi),
    "ascend": ("ascend", _npu_smi),
    "ascend-busy": ("ascend", _npu_smi_busy),
    "cambricon": ("cambricon", _cnmon),
    "kunlun": ("kunlun", _kunlun()),
    "kunlun-4x": ("kunlun", _kunlun("xpu_smi", KUNLUN_K200)),
    "mthreads": ("mthreads", _gmi(GMI_S5000)),
    "intel": ("intel", _xpu_smi_intel),
    "intel-busy": ("intel", _xpu_smi_intel_busy),
    "intel-busy-stats": ("intel", _xpu_smi_intel_busy_stats),
    "biren": ("biren", _brsmi),
}

# Vendor name → (backend, tool): a fake tool printing garbage for every argv.
GARBAGE_TOOLS: dict[str, tuple[str, str]] = {
    "rocm-smi": ("rocm", "rocm-smi"),
    "amd-smi": ("rocm", "amd-smi"),
    "hygon": ("hygon", "hy-smi"),
    "ascend": ("ascend", "npu-smi"),
    "cambricon": ("cambricon", "cnmon"),
    "kunlun": ("kunlun", "xpu-smi"),
    "mthreads": ("mthreads", "mthreads-gmi"),
    "biren": ("biren", "brsmi"),
    "intel": ("intel", "xpu-smi"),
}

# Every fake at once: Kunlunxin's tool as xpu_smi beside Intel's xpu-smi (both exist
# on real machines), AMD's rocm-smi beside Hygon's hy-smi.
ALL_TOOLS = _all(_rocm_smi, _hy_smi, _npu_smi, _cnmon, _kunlun("xpu_smi"), _gmi(GMI_S80), _xpu_smi_intel, _brsmi)
# A hung rocm-smi, a garbage-printing hy-smi, and a good cnmon after them in AUTO_ORDER.
FAULTY_TOOLS = _all(_hung("rocm-smi", MI100), _garbage("hy-smi"), _cnmon)

CASES: dict[str, Case] = {
    **{f"record-{v}": Case(_record(b), setup) for v, (b, setup) in VENDORS.items()},
    "record-nvml": Case(_record("nvml"), _no_tools, (NVML_SHIM, REPO)),
    "record-nvml-faults": Case(["record", "--backend", "nvml", "--duration", str(NVML_FAULTS_DURATION), "-o", "{out}"],
                               _no_tools, (NVML_SHIM_FAULTS, REPO)),
    "auto-one-tool": Case(_record("auto"), _xpu_smi_intel, (NO_PYNVML,)),
    "auto-past-hung-and-garbage": Case(_record("auto"), FAULTY_TOOLS, (NO_PYNVML,)),
    # mthreads-gmi: discovery and the first sample answer, the second sample hangs.
    "hang-later": Case(_record("mthreads"), _flaky("mthreads-gmi", GMI_S80, good_calls=2, then="hang")),
    # cnmon: discovery and the first sample answer, then garbage on every call.
    "garbage-later": Case(_record("cambricon"), _flaky("cnmon", CNMON, good_calls=2, then="garbage")),
    "hung-at-discovery": Case(_record("mthreads"), _hung("mthreads-gmi", GMI_S80)),
    **{f"garbage-{v}": Case(_record(b), _garbage(tool)) for v, (b, tool) in GARBAGE_TOOLS.items()},
    "doctor-fakes": Case(["doctor", "--json"], ALL_TOOLS, (NVML_SHIM, REPO)),
    "doctor-fakes-text": Case(["doctor"], ALL_TOOLS, (NVML_SHIM, REPO)),
    "doctor-faults": Case(["doctor", "--json"], FAULTY_TOOLS, (NO_PYNVML,)),
    "doctor-empty": Case(["doctor", "--json"], _no_tools),
}


def _run(name: str, case: Case, env: dict[str, str], out: Path) -> Result:
    args = [a.replace("{out}", str(out)) for a in case.args]
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "sattui", *args], capture_output=True, text=True, env=env,
                       cwd=REPO, timeout=90)
    res = Result(name, p.returncode, p.stdout, p.stderr, time.monotonic() - t0, out)
    if out.exists() and out.stat().st_size:
        reader = RecordingReader(str(out))
        res.header = reader.header
        res.records = list(reader.records())
        assert not reader.warnings, reader.warnings
    return res


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Result]:
    """Every case's CLI run, all started together (each with its own PATH and folder)."""
    jobs = []
    for name, case in CASES.items():
        d = tmp_path_factory.mktemp(name)
        with pytest.MonkeyPatch.context() as mp:
            isolate_path(d, mp)  # PATH = an empty folder: only the fakes below are found
            case.tools(d, mp)
            env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        if case.pythonpath:
            env["PYTHONPATH"] = os.pathsep.join(str(p) for p in case.pythonpath)
        jobs.append((name, case, env, d / "f.jsonl"))
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = {name: pool.submit(_run, name, case, env, out) for name, case, env, out in jobs}
        return {name: f.result() for name, f in futures.items()}


@pytest.fixture(scope="module")
def real_here(tmp_path_factory) -> set[str]:
    """Backends that find something on this machine with PATH isolated: a real GPU's
    library or /sys entry, or a vendor tool in a fixed system folder (/opt/rocm/bin…).
    Empty on a plain CI box; the tests that need "nothing here" exempt these."""
    from sattui.vendors.backend import probe_all

    with pytest.MonkeyPatch.context() as mp:
        isolate_path(tmp_path_factory.mktemp("isolated"), mp)
        return {p.name for p in probe_all() if p.available}


def _ok(res: Result) -> None:
    assert res.rc == 0, (res.name, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr


def _one_line_error(res: Result) -> str:
    assert res.rc != 0, (res.name, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("sattui: error: "), lines[0]
    return lines[0]


# -- recordings whose card values match the fixture -----------------------------------------------

# Per vendor: the header's cards [(card, vendor, name, mem_total)], and per card the values
# every card record must hold (the fixture does not change between calls).
EXPECTED: dict[str, tuple[list[tuple[int, str, str | None, int | None]], dict[int, dict[str, Any]]]] = {
    # rocm-smi-json_4x-mi100: card0..3 "Card series" "Arcturus GL-XL [Instinct MI100]",
    # "VRAM Total Memory (B)" 34342961152, "VRAM Total Used Memory (B)" 6750208, "GPU use (%)" "0",
    # "Average Graphics Package Power (W)" 36.0/44.0/43.0/39.0, "Temperature (Sensor edge) (C)"
    # 53.0/55.0/54.0/51.0, "Max Graphics Package Power (W)" 290.0.
    "rocm-smi": (
        [(i, "amd", "Arcturus GL-XL [Instinct MI100]", 34342961152) for i in range(4)],
        # card0 also "GPU memory use (%)" "0", "sclk clock speed:" "(300Mhz)", "pcie clock level"
        # "0 (16.0GT/s x16)"; rocm-smi gives no per-process VRAM: procs unknown (None), not {}.
        {i: dict(util=0.0, mem_used=6750208, mem_total=34342961152, power_w=pw, power_limit_w=290.0, temp_c=t,
                 procs=None, **({"dram_active": 0.0, "sm_clock_mhz": 300.0, "pcie_gen": 4, "pcie_width": 16}
                                if i == 0 else {}))
         for i, (pw, t) in enumerate([(36.0, 53.0), (44.0, 55.0), (43.0, 54.0), (39.0, 51.0)])},
    ),
    # amd-smi default view: "| 0000:03:00.0 ...Radeon AI PRO R9700 | 1 %  79 °C  0  103/300 W |",
    # "| 0  0  N/A  N/A | 100 %  38.82  29777/32624 MB |"; GPU 1 "0 %  80 °C  0  92/300 W",
    # "100 %  40.0 %  29777/32624 MB" (amd-smi's MB are MiB). Process rows: VRAM_MEM column.
    "amd-smi": (
        [(i, "amd", "...Radeon AI PRO R9700", 32624 * MiB) for i in range(2)],
        {i: dict(util=100.0, dram_active=dram, temp_c=t, power_w=pw, power_limit_w=300.0,
                 mem_used=29777 * MiB, mem_total=32624 * MiB,
                 procs={"213534": round(54.7 * 1024), "213890": round(54.7 * 1024),
                        "213952": round(19.6 * 1024**3), "213953": round(19.1 * 1024**3)})
         for i, (dram, t, pw) in enumerate([(1.0, 79.0, 103.0), (0.0, 80.0, 92.0)])},
    ),
    # hy-smi concise: "DCU Temp AvgPwr Perf PwrCap VRAM% DCU% Mode", rows
    # "0  49.0C  118.0W  auto  800.0W  0%  0%  Normal" … "3  49.0C  138.0W …". No names, no
    # VRAM size (VRAM% only): unknown, not made up.
    "hygon": (
        [(i, "hygon", None, None) for i in range(4)],
        {i: dict(util=0.0, temp_c=t, power_w=pw, power_limit_w=800.0, mem_used=None, mem_total=None)
         for i, (t, pw) in enumerate([(49.0, 118.0), (48.0, 120.0), (53.0, 116.0), (49.0, 138.0)])},
    ),
    # DTK 23.10.1 rocm-smi concise: "DCU  Temp  AvgPwr  Fan  Perf  PwrCap  VRAM%  DCU%", rows
    # "0  30.0c  38.0W  0.0%  auto  280.0W  0%  0%" … "3  29.0c  39.0W …". No names, no VRAM size.
    "hygon-dtk-rocm-smi": (
        [(i, "hygon", None, None) for i in range(4)],
        {i: dict(util=0.0, temp_c=t, power_w=pw, power_limit_w=280.0, mem_used=None, mem_total=None)
         for i, (t, pw) in enumerate([(30.0, 38.0), (30.0, 41.0), (29.0, 38.0), (29.0, 39.0)])},
    ),
    # npu-smi 910B3 8-card overview: "| 0  910B3 | OK | 99.4  34  0 / 0 |", "| 0 | 0000:C1:00.0 |
    # 0  0 / 0  59189/ 65536 |", process "| 0  0 | 3233241 | VLLMWorker_TP | 55844 |" …;
    # -t common -i 0 "Aicore Freq(MHZ) : 1800".
    "ascend": (
        [(i, "huawei", "910B3", 65536 * MiB) for i in range(8)],
        {i: dict(util=0.0, power_w=pw, temp_c=t, mem_used=hbm * MiB, mem_total=65536 * MiB,
                 sm_clock_max_mhz=1800.0, procs={pid: pmem * MiB})
         for i, (pw, t, hbm, pid, pmem) in enumerate([
             (99.4, 34.0, 59189, "3233241", 55844), (91.1, 32.0, 59184, "3233701", 55840),
             (86.9, 33.0, 59186, "3234962", 55842), (93.2, 35.0, 59186, "3235553", 55842),
             (88.7, 37.0, 59932, "3232170", 56588), (91.5, 37.0, 59944, "3231929", 56600),
             (94.9, 37.0, 59021, "2895155", 55671), (90.1, 39.0, 19319, "1886762", 15975)])},
    ),
    # BUSY npu-smi 24.1.rc2, 16x 910B2C: "| 0     910B2C | OK | 450.6       78 ...", "| 0 |
    # 0000:75:01.0  | 100         0    / 0          54735/ 65536 |" …; "| 0  0 | 265997 |
    # python3 | 51358 |" on every NPU. AICore 100 on NPUs 0 1 4 6 7 9 13, 0 on the rest.
    "ascend-busy": (
        [(i, "huawei", "910B2C", 65536 * MiB) for i in range(16)],
        {i: dict(util=util, power_w=pw, temp_c=t, mem_used=hbm * MiB, mem_total=65536 * MiB,
                 procs={"265997": 51358 * MiB})
         for i, (util, pw, t, hbm) in enumerate([
             (100.0, 450.6, 78.0, 54735), (100.0, 449.7, 77.0, 54712), (0.0, 91.7, 47.0, 54715),
             (0.0, 96.1, 49.0, 54712), (100.0, 450.1, 75.0, 54711), (0.0, 97.4, 48.0, 54712),
             (100.0, 449.8, 75.0, 54713), (100.0, 450.2, 78.0, 54711), (0.0, 96.5, 47.0, 54715),
             (100.0, 450.1, 78.0, 54712), (0.0, 137.4, 49.0, 54710), (0.0, 109.4, 49.0, 54709),
             (0.0, 104.6, 48.0, 54711), (100.0, 450.3, 77.0, 54710), (0.0, 109.6, 45.0, 54710),
             (0.0, 116.9, 54.0, 54710)])},
    ),
    # cnmon v5.10.13: "| 0     /   MLU370-X8    v1.1.6 |", "|  0%   32C   106 W/ 250 W |
    # 0 MiB/ 23374 MiB |"; card 1 "|  0%   39C   106 W/ 250 W |"; "No running processes found".
    "cambricon": (
        [(i, "cambricon", "MLU370-X8", 23374 * MiB) for i in range(2)],
        {i: dict(util=0.0, temp_c=t, power_w=106.0, power_limit_w=250.0, mem_used=0, mem_total=23374 * MiB,
                 procs={}) for i, t in enumerate([32.0, 39.0])},
    ),
    # Kunlunxin xpu_smi 8x P800: "|   0  P800 OAM  N/A | 00000000:03:00.0 N/A |",
    # "| N/A   37C  N/A     85W / 400W |  0MiB / 98304MiB |  0% …"; "No running processes found".
    "kunlun": (
        [(i, "kunlunxin", "P800 OAM", 98304 * MiB) for i in range(8)],
        {i: dict(util=0.0, temp_c=t, power_w=pw, power_limit_w=400.0, mem_used=0, mem_total=98304 * MiB, procs={})
         for i, (t, pw) in enumerate([(37.0, 85.0), (41.0, 86.0), (34.0, 85.0), (39.0, 88.0),
                                      (37.0, 86.0), (42.0, 86.0), (35.0, 86.0), (42.0, 88.0)])},
    ),
    # Kunlunxin 4.x xpu_smi, 2x K200 (4 devices): "|     0 | 0000:43:00.0 | K200  | … |     3 % |
    # 0 / 16 MB |    3 / 8064 MB |       38 |   37 |       900 |"; devices 1-3 "3 %", "4 %", "4 %",
    # Memory 1, 3, 1025 MB, Power(W) 38/37/37, Temp 37/38/36. No power cap in this layout.
    "kunlun-4x": (
        [(i, "kunlunxin", "K200", 8064 * MiB) for i in range(4)],
        {i: dict(util=u, mem_used=m * MiB, mem_total=8064 * MiB, power_w=pw, power_limit_w=None, temp_c=t,
                 sm_clock_mhz=900.0)
         for i, (u, m, pw, t) in enumerate([(3.0, 3, 38.0, 37.0), (3.0, 1, 38.0, 37.0), (4.0, 3, 37.0, 38.0),
                                            (4.0, 1025, 37.0, 36.0)])},
    ),
    # mthreads-gmi 2.4.1, 8x S5000: "0    MTT S5000   |00000000:18:00.0    |0%    0MiB(81920MiB)",
    # "     Physical      P0     |16x(16x)            |48C   YES"; no power column: None.
    "mthreads": (
        [(i, "moorethreads", "MTT S5000", 81920 * MiB) for i in range(8)],
        {i: dict(util=0.0, temp_c=t, mem_used=0, mem_total=81920 * MiB, power_w=None, pcie_width=16, procs={})
         for i, t in enumerate([48.0, 48.0, 49.0, 48.0, 48.0, 50.0, 48.0, 49.0])},
    ),
    # xpu-smi discovery -j "device_name": "Intel(R) Graphics [0x020a]"; discovery -d 0
    # "Memory Physical Size: 32768.00 MiB"; stats -d 0: "GPU Power (W) | 15", "GPU Frequency
    # (MHz) | 2050", "GPU Core Temperature (C) | 41", "GPU Memory Used (MiB) | 24", utilization
    # "| 0", "GPU Memory Bandwidth (%)" blank.
    "intel": (
        [(0, "intel", "Intel(R) Graphics [0x020a]", 32768 * MiB)],
        {0: dict(util=0.0, power_w=15.0, sm_clock_mhz=2050.0, temp_c=41.0, mem_used=24 * MiB,
                 mem_total=32768 * MiB, dram_active=None)},
    ),
    # BUSY xpumcli dump (a Flex 170), last row "21:23:03.000,    0, 99.65, 119.24, 1700, 51.00"
    # (util %, power W, MHz, core C); no memory-used column: None. Name and size from discovery.
    "intel-busy": (
        [(0, "intel", "Intel(R) Graphics [0x020a]", 32768 * MiB)],
        {0: dict(util=99.65, power_w=119.24, sm_clock_mhz=1700.0, temp_c=51.0, mem_used=None,
                 mem_total=32768 * MiB)},
    ),
    # DERIVED stats table: "Average % utilization of | 73" (edited from the guide's "0"); the
    # rest as "intel" above (15 W, 2050 MHz, 41 C, 24 MiB, bandwidth blank).
    "intel-busy-stats": (
        [(0, "intel", "Intel(R) Graphics [0x020a]", 32768 * MiB)],
        {0: dict(util=73.0, power_w=15.0, sm_clock_mhz=2050.0, temp_c=41.0, mem_used=24 * MiB,
                 mem_total=32768 * MiB, dram_active=None)},
    ),
    # SYNTHETIC brsmi table (tests/unit/test_vendor_biren.py): "|   0  BR104P  N/A  |",
    # "| N/A   45C   P0   120W / 300W  |   2048MiB / 32768MiB |     35%   Default |";
    # GPU 1 all "N/A" but the cap; process "|    0       4242      C   python   2000MiB |".
    "biren": (
        [(i, "biren", "BR104P", 32768 * MiB) for i in range(2)],
        {0: dict(util=35.0, temp_c=45.0, power_w=120.0, power_limit_w=300.0, mem_used=2048 * MiB,
                 mem_total=32768 * MiB, procs={"4242": 2000 * MiB}),
         1: dict(util=None, temp_c=None, power_w=None, power_limit_w=300.0, mem_used=0, mem_total=32768 * MiB,
                 procs={})},
    ),
}


def _check_recording(res: Result, backend: str, cards: list[tuple], values: dict[int, dict[str, Any]]) -> None:
    _ok(res)
    assert res.wall_s < DURATION + SLACK_S, res.wall_s
    assert res.header["backend"] == backend
    assert [(c["card"], c["vendor"], c["name"], c["mem_total"]) for c in res.header["cards"]] == cards
    by = res.cards()
    assert sorted(by) == [c[0] for c in cards]
    for card, recs in by.items():
        assert len(recs) >= 2, (card, len(recs))
        for rec in recs:
            got = {k: rec[k] for k in values[card]}
            assert got == values[card], (card, rec["t"])
    assert res.events("backend_failing") == []
    assert [e["type"] for e in res.events()][-1] == "recording_ended"
    assert res.events("recording_ended")[0]["ended_by"] == "duration"


@pytest.mark.parametrize("vendor", list(VENDORS))
def test_record_matches_the_fixture(runs, real_here, vendor):
    backend, _ = VENDORS[vendor]
    if backend in real_here:  # e.g. /opt/rocm/bin/amd-smi, found before a fake rocm-smi on PATH
        pytest.skip(f"this machine has a real {backend} tool in a fixed folder; it would be read, not the fake")
    cards, values = EXPECTED[vendor]
    _check_recording(runs[f"record-{vendor}"], backend, cards, values)


# The fake pynvml's H200 and A100 (tests/fakes/fake_pynvml.py h200(), a100()) in NVML's units,
# converted as tests/unit/test_vendor_nvml.py's h200_sample/a100_sample: mW → W
# (690_000 → 690.0, limit 700_000 → 700.0; 210_500 → 210.5, 400_000 → 400.0), memory v2
# "used" bytes, PCIe KB/s → B/s (×1024), GPM MiB/s → B/s.
NVML_H200 = dict(util=98.0, mem_used=71_000_000_000, mem_total=150_754_820_096, power_w=690.0, power_limit_w=700.0,
                 temp_c=71.0, sm_clock_mhz=1755.0, sm_clock_max_mhz=1980.0, clock_reasons=0x4, pcie_gen=5,
                 pcie_width=16, procs={"4242": 70_000_000_000})
NVML_H200_GPM = dict(sm_active=85.0, sm_occupancy=40.0, tensor_active=35.0, dram_active=30.0,
                     pcie_rx_Bps=1900.0 * MiB, pcie_tx_Bps=95.0 * MiB)
NVML_A100 = dict(util=35.0, sm_active=None, sm_occupancy=None, tensor_active=None, dram_active=None,
                 mem_used=20_000_000_000, mem_total=85_899_345_920, power_w=210.5, power_limit_w=400.0, temp_c=48.0,
                 sm_clock_mhz=1410.0, sm_clock_max_mhz=1410.0, clock_reasons=0x1,
                 pcie_rx_Bps=250_000.0 * 1024, pcie_tx_Bps=1_000.0 * 1024, pcie_gen=4, pcie_width=16,
                 procs={"5151": 19_000_000_000, "5152": None})


def test_record_nvml_through_the_fake_library(runs):
    res = runs["record-nvml"]
    _ok(res)
    assert res.wall_s < DURATION + SLACK_S
    assert res.header["backend"] == "nvml"
    assert [(c["card"], c["vendor"], c["name"], c["uuid"], c["mem_total"], c["power_limit_w"])
            for c in res.header["cards"]] == [
        (0, "nvidia", "NVIDIA H200", "GPU-00000000-0000-0000-0000-000000000000", 150_754_820_096, 700.0),
        (1, "nvidia", "NVIDIA A100-SXM4-80GB", "GPU-11111111-2222-3333-4444-555555555555", 85_899_345_920, 400.0)]
    by = res.cards()
    assert sorted(by) == [0, 1]
    assert len(by[0]) >= 2 and len(by[1]) >= 2
    for rec in by[0]:
        assert {k: rec[k] for k in NVML_H200} == NVML_H200, rec["t"]
        if rec["sm_active"] is None:
            # GPM wants two snapshots ≥ 100 ms apart: the first tick may come too soon after
            # discovery, and then PCIe comes from the 20 ms counters (KB/s → B/s).
            assert (rec["pcie_rx_Bps"], rec["pcie_tx_Bps"]) == (1_953_125 * 1024, 97_656 * 1024)
        else:
            assert {k: rec[k] for k in NVML_H200_GPM} == NVML_H200_GPM, rec["t"]
    assert by[0][-1]["sm_active"] == 85.0  # GPM answered once the interval was long enough
    for rec in by[1]:
        assert {k: rec[k] for k in NVML_A100} == NVML_A100, rec["t"]
    assert res.events("backend_failing") == []


def _nvml_fault_schedule() -> tuple[float, float, float]:
    """(UNKNOWN_FROM_S, UNKNOWN_TO_S, LOSE_CARD1_AT_S) from the shim's source, not imported
    (importing it would replace this process's pynvml)."""
    text = (NVML_SHIM_FAULTS / "pynvml.py").read_text()
    vals = {}
    for name in ("UNKNOWN_FROM_S", "UNKNOWN_TO_S", "LOSE_CARD1_AT_S"):
        (line,) = [ln for ln in text.splitlines() if ln.startswith(f"{name} = ")]
        vals[name] = float(line.split("=", 1)[1])
    return vals["UNKNOWN_FROM_S"], vals["UNKNOWN_TO_S"], vals["LOSE_CARD1_AT_S"]


def test_nvml_errors_mid_run_through_the_real_cli(runs):
    """NVML failing in a real ``sattui record`` (the faults shim: H200 power NOT_SUPPORTED
    throughout, H200 utilization UNKNOWN for 1.5 s, the A100 lost at 2.5 s): power is None
    and never 0, utilization is None only while NVML says UNKNOWN and then comes back, the
    lost card gives one card_lost event and no record after it while the H200 goes on to
    the end, and the report marks the lost card."""
    unknown_from, unknown_to, lose_at = _nvml_fault_schedule()
    res = runs["record-nvml-faults"]
    _ok(res)
    assert res.header["backend"] == "nvml"
    by = res.cards()
    h200, a100 = by[0], by[1]
    # The session clock starts a little after the shim's (imported first): allow 1 s.
    assert all(r["power_w"] is None for r in h200), "NOT_SUPPORTED power must be None, never 0"
    assert all(r["power_limit_w"] == 700.0 for r in h200)  # other power fields still read
    utils = [r["util"] for r in h200]
    assert utils[0] is not None and utils[-1] is not None
    gaps = [i for i, u in enumerate(utils) if u is None]
    assert gaps, "UNKNOWN never reached a record"
    assert gaps == list(range(gaps[0], gaps[-1] + 1)), f"None only in one stretch: {utils}"
    gap_t = [h200[i]["t"] for i in gaps]
    back_t = h200[gaps[-1] + 1]["t"]  # the first record after the stretch (utils[-1] is not None)
    assert {u for u in utils if u is not None} == {98.0}  # the H200's fake value, unchanged
    (lost,) = res.events("card_lost")
    assert lost["card"] == 1
    # The recording's t and the shim's clock have different origins, apart by an amount
    # that varies with load (the shim starts when sattui first imports pynvml), so where
    # the stretch lies is checked against the loss, timed by the same shim clock: their
    # distances in the recording do not depend on the origins. Each is seen at the first
    # card tick after it happens (ticks CARD_DT apart).
    lo, hi = lose_at - unknown_from - CARD_DT - TICK_SLACK_S, lose_at - unknown_from + CARD_DT + TICK_SLACK_S
    assert lo <= lost["t"] - gap_t[0] <= hi, ("None began away from UNKNOWN_FROM_S", gap_t, lost["t"])
    assert gap_t[-1] <= lost["t"] + (unknown_to - lose_at) + TICK_SLACK_S, ("None outlived UNKNOWN_TO_S", gap_t)
    assert back_t <= lost["t"] + (unknown_to - lose_at) + CARD_DT + TICK_SLACK_S, ("came back late", back_t)
    assert len(a100) >= 3 and all(r["t"] < lost["t"] for r in a100)
    assert all({k: r[k] for k in NVML_A100} == NVML_A100 for r in a100)
    assert h200[-1]["t"] >= NVML_FAULTS_DURATION - 1.0, "the H200 stopped with the A100"
    assert res.events("backend_failing") == []  # a lost card is not a failing backend

    rep = subprocess.run([sys.executable, "-m", "sattui", "report", str(res.out), "--json"], capture_output=True,
                         text=True, cwd=REPO, timeout=60)
    assert rep.returncode == 0, rep.stderr
    cards = {c["card"]: c for c in json.loads(rep.stdout)["cards"]}
    assert cards[1]["lost_at_s"] == round(lost["t"], 2) and "lost_at_s" not in cards[0]
    assert cards[0]["power_mean_w"] is None and cards[0]["util_mean"] == 98.0
    text = subprocess.run([sys.executable, "-m", "sattui", "report", str(res.out)], capture_output=True,
                          text=True, cwd=REPO, timeout=60).stdout
    (line,) = [ln for ln in text.splitlines() if ln.startswith("card 1 ")]
    # the text shows the JSON's time (rounded to 10 ms) to 0.1 s: the same digits as --json
    assert f"LOST at {cards[1]['lost_at_s']:.1f} s" in line, line


def test_auto_picks_the_one_fake_tool(runs, real_here):
    real = real_here - {"nvml"}  # a real pynvml is hidden from this run
    if real & set(AUTO_ORDER[:AUTO_ORDER.index("intel")]):
        pytest.skip(f"this machine has a real {sorted(real)} that auto tries before intel")
    # Every backend before intel in AUTO_ORDER is probed and passed over; intel is chosen.
    cards, values = EXPECTED["intel"]
    _check_recording(runs["auto-one-tool"], "intel", cards, values)


# -- faults -------------------------------------------------------------------------------------

def test_a_hung_and_a_garbage_tool_do_not_stop_auto(runs, real_here):
    """rocm-smi hangs (rocm: probe's version call, then discovery, each times out), hy-smi
    prints garbage (hygon: discovery fails to parse); auto still reaches cambricon."""
    real = real_here - {"nvml"}
    if real & set(AUTO_ORDER[:AUTO_ORDER.index("cambricon")]):
        pytest.skip(f"this machine has a real {sorted(real)} that auto tries before cambricon")
    res = runs["auto-past-hung-and-garbage"]
    cards, values = EXPECTED["cambricon"]
    _ok(res)
    assert res.wall_s < VERSION_TIMEOUT_S + TOOL_TIMEOUT_S + DURATION + SLACK_S, res.wall_s
    assert res.header["backend"] == "cambricon"
    assert [(c["card"], c["name"]) for c in res.header["cards"]] == [(c[0], c[2]) for c in cards]
    by = res.cards()
    assert sorted(by) == [0, 1] and all(len(v) >= 2 for v in by.values())
    assert all({k: r[k] for k in values[c]} == values[c] for c, recs in by.items() for r in recs)


def test_tool_hanging_after_discovery_ends_on_time(runs):
    """mthreads-gmi answers discovery and one sample, then hangs: one timeout (5 s, the
    CLI's) costs the recording at most that much past its duration; the cards go stale
    (no made-up records), a backend_failing event says why."""
    res = runs["hang-later"]
    _ok(res)
    assert res.wall_s < DURATION + TOOL_TIMEOUT_S + SLACK_S, res.wall_s
    assert res.header["backend"] == "mthreads"
    # mthreads-gmi 2.0.0, 1x S80: "0    MTT S80   |00000000:01:00.0    |0%    662MiB(16384MiB)", "|41C   YES".
    assert [(c["card"], c["name"], c["mem_total"]) for c in res.header["cards"]] == [(0, "MTT S80", 16384 * MiB)]
    recs = res.cards()[0]
    assert len(recs) == 1  # the one sample before the hang
    assert (recs[0]["util"], recs[0]["temp_c"], recs[0]["mem_used"]) == (0.0, 41.0, 662 * MiB)
    # "0    1123      /usr/lib/xorg/Xorg   134MiB", "0    1361      /usr/sbin/unity-greeter   1MiB"
    assert recs[0]["procs"] == {"1123": 134 * MiB, "1361": 1 * MiB}
    (ev,) = res.events("backend_failing")
    assert ev["backend"] == "mthreads"
    assert f"mthreads-gmi did not answer within {TOOL_TIMEOUT_S:g} s" in ev["message"]
    assert ev["t"] > recs[0]["t"]
    assert res.events()[-1]["type"] == "recording_ended"
    assert res.events("recording_ended")[0]["ended_by"] == "duration"


def test_tool_printing_garbage_after_discovery(runs):
    res = runs["garbage-later"]
    _ok(res)
    assert res.wall_s < DURATION + SLACK_S, res.wall_s
    assert res.header["backend"] == "cambricon"
    recs = res.cards()
    assert sorted(recs) == [0, 1] and all(len(v) == 1 for v in recs.values())  # the one good sample
    cards, values = EXPECTED["cambricon"]
    assert all({k: r[k] for k in values[c]} == values[c] for c, rs in recs.items() for r in rs)
    (ev,) = res.events("backend_failing")  # said once, not once per poll
    # The version comes from the last good output's header ("CNMON v5.10.13").
    assert "cnmon 5.10.13: no card table" in ev["message"] and "\n" not in ev["message"]
    assert ev["t"] > max(r["t"] for rs in recs.values() for r in rs)
    assert res.events()[-1]["type"] == "recording_ended"
    assert res.events("recording_ended")[0]["ended_by"] == "duration"


def test_tool_hung_at_discovery_is_one_line_error(runs):
    res = runs["hung-at-discovery"]
    line = _one_line_error(res)
    assert f"mthreads-gmi did not answer within {TOOL_TIMEOUT_S:g} s" in line
    assert res.wall_s < TOOL_TIMEOUT_S + SLACK_S


@pytest.mark.parametrize("vendor", list(GARBAGE_TOOLS))
def test_garbage_on_a_forced_backend_is_one_line_error(runs, vendor):
    _, tool = GARBAGE_TOOLS[vendor]
    res = runs[f"garbage-{vendor}"]
    line = _one_line_error(res)
    assert f": {tool} " in line, line  # "sattui: error: cnmon (version unknown): no card table …"
    assert "\x00" not in line
    assert res.wall_s < SLACK_S + VERSION_TIMEOUT_S


# -- doctor ---------------------------------------------------------------------------------------

# The faked backends: (version doctor reports, [card names]) — versions from the fixtures'
# headers or the fakes' --version answers, as the unit tests assert them.
DOCTOR_FAKED = {
    "nvml": ("570.124.06", ["NVIDIA H200", "NVIDIA A100-SXM4-80GB"]),  # fake driver_version
    "rocm": ("2.0.0+6.0.2", ["Arcturus GL-XL [Instinct MI100]"] * 4),  # ROCM_SMI_VERSION
    "hygon": ("1.8.0", [None] * 4),  # HY_SMI_VERSION "HY-SMI version: 1.8.0"
    "ascend": ("25.5.1", ["910B3"] * 8),  # the overview's "npu-smi 25.5.1  Version: 25.5.1"
    "cambricon": ("5.10.13", ["MLU370-X8"] * 2),  # "CNMON v5.10.13"
    "kunlun": ("driver 5.0.21.26", ["P800 OAM"] * 8),  # "Driver Version: 5.0.21.26"
    "mthreads": ("2.0.0", ["MTT S80"]),  # "mthreads-gmi:2.0.0"
    "biren": ("1.4.0", ["BR104P"] * 2),  # SYNTHETIC "BRSMI 1.4.0"
    "intel": ("1.2.39.20240716", ["Intel(R) Graphics [0x020a]"]),  # XPU_SMI_VERSION
}


def test_doctor_json_with_every_fake(runs, real_here):
    res = runs["doctor-fakes"]
    _ok(res)
    backends = res.doctor()
    assert list(backends) == list(AUTO_ORDER)  # every backend, in the order auto tries them
    real = real_here
    for name, b in backends.items():
        assert {"available", "why", "verified", "cards", "version", "path"} <= set(b), name
        if name in DOCTOR_FAKED and (name == "nvml" or name not in real):  # a real tool could win
            version, names = DOCTOR_FAKED[name]
            assert b["available"] is True, (name, b["why"])
            assert b["version"] == version, name
            assert [c["name"] for c in b["cards"]] == names, name
            assert [c["card"] for c in b["cards"]] == list(range(len(names))), name
        elif name not in real:
            assert b["available"] is False and b["why"], (name, b)
    assert backends["biren"]["verified"] is False
    assert backends["biren"]["why"] == "unverified: no real brsmi output seen"
    assert all(b["verified"] is True for n, b in backends.items() if n != "biren")
    # Intel's xpu-smi and Kunlunxin's xpu_smi side by side: each backend takes its own.
    assert backends["kunlun"]["path"].endswith("/xpu_smi") and backends["intel"]["path"].endswith("/xpu-smi")
    assert backends["rocm"]["cards"][0]["mem_total"] == 34342961152
    assert backends["ascend"]["cards"][0]["mem_total"] == 65536 * MiB


def test_doctor_text_explains_every_backend(runs, real_here):
    res = runs["doctor-fakes-text"]
    _ok(res)
    lines = res.stdout.splitlines()
    start = lines.index("card backends (--backend auto tries them in this order)")
    rows = [ln for ln in lines[start + 1:] if ln[:4] in ("ok  ", "NO  ")]
    assert [ln[4:].split()[0] for ln in rows] == list(AUTO_ORDER)
    by = {ln[4:].split()[0]: ln for ln in rows}
    assert by["cambricon"].startswith("ok  ") and "2 card(s): MLU370-X8" in by["cambricon"]
    assert "2 card(s): NVIDIA A100-SXM4-80GB, NVIDIA H200" in by["nvml"]
    assert "8 card(s): 910B3" in by["ascend"]
    assert "unverified: parsed from no real output of this tool" in res.stdout
    if "drm" not in real_here:
        assert by["drm"].startswith("NO  ") and by["drm"].split(": ", 1)[1].strip()


def test_doctor_with_a_hung_and_a_garbage_tool(runs):
    res = runs["doctor-faults"]
    _ok(res)
    assert res.wall_s < VERSION_TIMEOUT_S + TOOL_TIMEOUT_S + SLACK_S, res.wall_s
    backends = res.doctor()
    assert list(backends) == list(AUTO_ORDER)
    rocm, hygon, cam = backends["rocm"], backends["hygon"], backends["cambricon"]
    assert rocm["available"] is False
    assert rocm["why"] == f"rocm-smi did not answer within {TOOL_TIMEOUT_S:g} s"
    assert hygon["available"] is False and hygon["why"].startswith("hy-smi ") and "\n" not in hygon["why"]
    assert cam["available"] is True and [c["name"] for c in cam["cards"]] == ["MLU370-X8"] * 2


def test_doctor_without_tools_says_why_for_each(runs, real_here):
    res = runs["doctor-empty"]
    _ok(res)
    backends = res.doctor()
    assert list(backends) == list(AUTO_ORDER)
    real = real_here  # empty on a machine without accelerators
    for name, b in backends.items():
        if name in real:
            continue
        assert b["available"] is False, (name, b)
        assert isinstance(b["why"], str) and b["why"].strip(), name
        assert b["cards"] == []
    assert "not found" in backends["cambricon"]["why"]
    assert backends["biren"]["verified"] is False
