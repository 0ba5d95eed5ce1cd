"""Wire dicts for store tests (the store never looks inside spec, so these need not be valid
kinds), and a watch consumed on a thread."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from muster.store import Store, WatchEvent
from muster.testing import wait_for


def job(name: str, ns: str = "default", labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "muster.dev/v1", "kind": "TrainingJob", "metadata": meta, "spec": spec or {"x": 1}}


def flavor(name: str) -> dict[str, Any]:
    return {"apiVersion": "muster.dev/v1", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}}


@contextlib.contextmanager
def consuming(store: Store, watch: Iterator[WatchEvent]) -> Iterator[tuple[list[str], Any]]:
    """Consume ``watch`` on a thread: yields the names it delivers (a list that grows) and
    the store notifier's waiter it waits on, once it waits; closes and joins it on exit."""
    seen: list[str] = []
    thread = threading.Thread(target=lambda: seen.extend(e.object["metadata"]["name"] for e in watch))
    thread.start()
    waiters = store.notifier._waiters  # type: ignore[attr-defined]
    try:
        wait_for(lambda: len(waiters) == 1, timeout=10, what="the watch waiting")
        yield seen, waiters[0]
    finally:
        watch.close()  # type: ignore[attr-defined]
        thread.join(timeout=10)
    assert not thread.is_alive(), "close() from another thread must end a blocked next()"
