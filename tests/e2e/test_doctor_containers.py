"""`sattui doctor [--pid PID]` against what containers and hosts really do, made real here:
a 64 MiB tmpfs on a trainer's /dev/shm in its own mount namespace, a trainer in its own
PID namespace (and sattui in another), a cgroup with a CPU quota, NVIDIA device nodes
with no driver behind them, and a user namespace whose root may not trace the host's
processes. Each needs root (the suite runs as root); each skips, saying why, elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from sattui.hostcheck.mounts import mounts_of
from sattui.hostcheck.pidns import PROC_PID_INIT_INO
from tests.e2e.conftest import REPO, _have_torch

pytestmark = [pytest.mark.e2e, pytest.mark.beside]

MIB = 1024 * 1024


def _need_root_and(*tools: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (mounts, namespaces, cgroups)")
    for t in tools:
        if shutil.which(t) is None:
            pytest.skip(f"{t} not installed")


def doctor(*args: str, prefix: tuple[str, ...] = (), env: dict | None = None) -> dict:
    r = subprocess.run([*prefix, sys.executable, "-m", "sattui", "doctor", "--json", *args], capture_output=True,
                       text=True, timeout=180, cwd=REPO, env=env)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)


def check(d: dict, cid: str) -> dict:
    (c,) = [c for c in d["checks"] if c["id"] == cid]
    return c


class Job:
    """A process tree started in its own session, killed whole at the end (its process
    group; ``marker``, a string in the command line, finds what left the group)."""

    def __init__(self, cmd: list[str], env: dict | None = None, marker: str | None = None) -> None:
        self.marker = marker
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True, env={**os.environ, **(env or {})})

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        if self.marker is None:
            return
        for p in psutil.process_iter(["cmdline"]):
            try:
                if p.info["cmdline"] and any(self.marker in a for a in p.info["cmdline"]):
                    p.kill()
            except psutil.Error:
                pass


class TrainerJob(Job):
    """The example trainer behind ``prefix`` (unshare, a cgroup joiner), with a truth file."""

    def __init__(self, tmp: Path, prefix: list[str], *args: str) -> None:
        self.truth = tmp / f"truth-{uuid.uuid4().hex[:10]}.jsonl"
        super().__init__([*prefix, sys.executable, "-m", "sattui.demo.trainer", "--seconds", "300",
                          "--truth", str(self.truth), *args], marker=str(self.truth))

    def wait_training(self, timeout: float = 120) -> int:
        """Until the loop runs; returns the trainer's pid (as seen here)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.truth.exists() and len(self.truth.read_text().splitlines()) >= 2:
                return self.pid()
            if self.proc.poll() is not None:
                raise AssertionError(f"trainer died: {self.proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.3)
        raise AssertionError("the trainer did not start training in time")

    def wait_for(self, what: str, ok, timeout: float = 240) -> int:
        """Until ``ok(pid)`` holds; returns the trainer's pid."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"trainer died: {self.proc.stderr.read().decode()[-2000:]}")
            try:
                pid = self.pid()
                if ok(pid):
                    return pid
            except (AssertionError, OSError, psutil.Error):
                pass
            time.sleep(0.3)
        raise AssertionError(f"the trainer did not reach {what} in time")

    def pid(self) -> int:
        for p in psutil.process_iter(["cmdline", "name"]):
            if p.info["cmdline"] and str(self.truth) in p.info["cmdline"] and p.info["name"].startswith("python"):
                return p.pid
        raise AssertionError("trainer process not found")


@pytest.fixture
def jobs():
    made: list[Job] = []
    yield made
    for j in made:
        j.stop()


# -- /dev/shm ---------------------------------------------------------------------------


def test_shm_is_read_in_the_trainers_mount_namespace_against_its_batches_in_flight(tmp_path, jobs):
    """A 64 MiB tmpfs on the trainer's /dev/shm (Docker's default), 8 MiB batches, 2 workers:
    about five batches are in flight, more than is left free."""
    _need_root_and("unshare", "mount")
    if not _have_torch():
        pytest.skip("torch not installed")
    shm64 = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             'mount -t tmpfs -o size=64m sattui-test-shm /dev/shm && exec "$@"', "sh"]
    # 16384 x 128 float32 = 8 MiB per batch; the large model keeps the main process in its
    # first step for many seconds while the workers fill the queue (2 workers x prefetch 2).
    job = TrainerJob(tmp_path, shm64, "--scenario", "compute_bound", "--workers", "2", "--batch", "16384",
                     "--epoch-items", "131072")
    jobs.append(job)

    def queue_full(pid: int) -> bool:
        st = os.statvfs(f"/proc/{pid}/root/dev/shm")
        return (st.f_blocks - st.f_bavail) * st.f_frsize >= 4 * 8 * MIB

    pid = job.wait_for("four batches in /dev/shm", queue_full)
    d = doctor("--pid", str(pid))
    shm = check(d, "shm")
    det = shm["details"]
    assert det["path"] == f"/proc/{pid}/root/dev/shm"
    assert det["size_bytes"] == 64 * MIB and det["fstype"] == "tmpfs", det
    assert det["workers"] == 2
    assert det["in_flight_bytes"] >= 2 * 8 * MIB, det
    assert det["in_flight_bytes"] > det["free_bytes"], det
    assert shm["status"] == "fail" and "--shm-size" in shm["fix"], shm
    assert "64 MiB tmpfs" in shm["summary"]
    # sattui's own /dev/shm is another one: without --pid doctor reads that.
    own = check(doctor(), "shm")["details"]
    st = os.statvfs("/dev/shm")
    assert own["path"] == "/dev/shm" and own["size_bytes"] == st.f_blocks * st.f_frsize


# -- PID namespaces -----------------------------------------------------------------------


def test_pid_namespace_from_outside_and_from_another_namespace(tmp_path, jobs):
    _need_root_and("unshare")
    if not _have_torch():
        pytest.skip("torch not installed")
    job = TrainerJob(tmp_path, ["unshare", "--pid", "--fork", "--mount-proc"], "--scenario", "input_bound",
                     "--workers", "1")
    jobs.append(job)
    pid = job.wait_training()

    # From outside (above it): visible under our pid, pid 1 inside; py-spy reads it.
    d = doctor("--pid", str(pid))
    ns = check(d, "pid_namespace")
    assert ns["status"] == "ok", ns
    assert ns["details"]["nspid"] == [pid, 1], ns
    assert "pid 1 inside its own PID namespace" in ns["summary"]
    stacks = check(d, "stacks")
    assert stacks["status"] == "ok" and stacks["details"]["python"], stacks

    # The pid as `ps` inside that container shows it, given to a sattui outside: named.
    ours = psutil.Process(1)
    if not ours.name().startswith("python"):
        one = check(doctor("--pid", "1"), "pid_namespace")
        assert one["status"] == "warn", one
        assert pid in [n["pid"] for n in one["details"]["namesakes"]], one

    # From another PID namespace (sattui in a container of its own): invisible, and why.
    inside = check(doctor("--pid", str(pid), prefix=("unshare", "--pid", "--fork", "--mount-proc")), "pid_namespace")
    assert inside["status"] == "fail", inside
    assert inside["details"]["visible"] is False
    assert inside["details"]["own_pid_ns"] != PROC_PID_INIT_INO
    assert "--pid=host" in inside["fix"]


# -- cgroup CPU limit ---------------------------------------------------------------------


def _cpu_cgroup(version: int) -> tuple[Path, Path]:
    """A new child cgroup with a CPU controller: (its dir, the file that takes a pid)."""
    name = f"sattui-test-{uuid.uuid4().hex[:10]}"
    for m in mounts_of(None):
        if version == 1 and m.fstype == "cgroup" and "cpu" in m.super_options.split(","):
            d = Path(m.mount_point) / name
            break
        if version == 2 and m.fstype == "cgroup2":
            top = Path(m.mount_point)
            try:
                enabled = (top / "cgroup.subtree_control").read_text().split()
            except OSError:
                enabled = []
            if "cpu" not in enabled:
                pytest.skip(f"cgroup v2 at {top} does not hand the cpu controller to children here "
                            f"(subtree_control: {enabled or 'none'}); the v1 test covers the quota")
            d = top / name
            break
    else:
        pytest.skip(f"no cgroup v{version} hierarchy with a cpu controller is mounted here")
    try:
        d.mkdir()
    except OSError as e:
        pytest.skip(f"cannot create a cgroup at {d}: {e.strerror}")
    try:
        if version == 1:
            (d / "cpu.cfs_period_us").write_text("100000")
            (d / "cpu.cfs_quota_us").write_text("50000")
        else:
            (d / "cpu.max").write_text("50000 100000")
    except OSError as e:
        d.rmdir()
        pytest.skip(f"cannot set a CPU quota at {d}: {e.strerror}")
    return d, d / "cgroup.procs"


@pytest.mark.parametrize("version", [1, 2])
def test_cgroup_cpu_quota_against_the_dataloader_workers(tmp_path, jobs, version):
    _need_root_and()
    if not _have_torch():
        pytest.skip("torch not installed")
    cg, procs = _cpu_cgroup(version)
    try:
        join = ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh"]
        job = TrainerJob(tmp_path, join, "--scenario", "input_bound", "--workers", "2")
        jobs.append(job)
        pid = job.wait_training(timeout=240)  # half a CPU for the imports
        c = check(doctor("--pid", str(pid)), "cgroup_cpu")
        det = c["details"]
        assert det["cgroup_version"] == version and det["cgroup"] == str(cg), det
        assert det["limit_cpus"] == 0.5 and det["set_by"].startswith(str(cg)), det
        assert det["dataloader_workers"] == 2 and det["cores_wanted"] == 3, det
        assert det["nr_periods"] and det["nr_periods"] > 0, det
        assert c["status"] == "warn" and "0.5 CPUs" in c["summary"], c
        assert "num_workers=0" in c["fix"] and "--cpus" in c["fix"], c
    finally:
        for j in jobs:
            j.stop()
        jobs.clear()
        end = time.monotonic() + 30
        while cg.exists() and time.monotonic() < end:
            try:
                cg.rmdir()
            except OSError:
                time.sleep(0.3)  # the killed processes leave it a moment later


# -- NVIDIA device nodes -------------------------------------------------------------------


def _fake_dev(nodes: str) -> list[str]:
    """A private mount namespace whose /dev is a fresh tmpfs with real device nodes made by mknod."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            "mount -t tmpfs sattui-test-dev /dev && mknod -m 666 /dev/null c 1 3 && "
            f"mknod -m 666 /dev/urandom c 1 9 {nodes}" + ' && exec "$@"', "sh"]


def test_nvidia_device_nodes_and_container_variables(jobs):
    _need_root_and("unshare", "mount", "mknod")
    nodes = "&& mknod -m 666 /dev/nvidiactl c 195 255 && mknod -m 666 /dev/nvidia0 c 195 0"
    # A trainer's container with the nodes but a driver capability list without compute.
    with_nodes = Job([*_fake_dev(nodes), "sleep", "300"],
                     env={"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "utility"})
    # A CUDA image started without the NVIDIA runtime: the variable, no nodes.
    no_runtime = Job(["sleep", "300"], env={"NVIDIA_VISIBLE_DEVICES": "all"})
    no_gpu = Job(["sleep", "300"], env={"NVIDIA_VISIBLE_DEVICES": "void"})
    jobs += [with_nodes, no_runtime, no_gpu]
    pid = with_nodes.proc.pid  # unshare and sh exec, so this becomes sleep
    end = time.monotonic() + 30
    while psutil.Process(pid).name() != "sleep" and time.monotonic() < end:
        time.sleep(0.1)  # the mount and the mknods come first

    c = check(doctor("--pid", str(pid)), "nvidia")
    assert set(c["details"]["device_nodes"]) == {"nvidiactl", "nvidia0"}, c
    assert c["details"]["device_nodes"]["nvidia0"] == {"major": 195, "minor": 0}
    assert c["status"] == "fail" and "lacks `compute`" in c["summary"], c

    c = check(doctor("--pid", str(no_runtime.proc.pid)), "nvidia")
    if not c["details"]["device_nodes"]:  # a machine with real NVIDIA nodes has them here
        assert c["status"] == "fail" and "no /dev/nvidiaN device node" in c["summary"], c
        assert "--gpus all" in c["fix"]

    c = check(doctor("--pid", str(no_gpu.proc.pid)), "nvidia")
    assert c["status"] == "warn" and "NVIDIA_VISIBLE_DEVICES=void" in c["summary"], c

    # sattui itself in such a container: the control node is opened, and no driver answers.
    env = {**os.environ, "NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "compute"}
    c = check(doctor(prefix=tuple(_fake_dev(nodes)), env=env), "nvidia")
    assert c["status"] == "fail", c
    assert c["details"]["open_error"] == "no driver behind the device node", c
    assert "lacks `utility`" in c["summary"] and "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in c["fix"], c


def test_no_nvidia_expected_on_a_plain_host():
    if any(n.startswith("nvidia") for n in os.listdir("/dev")) or os.path.exists("/proc/driver/nvidia"):
        pytest.skip("this machine has NVIDIA device nodes or a driver")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NVIDIA_")}
    c = check(doctor(env=env), "nvidia")
    assert c["status"] == "info" and "no NVIDIA driver expected" in c["summary"], c


# -- ptrace: who may read whom ---------------------------------------------------------------


def test_a_process_that_is_not_python_is_named_so_even_where_ptrace_is_refused(jobs):
    """Root in a user namespace may not trace the host's processes (the kernel's ptrace
    check wants CAP_SYS_PTRACE in the target's namespace), as root may not trace pid 1 of
    some sandboxes: py-spy says "permission denied" before it can look for Python."""
    _need_root_and("unshare")
    userns = ("unshare", "--user", "--map-root-user")
    probe = subprocess.run([*userns, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"user namespaces are not allowed here: {probe.stderr.decode().strip()}")
    sleeper = Job(["sleep", "300"])
    py = Job([sys.executable, "-c", "import time; time.sleep(300)"])
    jobs += [sleeper, py]
    time.sleep(0.5)

    c = check(doctor("--pid", str(sleeper.proc.pid), prefix=userns), "stacks")
    assert c["status"] == "fail", c
    assert "is not a Python process" in c["summary"] and "py-spy may not read it" in c["summary"], c
    assert c["details"]["kind"] == "denied"

    c = check(doctor("--pid", str(py.proc.pid), prefix=userns), "stacks")
    assert c["status"] == "fail" and "no permission to read the stacks" in c["summary"], c
    assert "user namespace" in c["summary"], c

    # Unconfined, the same two: py-spy reads the Python one and says the other is not Python.
    assert check(doctor("--pid", str(py.proc.pid)), "stacks")["status"] == "ok"
    c = check(doctor("--pid", str(sleeper.proc.pid)), "stacks")
    assert c["status"] == "fail" and c["details"]["kind"] == "not_python", c


def test_record_of_a_refused_non_python_process_says_not_python(tmp_path, jobs):
    """The recorder, same case: `sattui record --pid` from a user namespace judges the
    process by its name (a non-Python root is a launcher to look below), never by
    py-spy's refusal."""
    _need_root_and("unshare")
    userns = ["unshare", "--user", "--map-root-user"]
    if subprocess.run([*userns, "true"], capture_output=True).returncode != 0:
        pytest.skip("user namespaces are not allowed here")
    sleeper = Job(["sleep", "300"])
    jobs.append(sleeper)
    out = tmp_path / "f.jsonl"
    r = subprocess.run([*userns, sys.executable, "-m", "sattui", "record", "--pid", str(sleeper.proc.pid),
                        "-o", str(out), "--duration", "8", "--backend", "none"],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "not a Python process" in r.stderr and "no permission" not in r.stderr, r.stderr
    rep = json.loads(subprocess.run([sys.executable, "-m", "sattui", "report", str(out), "--json"],
                                    capture_output=True, text=True, timeout=60, cwd=REPO).stdout)
    assert rep["trainer"]["sampler"]["problem"] == "not a Python process (sleep), and no trainer was found below it"


# -- CPU frequency (what this machine has) -----------------------------------------------------


def test_cpu_frequency_as_this_machine_exposes_it():
    c = check(doctor(), "cpu_frequency")
    base = Path("/sys/devices/system/cpu/cpufreq")
    policies = sorted(base.glob("policy*")) if base.is_dir() else []
    if not policies:
        assert c["status"] == "info" and "not exposed" in c["summary"], c
        return
    govs = {(p / "scaling_governor").read_text().strip() for p in policies if (p / "scaling_governor").exists()}
    assert set(c["details"]["governors"]) == govs, c
    assert c["status"] == ("ok" if govs == {"performance"} else "warn"), c
