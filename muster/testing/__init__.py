"""Test helpers shipped with the package: waiting on conditions, free ports, optional programs.

Tests never sleep on hope: they wait for a condition with a deadline via :func:`wait_for`.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import NoReturn, TypeVar

__all__ = ["free_port", "require_all", "skip_or_fail", "wait_for"]

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


def require_all() -> bool:
    """True under CI (``MUSTER_TEST_REQUIRE_ALL=1``), where a missing program is a failure."""
    return os.environ.get("MUSTER_TEST_REQUIRE_ALL", "") not in ("", "0", "false")


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the calling test with ``reason``, or fail it when every program is required."""
    import pytest

    if require_all():
        pytest.fail(f"MUSTER_TEST_REQUIRE_ALL is set but: {reason}")
    pytest.skip(reason)
