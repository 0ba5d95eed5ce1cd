"""PostgreSQL change notifications: every write transaction ends with ``pg_notify`` on
:data:`CHANNEL` (delivered at COMMIT, payload the new revision and the kinds it changed, see
:func:`notice`), and one listener thread per store, on a connection of its own, turns each
notification into a wake-up of this process's watchers of those kinds. So a watcher sees a
write of any process (another server, a tool) at once, not at its next poll.

A notification lost while the listener reconnects is made up for: after every (re)connect the
listener reads the current revision and wakes the watchers with it, and watchers keep a slow
poll as a safety net.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection

from sqlalchemy import Engine

from muster.store.watch import Notifier

__all__ = ["CHANNEL", "Listener", "notice", "parse_notice"]

log = logging.getLogger(__name__)

CHANNEL = "muster_changes"
_RECONNECT_SECONDS = 1.0
_CHECK_SECONDS = 0.25  # how often the listener looks whether it should stop


def notice(revision: int, kinds: Collection[str]) -> str:
    """A notification's payload: the revision, then the kinds changed (``"42 Pod Event"``).
    Kinds are names without spaces, and a transaction changes a few: far below NOTIFY's
    8,000 bytes."""
    return " ".join((str(revision), *sorted(kinds)))


def parse_notice(payload: str) -> tuple[int, frozenset[str] | None]:
    """The revision and kinds of a :func:`notice` (kinds None when it names none, as a bare
    revision from an older server does: then every watcher wakes). ValueError when the
    payload is not one."""
    revision, *kinds = payload.split(" ")
    return int(revision), frozenset(kinds) if kinds else None


class Listener:
    """LISTEN on :data:`CHANNEL` in a daemon thread, waking ``notifier`` with each revision."""

    def __init__(self, engine: Engine, notifier: Notifier, current: Callable[[], int]) -> None:
        self._engine = engine
        self._notifier = notifier
        self._current = current
        self._stopped = threading.Event()
        self._listening = threading.Event()
        self._thread = threading.Thread(target=self._run, name="muster-store-listen", daemon=True)
        self._thread.start()

    @property
    def listening(self) -> bool:
        """Whether notifications arrive now (else watchers rely on polling)."""
        return self._listening.is_set()

    def wait_listening(self, timeout: float) -> bool:
        return self._listening.wait(timeout)

    def close(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=2 * _CHECK_SECONDS + 1)

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self._listen()
            except Exception as exc:  # a lost connection: watchers poll until we are back
                self._listening.clear()
                if self._stopped.is_set():
                    return
                log.warning("listening for store changes failed (%s); retrying", exc)
                self._stopped.wait(_RECONNECT_SECONDS)

    def _listen(self) -> None:
        raw = self._engine.raw_connection()
        try:
            dbapi = raw.driver_connection
            assert dbapi is not None
            dbapi.autocommit = True
            dbapi.execute(f"LISTEN {CHANNEL}")
            self._listening.set()
            # Whatever was committed before LISTEN took effect: wake the watchers for it.
            self._notifier.notify(self._current())
            while not self._stopped.is_set():
                for note in dbapi.notifies(timeout=_CHECK_SECONDS):
                    try:
                        revision, kinds = parse_notice(note.payload)
                    except ValueError:
                        continue
                    self._notifier.notify(revision, kinds)
        finally:
            self._listening.clear()
            raw.invalidate()  # never hand a LISTENing connection back to the pool
