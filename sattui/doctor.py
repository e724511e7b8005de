"""`sattui doctor`: what works on this machine, and why not."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import psutil

from sattui import __version__
from sattui.hostcheck.ptrace import CAP_SYS_PTRACE, effective_caps, ptrace_scope
from sattui.sampler_status import PTRACE_FIX
from sattui.textsafe import clean_lines
from sattui.trainer.stacks import find_py_spy, py_spy_version

__all__ = ["CAP_SYS_PTRACE", "PTRACE_FIX", "effective_caps", "run_doctor", "format_text", "format_json"]

DOCTOR_LINE_MAX = 1000


def ptrace_check() -> dict[str, Any]:
    """Can py-spy attach here? Decided from yama's scope and our capabilities."""
    caps = effective_caps()
    has_cap = caps is not None and bool(caps & (1 << CAP_SYS_PTRACE))
    scope = ptrace_scope()
    root = os.geteuid() == 0
    if scope == 3:
        ok, reach = False, "none: kernel.yama.ptrace_scope=3 forbids attaching until reboot"
    elif has_cap:
        ok, reach = True, "any process (CAP_SYS_PTRACE)"
    elif scope in (None, 0):
        ok, reach = True, "processes of the same user"
    elif scope == 1:
        ok, reach = False, "only sattui's own children (`sattui record -- CMD`); kernel.yama.ptrace_scope=1"
    else:
        ok, reach = False, f"none without CAP_SYS_PTRACE; kernel.yama.ptrace_scope={scope}"
    return {"ok": ok, "can_attach_to": reach, "root": root, "cap_sys_ptrace": has_cap,
            "ptrace_scope": scope, "fix": None if ok else PTRACE_FIX}


def py_spy_check() -> dict[str, Any]:
    path = find_py_spy()
    if path is None:
        return {"ok": False, "path": None, "version": None,
                "why": "py-spy not found on PATH nor beside this Python; `pip install py-spy`"}
    ver = py_spy_version(path)
    return {"ok": ver is not None, "path": path, "version": ver,
            "why": None if ver else f"{path} did not report a version"}


def psutil_check() -> dict[str, Any]:
    try:
        psutil.Process(os.getpid()).io_counters()
        io = True
    except (psutil.Error, AttributeError, OSError):
        io = False
    return {"ok": True, "version": psutil.__version__, "io_counters": io}


def backends_check(find_cards: bool = True) -> list[dict[str, Any]]:
    """Every backend: available or not and why, its version, and the cards it finds."""
    from sattui.vendors.backend import REGISTRY, BackendError, probe_all

    out = []
    for p in probe_all():
        entry: dict[str, Any] = {"name": p.name, "available": p.available, "why": p.reason,
                                 "version": p.version, "path": p.path, "verified": p.verified, "cards": []}
        if p.available and find_cards:
            backend = REGISTRY[p.name]()
            try:
                entry["cards"] = [c.to_record() for c in backend.discover()]
            except BackendError as e:
                entry["available"] = False
                entry["why"] = str(e)
            except Exception as e:  # doctor reports a broken backend, it does not crash on one
                entry["available"] = False
                entry["why"] = f"internal error: {type(e).__name__}: {e}"
            finally:
                backend.close()
        out.append(entry)
    return out


def run_doctor(pid: int | None = None) -> dict[str, Any]:
    """Everything doctor knows; with ``pid``, the container and host checks are for that trainer."""
    from sattui.hostcheck import run_checks

    return {
        "format": "sattui.doctor/1",
        "sattui": __version__,
        "python": sys.version.split()[0],
        "ptrace": ptrace_check(),
        "py_spy": py_spy_check(),
        "psutil": psutil_check(),
        "backends": backends_check(),
        "pid": pid,
        "checks": [c.to_json() for c in run_checks(pid)],
    }


CHECK_MARKS = {"ok": "ok  ", "warn": "warn", "fail": "NO  ", "info": "--  "}


def format_text(d: dict[str, Any]) -> str:
    def mark(ok: bool) -> str:
        return "ok  " if ok else "NO  "

    pt, ps, pu = d["ptrace"], d["py_spy"], d["psutil"]
    lines = [f"sattui {d['sattui']} on Python {d['python']}", ""]
    scope = pt.get("ptrace_scope")
    yama = "Yama not loaded" if scope is None else f"kernel.yama.ptrace_scope={scope}"
    cap = "" if "CAP_SYS_PTRACE" in pt["can_attach_to"] else \
        ("with CAP_SYS_PTRACE, " if pt.get("cap_sys_ptrace") else "without CAP_SYS_PTRACE, ")
    lines.append(f"{mark(pt['ok'])} ptrace: can attach to {pt['can_attach_to']}; {cap}{yama}")
    if pt["fix"]:
        lines.append(f"      fix: {pt['fix']}")
    if ps["ok"]:
        lines.append(f"{mark(True)} py-spy {ps['version']} at {ps['path']}")
    else:
        lines.append(f"{mark(False)} py-spy: {ps['why']}")
    lines.append(f"{mark(pu['ok'])} psutil {pu['version']} (per-process I/O counters: "
                 f"{'readable' if pu['io_counters'] else 'not readable'})")
    if d.get("checks"):
        # Before the backends: readers of the text take every row after their heading as a backend.
        pid = d.get("pid")
        lines += ["", "containers and host" + (f", for the trainer pid {pid}" if pid is not None else
                                               " (`--pid PID`: for that trainer)")]
        for c in d["checks"]:
            lines.append(f"{CHECK_MARKS.get(c['status'], '?   ')} {c['summary']}")
            if c.get("fix"):
                lines.append(f"      fix: {c['fix']}")
    lines += ["", "card backends (--backend auto tries them in this order)"]
    for b in d.get("backends", []):
        ver = f" {b['version']}" if b.get("version") else ""
        if b["available"]:
            n = len(b["cards"])
            names = ", ".join(sorted({c.get("name") or "?" for c in b["cards"]}))
            lines.append(f"{mark(True)} {b['name']:<10}{ver}: {n} card(s){': ' + names if n else ''}")
        else:
            lines.append(f"{mark(False)} {b['name']:<10}{ver}: {b['why']}")
        if not b.get("verified", True):
            lines.append("      unverified: parsed from no real output of this tool; please report what it prints")
    if d.get("backends") and not any(b["available"] and b["cards"] for b in d["backends"]):
        lines.append("no accelerator found: sattui records the trainer only")
    # Card names, versions and reasons are the vendor tools' words: escaped (sattui/textsafe.py).
    return clean_lines(lines, DOCTOR_LINE_MAX)


def format_json(d: dict[str, Any]) -> str:
    return json.dumps(d, indent=2)
