from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from muster.testing.up import MusterUp


def test_a_started_server_used_as_a_context_is_not_started_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``with MusterUp(...).start()`` once started a second process whose readiness check was
    # answered by the first one; stop() then ended the second and the first ran on.
    up = MusterUp(tmp_path)
    up.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    first = up.proc

    def no_second_start(*_args: object, **_kwargs: object) -> MusterUp:
        raise AssertionError("the running server was started again")

    monkeypatch.setattr(up, "start", no_second_start)
    try:
        with up as entered:
            assert entered is up and up.proc is first
        assert first.poll() is not None  # stopped on leaving the block
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
