from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def muster_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private MUSTER_HOME for one test; the server URL and token are cleared."""
    home = tmp_path / "muster-home"
    home.mkdir()
    monkeypatch.setenv("MUSTER_HOME", str(home))
    monkeypatch.delenv("MUSTER_SERVER", raising=False)
    monkeypatch.delenv("MUSTER_TOKEN", raising=False)
    monkeypatch.delenv("MUSTER_STORE", raising=False)
    return home
