"""parse_chrometrace and py-spy output parsing, on outputs captured from real py-spy 0.4.3.

The fixtures in tests/fixtures/pyspy/ were recorded from the example trainer with the
sampler's own flags (``py-spy record --nonblocking --idle --threads -f chrometrace``):

- input_bound_20hz_2s.json: ``--scenario input_bound`` (pid 1266), ``-r 20 -d 2``
- extra_threads_10hz_1s.json: ``--scenario input_bound --extra-threads 56`` (pid 1267), ``-r 10 -d 1``
- inline_20hz_2s.json: ``--scenario inline`` (pid 1268, num_workers=0), ``-r 20 -d 2``
- input_bound_sigint.json: pid 1266, ``-r 20 -d 30`` ended by SIGINT after 1.5 s
- stdout_*.txt: py-spy's stdout of those runs; stderr_*.txt: its stderr when it fails.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from sattui.model import Event, Frame, StackSample
from sattui.trainer import stacks
from sattui.trainer.stacks import (
    StackSampler,
    classify_failure,
    parse_chrometrace,
    parse_summary,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "pyspy"
DATALOADER = "torch/utils/data/dataloader.py"


def load(name: str) -> list[dict]:
    return json.loads((FIX / name).read_text())


def by_thread(samples: list[StackSample]) -> dict[int, list[StackSample]]:
    out: dict[int, list[StackSample]] = defaultdict(list)
    for s in samples:
        out[s.tid].append(s)
    return out


# ---------------------------------------------------------------- real captures


def test_input_bound_threads_and_main_thread() -> None:
    samples = parse_chrometrace(load("input_bound_20hz_2s.json"), t0=100.0)
    threads = by_thread(samples)
    assert set(threads) == {1266, 1530}
    assert {s.thread_name for s in threads[1266]} == {"MainThread"}
    assert {s.thread_name for s in threads[1530]} == {"QueueFeederThread"}
    assert all(s.is_main for s in threads[1266]) and not any(s.is_main for s in threads[1530])
    assert all(s.pid == 1266 and s.state is None for s in samples)
    assert len(threads[1266]) == 7
    assert len(threads[1530]) == 1  # an idle thread: one span for the whole run


def test_input_bound_first_main_span_is_a_dataloader_wait_innermost_first() -> None:
    main = [s for s in parse_chrometrace(load("input_bound_20hz_2s.json"), t0=100.0) if s.is_main]
    first = main[0]
    assert first.t == pytest.approx(100.142374)  # ts 142374 µs
    assert first.dur == pytest.approx(0.164608)
    names = [f.name for f in first.frames]
    assert names[0] == "_PollLikeSelector.select"
    assert first.frames[0] == Frame("_PollLikeSelector.select",
                                    "/root/.pyenv/versions/3.11.7/lib/python3.11/selectors.py", 415)
    assert names[-1] == "_run_module_as_main" and first.frames[-1].filename == "<frozen runpy>"
    nd = names.index("_MultiProcessingDataLoaderIter._next_data")
    assert first.frames[nd].filename.endswith(DATALOADER) and first.frames[nd].line == 1505
    # innermost first: the callee comes before its caller
    assert names.index("_MultiProcessingDataLoaderIter._try_get_data") < nd < names.index("main")
    assert not any(f.name.startswith("thread (") for s in main for f in s.frames)


def test_input_bound_fd_passing_shows_inside_the_dataloader_wait() -> None:
    main = [s for s in parse_chrometrace(load("input_bound_20hz_2s.json"), t0=0.0) if s.is_main]
    second = main[1]
    names = [f.name for f in second.frames]
    assert names[:4] == ["Connection._recv", "Connection._recv_bytes", "_ConnectionBase.recv_bytes",
                         "answer_challenge"]
    assert "rebuild_storage_fd" in names
    assert any(f.name == "_MultiProcessingDataLoaderIter._try_get_data" for f in second.frames)


def test_input_bound_spans_tile_the_run_per_thread() -> None:
    data = load("input_bound_20hz_2s.json")
    samples = parse_chrometrace(data, t0=0.0)
    last_ts = max(e["ts"] for e in data) / 1e6  # 2.123022: the closing E events
    for _tid, spans in by_thread(samples).items():
        spans.sort(key=lambda s: s.t)
        for a, b in zip(spans, spans[1:]):
            assert a.t + a.dur == pytest.approx(b.t, abs=1e-9)
        assert spans[-1].t + spans[-1].dur == pytest.approx(last_ts)
        total = sum(s.dur for s in spans)
        assert total == pytest.approx(last_ts - spans[0].t, abs=1e-6)
        assert 1.9 < total < 2.1  # a "-d 2" run


def test_sixty_thread_trainer() -> None:
    samples = parse_chrometrace(load("extra_threads_10hz_1s.json"), t0=0.0)
    threads = by_thread(samples)
    assert len(threads) == 58
    names = {s.thread_name for s in samples}
    assert names == {"MainThread", "QueueFeederThread"} | {f"idle-{i}" for i in range(56)}
    assert [s.tid for s in samples if s.is_main] and {s.tid for s in samples if s.is_main} == {1267}
    idle0 = threads[1529]
    assert len(idle0) == 1 and idle0[0].thread_name == "idle-0"
    assert [f.name for f in idle0[0].frames] == ["Condition.wait", "Event.wait", "Thread.run",
                                                 "Thread._bootstrap_inner", "Thread._bootstrap"]
    assert idle0[0].t == pytest.approx(0.185599) and idle0[0].dur == pytest.approx(0.753315)
    main = [s for s in samples if s.is_main]
    assert any(f.name == "rebuild_storage_fd" for s in main for f in s.frames)


def test_inline_loading_and_backward_on_the_main_thread() -> None:
    samples = parse_chrometrace(load("inline_20hz_2s.json"), t0=0.0)
    assert {s.tid for s in samples} == {1268} and all(s.is_main for s in samples)
    assert len(samples) == 7
    fetch = samples[0]
    assert fetch.frames[0] == Frame("SyntheticDataset.__getitem__", "/work/main/sattui/demo/trainer.py", 56)
    assert any(f.name == "_MapDatasetFetcher.fetch" and f.filename.endswith("torch/utils/data/_utils/fetch.py")
               for f in fetch.frames)
    backward = samples[1]
    assert backward.frames[0].name == "_engine_run_backward"
    assert backward.frames[0].filename.endswith("torch/autograd/graph.py")
    assert [f.name for f in backward.frames[1:4]] == ["backward", "Tensor.backward", "main"]
    assert sum(s.dur for s in samples) == pytest.approx(1.978806, abs=1e-6)


def test_sigint_run_is_complete() -> None:
    samples = parse_chrometrace(load("input_bound_sigint.json"), t0=5.0)
    main = [s for s in samples if s.is_main]
    assert len(main) == 1
    assert main[0].t == pytest.approx(5.173736) and main[0].dur == pytest.approx(1.445)
    out = (FIX / "stdout_input_bound_sigint.txt").read_text()
    assert "Stopped sampling because Control-C pressed" in out
    assert parse_summary(out) == (52, 0)


def test_pid_filter() -> None:
    data = load("input_bound_20hz_2s.json")
    assert len(parse_chrometrace(data, t0=0.0, pid_filter=1266)) == 8
    assert parse_chrometrace(data, t0=0.0, pid_filter=4242) == []


@pytest.mark.parametrize("name, expected", [
    ("stdout_input_bound_20hz_2s.txt", (78, 0)),
    ("stdout_extra_threads_10hz_1s.txt", (522, 0)),
    ("stdout_inline_20hz_2s.txt", (39, 0)),
])
def test_parse_summary(name: str, expected: tuple[int, int]) -> None:
    assert parse_summary((FIX / name).read_text()) == expected


def test_parse_summary_without_summary() -> None:
    assert parse_summary("") == (None, None)
    assert parse_summary("py-spy> Sampling process 10 times a second") == (None, None)


@pytest.mark.parametrize("name, kind", [
    ("stderr_not_python.txt", "not_python"),
    ("stderr_no_such_pid.txt", "gone"),
    ("stderr_denied_not_root.txt", "denied"),
    ("stderr_denied_no_cap_sys_ptrace.txt", "denied"),
])
def test_classify_failure(name: str, kind: str) -> None:
    assert classify_failure((FIX / name).read_text()) == kind


def test_classify_failure_other() -> None:
    assert classify_failure("Error: something new\n") == "other"
    assert classify_failure("") == "other"


# ---------------------------------------------------------------- hand-made input


def ev(ph: str, ts: int, name: str, tid: int = 7, pid: int = 50, filename: str = "f.py", line: int = 1) -> dict:
    return {"args": {"filename": filename, "line": line}, "cat": "py-spy", "name": name, "ph": ph,
            "pid": pid, "tid": tid, "ts": ts}


def thread_b(ts: int, os_tid: int = 50, name: str = "MainThread", tid: int = 7) -> dict:
    return ev("B", ts, f"thread ({os_tid}): {name}", tid=tid, filename="", line=0)


def test_empty_and_not_a_list() -> None:
    assert parse_chrometrace([], t0=0.0) == []
    assert parse_chrometrace({"traceEvents": []}, t0=0.0) == []  # type: ignore[arg-type]


def test_junk_entries_are_skipped() -> None:
    data = [
        None, 3, "x", [], {}, {"ph": "B"},
        {"ph": "B", "ts": "soon", "pid": 50, "tid": 7, "name": "a"},
        {"ph": "B", "ts": 1, "pid": "50", "tid": 7, "name": "a"},
        {"ph": "X", "ts": 1, "pid": 50, "tid": 7, "name": "a", "dur": 5},
        {"ph": "B", "ts": float("nan"), "pid": 50, "tid": 7, "name": "a"},
        thread_b(0), ev("B", 0, "outer"), ev("B", 0, "inner", line=9),
        {"ph": "B", "ts": 10, "pid": 50, "tid": 7, "name": None},
        ev("E", 1000, "inner"), ev("E", 1000, "outer"), ev("E", 1000, "thread (50): MainThread", filename=""),
    ]
    (s,) = parse_chrometrace(data, t0=2.0)
    assert s.t == pytest.approx(2.0) and s.dur == pytest.approx(0.001)
    assert s.frames == (Frame("inner", "f.py", 9), Frame("outer", "f.py", 1))
    assert (s.pid, s.tid, s.thread_name, s.is_main) == (50, 50, "MainThread", True)


def test_only_the_changed_frames_get_events() -> None:
    # py-spy ends and begins only the frames below the common prefix of two stacks.
    data = [thread_b(0), ev("B", 0, "main"), ev("B", 0, "a"),
            ev("E", 200, "a"), ev("B", 200, "b"),
            ev("E", 500, "b"), ev("E", 500, "main"), ev("E", 500, "thread (50): MainThread", filename="")]
    a, b = parse_chrometrace(data, t0=0.0)
    assert [f.name for f in a.frames] == ["a", "main"] and a.dur == pytest.approx(0.0002)
    assert [f.name for f in b.frames] == ["b", "main"] and b.t == pytest.approx(0.0002)
    assert b.dur == pytest.approx(0.0003)


def test_unmatched_begin_is_closed_at_the_last_ts() -> None:
    data = [thread_b(0), ev("B", 0, "main"),
            thread_b(100, os_tid=61, name="worker", tid=8), ev("B", 100, "loop", tid=8),
            ev("E", 900, "loop", tid=8), ev("B", 900, "poll", tid=8)]
    samples = parse_chrometrace(data, t0=0.0)
    main = [s for s in samples if s.is_main]
    assert len(main) == 1 and main[0].dur == pytest.approx(0.0009)
    other = sorted((s for s in samples if s.tid == 61), key=lambda s: s.t)
    assert [f.name for f in other[0].frames] == ["loop"] and other[0].dur == pytest.approx(0.0008)
    # The last stack of tid 61 began at the last ts: nothing to close, no zero-length span.
    assert len(other) == 1
    assert other[0].thread_name == "worker" and not other[0].is_main


def test_unmatched_end_is_ignored() -> None:
    data = [ev("E", 0, "ghost"), thread_b(0), ev("B", 0, "main"), ev("E", 50, "nope"),
            ev("E", 100, "main"), ev("E", 100, "thread (50): MainThread", filename="")]
    samples = parse_chrometrace(data, t0=0.0)
    assert [(s.t, [f.name for f in s.frames]) for s in samples] == [(0.0, ["main"]), (0.00005, ["main"])]
    assert sum(s.dur for s in samples) == pytest.approx(0.0001)


def test_events_out_of_order_are_sorted_by_ts() -> None:
    data = [ev("E", 300, "main"), ev("E", 300, "thread (50): MainThread", filename=""),
            thread_b(0), ev("B", 0, "main")]
    (s,) = parse_chrometrace(data, t0=1.0)
    assert s.t == pytest.approx(1.0) and s.dur == pytest.approx(0.0003)


def test_without_thread_frames_the_chrome_tid_stands_in() -> None:
    (s,) = parse_chrometrace([ev("B", 0, "main"), ev("E", 10, "main")], t0=0.0)
    assert (s.tid, s.thread_name, s.is_main) == (7, None, False)


def test_hex_thread_id_and_metadata_names() -> None:
    # Newer py-spy adds "M" thread_name events; the hex form is a pthread id, not an OS tid.
    data = [{"ph": "M", "name": "thread_name", "pid": 50, "tid": 0, "ts": 0, "args": {"name": "50: MainThread"}},
            ev("B", 0, "thread (0x7f00aa): MainThread", tid=0, filename=""), ev("B", 0, "main", tid=0),
            ev("E", 10, "main", tid=0)]
    (s,) = parse_chrometrace(data, t0=0.0)
    assert (s.tid, s.thread_name, s.is_main) == (50, "MainThread", True)


# ---------------------------------------------------------------- sampler without py-spy


def test_missing_py_spy_gives_one_event_and_no_thread(tmp_path: Path) -> None:
    events: list[Event] = []
    sampler = StackSampler(1, lambda: 1.5, lambda c: None, events.append, py_spy=str(tmp_path / "py-spy"))
    sampler.start()
    assert sampler.status == "missing" and sampler._thread is None
    assert [(e.t, e.type) for e in events] == [(1.5, "sampler_missing")]
    assert "py-spy" in (sampler.status_message or "")
    sampler.stop()
    assert sampler.status == "missing"


def test_find_py_spy_prefers_binary_over_shim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shim_dir, venv_bin = tmp_path / "shims", tmp_path / "venv" / "bin"
    shim_dir.mkdir()
    venv_bin.mkdir(parents=True)
    shim = shim_dir / "py-spy"
    shim.write_text("#!/bin/sh\nexec true\n")
    shim.chmod(0o755)
    binary = venv_bin / "py-spy"
    binary.write_bytes(b"\x7fELF fake")
    binary.chmod(0o755)
    monkeypatch.setenv("PATH", str(shim_dir))
    monkeypatch.setattr(stacks.sys, "executable", str(venv_bin / "python"))
    assert stacks.find_py_spy() == str(binary)
    binary.unlink()
    assert stacks.find_py_spy() == str(shim)
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert stacks.find_py_spy() is None


def _run_with(cpu_s: float, rate: int, wall: float = 2.0) -> stacks._Run:
    return stacks._Run(proc=None, out=Path("x"), stdout=Path("x"), stderr=Path("x"),  # type: ignore[arg-type]
                       t_spawn=0.0, rate=rate, cpu_s=cpu_s, t_cpu=wall)


def test_cpu_budget_lowers_then_restores_the_rate() -> None:
    events: list[Event] = []
    s = StackSampler(1, lambda: 0.0, lambda c: None, events.append, rate_hz=20, chunk_s=2)
    # 58 threads, 40 intervals, 0.6 s of CPU in 2 s: 0.015 s an interval, 0.30 cores at 20 Hz.
    s._adapt_rate(_run_with(0.6, 20), n_samples=58 * 40, n_threads=58)
    assert s.rate_hz == 6.0  # floor(0.9 * 0.10 / 0.015)
    assert [e.type for e in events] == ["sampler_rate"]
    assert events[0].data["rate_hz"] == 6.0 and events[0].data["previous_rate_hz"] == 20.0
    # Same cost per interval at the new rate: within budget, no change.
    s._adapt_rate(_run_with(0.18, 6), n_samples=58 * 12, n_threads=58)
    assert s.rate_hz == 6.0 and len(events) == 1
    # The target lost most of its threads: cost per interval falls, the rate climbs back.
    for _ in range(4):
        s._adapt_rate(_run_with(0.01, 6), n_samples=2 * 12, n_threads=2)
    assert s.rate_hz == 20.0 and events[-1].data["rate_hz"] == 20.0


def test_cpu_budget_tolerates_zero_cpu_and_can_be_off() -> None:
    s = StackSampler(1, lambda: 0.0, lambda c: None, lambda e: None, rate_hz=10)
    s._adapt_rate(_run_with(0.0, 10), n_samples=40, n_threads=2)
    assert s.rate_hz == 10.0
    s.cpu_budget = None
    s._adapt_rate(_run_with(5.0, 10), n_samples=40, n_threads=2)
    assert s.rate_hz == 10.0


def test_rate_is_an_integer_for_py_spy() -> None:
    s = StackSampler(1, lambda: 0.0, lambda c: None, lambda e: None, rate_hz=12.4, chunk_s=2)
    assert s.rate_hz == 12.0 and s.chunk_s == 2.0
    assert StackSampler(1, lambda: 0.0, lambda c: None, lambda e: None, rate_hz=0.2).rate_hz == 1.0


def test_chunks_grow_once_the_first_answer_is_in() -> None:
    # 2-s chunks while the advisor decides (an answer within ~30 s), then 5-s ones: each
    # py-spy run's attach and its overlap with the next cost less than half as often.
    now = [100.0]
    s = StackSampler(1, lambda: now[0], lambda c: None, lambda e: None)
    assert (s.chunk_s, s.steady_chunk_s, s.steady_after_s) == (2.0, 5.0, 45.0)
    assert s.chunk_now() == 2.0  # no run yet
    s._t_first_spawn = 100.0
    now[0] = 144.9
    assert s.chunk_now() == 2.0
    now[0] = 145.0
    assert s.chunk_now() == 5.0
    # off, or no longer than the chunk asked for: the chunk asked for throughout
    assert StackSampler(1, lambda: 1e6, lambda c: None, lambda e: None, steady_chunk_s=None).chunk_now() == 2.0
    longer = StackSampler(1, lambda: 1e6, lambda c: None, lambda e: None, chunk_s=8.0)
    longer._t_first_spawn = 0.0
    assert longer.chunk_now() == 8.0


def test_a_chunk_file_reads_with_orjson_and_bad_utf8_still_reads() -> None:
    ev = {"ph": "B", "ts": 5, "pid": 1, "tid": 0, "name": "f", "args": {"filename": "a.py", "line": 1}}
    raw = json.dumps([ev]).encode()
    assert stacks._load_trace(raw) == [ev]
    # a frame's name with a byte that is not UTF-8: replaced, the rest read as before
    bad = raw.replace(b'"f"', b'"f\xff"')
    got = stacks._load_trace(bad)
    assert got[0]["name"] == "f\ufffd" and got[0]["ts"] == 5
    with pytest.raises(ValueError):
        stacks._load_trace(b"[{")  # torn: the caller reads no samples from it
