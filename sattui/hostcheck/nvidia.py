"""NVIDIA in a container: the runtime's variables and the device nodes they should bring.

The NVIDIA Container Toolkit reads ``NVIDIA_VISIBLE_DEVICES`` (which GPUs: ``all``, a
list, ``none`` or ``void``) and ``NVIDIA_DRIVER_CAPABILITIES`` (which driver libraries:
``compute`` for CUDA, ``utility`` for NVML and nvidia-smi; unset means
``compute,utility``) and mounts ``/dev/nvidiactl``, ``/dev/nvidia-uvm`` and one
``/dev/nvidiaN`` per GPU. CUDA images set ``NVIDIA_VISIBLE_DEVICES=all``, so a container
started without the runtime (no ``--gpus``) has the variable and no device nodes.
"""

from __future__ import annotations

import errno
import os
import re
import stat

from sattui.hostcheck.check import Check
from sattui.hostcheck.target import Target
from sattui.textsafe import clean
from sattui.trainer.env import read_allowed_env

NVIDIA_MAJOR = 195  # /dev/nvidiaN and /dev/nvidiactl (Documentation/admin-guide/devices.txt)
FIX_RUNTIME = ("start the container with the NVIDIA runtime: `docker run --gpus all` (NVIDIA Container Toolkit) "
               "or `--runtime=nvidia`; Kubernetes: request `nvidia.com/gpu` in the pod's resources")
FIX_UTILITY = ("add `utility` to the container's NVIDIA_DRIVER_CAPABILITIES "
               "(`-e NVIDIA_DRIVER_CAPABILITIES=compute,utility`): it mounts libnvidia-ml, "
               "which sattui reads cards with")
FIX_COMPUTE = "add `compute` to the trainer container's NVIDIA_DRIVER_CAPABILITIES: CUDA needs it"
NO_GPU = ("none", "void", "")


def device_nodes(dev_dir: str) -> dict[str, dict]:
    """The ``nvidia*`` entries of ``dev_dir``: whether each is a character device, its numbers."""
    out: dict[str, dict] = {}
    try:
        names = sorted(n for n in os.listdir(dev_dir) if n.startswith("nvidia"))
    except OSError:
        return out
    for name in names:
        try:
            st = os.stat(os.path.join(dev_dir, name))
        except OSError:
            continue
        if stat.S_ISCHR(st.st_mode):
            out[name] = {"major": os.major(st.st_rdev), "minor": os.minor(st.st_rdev)}
    return out


def open_error(path: str) -> str | None:
    """Why ``path`` cannot be opened read-write (None: it can). Opening the control node
    only asks the driver for a handle; it changes nothing on the card."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as e:
        if e.errno == errno.ENXIO or e.errno == errno.ENODEV:
            return "no driver behind the device node"
        if e.errno in (errno.EPERM, errno.EACCES):
            return "the device cgroup or the node's mode forbids opening it"
        return e.strerror or str(e)
    os.close(fd)
    return None


def _caps(value: str | None) -> set[str] | None:
    if value is None:
        return None
    return {c.strip() for c in value.split(",") if c.strip()}


def check_nvidia(target: Target | None) -> Check:
    own_env = {k: os.environ[k] for k in ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")
               if k in os.environ}
    env = (read_allowed_env(target.pid) or {}) if target else own_env
    dev_dir = (target.root if target else "") + "/dev"
    nodes = device_nodes(dev_dir)
    gpus = sorted((n for n in nodes if re.fullmatch(r"nvidia\d+", n)), key=lambda n: int(n[6:]))
    visible = env.get("NVIDIA_VISIBLE_DEVICES")
    caps_value = env.get("NVIDIA_DRIVER_CAPABILITIES")
    driver = os.path.exists("/proc/driver/nvidia")
    details: dict = {"dev": dev_dir, "device_nodes": nodes, "driver_loaded": driver,
                     "NVIDIA_VISIBLE_DEVICES": visible, "NVIDIA_DRIVER_CAPABILITIES": caps_value,
                     "sattui_NVIDIA_DRIVER_CAPABILITIES": own_env.get("NVIDIA_DRIVER_CAPABILITIES")}
    who = "the trainer" if target else "this container"
    if visible is None and not nodes and not driver:
        return Check("nvidia", "info", "no NVIDIA driver expected here (NVIDIA_VISIBLE_DEVICES unset, no /dev/nvidia* "
                     "device nodes, no driver in /proc/driver/nvidia)", None, details)
    shown = clean(visible or "", 40)
    if visible is not None and visible.strip().lower() in NO_GPU:
        return Check("nvidia", "warn", f"NVIDIA_VISIBLE_DEVICES={shown or '(empty)'}: the container runtime gives "
                     f"{who} no GPU", FIX_RUNTIME, details)
    problems: list[tuple[str, str]] = []
    if not gpus:
        said = f"NVIDIA_VISIBLE_DEVICES={shown}" if visible is not None else "an NVIDIA driver is loaded"
        problems.append((f"{said} but {who} has no /dev/nvidiaN device node: the container was started "
                         "without the NVIDIA runtime", FIX_RUNTIME))
    elif "nvidiactl" not in nodes:
        problems.append((f"/dev/nvidiactl is missing beside {', '.join(gpus)}", FIX_RUNTIME))
    elif target is None:
        # Only sattui's own nodes can be tried: another process's device cgroup is not ours.
        err = open_error(os.path.join(dev_dir, "nvidiactl"))
        if err:
            details["open_error"] = err
            problems.append((f"/dev/nvidiactl cannot be opened: {err}", FIX_RUNTIME))
    caps = _caps(caps_value)
    if caps is not None and "all" not in caps and "compute" not in caps:
        problems.append((f"NVIDIA_DRIVER_CAPABILITIES={clean(caps_value or '', 40)} lacks `compute`", FIX_COMPUTE))
    own_caps = _caps(own_env.get("NVIDIA_DRIVER_CAPABILITIES"))
    if own_caps is not None and "all" not in own_caps and "utility" not in own_caps:
        problems.append((f"sattui's NVIDIA_DRIVER_CAPABILITIES="
                         f"{clean(own_env['NVIDIA_DRIVER_CAPABILITIES'], 40)} lacks `utility`: "
                         "no NVML in this container", FIX_UTILITY))
    if problems:
        fixes = list(dict.fromkeys(f for _, f in problems))
        return Check("nvidia", "fail", "; ".join(p for p, _ in problems), "; ".join(fixes), details)
    caps_words = f", capabilities {clean(caps_value, 40)}" if caps_value else ""
    return Check("nvidia", "ok", f"{who} has /dev/nvidiactl and {', '.join(gpus)}"
                 + (f" (NVIDIA_VISIBLE_DEVICES={shown}{caps_words})" if visible is not None else ""), None, details)
