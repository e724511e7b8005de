"""The recording schema's checks of lists and objects (sattui/recording/schema.py): a
list or an object of a plain check is checked by the set of its items' types, in C; it
must accept exactly what the check applied to each item accepts."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sattui.recording import schema

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)
PLAIN = [schema._num, schema._int, schema._str, schema._bool, schema._is_list, schema._NUM, schema._INT,
         schema._STR]


@settings(max_examples=400, deadline=None)
@given(items=st.lists(values, max_size=5), which=st.sampled_from(range(len(PLAIN))))
def test_a_list_or_object_of_a_plain_check_accepts_what_the_check_accepts_item_by_item(items: list[Any],
                                                                                       which: int) -> None:
    check = PLAIN[which]
    each = all(check(x) for x in items)
    assert schema._list_of(check)(items) is each
    assert schema._dict_of(check)({str(i): x for i, x in enumerate(items)}) is each
    assert schema._list_of(check)(tuple(items)) is False  # only a list is a list
    assert schema._dict_of(check)(items) is False


def test_the_messages_name_the_field_and_what_it_should_hold() -> None:
    rec = {"kind": "stacks", "t": 0.0, "t_end": 2.0, "pid": 1, "frames": [], "stacks": [], "samples": [[0, 1], 5]}
    assert schema.problem(rec) == "stacks record: 'samples' is list, not list of list"
    card = {"kind": "card", "t": 0.0, "card": 0, "procs": {"12": "many"}}
    assert schema.problem(card) == "card record: 'procs' is dict, not object of int or null or null"
