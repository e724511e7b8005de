"""The pieces of doctor's container and host checks that read files (sattui/hostcheck/).

The real namespaces, tmpfs, cgroup and device nodes are in
tests/e2e/test_doctor_containers.py. What cannot be made real on a machine is tested here
on a directory laid out as the kernel lays it out: cpufreq where the VM exposes none, a
cgroup v2 CPU quota where the cpu controller is bound to v1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sattui import doctor
from sattui.host import parse_proc_cgroup
from sattui.host import under_mount as _under
from sattui.hostcheck import Target, run_checks
from sattui.hostcheck.cgroup import tightest
from sattui.hostcheck.check import Check
from sattui.hostcheck.cpufreq import check_cpufreq
from sattui.hostcheck.mounts import Mount, mount_at, mounts_of, parse_mountinfo


def test_mountinfo_of_this_process_has_its_root_and_dev_shm():
    mounts = mounts_of(None)
    assert mount_at(mounts, "/") is not None
    shm = mount_at(mounts, "/dev/shm")
    if os.path.ismount("/dev/shm"):
        assert shm is not None and shm.fstype
    # The kernel's escapes for a space in a path.
    (m,) = parse_mountinfo(r"36 35 98:0 /a\040b /mnt/with\040space rw,noatime master:1 - ext4 /dev/root rw")
    assert m.mount_point == "/mnt/with space" and m.root == "/a b" and m.fstype == "ext4"
    assert m.super_options == "rw" and m.options == "rw,noatime"


def test_proc_cgroup_lines_and_paths_under_a_mount():
    lines = parse_proc_cgroup("12:cpu,cpuacct:/docker/abc\n0::/system.slice/x.service\n")
    assert lines == [("12", ["cpu", "cpuacct"], "/docker/abc"), ("0", [], "/system.slice/x.service")]
    host = Mount("/sys/fs/cgroup", "/", "cgroup2", "cgroup2", "rw", "rw")
    assert _under(host, "/system.slice/x.service") == "/sys/fs/cgroup/system.slice/x.service"
    assert _under(host, "/") == "/sys/fs/cgroup"
    # Inside a container the mount shows only its own subtree.
    inside = Mount("/sys/fs/cgroup/cpu", "/docker/abc", "cgroup", "cgroup", "rw", "rw,cpu,cpuacct")
    assert _under(inside, "/docker/abc/job") == "/sys/fs/cgroup/cpu/job"
    assert _under(inside, "/docker/other") is None


def test_cgroup_v2_quota_is_the_tightest_on_the_path(tmp_path):
    # cpu.max as the kernel writes it: "$MAX $PERIOD", MAX "max" when unlimited.
    top = tmp_path
    pod = top / "kubepods" / "pod1"
    job = pod / "job"
    job.mkdir(parents=True)
    (top / "kubepods" / "cpu.max").write_text("max 100000\n")
    (pod / "cpu.max").write_text("150000 100000\n")
    (job / "cpu.max").write_text("400000 100000\n")
    assert tightest(2, str(job), str(top)) == (1.5, str(pod / "cpu.max"))
    (pod / "cpu.max").write_text("max 100000\n")
    assert tightest(2, str(job), str(top)) == (4.0, str(job / "cpu.max"))
    (job / "cpu.max").write_text("max 100000\n")
    assert tightest(2, str(job), str(top)) is None


def _policy(base: Path, n: int, governor: str, cur: int, top: int) -> None:
    d = base / "cpufreq" / f"policy{n}"
    d.mkdir(parents=True)
    (d / "affected_cpus").write_text(f"{n}\n")
    (d / "scaling_governor").write_text(governor + "\n")
    (d / "scaling_cur_freq").write_text(f"{cur}\n")
    (d / "cpuinfo_max_freq").write_text(f"{top}\n")


def test_cpu_frequency_governor_and_clock(tmp_path):
    """This project's machine is a VM without cpufreq (the e2e test covers that); a
    host's sysfs layout: one policyN directory per frequency domain."""
    _policy(tmp_path, 0, "powersave", 1_200_000, 3_500_000)
    _policy(tmp_path, 1, "powersave", 1_200_000, 3_500_000)
    c = check_cpufreq(None, str(tmp_path))
    assert c.status == "warn" and "powersave on 2" in c.summary, c
    assert "now 1.20 GHz of 3.50 GHz max (34 %)" in c.summary
    assert "cpupower frequency-set -g performance" in c.fix
    for n in (0, 1):
        (tmp_path / "cpufreq" / f"policy{n}" / "scaling_governor").write_text("performance\n")
    c = check_cpufreq(None, str(tmp_path))
    assert c.status == "ok" and c.fix is None, c
    empty = tmp_path / "vm"
    empty.mkdir()
    c = check_cpufreq(None, str(empty))
    assert c.status == "info" and "not exposed" in c.summary


def test_text_a_process_chose_reaches_the_terminal_escaped():
    evil = "\x1b]0;PWNED\x07\x1b[31mred"
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", evil])
    try:
        time.sleep(0.3)
        t = Target.of(p.pid)
        assert t is not None and evil in t.cmdline
        assert "\x1b" not in t.label and "\x07" not in t.label
        text = doctor.format_text(doctor.run_doctor(p.pid))
        assert "\x1b" not in text and "\x07" not in text
    finally:
        p.kill()
        p.wait()


def test_check_status_is_one_of_four():
    with pytest.raises(ValueError):
        Check("x", "maybe", "?")


def test_doctor_json_and_text_carry_every_check():
    d = doctor.run_doctor(os.getpid())
    assert d["pid"] == os.getpid()
    ids = [c["id"] for c in d["checks"]]
    assert ids == ["pid_namespace", "stacks", "shm", "nvidia", "cpu_frequency", "cgroup_cpu"]
    for c in d["checks"]:
        assert set(c) == {"id", "status", "summary", "fix", "details"}
    json.loads(doctor.format_json(d))
    text = doctor.format_text(d)
    for c in d["checks"]:
        mark = doctor.CHECK_MARKS[c["status"]]
        assert f"{mark} {c['summary']}" in text
        if c["fix"]:
            assert f"fix: {c['fix']}" in text
    # Without a pid there is no stacks check, and sattui's own view is checked.
    assert [c.id for c in run_checks(None)] == ["pid_namespace", "shm", "nvidia", "cpu_frequency", "cgroup_cpu"]
