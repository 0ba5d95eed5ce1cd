"""Stored JSON decoded in chunks: the same objects as one by one, sharing their key strings."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from muster.store.sql import decode_all

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10,
)


@given(st.lists(st.dictionaries(st.text(max_size=4), _json, max_size=4), max_size=12), st.integers(1, 5))
def test_the_same_objects_as_one_by_one_at_any_chunk_size(objs: list[dict], chunk: int) -> None:
    texts = [json.dumps(o) for o in objs]
    assert decode_all(texts, chunk=chunk) == [json.loads(t) for t in texts]


def test_objects_of_one_chunk_share_their_keys() -> None:
    texts = [json.dumps({"metadata": {"name": f"job-{i}"}}) for i in range(4)]
    a, b, c, d = decode_all(texts, chunk=2)
    key = lambda o: next(iter(o["metadata"]))  # noqa: E731
    assert key(a) is key(b) and key(c) is key(d)
    assert [o["metadata"]["name"] for o in (a, b, c, d)] == ["job-0", "job-1", "job-2", "job-3"]
