"""Issue 6, reliability: each fault sattui must survive, proved end to end.

docs/reliability.md maps every fault to the test that proves it (here or elsewhere).
Targets are plain Python processes (no torch) so the whole file stays fast.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from sattui.recording import RecordingReader
from tests.e2e.conftest import REPO, py_spy_on, run_sattui, sattui_cmd

# e2e: real processes whose timing is asserted (no tick lost, sattui's CPU per second,
# how long a zombie lasts), run alone; the tests marked beside assert no timing and run
# beside other such tests (scripts/run_tests.sh).
pytestmark = pytest.mark.e2e

IS_ROOT = os.geteuid() == 0

SPIN = """
import os, sys, threading, time
n_threads = int(sys.argv[1]); n_children = int(sys.argv[2])
for _ in range(n_threads):
    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
kids = []
for _ in range(n_children):
    pid = os.fork()
    if pid == 0:
        time.sleep(3600)
        os._exit(0)
    kids.append(pid)
print("ready", flush=True)
def work():
    return sum(i * i for i in range(20000))
while True:
    work()
    time.sleep(0.001)
"""


class Spinner:
    """A busy Python "trainer" (a main loop, optional idle threads and forked children)."""

    def __init__(self, threads: int = 0, children: int = 0, env: dict[str, str] | None = None,
                 preexec=None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", SPIN, str(threads), str(children)],
                                     stdout=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
        assert self.proc.stdout.readline().strip() == "ready"
        self.pid = self.proc.pid

    def kill(self) -> None:
        try:
            family = psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            family = []
        for p in [*family]:
            try:
                p.kill()
            except psutil.Error:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def spinner():
    made: list[Spinner] = []

    def make(**kw) -> Spinner:
        s = Spinner(**kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.kill()


def _records(path: Path) -> tuple[list[dict], list[str]]:
    reader = RecordingReader(str(path))
    recs = list(reader.records())
    return recs, reader.warnings




def _kill_py_spy_on(pid: int) -> None:
    for p in py_spy_on(pid):
        try:
            p.kill()
        except psutil.Error:
            pass


def _popen_record(*args: str, **kw) -> subprocess.Popen[str]:
    return subprocess.Popen(sattui_cmd("record", *args), cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def _wait_lines(path: Path, n: int, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and len(path.read_bytes().splitlines()) >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f"{path} did not reach {n} lines")


# -- row 1: the trainer is SIGKILLed mid-recording ---------------------------------------

@pytest.mark.beside
def test_trainer_sigkilled_mid_recording_ends_the_file_with_an_event(spinner, tmp_path):
    tr = spinner(children=2)
    out = tmp_path / "f.jsonl"
    p = _popen_record("--pid", str(tr.pid), "-o", str(out), "--interval", "0.5", "--duration", "60")
    _wait_lines(out, 6)
    time.sleep(1.5)
    t_kill = time.monotonic()
    os.kill(tr.pid, signal.SIGKILL)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert time.monotonic() - t_kill < 15
    assert "Traceback" not in err and "ended by trainer_exited" in err
    recs, warnings = _records(out)
    assert warnings == []
    types = [r.get("type") for r in recs if r["kind"] == "event"]
    assert "trainer_exited" in types and types[-1] == "recording_ended"
    assert recs[-1]["ended_by"] == "trainer_exited"
    assert any(r["kind"] == "proc" for r in recs)
    assert not py_spy_on(tr.pid)
    rep = run_sattui("report", str(out))
    assert rep.returncode == 0, rep.stderr


# -- row 2: sattui itself is SIGKILLed -----------------------------------------------------

def _last_proc_t(path: Path) -> float | None:
    """The newest process sample's time now on disk (a line being written is skipped)."""
    newest = None
    for line in path.read_bytes().splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("kind") == "proc":
            newest = r["t"] if newest is None else max(newest, r["t"])
    return newest


KILL_AFTER_S = 2.0


def test_sattui_sigkilled_leaves_everything_up_to_the_last_second(spinner, tmp_path):
    tr = spinner()
    out = tmp_path / "f.jsonl"
    p = _popen_record("--pid", str(tr.pid), "-o", str(out), "--interval", "0.5")
    try:
        _wait_lines(out, 8)
        # The file is the clock (the recording's t has its own origin): catch a tick the
        # moment it reaches the disk, kill KILL_AFTER_S later. Its t is then at most the
        # kill's t - KILL_AFTER_S, so "nothing lost past the last second" means a sample
        # at or after t_seen + KILL_AFTER_S - 1 s is in the file.
        t0 = _last_proc_t(out)
        deadline = time.monotonic() + 10
        while (t_seen := _last_proc_t(out)) == t0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert t_seen is not None and t_seen != t0, "no new tick reached the file in 10 s"
        time.sleep(KILL_AFTER_S)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)
        recs, warnings = _records(out)
        assert warnings == []
        t_last_proc = max(r["t"] for r in recs if r["kind"] == "proc")
        t_header = json.loads(out.read_bytes().splitlines()[0])
        assert t_header["kind"] == "header"
        # Ticks every 0.5 s, each flushed: at most the last second is lost.
        assert t_last_proc >= t_seen + KILL_AFTER_S - 1.0, (t_seen, t_last_proc)
        # A kill landing mid-write tears the last line: it is skipped with a warning.
        data = out.read_bytes()
        last_nl = data.rstrip(b"\n").rfind(b"\n")
        torn = data[: last_nl + 1] + data[last_nl + 1: -1][: max(1, (len(data) - last_nl) // 2)]
        out.write_bytes(torn)
        recs2, warnings2 = _records(out)
        assert len(recs2) == len(recs) - 1
        assert len(warnings2) == 1 and "torn" in warnings2[0]
        rep = run_sattui("report", str(out))
        assert rep.returncode == 0, rep.stderr
        assert "torn" in rep.stderr
    finally:
        if p.poll() is None:
            p.kill()
        # py-spy runs in its own session and outlives a SIGKILLed sattui until its
        # --duration backstop (docs/reliability.md); do not leave it to the next test.
        _kill_py_spy_on(tr.pid)


# -- row 5 / row 10: not root, no ptrace rights over the trainer ---------------------------

@pytest.mark.beside
@pytest.mark.skipif(not IS_ROOT, reason="needs root to own the trainer and switch to nobody")
def test_non_root_record_of_a_root_trainer_says_the_fix_and_records_processes(spinner, tmp_path):
    tr = spinner(children=1)  # owned by root
    # pytest's own temp root is 0700 root: nobody writes to a directory of its own.
    import tempfile

    tmp_path = Path(tempfile.mkdtemp(prefix="sattui-nobody-", dir="/tmp"))
    tmp_path.chmod(0o777)
    out = tmp_path / "f.jsonl"
    # ...and the interpreter's directory cannot pass access(2) for nobody: a py-spy on PATH.
    from sattui.trainer.stacks import find_py_spy

    shutil.copy(find_py_spy(), tmp_path / "py-spy")
    # `nobody` with only DAC read rights (the interpreter lives under a 0700 /root here):
    # no CAP_SYS_PTRACE, another uid than the trainer, so py-spy is denied as for any user.
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                 "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
    r = subprocess.run([*as_nobody, *sattui_cmd("record", "--pid", str(tr.pid), "-o", str(out),
                                                "--duration", "15", "--backend", "sim")],
                       cwd=REPO, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "HOME": str(tmp_path), "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    denied = [x for x in r.stderr.splitlines() if "permission" in x.lower() or "ptrace" in x.lower()]
    assert denied, r.stderr
    assert "SYS_PTRACE" in denied[0] and "ptrace_scope" in denied[0]
    recs, _ = _records(out)
    assert not any(r_["kind"] == "stacks" for r_ in recs)
    assert "permission_denied" in [x.get("type") for x in recs if x["kind"] == "event"]
    procs = {x["pid"] for x in recs if x["kind"] == "proc"}
    assert tr.pid in procs and len(procs) >= 2  # the trainer and its child are still recorded
    rep = json.loads(run_sattui("report", str(out), "--json").stdout)
    assert rep["trainer"]["states"] == {}
    assert rep["trainer"]["sampler"]["problem"]
    # Past the advisor's warm-up, with cards: the stack rules are said "cannot judge".
    cj = {c["rule"]: c["reason"] for c in rep.get("cannot_judge") or []}
    assert "input_bound" in cj, rep.get("cannot_judge")
    text = run_sattui("report", str(out)).stdout
    assert "no stacks" in text and "cannot" in text.lower()


# -- row 6: scale: 64 workers and 500 threads ----------------------------------------------

def test_64_children_and_500_threads_are_all_seen_without_cpu_running_away(spinner, tmp_path):
    tr = spinner(threads=500, children=64)
    out = tmp_path / "f.jsonl"
    p = _popen_record("--pid", str(tr.pid), "-o", str(out), "--duration", "8")
    ps = psutil.Process(p.pid)
    cpu = 0.0
    while p.poll() is None:
        try:
            t = ps.cpu_times()
            cpu = t.user + t.system
        except psutil.Error:
            break
        time.sleep(0.2)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    recs, _ = _records(out)
    last_t = max(r["t"] for r in recs if r["kind"] == "proc")
    at_end = {r["pid"] for r in recs if r["kind"] == "proc" and r["t"] >= last_t - 0.01}
    kids = {c.pid for c in psutil.Process(tr.pid).children()}
    assert len(kids) == 64
    assert kids <= at_end, f"missing {len(kids - at_end)} of 64"
    ticks = sorted({r["t"] for r in recs if r["kind"] == "proc"})
    # No tick lost: a tick every 1 s (the default interval) from 0 to 8 s, 9 in all. A slow
    # tick delays the next ones (no catch-up burst) but a lost one leaves a 2 s hole.
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert len(ticks) >= 8, f"{len(ticks)} ticks in 8 s: {ticks}"
    assert max(gaps) < 1.8, f"a tick was lost: {[round(g, 2) for g in gaps]}"
    # sattui's own CPU, py-spy excluded, over ~8 s: well under one core.
    assert cpu / 8 < 0.6, f"sattui used {cpu:.1f} CPU-s in 8 s"


# -- row 7: disk full mid-recording ---------------------------------------------------------

@pytest.fixture
def tiny_tmpfs(tmp_path):
    if not IS_ROOT:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.beside
def test_disk_full_mid_recording_is_one_line_and_earlier_lines_stay(spinner, tiny_tmpfs):
    tr = spinner(children=4)
    filler = tiny_tmpfs / "filler"
    with open(filler, "wb") as f:  # leave ~24 KiB free: a few seconds of records
        f.write(b"\0" * (1024 * 1024 - 24 * 1024))
    out = tiny_tmpfs / "f.jsonl"
    t0 = time.monotonic()
    r = run_sattui("record", "--pid", str(tr.pid), "-o", str(out), "--interval", "0.2",
                   "--duration", "60", timeout=90)
    assert time.monotonic() - t0 < 45, "the recorder must stop when the disk is full"
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, r.stderr
    assert "cannot write" in lines[0] and "No space left on device" in lines[0]
    recs, warnings = _records(out)  # at worst a torn last line
    assert len(warnings) <= 1
    assert sum(1 for x in recs if x["kind"] == "proc") >= 5
    assert tr.proc.poll() is None, "the trainer goes on"
    assert not py_spy_on(tr.pid), "py-spy is stopped"


# -- row 7: a large recording is reported with bounded memory ------------------------------

def _grow(src: Path, dst: Path, target_bytes: int) -> int:
    """``dst``: ``src``'s header, then its body repeated with times shifted, to ``target_bytes``."""
    lines = src.read_bytes().splitlines()
    header, body = lines[0], [json.loads(x) for x in lines[1:] if x.strip()]
    body = [r for r in body if r["kind"] != "event"]
    span = max(r.get("t_end", r["t"]) for r in body) + 1.0
    n = 0
    with open(dst, "wb") as f:
        f.write(header + b"\n")
        size, k = len(header) + 1, 0
        while size < target_bytes:
            for r in body:
                r2 = dict(r, t=round(r["t"] + k * span, 4))
                if "t_end" in r2:
                    r2["t_end"] = round(r["t_end"] + k * span, 4)
                if r["kind"] == "stacks":
                    r2["samples"] = [[round(x[0] + k * span, 4), *x[1:]] for x in r["samples"]]
                b = json.dumps(r2, separators=(",", ":")).encode() + b"\n"
                f.write(b)
                size += len(b)
                n += 1
            k += 1
    return n


@pytest.mark.beside
@pytest.mark.long
def test_report_of_a_large_recording_streams_with_bounded_memory(spinner, tmp_path):
    tr = spinner(children=2)
    small = tmp_path / "small.jsonl"
    r = run_sattui("record", "--pid", str(tr.pid), "-o", str(small), "--duration", "4", "--backend", "none")
    assert r.returncode == 0, r.stderr
    big = tmp_path / "big.jsonl"
    _grow(small, big, 40 * 1024 * 1024)
    p = subprocess.Popen(sattui_cmd("report", str(big), "--json"), cwd=REPO, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    ps = psutil.Process(p.pid)
    peak = 0
    while p.poll() is None:
        try:
            peak = max(peak, ps.memory_info().rss)
        except psutil.Error:
            break
        time.sleep(0.05)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    json.loads(out)
    # The file is 40 MB; the report holds aggregates only (measured ~30 MiB peak).
    assert peak < 100 * 1024 * 1024, f"peak RSS {peak / 2**20:.0f} MiB"


# -- row 10: secrets never reach a file, the report, or the screen --------------------------

@pytest.mark.beside
def test_secret_env_reaches_no_file_no_report_and_no_screen(spinner, tmp_path):
    secret = "wandb-" + secrets.token_hex(16)
    tr = spinner(env={"WANDB_API_KEY": secret, "MY_TOKEN": secret, "CUDA_VISIBLE_DEVICES": "0"})
    out = tmp_path / "f.jsonl"
    r = run_sattui("record", "--pid", str(tr.pid), "-o", str(out), "--duration", "4", "--backend", "sim")
    assert r.returncode == 0, r.stderr
    data = out.read_text()
    assert secret not in data and "WANDB_API_KEY" not in data
    assert json.loads(data.splitlines()[0])["env"].get("CUDA_VISIBLE_DEVICES") == "0"
    assert (out.stat().st_mode & 0o777) == 0o600
    for args in ((), ("--json",)):
        rep = run_sattui("report", str(out), *args)
        assert rep.returncode == 0
        assert secret not in rep.stdout + rep.stderr
    assert secret not in r.stdout + r.stderr

    from sattui.app import SattuiApp
    from sattui.session import ReplaySession

    async def screens() -> list[str]:
        app = SattuiApp(ReplaySession(str(out)), show_clock=False)
        shots = []
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.pause()
            shots.append(app.export_screenshot())
            for key in ("w", "s", "enter"):
                await pilot.press(key)
                await pilot.pause()
                shots.append(app.export_screenshot())
                await pilot.press("escape")
                await pilot.pause()
        return shots

    shots = asyncio.run(screens())
    assert len(shots) == 4
    for svg in shots:
        assert secret not in svg and "WANDB" not in svg


@pytest.mark.beside
def test_a_running_record_opens_no_listening_socket(spinner, tmp_path):
    tr = spinner()
    out = tmp_path / "f.jsonl"
    p = _popen_record("--pid", str(tr.pid), "-o", str(out), "--duration", "5", "--backend", "sim")
    try:
        _wait_lines(out, 4)
        time.sleep(1)
        procs = [psutil.Process(p.pid), *psutil.Process(p.pid).children(recursive=True)]
        for proc in procs:
            conns = proc.net_connections(kind="all") if hasattr(proc, "net_connections") \
                else proc.connections(kind="all")
            listening = [c for c in conns if c.status == psutil.CONN_LISTEN]
            assert listening == [], (proc, listening)
            inet = [c for c in conns if c.family in (2, 10)]
            assert inet == [], (proc, inet)
    finally:
        _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err


@pytest.mark.beside
def test_disk_full_stops_a_trainer_sattui_started_itself(tiny_tmpfs):
    # Before the fix the failing close skipped stop_child: `record -- CMD` left CMD running.
    marker = f"sattui-disk-full-{secrets.token_hex(4)}"
    with open(tiny_tmpfs / "filler", "wb") as f:
        f.write(b"\0" * (1024 * 1024 - 24 * 1024))
    r = run_sattui("record", "-o", str(tiny_tmpfs / "f.jsonl"), "--interval", "0.2", "--duration", "60",
                   "--", sys.executable, "-c", f"import time; time.sleep(120)  # {marker}", timeout=90)
    assert r.returncode != 0
    assert "No space left on device" in r.stderr.splitlines()[-1]
    time.sleep(0.5)
    left = [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]
    for p in left:
        p.kill()
    assert left == []


# -- row 3: a misbehaving vendor tool leaves no zombie and no orphan -------------------------

GMI_S80 = (REPO / "tests" / "fixtures" / "vendors" / "moorethreads"
           / "mthreads-gmi_1x-S80_gmi2.0.0_drv3.0.0_two-procs.txt")

# A fake mthreads-gmi that goes through every kind of bad day, one per call: call 3 hangs
# with a grandchild holding its stdout (the worst case for a reaper: the child's exit
# alone does not close the pipe), 4 crashes, 5 prints garbage, 6 answers slowly but
# within the timeout; every other call answers like the real S80 capture.
_BAD_DAY_TOOL = '''#!{python}
import os, subprocess, sys, time
with open({counter!r}, "a") as f:
    f.write(str(os.getpid()) + "\\n")
with open({counter!r}) as f:
    n = sum(1 for _ in f)
if n == 3:
    subprocess.Popen([{python!r}, "-c", "import time; time.sleep(60)", {marker!r}])
    time.sleep(60)
elif n == 4:
    sys.stderr.write("mthreads-gmi: Segmentation fault\\n")
    os._exit(139)
elif n == 5:
    sys.stdout.write("\\x00\\x01 not a table {{[ ]\\n")
else:
    if n == 6:
        time.sleep(2.0)
    with open({fixture!r}, "rb") as f:
        sys.stdout.buffer.write(f.read())
'''


def _procs_mentioning(marker: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in a for a in p.info["cmdline"] or []):
                out.append(p)
        except psutil.Error:
            pass
    return out


def test_hung_crashing_garbage_and_slow_tool_leave_no_zombie_or_orphan(spinner, tmp_path):
    """A whole ``sattui record`` (py-spy on a trainer, cards from a tool that hangs,
    crashes, prints garbage and dawdles in turn): while it runs, no child of sattui stays
    a zombie; afterwards no process it started (tool, the tool's grandchild, py-spy) is
    left, and the cards came back after each fault."""
    marker = f"sattui-bad-day-{secrets.token_hex(4)}"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "mthreads-gmi"
    counter = tmp_path / "calls"
    tool.write_text(_BAD_DAY_TOOL.format(python=sys.executable, counter=str(counter), marker=marker,
                                         fixture=str(GMI_S80)))
    tool.chmod(0o755)
    trainer = spinner()
    out = tmp_path / "run.jsonl"
    env = {**os.environ, "PATH": os.pathsep.join([str(bindir), os.environ["PATH"]])}
    proc = _popen_record("--pid", str(trainer.pid), "--backend", "mthreads", "--duration", "16",
                         "-o", str(out), env=env)
    me = psutil.Process(proc.pid)
    zombie_seen: dict[int, float] = {}  # pid -> first time seen as a zombie
    longest_zombie_s = 0.0
    while proc.poll() is None:
        now = time.monotonic()
        try:
            kids = me.children(recursive=True)
        except psutil.Error:
            break
        for k in kids:
            try:
                if k.status() == psutil.STATUS_ZOMBIE:
                    first = zombie_seen.setdefault(k.pid, now)
                    longest_zombie_s = max(longest_zombie_s, now - first)
            except psutil.Error:
                pass
        time.sleep(0.2)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    # A child may be a zombie for the moment between its exit and the wait() that reaps
    # it; one that stays so for more than a second is leaked.
    assert longest_zombie_s < 1.0, f"a child of sattui stayed a zombie {longest_zombie_s:.1f} s: {zombie_seen}"

    tool_pids = [int(x) for x in counter.read_text().split()]
    assert len(tool_pids) >= 7, f"the tool ran only {len(tool_pids)} times; every fault must have been met"
    deadline = time.monotonic() + 5
    while (left := _procs_mentioning(marker) + _procs_mentioning(str(tool)) + py_spy_on(trainer.pid)) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    # Each tool run is `python <tool path>`, so this sweep finds any left of the seven too.
    assert not left, [(p.pid, p.cmdline()) for p in left if p.is_running()]

    recs, warnings = _records(out)
    assert not warnings
    fails = [r for r in recs if r["kind"] == "event" and r["type"] == "backend_failing"]
    recovered = [r for r in recs if r["kind"] == "event" and r["type"] == "backend_recovered"]
    cards = [r for r in recs if r["kind"] == "card"]
    assert any("did not answer" in e["message"] for e in fails), fails
    assert recovered, "the cards never came back after the faults"
    assert any(c["t"] > recovered[-1]["t"] for c in cards), "no card record after the tool recovered"
    assert all(c["util"] == 0.0 and c["temp_c"] == 41.0 for c in cards)  # the S80 capture, never made up
    assert [r for r in recs if r["kind"] == "proc" and r["pid"] == trainer.pid], "the trainer went unrecorded"
    assert recs[-1]["kind"] == "event" and recs[-1]["type"] == "recording_ended"


# -- row 6: a pid taken again by another process -------------------------------------------

# A trainer whose DataLoader-like worker dies and whose pid goes, between two of sattui's
# ticks, to a new child that is not a worker (``sleep``): real pid reuse, forced through
# /proc/sys/kernel/ns_last_pid (root) so it does not take 4 million forks.
_REUSE_TRAINER = '''
import os, sys, time
def worker():
    pid = os.fork()
    if pid == 0:
        with open("/proc/self/comm", "w") as f:
            f.write("pt_data_worker")
        while True:
            sum(range(10000))
    return pid
def stranger():
    # Not a fork of the trainer that stays one (that is how older torch's workers look):
    # it execs another program, as a launcher's helper or a shell-out would.
    pid = os.fork()
    if pid == 0:
        os.execv("/bin/sleep", ["sleep", "60"])
    return pid
w = worker()
print(w, flush=True)
sys.stdin.readline()
os.kill(w, 9)
os.waitpid(w, 0)
got = None
for attempt in range(100):
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(w - 1))
    p = stranger()
    if p == w:
        got = p
        break
    os.kill(p, 9)
    os.waitpid(p, 0)
print(got, flush=True)
sys.stdin.readline()
'''


def _can_set_next_pid() -> bool:
    try:
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(open("/proc/sys/kernel/ns_last_pid").read().strip())
        return True
    except OSError:
        return False


@pytest.mark.skipif(not IS_ROOT or not _can_set_next_pid(), reason="needs root to set ns_last_pid")
def test_a_reused_pid_is_a_new_process_not_the_old_one_continued(tmp_path):
    trainer = subprocess.Popen([sys.executable, "-c", _REUSE_TRAINER], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    out = tmp_path / "run.jsonl"
    try:
        worker_pid = int(trainer.stdout.readline())
        rec = _popen_record("--pid", str(trainer.pid), "--duration", "10", "-o", str(out))
        _wait_lines(out, 8)  # the header and a few ticks with the worker in them
        time.sleep(2.5)  # the worker builds up CPU time (the stranger must not inherit it)
        trainer.stdin.write("reuse\n")
        trainer.stdin.flush()
        got = trainer.stdout.readline().strip()
        if got == "None":
            pytest.skip("another process took the pid first 100 times")
        assert int(got) == worker_pid
        _, stderr = rec.communicate(timeout=60)
        assert rec.returncode == 0, stderr
    finally:
        for p in psutil.Process(trainer.pid).children():
            p.kill()
        trainer.kill()
        trainer.wait()

    recs, warnings = _records(out)
    assert not warnings
    mine = [r for r in recs if r.get("pid") == worker_pid and r["kind"] in ("proc", "event")]
    procs = [r for r in mine if r["kind"] == "proc"]
    olds = [r for r in procs if r["name"] == "pt_data_worker"]
    news = [r for r in procs if r["name"] == "sleep"]
    assert len(olds) >= 3 and len(news) >= 2, [(r["t"], r["name"]) for r in procs]
    assert all(r["role"] == "worker" for r in olds)
    assert all(r["role"] == "other" for r in news), "the stranger inherited the worker's role"
    assert max(r["t"] for r in olds) < min(r["t"] for r in news)
    # Its first sample's figures are its own: born since the previous tick, its counters
    # are counted from 0 (a sleeper: ~0 CPU), not as a delta against the old worker's.
    assert news[0]["cpu"] is not None and news[0]["cpu"] < 0.3, news[0]
    assert all(r["cpu"] is None or r["cpu"] < 0.3 for r in news)
    assert max(r["cpu"] or 0 for r in olds) > 0.5
    # The tick that saw the change says so, before the stranger's first record.
    types = [(r["kind"], r.get("type"), r.get("name")) for r in mine]
    first_new = types.index(("proc", None, "sleep"))
    assert ("event", "proc_exited", None) in types[:first_new] and ("event", "proc_started", None) in types[:first_new]

    r = run_sattui("report", str(out), "--json")
    assert r.returncode == 0, r.stderr
    rows = [p for p in json.loads(r.stdout)["processes"] if p["pid"] == worker_pid]
    assert sorted((p["role"], p["name"]) for p in rows) == [("other", "sleep"), ("worker", "pt_data_worker")]
    worker_row = next(p for p in rows if p["role"] == "worker")
    stranger_row = next(p for p in rows if p["role"] == "other")
    assert worker_row["cpu_mean"] > 0.5 and stranger_row["cpu_mean"] < 0.3
