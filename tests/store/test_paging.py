"""Paged lists (``list_page``, the store side of ``limit``/``continue``) on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest

from muster.store import Store, parse_selector
from muster.store.capabilities import JsonPage, PagedListing
from tests.store.factories import flavor, job


def _keys(page: JsonPage) -> list[tuple[str, str]]:
    return [(o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in map(json.loads, page.texts)]


def _all_pages(
    store: PagedListing, kind: str, limit: int, after: tuple[str, str] | None = None, **kwargs
) -> list[JsonPage]:
    pages = [store.list_page(kind, limit=limit, after=after, **kwargs)]
    while pages[-1].last is not None:
        pages.append(store.list_page(kind, limit=limit, after=pages[-1].last, **kwargs))
    return pages


def _fill(store: Store) -> None:
    for i in range(7):
        for ns in ("b", "a", "c"):
            store.create(job(f"j{i}", ns=ns, labels={"parity": "even" if i % 2 == 0 else "odd"}))


def test_the_store_pages(store: Store):
    assert isinstance(store, PagedListing)


@pytest.mark.parametrize("limit", [1, 2, 5, 21, 22, 500])
def test_pages_across_namespaces_concatenate_to_the_list(store: Store, limit: int):
    _fill(store)
    pages = _all_pages(store, "TrainingJob", limit)  # type: ignore[arg-type]
    whole = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in store.list("TrainingJob").items]
    assert [k for p in pages for k in _keys(p)] == whole
    assert all(len(p.texts) == limit for p in pages[:-1])
    assert 1 <= len(pages[-1].texts) <= limit  # never an empty last page after a full one
    assert all(p.last == _keys(p)[-1] for p in pages[:-1])
    assert len(pages) == -(-len(whole) // limit)


def test_pages_of_one_namespace(store: Store):
    _fill(store)
    pages = _all_pages(store, "TrainingJob", 3, namespace="b")  # type: ignore[arg-type]
    assert [k for p in pages for k in _keys(p)] == [("b", f"j{i}") for i in range(7)]
    assert [len(p.texts) for p in pages] == [3, 3, 1]
    with pytest.raises(ValueError, match="cannot follow a key of 'a'"):
        store.list_page("TrainingJob", "b", limit=3, after=("a", "j1"))  # type: ignore[attr-defined]


def test_cluster_scoped_kind_pages(store: Store):
    for name in ("f3", "f1", "f2"):
        store.create(flavor(name))
    pages = _all_pages(store, "ResourceFlavor", 2)  # type: ignore[arg-type]
    assert [k for p in pages for k in _keys(p)] == [("", "f1"), ("", "f2"), ("", "f3")]
    assert pages[0].last == ("", "f2")


def test_an_empty_list_is_one_empty_last_page(store: Store):
    page = store.list_page("TrainingJob", limit=10)  # type: ignore[attr-defined]
    assert page.texts == [] and page.last is None
    assert page.resource_version == str(store.revision())


def test_selector_pages_are_full_until_the_last(store: Store):
    _fill(store)
    even = parse_selector("parity=even")  # 4 of 7 per namespace: 12 in all
    pages = _all_pages(store, "TrainingJob", 5, selector=even)  # type: ignore[arg-type]
    assert [len(p.texts) for p in pages] == [5, 5, 2]
    listed = [k for p in pages for k in _keys(p)]
    assert listed == [(ns, f"j{i}") for ns in "abc" for i in (0, 2, 4, 6)]
    # A requirement the database cannot narrow by (checked in Python), matching only rows far
    # apart: a page reads batch after batch until it has its matches or the rows end.
    odd = parse_selector("parity!=even")
    pages = _all_pages(store, "TrainingJob", 1, selector=odd)  # type: ignore[arg-type]
    assert [k for p in pages for k in _keys(p)] == [(ns, f"j{i}") for ns in "abc" for i in (1, 3, 5)]
    assert pages[-1].last is None and len(pages) == 9


def test_accept_narrows_like_a_selector(store: Store):
    _fill(store)

    def only_c(text: str) -> bool:
        return json.loads(text)["metadata"]["namespace"] == "c"

    pages = _all_pages(store, "TrainingJob", 2, accept=only_c)  # type: ignore[arg-type]
    assert [k for p in pages for k in _keys(p)] == [("c", f"j{i}") for i in range(7)]
    assert [len(p.texts) for p in pages] == [2, 2, 2, 1]


def test_limit_must_be_positive(store: Store):
    with pytest.raises(ValueError, match="at least 1"):
        store.list_page("TrainingJob", limit=0)  # type: ignore[attr-defined]


def test_changes_between_pages(store: Store):
    """Pages are not one snapshot: an object present throughout appears exactly once; one
    created behind the cursor does not appear, one created ahead of it does; one deleted
    ahead of it does not; each page reports the revision it was read at."""
    _fill(store)
    paged: PagedListing = store  # type: ignore[assignment]
    first = paged.list_page("TrainingJob", limit=8)
    assert _keys(first)[-1] == ("b", "j0")
    store.delete("TrainingJob", "j3", "a")  # already listed
    store.delete("TrainingJob", "j5", "c")  # not yet listed
    store.create(job("j9", ns="a"))  # behind the cursor
    store.create(job("j35", ns="b"))  # ahead of it
    changed = store.get("TrainingJob", "j6", "c")
    changed["spec"]["x"] = 2
    store.update(changed)  # ahead of it, changed: listed once, as it is now
    rest = _all_pages(store, "TrainingJob", 8, after=first.last)  # type: ignore[arg-type]
    assert int(rest[0].resource_version) > int(first.resource_version)
    listed = _keys(first) + [k for p in rest for k in _keys(p)]
    assert len(listed) == len(set(listed))
    throughout = {(ns, f"j{i}") for ns in "abc" for i in range(7)} - {("a", "j3"), ("c", "j5")}
    assert throughout <= set(listed)
    assert ("b", "j35") in listed and ("a", "j9") not in listed and ("c", "j5") not in listed
    j6 = next(json.loads(t) for p in rest for t in p.texts if '"j6"' in t and '"c"' in t)
    assert j6["spec"]["x"] == 2
