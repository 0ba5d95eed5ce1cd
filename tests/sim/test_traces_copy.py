"""The gzipped traces bundled in traces/ are the shared files, byte for byte."""

from __future__ import annotations

import gzip

import pytest

from muster.sim.traces import BUNDLED_TRACES
from tests.sim.conftest import FILES, shared_traces


def test_bundled_traces_match_shared() -> None:
    root = shared_traces()
    if root is None:
        pytest.skip("../shared/traces is absent; the gzipped copies in traces/ are what run")
    for name, folder in FILES.items():
        bundled = BUNDLED_TRACES / folder / f"{name}.gz"
        source = root / folder / name
        assert gzip.decompress(bundled.read_bytes()) == source.read_bytes(), (
            f"refresh the copy: gzip -9nc {source} > {bundled}"
        )


def test_every_bundled_file_is_listed() -> None:
    bundled = {p.relative_to(BUNDLED_TRACES).as_posix() for p in BUNDLED_TRACES.rglob("*.gz")}
    assert bundled == {f"{folder}/{name}.gz" for name, folder in FILES.items()}
