import json
import os
import stat

import pytest

from sattui.errors import RecordingError, SattuiError
from sattui.model import Event, Frame, ProcSample, StackChunk, StackSample
from sattui.recording import (
    FORMAT,
    RecordingReader,
    RecordingWriter,
    make_header,
    samples_from_record,
    stacks_to_record,
)


def _write(path, lines):
    with open(path, "w") as f:
        f.write(lines)


def _header(**kw):
    return make_header(pid=4242, cmdline=["python", "train.py"], backend=None, **kw)


def test_roundtrip_and_mode_0600(tmp_path):
    p = str(tmp_path / "r.jsonl")
    w = RecordingWriter(p, _header())
    w.write(ProcSample(1.0, 4242, 1, "main", None, "python", 0.5, "R", 100, 0.0, None).to_record())
    w.write(Event(2.0, "trainer_exited", "trainer exited", {"exit_code": 0}).to_record())
    w.close()
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    r = RecordingReader(p)
    assert r.header["format"] == FORMAT and r.header["pid"] == 4242
    recs = list(r.records())
    assert [x["kind"] for x in recs] == ["proc", "event"]
    assert recs[0]["cpu"] == 0.5 and recs[0]["write_Bps"] is None
    assert recs[1]["exit_code"] == 0
    assert r.warnings == []


def test_existing_file_is_refused_and_replaced_with_mode_0600_only_when_forced(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text("old")
    os.chmod(p, 0o644)
    with pytest.raises(SattuiError, match="the file exists; pass --force to replace it"):
        RecordingWriter(str(p), _header())
    assert p.read_text() == "old"
    RecordingWriter(str(p), _header(), force=True).close()
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    assert RecordingReader(str(p)).header["pid"] == 4242


def test_each_write_is_flushed_so_a_reader_sees_it_before_close(tmp_path):
    p = str(tmp_path / "r.jsonl")
    w = RecordingWriter(p, _header())
    w.write(Event(0.5, "x", "y").to_record())
    assert len(list(RecordingReader(p).records())) == 1  # writer still open
    w.close()


def test_nan_is_written_as_null(tmp_path):
    p = str(tmp_path / "r.jsonl")
    w = RecordingWriter(p, _header())
    w.write({"kind": "card", "t": 1.0, "card": 0, "util": float("nan")})
    w.close()
    (rec,) = RecordingReader(p).records()
    assert rec["util"] is None


def test_torn_last_line_is_skipped_with_a_warning(tmp_path):
    p = str(tmp_path / "r.jsonl")
    w = RecordingWriter(p, _header())
    w.write(Event(1.0, "a", "b").to_record())
    w.close()
    with open(p, "a") as f:
        f.write('{"kind": "proc", "t": 2.0, "pid"')  # killed mid-write: no newline
    r = RecordingReader(p)
    recs = list(r.records())
    assert len(recs) == 1
    assert len(r.warnings) == 1 and "line 3" in r.warnings[0] and "torn" in r.warnings[0]


def test_bad_line_in_the_middle_is_an_error_naming_the_line(tmp_path):
    p = str(tmp_path / "r.jsonl")
    hdr = json.dumps(_header())
    _write(p, hdr + '\n{"kind":"event","t":1,"type":"a","message":"b"}\nGARBAGE\n{"kind":"event","t":2}\n')
    with pytest.raises(RecordingError, match="line 3"):
        list(RecordingReader(p).records())


def test_bad_complete_last_line_is_an_error_too(tmp_path):
    p = str(tmp_path / "r.jsonl")
    _write(p, json.dumps(_header()) + "\nnot json\n")
    with pytest.raises(RecordingError, match="line 2"):
        list(RecordingReader(p).records())


@pytest.mark.parametrize("content,match", [
    ("", "empty file"),
    ("\n\n", "empty file"),
    ("hello world\n", "line 1 is not a sattui header"),
    ('{"kind": "card", "t": 0}\n', "line 1 is not a sattui header"),
    ('{"kind": "header", "format": "othertool/3"}\n', "not a sattui recording"),
    ('{"kind": "header", "format": "sattui/2"}\n', "sattui/2 is not one this sattui reads"),
    ("\x00\x01\x02binary", "not a sattui header"),
])
def test_foreign_empty_or_newer_files_are_rejected(tmp_path, content, match):
    p = tmp_path / "f.jsonl"
    p.write_bytes(content.encode("latin-1"))
    with pytest.raises(RecordingError, match=match):
        RecordingReader(str(p))


def test_a_kind_from_a_newer_sattui_is_skipped_with_one_warning_per_kind(tmp_path):
    # Kinds are added without a new format version (docs/format.md): this reader skips
    # the ones it does not know, and says so once per kind, with the count.
    p = str(tmp_path / "r.jsonl")
    _write(p, json.dumps(_header()) + '\n{"kind":"gpu_topology","t":1,"x":[1]}\n'
           '{"kind":"event","t":2,"type":"a","message":"b"}\n{"kind":"gpu_topology","t":3}\n')
    r = RecordingReader(p)
    assert [x["kind"] for x in r.records()] == ["event"]
    assert r.warnings == [f"{p}: 2 record(s) of kind 'gpu_topology' skipped: a newer sattui wrote them"]


@pytest.mark.parametrize("line,match", [
    ('{"kind":"weird"}', "line 2: unknown record kind 'weird'"),  # no time: not a record
    ('{"kind":"Not A Kind!","t":1}', "line 2: unknown record kind 'Not A Kind!'"),
    ('{"kind":3,"t":1}', "line 2: unknown record kind 3"),
    ('{"t":1}', "line 2: unknown record kind None"),
    ('[1, 2]', "line 2: unknown record kind 'list'"),
    ('{"kind":"proc"}', "line 2: record without a time"),
])
def test_damaged_kinds_and_missing_t_name_the_line(tmp_path, line, match):
    p = str(tmp_path / "r.jsonl")
    _write(p, json.dumps(_header()) + "\n" + line + "\n")
    with pytest.raises(RecordingError, match=match):
        list(RecordingReader(p).records())


def test_host_and_worker_stack_records_roundtrip_and_are_checked(tmp_path):
    from sattui.model import HostSample, WorkerStack

    p = str(tmp_path / "r.jsonl")
    w = RecordingWriter(p, _header())
    w.write(HostSample(1.0, cpu_busy=1.5, cpus=2, cg_version=1, cg_periods=10, cg_throttled_periods=3,
                       cg_throttled_s=0.02).to_record())
    w.write(WorkerStack(1.5, 4301, "fetch_wait", (Frame("Items.__getitem__", "/u/ds.py", 56),),
                        active=False).to_record())
    w.write(ProcSample(2.0, 4301, 4242, "worker", None, "pt_data_worker", 0.5, "S", 100, 0.0, 0.0,
                       cpu_main=0.4, run_delay=0.1, uss=4096).to_record())
    w.close()
    host, ws, proc = RecordingReader(p).records()
    assert host["cpu_busy"] == 1.5 and host["freq_mhz"] is None and host["cg_throttled_periods"] == 3
    assert ws == {"kind": "worker_stack", "t": 1.5, "pid": 4301, "state": "fetch_wait", "active": False,
                  "frames": [["Items.__getitem__", "/u/ds.py", 56]]}
    assert (proc["cpu_main"], proc["run_delay"], proc["uss"]) == (0.4, 0.1, 4096)
    for bad, match in [('{"kind":"host","t":1,"cpu_busy":"2"}', "'cpu_busy' is str, not number or null"),
                       ('{"kind":"worker_stack","t":1,"pid":1,"state":"idle","frames":[["f"]]}',
                        "a frame is not"),
                       ('{"kind":"worker_stack","t":1,"pid":1,"state":"idle","frames":[],"active":1}',
                        "'active' is int, not boolean or null"),
                       ('{"kind":"proc","t":1,"pid":1,"uss":1.5}', "'uss' is float, not int or null")]:
        _write(p, json.dumps(_header()) + "\n" + bad + "\n")
        with pytest.raises(RecordingError, match=match):
            list(RecordingReader(p).records())


def test_a_shape_seen_before_is_still_checked_where_values_differ(tmp_path):
    # The reader skips the plain checks of a record shape (names and types) that passed
    # before; a later line of the same names but another type, or of the same shape with
    # a bad value inside a nested field, is still refused, naming its line.
    p = str(tmp_path / "r.jsonl")
    good = {"kind": "card", "t": 1.0, "card": 0, "util": 50.0, "procs": {"42": 1024}}
    chunk = {"kind": "stacks", "t": 1.0, "t_end": 2.0, "pid": 1, "frames": [["f", "x.py", 1]], "stacks": [[0]],
             "samples": [[1.0, 0.1, 1, 0, "forward"]]}
    cases = [(good, {**good, "t": 2.0, "util": "50"}, "line 3: card record: 'util' is str, not number or null"),
             (good, {**good, "t": 2.0, "procs": {"42": "1 GB"}}, "line 3: card record: 'procs' is dict"),
             (chunk, {**chunk, "t": 2.0, "samples": [[2.0, 0.1, 1, 5, "forward"]]},
              "line 3: stacks record: a sample is not")]
    for first, bad, match in cases:
        _write(p, json.dumps(_header()) + "\n" + json.dumps(first) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(RecordingError, match=match):
            list(RecordingReader(p).records())
    _write(p, json.dumps(_header()) + "\n" + json.dumps(good) + "\n" + json.dumps({**good, "t": 2.0}) + "\n")
    assert [r["t"] for r in RecordingReader(p).records()] == [1.0, 2.0]


def test_proc_record_leaves_unknown_optional_fields_out():
    rec = ProcSample(1.0, 1, None, "main", None, "python", None, "R", 1, None, None).to_record()
    assert not {"nspid", "cpu_main", "run_delay", "uss"} & set(rec)


def test_missing_file_and_unwritable_output(tmp_path):
    with pytest.raises(RecordingError, match="cannot read"):
        RecordingReader(str(tmp_path / "nope.jsonl"))
    with pytest.raises(SattuiError, match="cannot write"):
        RecordingWriter(str(tmp_path / "no" / "dir.jsonl"), _header())


def test_write_failure_is_one_clear_error(tmp_path):
    # /dev/full fails every write with ENOSPC, as a full disk does. sattui never takes a
    # device as its output (sattui/safefile.py), so the writer's file is swapped for it.
    with pytest.raises(SattuiError, match="cannot write /dev/full: not a regular file"):
        RecordingWriter("/dev/full", _header(), force=True)
    p = str(tmp_path / "r.jsonl")
    w = RecordingWriter(p, _header())
    w._f.close()
    w._f = open("/dev/full", "w", encoding="utf-8")
    with pytest.raises(SattuiError, match=f"cannot write {p}: No space left on device"):
        w.write(Event(1.0, "x", "y").to_record())


def test_stacks_record_roundtrip_keeps_states_and_frames():
    f_main = Frame("main", "/work/train.py", 130)
    f_next = Frame("_MultiProcessingDataLoaderIter._next_data", "/x/torch/utils/data/dataloader.py", 1505)
    f_thr = Frame("Condition.wait", "/usr/lib/python3.11/threading.py", 327)
    samples = [
        StackSample(10.0, 0.5, 4242, 4242, "MainThread", True, (f_next, f_main), state="data_wait"),
        StackSample(10.5, 0.1, 4242, 4242, "MainThread", True, (f_main,), state="other"),
        StackSample(10.0, 0.6, 4242, 4300, "QueueFeederThread", False, (f_thr,)),
    ]
    rec = stacks_to_record(StackChunk(10.0, 10.6, 4242, 20.0, samples, errors=1))
    assert len(rec["frames"]) == 3 and len(rec["stacks"]) == 3
    assert rec["threads"] == {"4242": "MainThread", "4300": "QueueFeederThread"}
    back = samples_from_record(json.loads(json.dumps(rec)))
    assert [s.state for s in back] == ["data_wait", "other", None]
    assert back[0].frames == (f_next, f_main)
    assert back[2].is_main is False and back[0].is_main is True
    assert back[1].t == 10.5 and back[1].dur == 0.1
