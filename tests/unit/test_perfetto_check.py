"""tests/perfetto_check.py itself: it accepts a well-formed trace and rejects each
malformed one with a message that says what is wrong, so a checker that accepted
everything would fail here (and tests/unit/test_export_perfetto.py's checks mean
something)."""

from __future__ import annotations

import copy
import json
import re

import pytest

from tests.perfetto_check import check_events, load_trace

GOOD = [
    {"ph": "M", "name": "process_name", "pid": 100, "args": {"name": "trainer 100"}},
    {"ph": "M", "name": "thread_name", "pid": 100, "tid": 100, "args": {"name": "main"}},
    {"ph": "M", "name": "process_sort_index", "pid": 100, "args": {"sort_index": 0}},
    {"ph": "X", "name": "data_wait", "cat": "state", "pid": 100, "tid": 100, "ts": 0, "dur": 500000.0,
     "args": {"samples": 5}},
    {"ph": "X", "name": "forward", "cat": "state", "pid": 100, "tid": 100, "ts": 500000.0, "dur": 250000},
    {"ph": "C", "name": "cpu", "cat": "proc", "pid": 100, "tid": 100, "ts": 0, "args": {"cpu": 97.5, "rss": 1000}},
    {"ph": "i", "name": "trainer_found", "cat": "event", "pid": 100, "ts": 1.5, "s": "g"},
    {"ph": "i", "name": "thread instant", "pid": 100, "tid": 100, "ts": 2.0},  # s defaults to "t"
]

# index into GOOD of each phase's example
M_NAME, M_SORT, X, C, I_EV = 0, 2, 3, 5, 6


def _bad(i: int, **change) -> list[dict]:
    """GOOD with event i changed: a key set to a value, or removed where the value is ...
    (Ellipsis)."""
    evs = copy.deepcopy(GOOD)
    for k, v in change.items():
        if v is ...:
            evs[i].pop(k)
        else:
            evs[i][k] = v
    return evs


def _rejected(events: list[dict], why: str) -> pytest.ExceptionInfo[AssertionError]:
    with pytest.raises(AssertionError, match=why) as e:
        check_events(events)
    return e


def test_a_good_trace_is_accepted():
    check_events(copy.deepcopy(GOOD))
    check_events([])  # an empty trace is a trace


BAD = [
    # every phase
    (X, {"ph": "B"}, r"ph 'B' is not one of"),
    (X, {"ph": ...}, r"ph None is not one of"),
    (C, {"pid": ...}, r"pid must be an int"),
    (X, {"pid": "100"}, r"pid must be an int"),
    (X, {"pid": -1}, r"pid must be an int"),
    (X, {"pid": 2 ** 32}, r"pid must be an int"),
    (M_NAME, {"pid": True}, r"pid must be an int"),
    (X, {"tid": 1.5}, r"tid must be an int"),
    (X, {"name": ...}, r"name must be a non-empty string"),
    (I_EV, {"name": ""}, r"name must be a non-empty string"),
    (M_NAME, {"name": ...}, r"name must be a non-empty string"),
    (X, {"args": [1, 2]}, r"args must be an object"),
    # ts: every phase but M
    (X, {"ts": ...}, r"ts must be a finite number"),
    (C, {"ts": ...}, r"ts must be a finite number"),
    (I_EV, {"ts": ...}, r"ts must be a finite number"),
    (X, {"ts": "0"}, r"ts must be a finite number"),
    (X, {"ts": -1.0}, r"ts must be a finite number >= 0"),
    (X, {"ts": float("nan")}, r"ts must be a finite number"),
    (C, {"ts": float("inf")}, r"ts must be a finite number"),
    # X
    (X, {"dur": ...}, r"X needs dur"),
    (X, {"dur": -1.0}, r"X needs dur, a finite number >= 0"),
    (X, {"dur": float("nan")}, r"X needs dur"),
    (X, {"dur": float("inf")}, r"X needs dur"),
    (X, {"dur": "250"}, r"X needs dur"),
    (X, {"dur": True}, r"X needs dur"),
    # C
    (C, {"args": ...}, r"C needs a non-empty args object"),
    (C, {"args": {}}, r"C needs a non-empty args object"),
    (C, {"args": {"cpu": "97.5"}}, r"C args must be finite numbers, not \{'cpu': '97.5'\}"),
    (C, {"args": {"cpu": 1.0, "rss": None}}, r"C args must be finite numbers, not \{'rss': None\}"),
    (C, {"args": {"cpu": float("nan")}}, r"C args must be finite numbers"),
    (C, {"args": {"cpu": False}}, r"C args must be finite numbers"),
    # i
    (I_EV, {"s": "x"}, r"i scope s 'x' is not one of"),
    (I_EV, {"s": None}, r"i scope s None is not one of"),
    (I_EV, {"s": "G"}, r"i scope s 'G' is not one of"),
    # M
    (M_NAME, {"name": "process_labels"}, r"M name 'process_labels' is not one of"),
    (M_NAME, {"args": ...}, r"M needs an args object"),
    (M_NAME, {"args": {}}, r"process_name needs args.name"),
    (M_NAME, {"args": {"name": ""}}, r"process_name needs args.name"),
    (M_NAME, {"args": {"name": 7}}, r"process_name needs args.name"),
    (M_NAME + 1, {"args": {"label": "main"}}, r"thread_name needs args.name"),
    (M_SORT, {"args": {"sort_index": "0"}}, r"process_sort_index needs args.sort_index"),
    (M_SORT, {"args": {}}, r"process_sort_index needs args.sort_index"),
]


@pytest.mark.parametrize(("i", "change", "why"), BAD,
                         ids=[f"{GOOD[i]['ph']}{i}-" + ",".join(f"{k} missing" if v is ... else f"{k}={v!r}"
                                                               for k, v in ch.items()) for i, ch, _ in BAD])
def test_a_missing_or_malformed_field_is_rejected_with_its_reason(i, change, why):
    e = _rejected(_bad(i, **change), why)
    # the message names the event, so a reader finds it in a trace of thousands
    assert str(e.value).startswith(f"event {i}: "), e.value


def test_not_an_object_is_rejected():
    _rejected([*copy.deepcopy(GOOD), ["X", 1, 2]], r"event 8: \['X', 1, 2\]: not an object")


def _slices(*spans, tid=100, pid=100) -> list[dict]:
    return [{"ph": "X", "name": f"s{k}", "pid": pid, "tid": tid, "ts": a, "dur": b - a}
            for k, (a, b) in enumerate(spans)]


@pytest.mark.parametrize("spans", [
    [(0, 10), (5, 15)],  # the second starts inside the first and ends after it
    [(5, 15), (0, 10)],  # the same, given in the other order
    [(0, 10), (9.99, 20)],  # by 10 ns: more than the tolerance
    [(0, 100), (10, 20), (50, 120)],  # the third closes its sibling, then outlives the parent
    [(0, 100), (10, 60), (20, 30), (40, 70)],  # a grandchild that outlives its parent
])
def test_slices_that_partly_overlap_on_one_track_are_rejected(spans):
    _rejected(_slices(*spans), r"slices overlap on track \(100, 100\)")


@pytest.mark.parametrize("spans", [
    [(0, 10), (10, 20), (20, 20.5)],  # end to start
    [(0, 10), (10.0000001, 20)],  # a rounding gap
    [(0, 10), (9.9999, 20)],  # a rounding overlap, within a nanosecond
    [(0, 100), (10, 20), (20, 30), (30, 100)],  # children that fill their parent
    [(0, 100), (0, 40), (0, 10)],  # three that start together, each inside the last
    [(0, 100), (10, 60), (20, 30), (40, 60), (60, 100)],  # three deep, then a sibling
    [(0, 10), (0, 10)],  # the same span twice: one inside the other
    [(5, 5), (0, 10), (10, 10)],  # zero-length slices, inside and at the end
])
def test_slices_that_nest_or_follow_each_other_are_accepted(spans):
    check_events(_slices(*spans))


def test_overlap_is_per_track():
    # the same spans on another thread, or in another process, are another track
    check_events([*_slices((0, 10)), *_slices((5, 15), tid=101), *_slices((5, 15), pid=101, tid=101)])
    # a slice without tid is on its process's main thread (tid = pid): the same track
    evs = _slices((0, 10), (5, 15))
    del evs[1]["tid"]
    _rejected(evs, re.escape("slices overlap on track (100, 100): (0, 10) and (5, 15)"))


def _write(tmp_path, text: str):
    p = tmp_path / "trace.json"
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_load_trace_accepts_the_object_form(tmp_path):
    obj = load_trace(_write(tmp_path, json.dumps({"traceEvents": GOOD, "displayTimeUnit": "ns"})))
    assert obj["traceEvents"] == GOOD
    assert load_trace(_write(tmp_path, '{"traceEvents": []}')) == {"traceEvents": []}


@pytest.mark.parametrize("const", ["NaN", "Infinity", "-Infinity"])
def test_load_trace_rejects_nan_and_infinity_in_the_text(tmp_path, const):
    # Python's json writes and reads these by default; they are not JSON (RFC 8259), and a strict parser refuses them
    text = '{"traceEvents": [{"ph": "C", "name": "cpu", "pid": 1, "ts": 0, "args": {"cpu": VALUE}}]}'
    text = text.replace("VALUE", const)
    with pytest.raises(AssertionError, match=f"not JSON: {const}"):
        load_trace(_write(tmp_path, text))


@pytest.mark.parametrize(("text", "why"), [
    (json.dumps(GOOD), r"not the object form .*: a list"),  # the array form: valid for Chrome, not what sattui writes
    ('"traceEvents"', r"not the object form .*: a str"),
    ('{"events": []}', r"traceEvents must be a list"),
    ('{"traceEvents": {}}', r"traceEvents must be a list"),
    ('{"traceEvents": [], "displayTimeUnit": "us"}', r"displayTimeUnit 'us'"),
])
def test_load_trace_rejects_what_is_not_the_object_form(tmp_path, text, why):
    with pytest.raises(AssertionError, match=why):
        load_trace(_write(tmp_path, text))


def test_nested_false_refuses_nesting_and_keeps_following_slices():
    # sattui's exports: a thread is in one state at a time, so its slices never nest
    check_events(_slices((0, 10), (10, 20), (25, 30)), nested=False)
    with pytest.raises(AssertionError, match="slices nest on track"):
        check_events(_slices((0, 100), (10, 20)), nested=False)
    with pytest.raises(AssertionError, match="slices overlap on track"):
        check_events(_slices((0, 10), (5, 15)), nested=False)
