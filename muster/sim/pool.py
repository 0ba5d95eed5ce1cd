"""Independent simulation runs in worker processes.

Each worker loads its inputs once (``init(setup)`` returns them) and then runs items
(``work(inputs, setup, item)``); results come back as they finish. Workers are spawned, not
forked, so they start clean of the parent's threads (the progress bar's among them). With
``jobs`` 1 everything runs in the calling process, on ``inputs`` when given.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

__all__ = ["run_items"]

S = TypeVar("S")
I = TypeVar("I")  # noqa: E741
R = TypeVar("R")

_STATE: dict[str, Any] = {}


def run_items(
    setup: S,
    items: Sequence[I],
    init: Callable[[S], Any],
    work: Callable[[Any, S, I], R],
    jobs: int = 1,
    inputs: Any = None,
) -> Iterator[R]:
    """Yield ``work(inputs, setup, item)`` for every item, in completion order."""
    if jobs <= 1 or len(items) <= 1:
        data = inputs if inputs is not None else init(setup)
        for item in items:
            yield work(data, setup, item)
        return
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(min(jobs, len(items)), initializer=_init, initargs=(setup, init, work)) as pool:
        yield from pool.imap_unordered(_run, items)


def _init(setup: Any, init: Callable[[Any], Any], work: Callable[[Any, Any, Any], Any]) -> None:
    _STATE.update(setup=setup, inputs=init(setup), work=work)


def _run(item: Any) -> Any:
    return _STATE["work"](_STATE["inputs"], _STATE["setup"], item)
