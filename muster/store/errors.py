"""The store's errors, in a module of their own: the SDK client's errors derive from them (code
written against the Store handles both alike), and a CLI call imports them without the store."""

from __future__ import annotations

__all__ = ["AlreadyExists", "Conflict", "InvalidSelector", "NotFound", "StoreError", "TooLarge", "TooOld"]


class StoreError(Exception):
    """Base of store errors; the message is fit to show to a user."""


class NotFound(StoreError):
    """The object does not exist (or no longer exists)."""


class AlreadyExists(StoreError):
    """``create`` of a name that is taken."""


class Conflict(StoreError):
    """A write carried a resourceVersion that is not the current one: re-read and retry."""


class TooLarge(StoreError):
    """A write whose object, as JSON, is larger than the store's per-object limit."""

    def __init__(self, message: str, size: int, limit: int) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit


class TooOld(StoreError):
    """A watch asked to resume from a revision older than the retained change log.

    The caller must re-list (which returns the current revision) and watch from there.
    """


class InvalidSelector(ValueError):
    """A label selector that does not parse; the message says where and why."""
