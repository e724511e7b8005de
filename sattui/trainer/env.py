"""The trainer's environment, reduced to an allow-list of harmless settings.

``/proc/PID/environ`` of a training job routinely holds API keys (``WANDB_API_KEY``,
``HF_TOKEN``, cloud credentials). sattui only needs the variables that explain how the
job runs (rank layout, visible devices, allocator and debug flags, thread counts,
collective-library tuning), so everything else is dropped while parsing and never
stored, shown, recorded or logged.

Rules, in order:

1. A name containing a secret-looking word (``KEY``, ``TOKEN``, ``SECRET``,
   ``PASSWORD``, ``CREDENTIAL``, ``AUTH`` …) is refused, even under an allowed prefix:
   prefixes are broad, and a tuning library may one day grow an ``..._AUTH_TOKEN``.
2. Otherwise a name is kept if it is in ``ALLOWED_EXACT`` or starts with one of
   ``ALLOWED_PREFIXES``.
3. A kept name whose value looks like a URL or carries ``user@host`` is still dropped:
   a URL may embed credentials, whatever its variable is called.

``MASTER_ADDR`` and ``MASTER_PORT`` are deliberately left out: no view or rule needs
them, and internal host names and ports are the kind of detail people do not expect a
shared recording to contain.

Note: ``/proc/PID/environ`` is the environment the process was *started* with;
``os.environ[...] = ...`` inside the trainer later is not visible from outside.
"""

from __future__ import annotations

ALLOWED_EXACT: frozenset[str] = frozenset(
    {
        # rank layout (torchrun / torch.distributed.launch / elastic agents)
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "GROUP_WORLD_SIZE",
        "ROLE_RANK",
        "ROLE_NAME",
        "ROLE_WORLD_SIZE",
        "TORCHELASTIC_RUN_ID",
        "TORCHELASTIC_RESTART_COUNT",
        "TORCHELASTIC_MAX_RESTARTS",
        # rank numbers of other launchers (Open MPI, MPICH / Intel MPI, Slurm's srun):
        # the trainer found below one of them is a rank (sattui/trainer/launchers.py)
        "OMPI_COMM_WORLD_RANK",
        "PMI_RANK",
        "SLURM_PROCID",
        # the job and pod a trainer belongs to: labels of every exported series, the
        # recording header's `job` (sattui/trainer/identity.py)
        "SLURM_JOB_ID",
        "SLURM_JOBID",
        "SLURM_JOB_NAME",
        "POD_NAME",
        "POD_NAMESPACE",
        "MY_POD_NAME",
        "MY_POD_NAMESPACE",
        "HOSTNAME",  # a pod's name, where no downward-API variable says it
        # which cards a process sees (rank -> card mapping), per vendor
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",  # which driver libraries the container runtime mounts (doctor)
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "ASCEND_RT_VISIBLE_DEVICES",
        "ASCEND_VISIBLE_DEVICES",
        "MLU_VISIBLE_DEVICES",
        "XPU_VISIBLE_DEVICES",
        "MUSA_VISIBLE_DEVICES",
        "ZE_AFFINITY_MASK",
        # allocator and debug switches (advisor R10, R18)
        "PYTORCH_CUDA_ALLOC_CONF",
        "PYTORCH_HIP_ALLOC_CONF",
        "PYTORCH_ALLOC_CONF",
        "PYTORCH_NO_CUDA_MEMORY_CACHING",
        "PYTORCH_NO_HIP_MEMORY_CACHING",
        "CUDA_LAUNCH_BLOCKING",
        "HIP_LAUNCH_BLOCKING",
        "CUDA_MODULE_LOADING",
        "CUBLAS_WORKSPACE_CONFIG",
        "NVIDIA_TF32_OVERRIDE",
        "TORCH_SHOW_CPP_STACKTRACES",
        "TORCH_CPP_LOG_LEVEL",
        "TORCH_USE_CUDA_DSA",
        "TORCH_LOGS",
        "TORCH_COMPILE_DEBUG",
        "TORCHDYNAMO_DISABLE",
        "TORCHINDUCTOR_COMPILE_THREADS",
        "PYTHONMALLOC",
        "PYTHONDEVMODE",
        # CPU thread pools (advisor R17)
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "GLOO_SOCKET_IFNAME",
    }
)

# Collective-library tuning. Broad on purpose (NCCL alone has ~100 knobs); the secret
# words below still apply inside them.
ALLOWED_PREFIXES: tuple[str, ...] = (
    "NCCL_",
    "TORCH_NCCL_",
    "TORCH_DISTRIBUTED_",
    "HCCL_",
)

# Substrings of a variable NAME that mark it as possibly secret. Matched on the
# upper-cased name; false refusals are cheap, a leaked token is not.
SECRET_WORDS: tuple[str, ...] = (
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "CREDENTIAL",
    "AUTH",
    "CERT",
    "PRIVATE",
    "COOKIE",
    "SESSION",
    "SIGNATURE",
)

# A value longer than this is not a setting we need; dropping it also bounds the
# memory one hostile environ can make us hold.
MAX_VALUE_LEN = 512


def is_allowed(name: str) -> bool:
    """Whether the variable ``name`` may be kept (its value is never consulted here)."""
    if not name or "=" in name:
        return False
    upper = name.upper()
    if any(word in upper for word in SECRET_WORDS):
        return False
    # Names are case-sensitive on Linux; only the exact spelling torch reads counts.
    return name in ALLOWED_EXACT or name.startswith(ALLOWED_PREFIXES)


def _value_ok(value: str) -> bool:
    # URLs can embed user:password@host; "@" also catches scp-style user@host.
    return len(value) <= MAX_VALUE_LEN and "://" not in value and "@" not in value


def parse_environ(raw: bytes) -> dict[str, str]:
    """Keep only allowed ``NAME=value`` pairs of a NUL-separated environ block.

    A refused entry's value is never decoded, so it cannot end up in a traceback or a
    repr either.
    """
    out: dict[str, str] = {}
    for entry in raw.split(b"\0"):
        name_b, sep, value_b = entry.partition(b"=")
        if not sep:
            continue
        try:
            name = name_b.decode("ascii")
        except UnicodeDecodeError:
            continue
        if not is_allowed(name):
            continue
        value = value_b.decode("utf-8", errors="replace")
        if _value_ok(value):
            out[name] = value
    return out


def read_allowed_env(pid: int) -> dict[str, str] | None:
    """The allow-listed start-up environment of ``pid``; None if it cannot be read.

    Reading another user's environ needs ptrace-read permission (same user or root);
    without it this returns None, which callers show as "unknown", not as "empty".
    """
    try:
        with open(f"/proc/{int(pid)}/environ", "rb") as f:
            raw = f.read()
    except (OSError, ValueError):
        return None
    return parse_environ(raw)
