"""The environment allow-list: only harmless settings survive, secrets never do."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time

import pytest

from sattui.trainer.env import ALLOWED_EXACT, ALLOWED_PREFIXES, is_allowed, parse_environ, read_allowed_env


@pytest.mark.parametrize(
    "name",
    ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "CUDA_VISIBLE_DEVICES",
     "HIP_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF",
     "CUDA_LAUNCH_BLOCKING", "PYTORCH_NO_CUDA_MEMORY_CACHING", "OMP_NUM_THREADS",
     "NCCL_SOCKET_IFNAME", "NCCL_DEBUG", "TORCH_NCCL_BLOCKING_WAIT", "TORCH_DISTRIBUTED_DEBUG",
     "TORCHELASTIC_RUN_ID"],
)
def test_allowed(name: str) -> None:
    assert is_allowed(name)


@pytest.mark.parametrize(
    "name",
    ["WANDB_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "GITHUB_TOKEN",
     "NCCL_IB_AUTH_TOKEN", "NCCL_SECRET", "TORCH_DISTRIBUTED_PASSWORD", "NCCL_CREDENTIALS",
     "TORCH_NCCL_API_KEY", "MASTER_ADDR", "MASTER_PORT", "PATH", "HOME", "DATABASE_URL",
     "rank", "", "RANK=1", "NCCL", "SSH_AUTH_SOCK"],
)
def test_refused(name: str) -> None:
    assert not is_allowed(name)


def test_no_exact_name_or_prefix_looks_secret() -> None:
    for name in list(ALLOWED_EXACT) + list(ALLOWED_PREFIXES):
        if name.endswith("_"):
            assert is_allowed(name + "X"), name
        else:
            assert is_allowed(name), name


def test_parse_environ_drops_urls_and_odd_entries() -> None:
    raw = b"\0".join([
        b"RANK=3",
        b"NCCL_NET_PLUGIN=https://user:pw@example.org/x",  # allowed name, URL value
        b"NCCL_SOCKET_IFNAME=user@host",
        b"NCCL_DEBUG=INFO",
        b"NOEQUALS",
        b"\xff\xfe=1",  # not an ASCII name
        b"CUDA_VISIBLE_DEVICES=GPU-1234,1",
        b"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        b"OMP_NUM_THREADS=" + b"9" * 600,  # absurdly long
        b"",
    ])
    assert parse_environ(raw) == {
        "RANK": "3",
        "NCCL_DEBUG": "INFO",
        "CUDA_VISIBLE_DEVICES": "GPU-1234,1",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    }


def test_read_allowed_env_of_a_real_process_keeps_no_secret() -> None:
    secret = "sattui-test-" + secrets.token_hex(16)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "WANDB_API_KEY": secret,
        "HF_TOKEN": secret,
        "NCCL_IB_AUTH_TOKEN": secret,
        "MY_APP_SETTING": secret,
        "NCCL_NET_PLUGIN": f"https://u:{secret}@host/x",
        "RANK": "1",
        "WORLD_SIZE": "2",
        "NCCL_SOCKET_IFNAME": "eth0",
        "CUDA_VISIBLE_DEVICES": "1,0",
    }
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        got = None
        for _ in range(50):  # environ is empty for a moment while the child execs
            got = read_allowed_env(p.pid)
            if got:
                break
            time.sleep(0.05)
        assert got == {"RANK": "1", "WORLD_SIZE": "2", "NCCL_SOCKET_IFNAME": "eth0",
                       "CUDA_VISIBLE_DEVICES": "1,0"}
        assert secret not in repr(got)
    finally:
        p.kill()
        p.wait()


def test_read_allowed_env_of_a_dead_process_is_none() -> None:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert read_allowed_env(p.pid) is None


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to drop to nobody")
def test_read_allowed_env_without_permission_is_none() -> None:
    """Another user's environ is unreadable: None ("unknown"), not {} and no exception."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: become nobody, try to read our (root) parent's environ
        try:
            os.close(r)
            os.setgid(65534)
            os.setuid(65534)
            got = read_allowed_env(os.getppid())
            os.write(w, repr(got).encode())
        finally:
            os._exit(0)
    os.close(w)
    out = b""
    while chunk := os.read(r, 4096):
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    assert out == b"None"
