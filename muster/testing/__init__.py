"""Test helpers shipped with the package: optional programs, fakes and factories; waiting on
conditions and free ports come from :mod:`muster.util` (production code imports them there).

Tests never sleep on hope: they wait for a condition with a deadline via :func:`wait_for`.
"""

from __future__ import annotations

import os
from typing import NoReturn

from muster.util import free_port, wait_for

__all__ = ["free_port", "require_all", "skip_or_fail", "wait_for"]


def require_all() -> bool:
    """True under CI (``MUSTER_TEST_REQUIRE_ALL=1``), where a missing program is a failure."""
    return os.environ.get("MUSTER_TEST_REQUIRE_ALL", "") not in ("", "0", "false")


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the calling test with ``reason``, or fail it when every program is required."""
    import pytest

    if require_all():
        pytest.fail(f"MUSTER_TEST_REQUIRE_ALL is set but: {reason}")
    pytest.skip(reason)
