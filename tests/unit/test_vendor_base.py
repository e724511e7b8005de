import stat
import time

import pytest

from sattui.vendors.backend import BackendUnavailable, ToolError, open_backend
from sattui.vendors.tool import run_tool


def _script(tmp_path, name, body):
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return str(p)


def test_timeout_kills_the_tools_children_too(tmp_path):
    # The grandchild keeps stdout open; without a process-group kill we would wait 30 s.
    tool = _script(tmp_path, "hang-smi", "sleep 30 &\nsleep 30\n")
    t0 = time.monotonic()
    with pytest.raises(ToolError, match="hang-smi did not answer within 0.5 s"):
        run_tool([tool], timeout_s=0.5)
    assert time.monotonic() - t0 < 5


def test_nonzero_exit_names_the_tool_and_first_line(tmp_path):
    tool = _script(tmp_path, "bad-smi", "echo 'driver not loaded' >&2\nexit 3\n")
    with pytest.raises(ToolError, match="bad-smi exited 3: driver not loaded"):
        run_tool([tool])


def test_missing_tool_is_unavailable(tmp_path):
    with pytest.raises(BackendUnavailable, match="not found"):
        run_tool([str(tmp_path / "nope-smi")])


def test_tool_runs_in_the_c_locale_without_a_shell(tmp_path):
    tool = _script(tmp_path, "env-smi", 'echo "$LC_ALL|$1"\n')
    out = run_tool([tool, "a; echo injected"])
    assert out.stdout.strip() == "C|a; echo injected"


def test_open_backend_rejects_unknown_and_none_gives_nothing():
    with pytest.raises(Exception, match="unknown backend 'bogus'"):
        open_backend("bogus")
    assert open_backend("none") == (None, [], [])


def test_auto_on_this_machine_names_why_each_backend_was_skipped(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    backend, cards, skipped = open_backend("auto")
    if backend is None:  # no accelerator here (CI): every backend says why
        assert cards == [] and skipped
        assert any(s.startswith("nvml:") for s in skipped)
        assert all(": " in s for s in skipped)
    else:
        backend.close()


def test_auto_order_and_backend_names_come_from_the_registered_classes(monkeypatch, tmp_path):
    from sattui import cli
    from sattui.vendors import backend as base

    # The order the README documents: NVML first, then the vendor tools, then Linux DRM.
    assert base.auto_order() == ("nvml", "rocm", "hygon", "ascend", "cambricon", "kunlun", "mthreads", "biren",
                                 "intel", "drm")
    assert base.backend_names() == ("auto", *base.auto_order(), "sim", "none")

    class Acme(base.Backend):  # a new vendor: registering it is all it takes
        name, vendor, auto_rank = "acme", "acme", 75

        @classmethod
        def probe(cls):
            return base.Probe(cls.name, False, "acme-smi not found")

        def discover(self):
            return []

        def sample(self):
            return []

    monkeypatch.setitem(base.REGISTRY, "acme", Acme)
    assert base.auto_order().index("acme") == base.auto_order().index("mthreads") + 1  # 70 < 75 < 80
    assert "acme" in base.backend_names()
    assert cli._backend_name("acme") == "acme"
    monkeypatch.setenv("PATH", str(tmp_path))  # no tool answers: every probe runs, in auto's order
    probes = {p.name: p for p in base.probe_all()}
    assert list(probes) == list(base.auto_order())
    assert probes["acme"].reason == "acme-smi not found"
