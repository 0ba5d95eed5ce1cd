"""The real traces for the loader tests: ``../shared/traces`` (or ``MUSTER_TRACES_DIR``) when the
checkout has it, else the gzipped copies bundled in the repository's ``traces/`` folder (the files
these tests read, byte for byte), so a clean checkout without ``../shared`` still tests the
loaders on real data."""

from __future__ import annotations

from pathlib import Path

import pytest

from muster.sim import openb
from muster.sim.traces import BUNDLED_TRACES, TraceNotFound, trace_dir

# Where each bundled file lives inside a trace directory.
FILES = {
    f"{openb.DEFAULT_NODES}.csv": openb.FOLDER,
    f"{openb.DEFAULT_PODS}.csv": openb.FOLDER,
    "analysis_allo_discrete.csv": "alibaba-gpu-v2023/fgd_expected_results",
    "analysis_frag_discrete.csv": "alibaba-gpu-v2023/fgd_expected_results",
    "analysis_frag_ratio_discrete.csv": "alibaba-gpu-v2023/fgd_expected_results",
    "philly.csv": "philly",
}


def shared_traces() -> Path | None:
    """The shared trace directory when it holds every file the tests read."""
    try:
        root = trace_dir()
    except TraceNotFound:
        return None
    if root == BUNDLED_TRACES:
        return None
    return root if all((root / folder / name).is_file() for name, folder in FILES.items()) else None


@pytest.fixture(scope="session")
def real_traces() -> Path:
    """A trace directory holding the real openb and Philly files."""
    return shared_traces() or BUNDLED_TRACES
