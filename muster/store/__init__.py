"""Persistence of Muster objects: the Store protocol and its SQL implementation.

``open_store(url)`` is the one way in: ``sqlite:///PATH`` (the embedded default) or
``postgresql+psycopg://USER@HOST:PORT/DB``. Migrations run when the store opens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from muster.store.errors import (
    AlreadyExists,
    Conflict,
    InvalidSelector,
    NotFound,
    StoreError,
    TooLarge,
    TooOld,
)
from muster.util import lazy_names

if TYPE_CHECKING:
    from muster.store.base import (
        ApplyResult,
        LabelSelector,
        ListResult,
        Store,
        WatchEvent,
    )
    from muster.store.selector import format_selector, parse_selector

__all__ = [
    "AlreadyExists",
    "ApplyResult",
    "Conflict",
    "InvalidSelector",
    "LabelSelector",
    "ListResult",
    "NotFound",
    "Store",
    "StoreError",
    "TooLarge",
    "TooOld",
    "WatchEvent",
    "format_selector",
    "open_store",
    "parse_selector",
]


# Loaded on first use: the SDK client (every CLI call) needs the errors only, not the contract.
_LAZY = {
    "ApplyResult": "muster.store.base",
    "LabelSelector": "muster.store.base",
    "ListResult": "muster.store.base",
    "Store": "muster.store.base",
    "WatchEvent": "muster.store.base",
    "format_selector": "muster.store.selector",
    "parse_selector": "muster.store.selector",
}

__getattr__ = lazy_names(__name__, _LAZY)


def open_store(
    url: str,
    *,
    poll_interval: float = 0.5,
    retention: int = 100_000,
    max_object_bytes: int | None = None,
) -> Store:
    """Open (creating and migrating as needed) the store at ``url``.

    ``poll_interval``: how often a watcher looks for writes made by other processes (writes
    of this process wake it at once). ``retention``: revisions of change log kept, i.e. how
    far back a watch can resume. ``max_object_bytes``: the largest object (as JSON) a write
    may store (None: :data:`~muster.store.base.DEFAULT_MAX_OBJECT_BYTES`).
    """
    from muster.store.base import DEFAULT_MAX_OBJECT_BYTES
    from muster.store.engine import make_engine
    from muster.store.sql import SqlStore

    if max_object_bytes is None:
        max_object_bytes = DEFAULT_MAX_OBJECT_BYTES
    return SqlStore(
        make_engine(url), poll_interval=poll_interval, retention=retention, max_object_bytes=max_object_bytes
    )
