"""Fuzzing the recording reader and the report built on it (issue 6, row 9).

Whatever a file holds, ``RecordingReader`` yields records or raises ``RecordingError``
(one line, no traceback from the CLI), and ``build_report`` gives a report or a
``SattuiError``: never a ``TypeError`` or ``KeyError`` from a field of the wrong type.
A real recording cut at any byte reads back as a prefix of itself.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sattui.errors import RecordingError, SattuiError
from sattui.recording import RecordingReader
from sattui.report import build_report

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "recordings" / "ui_fixture.jsonl"
FIXTURE_BYTES = FIXTURE.read_bytes()
FIXTURE_LINES = FIXTURE_BYTES.splitlines(keepends=True)
HEADER_LINE = FIXTURE_LINES[0]
# One real record of each kind, to mangle field by field.
SAMPLES = {}
for _line in FIXTURE_LINES[1:]:
    _rec = json.loads(_line)
    SAMPLES.setdefault(_rec["kind"], _rec)

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _read_all(path: Path) -> tuple[list[dict], list[str]]:
    reader = RecordingReader(str(path))
    recs = list(reader.records())
    return recs, reader.warnings


def _report_or_clean_error(path: Path) -> None:
    try:
        rep, _ = build_report(str(path))
    except SattuiError as e:
        assert "\n" not in str(e), str(e)
        return
    json.dumps(rep)  # what `report --json` prints must serialise


@SETTINGS
@given(data=st.binary(max_size=400))
def test_any_bytes_are_records_or_a_recording_error(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fz") / "f.jsonl"
    path.write_bytes(data)
    try:
        _read_all(path)
    except RecordingError as e:
        assert "\n" not in str(e)


@SETTINGS
@given(lines=st.lists(st.binary(max_size=60), max_size=6))
def test_a_good_header_then_any_lines(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("fz") / "f.jsonl"
    path.write_bytes(HEADER_LINE + b"\n".join(lines))
    try:
        _read_all(path)
    except RecordingError as e:
        assert "\n" not in str(e)
    _report_or_clean_error(path)


@SETTINGS
@given(cut=st.integers(len(HEADER_LINE), len(FIXTURE_BYTES)))
def test_a_real_recording_cut_anywhere_reads_back_as_its_own_prefix(tmp_path_factory, cut):
    path = tmp_path_factory.mktemp("fz") / "f.jsonl"
    path.write_bytes(FIXTURE_BYTES[:cut])
    recs, warnings = _read_all(path)
    whole = [json.loads(ln) for ln in FIXTURE_LINES[1:]]
    assert recs == whole[:len(recs)]
    complete = FIXTURE_BYTES[:cut].count(b"\n") - 1  # full lines after the header
    assert len(recs) == complete or len(recs) == complete + 1  # a cut right before "\n" still parses
    assert len(warnings) <= 1


@SETTINGS
@given(kind=st.sampled_from(sorted(SAMPLES)), data=st.data())
def test_records_with_fields_of_any_type_give_a_report_or_a_clean_error(tmp_path_factory, kind, data):
    rec = dict(SAMPLES[kind])
    for key in data.draw(st.lists(st.sampled_from(sorted(rec)), min_size=1, max_size=4, unique=True)):
        if key == "kind":
            continue
        rec[key] = data.draw(json_values)
    path = tmp_path_factory.mktemp("fz") / "f.jsonl"
    body = [ln for ln in FIXTURE_LINES[1:200]]
    body.insert(data.draw(st.integers(0, len(body))), (json.dumps(rec) + "\n").encode())
    path.write_bytes(HEADER_LINE + b"".join(body))
    _report_or_clean_error(path)


@SETTINGS
@given(data=st.data())
def test_a_header_with_fields_of_any_type_gives_a_report_or_a_clean_error(tmp_path_factory, data):
    header = json.loads(HEADER_LINE)
    for key in data.draw(st.lists(st.sampled_from(sorted(set(header) - {"kind", "format"})), min_size=1,
                                  max_size=4, unique=True)):
        header[key] = data.draw(json_values)
    path = tmp_path_factory.mktemp("fz") / "f.jsonl"
    path.write_bytes((json.dumps(header) + "\n").encode() + b"".join(FIXTURE_LINES[1:200]))
    _report_or_clean_error(path)
