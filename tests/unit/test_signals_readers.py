"""The raw readers of sattui/trainer/sched.py, smaps.py and sattui/host.py, against this
machine's own files, cross-checked with what the kernel reports through other doors
(os.times, psutil), and against the kernel's documented formats where this machine has
no such file (cgroup v2 throttling, cpufreq)."""

from __future__ import annotations

import os
import threading
import time

import psutil
import pytest

from sattui import host
from sattui.trainer import sched, smaps


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_thread_ticks_are_that_thread_alone():
    tck = os.sysconf("SC_CLK_TCK")
    me = os.getpid()
    before = sched.thread_ticks(me, me)
    got: dict[str, int | None] = {}

    def other() -> None:
        tid = threading.get_native_id()
        t0 = sched.thread_ticks(me, tid)
        _burn(0.3)
        got["other"] = sched.thread_ticks(me, tid) - t0  # type: ignore[operator]

    th = threading.Thread(target=other)
    th.start()
    th.join()
    main_delta = sched.thread_ticks(me, me) - before  # type: ignore[operator]
    # the other thread burnt 0.3 s of CPU; the main thread waited in join
    assert got["other"] / tck == pytest.approx(0.3, abs=0.05)
    assert main_delta / tck < 0.05
    assert sched.thread_ticks(me, 2**22 + 7) is None  # no such thread


def test_parse_thread_ticks_takes_fields_after_the_last_paren():
    raw = open(f"/proc/{os.getpid()}/stat", "rb").read()
    parts = raw[raw.rfind(b")") + 2:].split()
    assert sched.parse_thread_ticks(raw) == int(parts[11]) + int(parts[12])
    # a comm with ") (" in it, as a hostile process may set
    evil = b"42 (a) S 1 2 (b) " + b" ".join(parts)
    assert sched.parse_thread_ticks(evil) == int(parts[11]) + int(parts[12])
    assert sched.parse_thread_ticks(b"garbage") is None
    assert sched.parse_thread_ticks(b"1 (x) S 1") is None


def test_run_queue_ns_is_the_second_schedstat_field_and_grows_monotonically():
    me = os.getpid()
    raw = open(f"/proc/{me}/schedstat", "rb").read()
    if len(raw.split()) < 2:
        pytest.skip("this kernel keeps no schedstat (CONFIG_SCHED_INFO off)")
    a = sched.run_queue_ns(me)
    _burn(0.05)
    b = sched.run_queue_ns(me, me)
    assert a is not None and b is not None and b >= a
    assert sched.parse_schedstat(b"123 456 7\n") == (123, 456)
    assert sched.parse_schedstat(b"") is None and sched.parse_schedstat(b"x y") is None
    assert sched.run_queue_ns(me, 2**22 + 7) is None


def test_uss_matches_psutil_which_reads_full_smaps():
    me = os.getpid()
    blob = bytearray(32 << 20)  # 32 MiB of private, touched memory
    blob[::4096] = b"x" * len(blob[::4096])
    mine = smaps.uss_bytes(me)
    theirs = psutil.Process(me).memory_full_info().uss
    assert mine is not None and mine >= 32 << 20
    assert mine == pytest.approx(theirs, rel=0.05)
    del blob
    assert smaps.parse_uss(b"Rss: 10 kB\nPrivate_Clean: 3 kB\nPrivate_Dirty: 4 kB\n") == 7 * 1024
    assert smaps.parse_uss(b"Rss: 10 kB\nPrivate_Dirty: 4 kB\n") is None  # a field missing: unknown
    assert smaps.uss_bytes(2**22 + 7) is None


def test_proc_stat_matches_psutil():
    got = host.read_proc_stat()
    ct = psutil.cpu_times()
    tck = os.sysconf("SC_CLK_TCK")
    assert got is not None and got.cpus == psutil.cpu_count()
    # read a moment apart: within a few ticks per CPU
    slack = 50 * got.cpus
    assert got.busy == pytest.approx((ct.user + ct.nice + ct.system + ct.irq + ct.softirq) * tck, abs=slack)
    assert got.idle == pytest.approx((ct.idle + ct.iowait) * tck, abs=slack)
    assert got.steal == pytest.approx(ct.steal * tck, abs=slack)
    assert host.parse_proc_stat("intr 1 2\n") is None
    assert host.parse_proc_stat("cpu 1 2 3\n") is None  # too few fields: not this format


def test_meminfo_matches_psutil_and_says_none_where_a_line_is_missing(tmp_path):
    got = host.read_meminfo()
    vm = psutil.virtual_memory()
    assert got is not None and got.total == vm.total
    assert got.available == pytest.approx(vm.available, rel=0.05)  # read a moment apart
    assert host.parse_meminfo("MemTotal:       16384 kB\nMemFree: 1 kB\n") == host.HostMemory(16 << 20, None)
    assert host.parse_meminfo("garbage\n") is None
    assert host.read_meminfo(str(tmp_path / "none")) is None
    from sattui.host_sampler import HostSampler
    s = HostSampler(os.getpid(), time.monotonic, meminfo=str(tmp_path / "none")).sample()
    assert (s.mem_total, s.mem_available) == (None, None)  # unreadable: unknown, never 0
    s = HostSampler(os.getpid(), time.monotonic).sample()
    assert s.mem_total == vm.total and s.mem_available is not None and 0 < s.mem_available <= s.mem_total


def test_cpu_stat_v1_here_and_v2_as_the_kernel_documents_it():
    found = host.cpu_cgroup(os.getpid(), host.mounts())
    if found is None:
        pytest.skip("no cgroup cpu controller visible here")
    version, d, _top = found
    thr = host.read_cpu_stat(d)
    if version == 1:
        assert thr is not None and thr.throttled_periods <= thr.periods
    # v2 (Documentation/admin-guide/cgroup-v2.rst, "cpu.stat"): throttled_usec in µs
    v2 = ("usage_usec 1000\nuser_usec 600\nsystem_usec 400\nnr_periods 50\nnr_throttled 7\n"
          "throttled_usec 35000\nnr_bursts 0\nburst_usec 0\n")
    assert host.parse_cpu_stat(v2) == host.Throttling(50, 7, 35_000_000)
    # v1: throttled_time in ns
    v1 = "nr_periods 5\nnr_throttled 2\nthrottled_time 123456\n"
    assert host.parse_cpu_stat(v1) == host.Throttling(5, 2, 123456)
    # a v2 cgroup without the cpu controller lists only its usage: no throttling figures
    assert host.parse_cpu_stat("usage_usec 1000\nuser_usec 600\nsystem_usec 400\n") is None


def test_cgroup_paths_from_proc_and_mountinfo():
    mounts = host.parse_mountinfo(
        "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
        "41 31 0:38 /kubepods /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
        "50 31 0:40 / /mnt/with\\040space rw - ext4 /dev/sda1 rw\n")
    assert [m.mount_point for m in mounts] == ["/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/unified",
                                               "/mnt/with space"]
    assert host.parse_proc_cgroup("4:cpu,cpuacct:/docker/abc\n0::/kubepods/pod1\n") == [
        ("4", ["cpu", "cpuacct"], "/docker/abc"), ("0", [], "/kubepods/pod1")]
    assert host.under_mount(mounts[1], "/kubepods/pod1") == "/sys/fs/cgroup/unified/pod1"
    assert host.under_mount(mounts[1], "/other") is None  # outside what that mount shows
    # this process, for real: the directory exists and holds a cpu.stat
    found = host.cpu_cgroup(os.getpid(), host.mounts())
    if found is not None:
        assert os.path.isfile(os.path.join(found[1], "cpu.stat"))


def test_cpu_quota_v2_files(tmp_path):
    leaf = tmp_path / "pod" / "ctr"
    leaf.mkdir(parents=True)
    (tmp_path / "cpu.max").write_text("max 100000\n")
    (tmp_path / "pod" / "cpu.max").write_text("150000 100000\n")
    (leaf / "cpu.max").write_text("400000 100000\n")
    assert host.read_cpu_quota(2, str(tmp_path)) is None  # "max": no quota
    assert host.read_cpu_quota(2, str(leaf)) == 4.0
    # the pod's 1.5 CPUs bind tighter than the container's own 4
    assert host.tightest_quota(2, str(leaf), str(tmp_path)) == (1.5, str(tmp_path / "pod"))
    assert host.read_cpu_quota(2, str(tmp_path / "nope")) is None


def test_cpufreq_readers(tmp_path):
    # This VM exposes no cpufreq; the layout is the kernel's
    # (Documentation/admin-guide/pm/cpufreq.rst), in a temporary tree.
    here = os.path.isdir("/sys/devices/system/cpu/cpu0/cpufreq")
    assert (host.cpufreq_khz(0, "scaling_cur_freq") is None) == (not here)
    d = tmp_path / "cpu1" / "cpufreq"
    d.mkdir(parents=True)
    (d / "scaling_cur_freq").write_text("1200000\n")
    (d / "cpuinfo_max_freq").write_text("3000000\n")
    (d / "scaling_governor").write_text("powersave\n")
    assert host.cpufreq_khz(1, "scaling_cur_freq", str(tmp_path)) == 1_200_000
    assert host.cpufreq_khz(1, "cpuinfo_max_freq", str(tmp_path)) == 3_000_000
    assert host.cpufreq_governor(1, str(tmp_path)) == "powersave"
    assert host.cpufreq_khz(0, "scaling_cur_freq", str(tmp_path)) is None
    assert host.cpufreq_governor(0, str(tmp_path)) is None


def test_host_sampler_means_clocks_over_the_trainers_cpus(tmp_path):
    from sattui.host_sampler import HostSampler

    cpus = sorted(os.sched_getaffinity(0))
    for i, c in enumerate(cpus):
        d = tmp_path / f"cpu{c}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_cur_freq").write_text(f"{1_000_000 + 1_000_000 * i}\n")
        (d / "cpuinfo_max_freq").write_text("3000000\n")
        (d / "scaling_governor").write_text("powersave\n" if i == 0 else "performance\n")
    h = HostSampler(os.getpid(), time.monotonic, sys_cpu=str(tmp_path))
    first = h.sample()
    assert first.cpu_busy is None and first.cg_throttled_periods is None  # no interval yet
    assert first.cpus == psutil.cpu_count()
    time.sleep(0.2)
    s = h.sample()
    assert s.cpu_busy is not None and 0 <= s.cpu_busy <= s.cpus + 0.5
    want_mhz = sum(1000 + 1000 * i for i in range(len(cpus))) / len(cpus)
    assert s.freq_mhz == pytest.approx(want_mhz) and s.freq_max_mhz == 3000.0
    assert s.governor == ("performance,powersave" if len(cpus) > 1 else "powersave")
    # no cpufreq at all (many VMs): None, never 0
    bare = HostSampler(os.getpid(), time.monotonic, sys_cpu=str(tmp_path / "none"))
    assert (bare.sample().freq_mhz, bare.sample().freq_max_mhz, bare.sample().governor) == (None, None, None)
