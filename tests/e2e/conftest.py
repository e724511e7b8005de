"""Real PyTorch trainers for end-to-end tests (torch is a test-only dependency)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]


def _have_torch() -> bool:
    try:
        import importlib.util

        return importlib.util.find_spec("torch") is not None
    except Exception:
        return False


def sattui_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "sattui", *args]


def run_sattui(*args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(sattui_cmd(*args), capture_output=True, text=True, timeout=timeout, cwd=REPO, **kw)


def py_spy_on(pid: int) -> list[psutil.Process]:
    """Every py-spy on the machine sampling ``pid``.

    Searched machine-wide, not among a process's children: sattui starts py-spy in a
    session of its own, so one left behind is re-parented to PID 1 and no longer a
    descendant of anything the test started.
    """
    out = []
    for p in psutil.process_iter(["name", "cmdline"]):
        try:
            cmd = p.info["cmdline"] or []
            if p.info["name"] == "py-spy" and str(pid) in cmd:
                out.append(p)
        except psutil.Error:
            pass
    return out


def wait_share(lines: list[dict], wall0: float, wall1: float) -> float:
    """A trainer's own share of wall time in next(loader) between two wall-clock times, from
    its truth lines (cumulative ``wait_s`` and ``elapsed_s``, written at step ends).

    The lines taken bracket the window: the last at or before ``wall0`` and the first at or
    after ``wall1``. The nearest line to ``wall1`` could predate a wait still under way at
    ``wall1``, which the sampler saw and the truth would not (a lagging worker on a loaded
    box: CI once read 0.125 against a "truth" of 0.03). The lines come about once a second,
    so the truth's window overhangs the one asked by up to a second each side."""
    before = [r for r in lines if r["wall"] <= wall0]
    after = [r for r in lines if r["wall"] >= wall1]
    a = before[-1] if before else lines[0]
    b = after[0] if after else lines[-1]
    assert b["elapsed_s"] - a["elapsed_s"] > 5, (a, b)
    return (b["wait_s"] - a["wait_s"]) / (b["elapsed_s"] - a["elapsed_s"])


def sampled_window(recs: list[dict], pid: int, wall_end: float) -> tuple[float, float]:
    """The wall-clock span the recording's stack chunks of ``pid`` cover. The recording's
    times count from its start, whose wall time the header gives only to the second; its last
    record is taken as written at ``wall_end`` (when `sattui record` returned), a few tenths
    of a second late at most, which moves the window by as much."""
    last = max(r.get("t_end", r.get("t", 0.0)) for r in recs)
    chunks = [r for r in recs if r["kind"] == "stacks" and r["pid"] == pid]
    assert chunks, "no stack chunks of the trainer"
    offset = wall_end - last
    return offset + min(r["t"] for r in chunks), offset + max(r["t_end"] for r in chunks)


class Trainer:
    """A running ``sattui.demo.trainer`` with its own truth file."""

    def __init__(self, tmp: Path, scenario: str, seconds: float, *extra: str, env: dict | None = None) -> None:
        self.truth = tmp / f"truth-{scenario}-{time.monotonic_ns()}.jsonl"
        cmd = [sys.executable, "-m", "sattui.demo.trainer", "--scenario", scenario, "--seconds", str(seconds),
               "--truth", str(self.truth), *extra]
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})})
        self.pid = self.proc.pid

    def wait_training(self, timeout: float = 60) -> None:
        """Until the training loop has run a while (imports done, workers up)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.truth.exists() and len(self.truth.read_text().splitlines()) >= 2:
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"trainer died: {self.proc.stdout.read().decode()}")
            time.sleep(0.2)
        raise AssertionError("trainer did not start training in time")

    def truth_lines(self) -> list[dict]:
        return [json.loads(x) for x in self.truth.read_text().splitlines() if x.strip()]

    def wait_share(self, wall0: float, wall1: float) -> float:
        """The trainer's own share of wall time in next(loader) between two wall-clock times."""
        return wait_share(self.truth_lines(), wall0, wall1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # DataLoader workers killed mid-start can outlive the trainer; leave nothing behind.
        for p in psutil.process_iter(["cmdline"]):
            try:
                if p.info["cmdline"] and str(self.truth) in " ".join(p.info["cmdline"]):
                    p.kill()
            except psutil.Error:
                pass


def need_trainer_tools() -> None:
    """Skip, saying which, where a real trainer cannot run here: torch or py-spy missing."""
    if not _have_torch():
        pytest.skip("torch not installed (pip install torch==2.13.0)")
    if shutil.which("py-spy") is None and not (Path(sys.executable).parent / "py-spy").exists():
        pytest.skip("py-spy not installed")


def torchrun_cmd() -> list[str]:
    """torchrun: the console script next to this interpreter (under `make test` .venv/bin
    is not on PATH; and not a pyenv shim, which is bash); python -m torch.distributed.run
    is the same launcher where the script is missing."""
    script = Path(sys.executable).parent / "torchrun"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "torch.distributed.run"]


@pytest.fixture
def trainer_factory(tmp_path):
    need_trainer_tools()
    made: list[Trainer] = []

    def make(scenario: str, seconds: float, *extra: str, env: dict | None = None) -> Trainer:
        t = Trainer(tmp_path, scenario, seconds, *extra, env=env)
        made.append(t)
        return t

    yield make
    for t in made:
        t.stop()


# --------------------------------------------------------------------------- shared runs
#
# One real trainer run per scenario (issue 21): a run that several tests judge is recorded
# once, by a session-scoped fixture, on first use, and every test reads the same
# recording (and the trainer's own truth). Recording files only are kept: nothing runs
# between the tests that share it.


@pytest.fixture(scope="session")
def starved_demo(tmp_path_factory) -> Path:
    """`sattui demo --headless --scenario starved` for 20 s: the real demo trainer, real
    py-spy, the SIMULATED card (test_demo.py, test_export_demo.py)."""
    need_trainer_tools()
    out = tmp_path_factory.mktemp("starved-demo") / "starved.jsonl"
    r = run_sattui("demo", "--headless", "--scenario", "starved", "--duration", "20", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    return out


# Every shared run of the demo trainer carries a secret in its environment and one
# allow-listed variable: the tests that read its recording check that the first never
# reaches a file or a report and the second does.
RUN_SECRET = "sattui-e2e-" + secrets.token_hex(12)
RUN_ENV = {"WANDB_API_KEY": RUN_SECRET, "NCCL_DEBUG": "WARN"}


@dataclass(frozen=True)
class DemoRun:
    """A finished ``sattui record -- python -m sattui.demo.trainer …`` run."""

    out: Path     # the recording
    truth: Path   # the trainer's own truth (JSON lines, cumulative seconds)
    stderr: str   # what `sattui record` said


@pytest.fixture(scope="session")
def demo_trainer_run(tmp_path_factory):
    """``get(scenario, seconds, *args, rate_hz="20")``: ``sattui record --rate RATE --
    python -m sattui.demo.trainer --scenario SCENARIO --seconds SECONDS ARGS --truth …``
    until the trainer exits, recorded on the first call with these arguments and handed
    to every later one (test_scenarios.py's S01–S03 and test_record_cli.py judge the same
    runs)."""
    runs: dict[tuple[str, ...], DemoRun] = {}

    def get(scenario: str, seconds: float, *args: str, rate_hz: str = "20", limit_s: float = 120) -> DemoRun:
        key = (scenario, str(seconds), rate_hz, *args)
        if key not in runs:
            need_trainer_tools()
            d = tmp_path_factory.mktemp(f"run-{scenario}")
            out, truth = d / "run.jsonl", d / "truth.jsonl"
            r = run_sattui("record", "-o", str(out), "--rate", rate_hz, "--duration", str(limit_s), "--",
                           sys.executable, "-m", "sattui.demo.trainer", "--scenario", scenario,
                           "--seconds", str(seconds), *args, "--truth", str(truth),
                           timeout=limit_s + 60, env={**os.environ, **RUN_ENV})
            assert r.returncode == 0, r.stderr
            assert "Traceback" not in r.stderr, r.stderr
            runs[key] = DemoRun(out, truth, r.stderr)
        return runs[key]

    return get


# The healthy, compute-bound trainer (sattui.demo.phase_trainer: a large MLP on cheap data,
# one worker) with `sattui record --pid` attached once its loop runs, until it exits:
# test_ledger_scenarios.py judges its ledger and steps (S00), test_record_cli.py that
# attaching by pid works and sees little data wait. 36 s of training: the recording (from
# the attach, ~1-2 s into the loop) is then about as long as the 35 s that S00 had when
# `record -- CMD` started the trainer itself and recorded its imports too. (28 s was
# tried: a clean-clone CI run then saw too few of its ~1-s steps' short data waits to
# count the steps, which S00 requires.)
HEALTHY_ARGS = ("--batch", "512", "--width", "2048", "--depth", "8")
HEALTHY_S = 36


@dataclass(frozen=True)
class AttachedRun:
    """A phase trainer recorded by ``sattui record --pid`` from mid-run to its exit."""

    out: Path      # the recording
    truth: Path    # the trainer's own truth (JSON lines, cumulative seconds)
    steps: Path    # the trainer's step starts (monotonic clock, one a line)
    pid: int       # the trainer's pid
    wall0: float   # wall clock when `record --pid` was started
    wall1: float   # … and when it returned
    stderr: str    # what `sattui record` said


@pytest.fixture(scope="session")
def healthy_attached_run(tmp_path_factory) -> AttachedRun:
    need_trainer_tools()
    d = tmp_path_factory.mktemp("healthy-attached")
    out, truth, steps = d / "run.jsonl", d / "truth.jsonl", d / "steps.txt"
    proc = subprocess.Popen([sys.executable, "-m", "sattui.demo.phase_trainer", "--seconds", str(HEALTHY_S),
                             "--truth", str(truth), "--step-times", str(steps), *HEALTHY_ARGS],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        # attach once the loop has run a while (imports done, the worker up): mid-run
        end = time.monotonic() + 60
        while not (truth.exists() and len(truth.read_text().splitlines()) >= 2):
            assert proc.poll() is None, f"trainer died: {proc.stdout.read().decode()}"
            assert time.monotonic() < end, "trainer did not start training in time"
            time.sleep(0.2)
        wall0 = time.time()
        r = run_sattui("record", "--pid", str(proc.pid), "-o", str(out), "--rate", "20", "--duration", "120",
                       timeout=180)
        wall1 = time.time()
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr, r.stderr
        assert proc.wait(30) == 0, proc.stdout.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return AttachedRun(out, truth, steps, proc.pid, wall0, wall1, r.stderr)


# The input-bound demo under ``sattui record --metrics … --webhook …`` with a Slurm job in
# its environment: test_metrics_first_scrape.py judges the exporter's pages from the first
# scrape on, test_notify_labels_live.py the job's labels and the webhook's messages.
EXPORTER_TRAINER_S = 20
EXPORTER_SLURM_JOB = "880011"


class WebHook:
    """A real HTTP server on 127.0.0.1 keeping every JSON body POSTed to it."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.bodies: list[dict] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                n = int(self.headers.get("Content-Length") or 0)
                outer.bodies.append(json.loads(self.rfile.read(n)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *a) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@dataclass(frozen=True)
class ExporterRun:
    """A finished ``sattui record --metrics --webhook -- python -m sattui.demo.trainer``."""

    code: int | None          # sattui's exit status
    said: str                 # what sattui wrote (stdout and stderr)
    pages: list               # [(wall clock, {family: samples})], every page that answered, in order
    born: dict                # pid -> wall-clock start, of every process seen below sattui
    bodies: list              # the JSON bodies the webhook got
    out: Path                 # the recording


@pytest.fixture(scope="session")
def exporter_run(tmp_path_factory) -> ExporterRun:
    """Scraped over HTTP every 0.5 s from sattui's start to its end."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from tests.prom import free_port

    need_trainer_tools()
    tmp = tmp_path_factory.mktemp("exporter")
    hook = WebHook()
    port = free_port()
    out = tmp / "run.jsonl"
    env = {**os.environ, "SLURM_JOB_ID": EXPORTER_SLURM_JOB, "SLURM_JOB_NAME": "demo-input", "SLURM_PROCID": "0"}
    log = open(tmp / "sattui.log", "wb")
    p = subprocess.Popen(sattui_cmd("record", "-o", str(out), "--duration", "90", "--metrics", f"127.0.0.1:{port}",
                                    "--webhook", hook.url, "--", sys.executable, "-m", "sattui.demo.trainer",
                                    "--scenario", "input_bound", "--seconds", str(EXPORTER_TRAINER_S)),
                         cwd=REPO, stdout=log, stderr=log, env=env)
    pages: list[tuple[float, dict]] = []
    born: dict[int, float] = {}
    code = None
    try:
        sattui = psutil.Process(p.pid)
        deadline = time.monotonic() + EXPORTER_TRAINER_S + 45
        while p.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    text = r.read().decode()
                pages.append((time.time(), {f.name: f.samples for f in text_string_to_metric_families(text)}))
            except OSError:
                pass
            try:
                for c in sattui.children(recursive=True):
                    born.setdefault(c.pid, c.create_time())
            except psutil.Error:
                pass
            time.sleep(0.5)
        code = p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
        log.close()
        hook.close()
    said = (tmp / "sattui.log").read_text(errors="replace")
    return ExporterRun(code, said, pages, born, hook.bodies, out)
