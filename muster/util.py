"""Small runtime utilities the server, the CLI and the tests share: waiting on a condition with a
deadline, finding a free local port, a byte count for people, a package's names imported on
first use, and the cycle collector paused over a burst of allocations."""

from __future__ import annotations

import gc
import importlib
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["free_port", "lazy_names", "paused_gc", "size_text", "wait_for"]

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T], timeout: float = 30.0, interval: float = 0.05, what: str = "condition"
) -> T:
    """Call ``condition`` until it returns a truthy value and return that value.

    Raises TimeoutError naming ``what`` (and the last exception raised by the condition, if
    any) after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:  # the condition may fail until the thing it probes is up
            last_exc = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_exc!r})" if last_exc else ""
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def size_text(n: int) -> str:
    """A byte count for people, exact in brackets: ``3145728`` -> ``3 MiB (3145728 bytes)``."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            amount = f"{n / size:.2f}".rstrip("0").rstrip(".")
            return f"{amount} {unit} ({n} bytes)"
    return f"{n} bytes"


def lazy_names(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's module ``__getattr__`` (PEP 562) that imports each name of ``where`` (name ->
    module) from its module on first use, so importing the package stays light."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__


@contextmanager
def paused_gc() -> Iterator[None]:
    """Keep Python's cycle collector off for the block (as it was before, after).

    For computations that build many short-lived containers and no reference cycles (the
    autoscaler's plan): their garbage is freed by reference counting as usual, while every
    few hundred surviving containers would otherwise start a collection that walks all the
    young objects again, finding nothing (about 8% of a plan's instructions, more when the
    heap is large). Process-wide, so only for blocks
    of milliseconds; a cycle made meanwhile is collected at the next collection after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
