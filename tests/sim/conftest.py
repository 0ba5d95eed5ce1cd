"""The real traces for the loader tests: ``../shared/traces`` (or ``MUSTER_TRACES_DIR``) when the
checkout has it, else the gzipped copies in ``tests/sim/traces`` (the files these tests read,
byte for byte), so a clean checkout without ``../shared`` still tests the loaders on real data."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from muster.sim import openb
from muster.sim.traces import TraceNotFound, trace_dir

COPY = Path(__file__).resolve().parent / "traces"
# Where each vendored file lives inside a trace directory.
FILES = {
    f"{openb.DEFAULT_NODES}.csv": openb.FOLDER,
    f"{openb.DEFAULT_PODS}.csv": openb.FOLDER,
    "philly.csv": "philly",
}


def shared_traces() -> Path | None:
    """The shared trace directory when it holds every file the tests read."""
    try:
        root = trace_dir()
    except TraceNotFound:
        return None
    return root if all((root / folder / name).is_file() for name, folder in FILES.items()) else None


@pytest.fixture(scope="session")
def real_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trace directory holding the real openb and Philly files."""
    root = shared_traces()
    if root is not None:
        return root
    root = tmp_path_factory.mktemp("traces")
    for name, folder in FILES.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / name).write_bytes(gzip.decompress((COPY / f"{name}.gz").read_bytes()))
    return root
