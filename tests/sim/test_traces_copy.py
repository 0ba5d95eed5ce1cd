"""The gzipped trace copies in tests/sim/traces are the shared files, byte for byte."""

from __future__ import annotations

import gzip

import pytest

from tests.sim.conftest import COPY, FILES, shared_traces


def test_vendored_traces_match_shared() -> None:
    root = shared_traces()
    if root is None:
        pytest.skip("../shared/traces is absent; the gzipped copies in tests/sim/traces are what run")
    for name, folder in FILES.items():
        copy = gzip.decompress((COPY / f"{name}.gz").read_bytes())
        source = root / folder / name
        assert copy == source.read_bytes(), f"refresh the copy: gzip -9c {source} > {COPY}/{name}.gz"
