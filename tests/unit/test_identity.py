"""The trainer's Slurm job and Kubernetes pod (sattui/trainer/identity.py), on every
exported series, in the recording header and the report, and as ``--slurm-job``.

The cgroup files are real layouts, copied from public sources (cited at each):
cgroup v1 and v2, the kubelet's cgroupfs and systemd drivers, containerd and docker, and
slurmd's v1 and v2 plugins.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from sattui.cluster.source import JobReader
from sattui.metrics.node import NodeMetrics
from sattui.report import job_text
from sattui.trainer.identity import JobIdentity, identity_of, pod_uid_from_cgroup, read_identity, slurm_job_from_cgroup
from tests.unit.test_metrics_exporter import HEADER, one, scrape

# sustainable-computing-io/kepler, internal/resource/container_test.go ("valid path with
# cgroup 11 and blkio"): cgroup v1, the kubelet's cgroupfs driver, a burstable pod.
V1_CGROUPFS = ("11:blkio:/kubepods/burstable/podf6adb0af-0855-4bab-b25b-c853f18d0ce2/"
               "35b97177dada20362ab90d90ac63cd54e8a41cf87bea34f270631b6da17f4a93\n")
# kepler, internal/resource/container_test.go ("valid path with cgroup 13 and memory"):
# cgroup v1, systemd driver, containerd's "slice:cri-containerd:ID" form (RHEL).
V1_SYSTEMD_CONTAINERD = ("13:memory:/system.slice/containerd.service/kubepods-besteffort-pod0043435f_1854_4327_b76b_"
                         "730f681a781d.slice:cri-containerd:01fd96f7ad292b02a8317cde4ecb8c7ef3cc06ffdd113f13410e0837"
                         "eb2b2a20\n")
# kepler, pkg/kubelet (TestGetPathFromPID, "ubuntuDocker"): cgroup v1, systemd driver, docker.
V1_SYSTEMD_DOCKER = ("11:blkio:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod481c0ae9_7d40_46dd_"
                     "b6ca_ba27cb64f87e.slice/docker-28a5e57257f81fcd6d592647dde27e06b53944d58af4fa546ad77a12ce8b41c2"
                     ".scope\n")
# kepler, internal/resource/container_test.go ("kind containerd"): cgroup v2, systemd
# driver under kind's kubelet.slice.
V2_SYSTEMD_KIND = ("0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-"
                   "burstable-pod3cae2e45_052c_4b11_80d3_4d7b2d2d3464.slice/cri-containerd-2b180104511194aab36fd295d3e2"
                   "17439f3ddb5bc88277f37b4952abee85c40e.scope\n")
# kepler, pkg/kubelet (TestGetPathFromPID, "rhelDocker"): a static pod, whose UID is the
# 32-hex hash of its manifest, nested in docker.
V1_STATIC_POD = ("11:blkio:/system.slice/docker-c27755f0fa91e81ababc85ef05cb227227a4228da2e5cb2f4999299c89d4ac69"
                 ".scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-"
                 "burstable-podd8992f589d8dd12c4342376ccb459375.slice/cri-containerd-ecbcea5cd29afb25ba519715e827cda9"
                 "e66cd0a914207f49ce0a292a6aa84d66.scope\n")
# NordicHPC/sonar, src/linux/slurm_test.rs (test_get_job_id): slurmd's cgroup v2 plugin
# ("from a Fox compute node"), and a whole v1 file from a Slurm 21 node (eX3).
SLURM_V2 = "0::/system.slice/slurmstepd.scope/job_1392969/step_0/user/task_0\n"
SLURM_V1 = """13:freezer:/slurm/uid_7319/job_748468/step_0
12:cpu,cpuacct:/system.slice/slurmd.service
11:hugetlb:/
10:blkio:/system.slice/slurmd.service
9:devices:/system.slice/slurmd.service
8:misc:/
7:cpuset:/
6:rdma:/
5:net_cls,net_prio:/
4:pids:/system.slice/slurmd.service
3:perf_event:/
2:memory:/system.slice/slurmd.service
1:name=systemd:/system.slice/slurmd.service
"""
# A container with its own cgroup namespace (cgroup v2's default) sees only its root.
V2_NAMESPACED = "0::/\n"


@pytest.mark.parametrize("text, uid", [
    (V1_CGROUPFS, "f6adb0af-0855-4bab-b25b-c853f18d0ce2"),
    (V1_SYSTEMD_CONTAINERD, "0043435f-1854-4327-b76b-730f681a781d"),
    (V1_SYSTEMD_DOCKER, "481c0ae9-7d40-46dd-b6ca-ba27cb64f87e"),
    (V2_SYSTEMD_KIND, "3cae2e45-052c-4b11-80d3-4d7b2d2d3464"),
    (V1_STATIC_POD, "d8992f589d8dd12c4342376ccb459375"),
    (SLURM_V1, None), (SLURM_V2, None), (V2_NAMESPACED, None), ("", None), ("random garbage\n", None),
    # a "pod…" directory outside kubepods is no pod
    ("0::/user.slice/pod0043435f-1854-4327-b76b-730f681a781d/x\n", None),
])
def test_pod_uid_from_real_cgroup_layouts(text, uid):
    assert pod_uid_from_cgroup(text) == uid


@pytest.mark.parametrize("text, job", [
    (SLURM_V1, "748468"), (SLURM_V2, "1392969"),
    ("10:devices:/slurm/uid_2101171/job_280678/step_interactive/task_0\n", "280678"),  # sonar's older data
    (V1_CGROUPFS, None), (V2_NAMESPACED, None), ("/job_hello/\n", None), ("0::/home/job_12/x\n", None),
])
def test_slurm_job_from_real_cgroup_layouts(text, job):
    assert slurm_job_from_cgroup(text) == job


def test_identity_env_first_cgroup_otherwise_and_nothing_guessed():
    env = {"SLURM_JOB_ID": "42", "SLURM_JOB_NAME": "llama", "SLURM_PROCID": "3", "TORCHELASTIC_RUN_ID": "r1"}
    # the environment's job id wins over the cgroup's (a job step's cgroup is its own job's)
    got = identity_of(env, SLURM_V1)
    assert (got.slurm_job_id, got.slurm_job_name, got.slurm_procid, got.run_id) == ("42", "llama", "3", "r1")
    assert (got.pod, got.pod_uid, got.namespace) == (None, None, None)
    assert identity_of({}, SLURM_V2).slurm_job_id == "1392969"
    # a pod: names from the downward API; HOSTNAME only where the process is in a pod
    pod = identity_of({"POD_NAME": "train-0", "POD_NAMESPACE": "ml", "HOSTNAME": "h"}, V2_SYSTEMD_KIND)
    assert (pod.pod, pod.namespace, pod.pod_uid) == ("train-0", "ml", "3cae2e45-052c-4b11-80d3-4d7b2d2d3464")
    assert identity_of({"MY_POD_NAME": "a", "MY_POD_NAMESPACE": "b"}, "").label_values() == ("", "a", "b")
    assert identity_of({"HOSTNAME": "train-0-abcde"}, V1_CGROUPFS).pod == "train-0-abcde"
    assert identity_of({"HOSTNAME": "train-0-abcde"}, V2_NAMESPACED, in_kubernetes=True).pod == "train-0-abcde"
    bare = identity_of({"HOSTNAME": "gpu-node-7"}, V2_NAMESPACED)
    assert bare == JobIdentity() and bare.label_values() == ("", "", "")


def test_identity_round_trips_through_a_header_and_refuses_junk():
    j = identity_of({"SLURM_JOB_ID": "7", "POD_NAME": "p"}, V1_CGROUPFS)
    assert JobIdentity.from_record(j.to_record()) == j
    assert JobIdentity.from_record(None) == JobIdentity()
    assert JobIdentity.from_record({"slurm_job_id": ["x"], "pod": "", "bogus": 1}) == JobIdentity()


def test_a_real_process_environment_through_the_allow_list():
    env = {**os.environ, "SLURM_JOB_ID": "9911", "SLURM_JOB_NAME": "train", "SLURM_PROCID": "0",
           "POD_NAMESPACE": "ml", "HF_TOKEN": "secret-value"}
    env.pop("POD_NAME", None)
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        deadline = time.monotonic() + 20
        while b"time.sleep" not in open(f"/proc/{p.pid}/cmdline", "rb").read() and time.monotonic() < deadline:
            time.sleep(0.05)
        got = read_identity(p.pid)
        assert (got.slurm_job_id, got.slurm_job_name, got.slurm_procid, got.namespace) == ("9911", "train", "0", "ml")
        assert "secret-value" not in repr(got)
    finally:
        p.kill()
        p.wait()


def test_every_series_carries_the_job_labels_and_empty_when_unknown():
    node = NodeMetrics("n1")
    node.set_header({**HEADER, "labels": identity_of({"SLURM_JOB_ID": "123", "POD_NAME": "w-0",
                                                   "POD_NAMESPACE": "ml"}, "").to_record()})
    node.sink([{"kind": "card", "t": 1.0, "card": 0, "util": 98.0, "mem_used": 7},
               {"kind": "proc", "t": 1.0, "pid": 5, "role": "main", "cpu": 1.0}])
    node.set_findings([{"t": 1.0, "rule": "input_bound", "severity": "high", "impact": 0.4}])
    got = scrape(node)
    names = [n for n in got if got[n]]
    assert {"sattui_info", "sattui_card_utilization_ratio", "DCGM_FI_DEV_GPU_UTIL", "sattui_finding_impact_ratio",
            "sattui_rank_state_seconds_total", "sattui_dataloader_workers"} <= set(names)
    for n in names:
        for lab, _ in got[n]:
            assert (lab.get("slurm_job_id"), lab.get("pod"), lab.get("namespace")) == ("123", "w-0", "ml"), n
    assert one(got, "DCGM_FI_DEV_GPU_UTIL", pod="w-0", namespace="ml", gpu="0") == 98.0
    bare = NodeMetrics("n1")
    bare.set_header(HEADER)  # an older header: no `labels`
    bare.sink([{"kind": "card", "t": 1.0, "card": 0, "util": 50.0}])
    lab = scrape(bare)["sattui_info"][0][0]
    assert lab.get("slurm_job_id", "") == "" and lab.get("pod", "") == ""


def test_report_line_says_the_job_and_pod():
    assert job_text({"slurm_job_id": "123", "slurm_job_name": "llama", "slurm_procid": "2", "pod": "w-0",
                     "namespace": "ml", "pod_uid": "u-1", "run_id": "r9"}) == \
        "Slurm job 123 (llama), task 2; pod ml/w-0 (uid u-1); torchrun run r9"
    assert job_text(None) == "" and job_text({"slurm_job_id": None}) == ""


class _Client:
    def __init__(self) -> None:
        self.queries: list[str] = []

    def query(self, q: str, t: float) -> list:
        self.queries.append(q)
        return []

    def query_range(self, q: str, t0: float, t1: float, step: float) -> list:
        self.queries.append(q)
        return []


def test_slurm_job_is_a_label_matcher_on_every_query():
    c = _Client()
    JobReader(c, "sattui", None, slurm_job='12"3').summary(1000.0, 60.0)  # type: ignore[arg-type]
    assert c.queries and all('slurm_job_id="12\\"3"' in q for q in c.queries if "{" in q), c.queries
    c2 = _Client()
    JobReader(c2, "sattui").summary(1000.0, 60.0)  # type: ignore[arg-type]
    assert not any("slurm_job_id" in q for q in c2.queries)
