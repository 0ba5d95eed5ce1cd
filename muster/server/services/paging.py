"""Paged lists: Kubernetes' ``limit`` and ``continue`` (docs/rest-api.md, "Paged lists").

A page answers at most ``limit`` objects in key order (namespace, then name) and, when more
follow, ``metadata.continue``: an opaque token naming the last key answered and what the list
is of (kind, namespace, label selector). The next request sends it back with the same
parameters and gets the objects after that key. The token holds no revision, so it never
expires; the price is that pages are not one snapshot: each is read at its own revision (its
``metadata.resourceVersion``). An object that exists throughout the listing is answered exactly
once; one created or deleted meanwhile may or may not be.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from muster.server.encoding import dumps
from muster.server.errors import ApiError
from muster.store import LabelSelector, Store
from muster.store.base import Obj
from muster.store.capabilities import JsonPage, PagedListing

__all__ = ["CONTINUE_PATTERN", "ListOf", "read_page"]

# What a token looks like (base64url, unpadded; empty: none, as Kubernetes reads it), declared
# in the OpenAPI document.
CONTINUE_PATTERN = r"^[A-Za-z0-9_-]*$"

_TOKEN_VERSION = 1
_RESTART = "start the list again without continue"


@dataclass(frozen=True)
class ListOf:
    """What a list is of: a continue token is good only for the list it came from."""

    kind: str
    namespace: str | None  # None: every namespace (or a cluster-scoped kind)
    selector: str | None  # the labelSelector as given (None when absent or empty)

    def describe(self) -> str:
        where = "every namespace" if self.namespace is None else f"namespace {self.namespace}"
        chosen = f"labelSelector {self.selector!r}" if self.selector else "no labelSelector"
        return f"{self.kind} in {where} with {chosen}"


def read_page(
    store: Store,
    of: ListOf,
    selector: LabelSelector | None,
    limit: int | None,
    token: str | None,
    keep: Callable[[Obj], bool] | None,
) -> tuple[str, bytes, str | None]:
    """One page: ``(resourceVersion, items as a JSON array, continue token or None)``.
    ``limit`` None answers everything after the token; ``keep`` narrows to what the caller may see
    (pages then still hold ``limit`` objects each, not fewer)."""
    after = parse_continue(token, of) if token else None
    accept = None if keep is None else (lambda text: keep(json.loads(text)))
    if isinstance(store, PagedListing):
        page = store.list_page(of.kind, of.namespace, selector, limit=limit, after=after, accept=accept)
    else:
        page = _page_of_whole_list(store, of, selector, limit, after, keep)
    items = ("[" + ",".join(page.texts) + "]").encode()
    return page.resource_version, items, None if page.last is None else _token(of, page.last)


def parse_continue(token: str, of: ListOf) -> tuple[str, str]:
    """The key a continue token resumes after; 400 when it is malformed or from another list."""
    try:
        doc = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if not isinstance(doc, dict) or doc.get("v") != _TOKEN_VERSION:
            raise ValueError
        ns, name = doc["after"]
        was = ListOf(doc["kind"], doc["namespace"], doc["selector"])
        if not all(isinstance(x, str) for x in (ns, name, was.kind)):
            raise ValueError
    except (ValueError, TypeError, KeyError, binascii.Error):
        raise ApiError(
            400,
            f"continue: not a token this server gave (a list's metadata.continue); {_RESTART}",
            errors=[_error(token)],
        ) from None
    if was != of:
        raise ApiError(
            400,
            f"continue: the token continues a list of {was.describe()}, not of {of.describe()}; send "
            f"the same kind, namespace and labelSelector with it, or {_RESTART}",
            errors=[_error(token, f"must come from a list of {of.describe()}")],
        )
    if of.namespace is not None and ns != of.namespace:  # made by hand: no page ends so
        raise ApiError(
            400, f"continue: the token resumes in another namespace; {_RESTART}", errors=[_error(token)]
        )
    return ns, name


def _token(of: ListOf, last: tuple[str, str]) -> str:
    doc = {"v": _TOKEN_VERSION, "kind": of.kind, "namespace": of.namespace, "selector": of.selector}
    doc["after"] = list(last)
    return base64.urlsafe_b64encode(dumps(doc)).rstrip(b"=").decode()


def _error(token: str, rule: str = "must be the metadata.continue of the previous page") -> dict[str, Any]:
    return {"path": "continue", "rule": rule, "got": token[:200]}


def _page_of_whole_list(
    store: Store,
    of: ListOf,
    selector: LabelSelector | None,
    limit: int | None,
    after: tuple[str, str] | None,
    keep: Callable[[Obj], bool] | None,
) -> JsonPage:
    """A page cut from the whole list, for a store that cannot page (same order and answers)."""
    listed = store.list(of.kind, of.namespace, selector)
    rows = sorted(
        (((o["metadata"].get("namespace") or "", o["metadata"]["name"]), o) for o in listed.items),
        key=lambda row: row[0],
    )
    rows = [(key, o) for key, o in rows if (after is None or key > after) and (keep is None or keep(o))]
    more = limit is not None and len(rows) > limit
    rows = rows[:limit]
    texts = [dumps(o).decode() for _key, o in rows]
    return JsonPage(listed.resource_version, texts, rows[-1][0] if more else None)
