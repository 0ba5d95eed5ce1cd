"""The store's JSON text: the standard library reads what it writes and it reads what the
standard library wrote, value for value; documents decoded apart share their key strings."""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from muster.store.codec import copy, dumps, dumps_bytes, loads
from muster.store.sql import decode_all

# Lone surrogates are left out: no UTF-8 text can hold one, so neither encoder can store one.
_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=12,
)


@given(_json)
def test_the_standard_library_reads_the_same_value(value: object) -> None:
    text = dumps(value)
    assert json.loads(text) == value
    assert dumps_bytes(value) == text.encode()


@given(_json)
def test_it_reads_the_standard_librarys_text_as_the_standard_library_does(value: object) -> None:
    for text in (json.dumps(value), json.dumps(value, separators=(",", ":"), ensure_ascii=False)):
        assert loads(text) == json.loads(text)


def test_the_text_is_compact_and_keeps_non_ascii_characters() -> None:
    obj = {"metadata": {"name": "jöb", "labels": {"team": "ü"}}, "spec": [1, 2.5, None, True]}
    assert dumps(obj) == json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    assert math.isclose(loads(dumps({"x": 1.5e-7}))["x"], 1.5e-7)


@given(st.lists(st.dictionaries(_text, _json, max_size=4), max_size=12))
def test_decode_all_gives_the_objects_one_by_one(objs: list[dict]) -> None:
    texts = [json.dumps(o) for o in objs]
    assert decode_all(texts) == [json.loads(t) for t in texts]


def test_objects_decoded_apart_share_their_keys() -> None:
    texts = [json.dumps({"metadata": {"name": f"job-{i}"}}) for i in range(4)]
    objs = decode_all(texts)
    keys = {id(next(iter(o["metadata"]))) for o in objs}
    assert len(keys) == 1
    assert [o["metadata"]["name"] for o in objs] == ["job-0", "job-1", "job-2", "job-3"]


@given(_json)
def test_a_copy_is_equal_and_shares_no_container(value: object) -> None:
    copied = copy(value)
    assert copied == value
    assert not (_containers(copied) & _containers(value))


def _containers(value: object) -> set[int]:
    if isinstance(value, dict):
        return {id(value)}.union(*(_containers(v) for v in value.values()))
    if isinstance(value, list):
        return {id(value)}.union(*(_containers(v) for v in value))
    return set()
