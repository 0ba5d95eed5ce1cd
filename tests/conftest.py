from __future__ import annotations

import importlib.util
import logging
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from muster.controllers.cache import MUTATION_REPORT
from muster.store import Store, open_store
from muster.testing import skip_or_fail
from muster.testing.postgres import PostgresServer, PostgresUnavailable, start_postgres
from muster.testing.processes import end_processes_under

if TYPE_CHECKING:
    from muster.testing.kubernetes import ControlPlane, NodeRegistry
    from muster.testing.ray import LocalRayCluster

# Every manager of the suite, in process or a `muster up` it starts, checks that no cached
# object is edited in place (docs/control-plane.md, "Shared objects"): in process the check's errors fail
# the test (below), and MusterUp fails on them in the server's log.
os.environ.setdefault("MUSTER_CACHE_MUTATION_DETECTOR", "1")


class _Mutations(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.found: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.found.append(record.getMessage())


_MUTATIONS = _Mutations()
logging.getLogger("muster.controllers.cache").addHandler(_MUTATIONS)


@pytest.fixture(autouse=True)
def _no_cache_mutation() -> Iterator[None]:
    """Fails a test whose managers found a cached object edited in place."""
    _MUTATIONS.found.clear()
    yield
    found = [m for m in _MUTATIONS.found if m.startswith(MUTATION_REPORT)]
    _MUTATIONS.found.clear()
    assert not found, "\n".join(found)


@pytest.fixture
def muster_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private MUSTER_HOME for one test; the server URL and token are cleared. Whatever still
    runs in it at the end (pods outlive their server by design) is ended."""
    home = tmp_path / "muster-home"
    home.mkdir()
    monkeypatch.setenv("MUSTER_HOME", str(home))
    monkeypatch.delenv("MUSTER_SERVER", raising=False)
    monkeypatch.delenv("MUSTER_TOKEN", raising=False)
    monkeypatch.delenv("MUSTER_STORE", raising=False)
    monkeypatch.delenv("MUSTER_CONTEXT", raising=False)
    monkeypatch.delenv("MUSTER_CONFIG", raising=False)
    yield home
    end_processes_under(home)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    """An empty SQLite store in the test's temporary directory (watchers poll often)."""
    opened = open_store(f"sqlite:///{tmp_path / 'muster.db'}", poll_interval=0.05)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def home_store(muster_home: Path) -> Iterator[Store]:
    """The SQLite store of the test's MUSTER_HOME (where `muster up` would keep it)."""
    opened = open_store(f"sqlite:///{muster_home / 'muster.db'}", poll_interval=0.05)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(scope="session")
def k8s_control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A real kube-apiserver 1.20 (with etcd and kube-controller-manager) shared by the session.

    Skipped (failed under MUSTER_TEST_REQUIRE_ALL=1) when scripts/k8s-build.sh has not been run.
    Logs, certificates and kubeconfigs stay in pytest's temporary directory. Tests share it:
    use ``k8s_namespace`` and delete the cluster-scoped objects (nodes, roles) they create.
    """
    from muster.testing.kubernetes import ControlPlane

    with ControlPlane(workdir=tmp_path_factory.mktemp("k8s")) as plane:
        yield plane


@pytest.fixture
def k8s_namespace(k8s_control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace of the session's control plane, named after the test; deleted after it."""
    from kubernetes import client

    stem = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:50].rstrip("-")
    name = f"{stem}-{secrets.token_hex(3)}"
    k8s_control_plane.create_namespace(name)
    yield name
    with k8s_control_plane.admin_client() as api:
        client.CoreV1Api(api).delete_namespace(name)


@pytest.fixture
def k8s_nodes(k8s_control_plane: ControlPlane) -> Iterator[NodeRegistry]:
    """Nodes a test registers on the session's control plane (unique names), deleted after it."""
    from muster.testing.kubernetes import NodeRegistry

    nodes = NodeRegistry(k8s_control_plane)
    yield nodes
    nodes.delete_all()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL server for the whole session (each test gets its own database)."""
    try:
        server = start_postgres()
    except PostgresUnavailable as exc:
        skip_or_fail(str(exc))
        raise  # unreachable: skip_or_fail raises
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty store, once on SQLite and once on a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'muster.db'}"
    return request.getfixturevalue("postgres_server").create_database()


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An open store on ``store_url``; watchers poll often so cross-process tests stay quick."""
    opened = open_store(store_url, poll_interval=0.05)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[LocalRayCluster]:
    """A Ray cluster on this machine shared by the session: a head and two nodes of four GPUs
    (declared through resources, model H100), one CPU each; this process is connected to it.

    Skipped (failed under MUSTER_TEST_REQUIRE_ALL=1) without the ray extra. A test that removes
    a node adds one back (``ray_cluster.add_gpu_node()``) so the next one finds two.
    """
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        skip_or_fail("ray is not installed (pip install -e '.[ray]')")
    from muster.testing.ray import LocalRayCluster

    with LocalRayCluster(gpu_nodes=2, gpus=4) as cluster:
        yield cluster


# `make test` runs the suite on two pytest-xdist workers (`-n 2`). The tests that start real
# processes (servers, trainers, model servers) form two units of work (see `work_unit`), each
# run one test at a time on one worker. The
# users of the session's Ray cluster form another (its dashboard port is fixed, so one worker
# owns it), and the users of the session's Kubernetes control plane a third; the in-process
# tests are spread over both workers. (xdist's own `loadgroup` marks are lost with this pytest:
# the scheduler below groups by path instead.)
_UNITS = (
    ("ray", ("tests/runtime/ray/", "tests/e2e/test_ray.py")),
    (
        "kubernetes",
        (
            "tests/kubernetes/",
            "tests/runtime/kubernetes/",
            "tests/testing/test_kubernetes.py",
            "tests/e2e/test_kubernetes.py",
            "tests/e2e/test_serving_kubernetes.py",
        ),
    ),
    ("processes", ("tests/e2e/", "tests/examples/", "tests/cli/test_demo.py")),
)


def work_unit(nodeid: str) -> str:
    """The unit of work (run whole on one worker) that a test belongs to."""
    unit = next((unit for unit, paths in _UNITS if nodeid.startswith(paths)), nodeid)
    if unit == "processes":
        # Two halves of about equal time, one per worker: the process tests are half of the
        # suite's time and wait on their processes much of it, so as one unit they were the
        # suite's critical path. The demo and tests/e2e/test_[a-j]* are one half.
        name = nodeid.split("::")[0].rsplit("/", 1)[-1]
        first = nodeid.startswith(("tests/cli/", "tests/e2e/")) and name[5:6] <= "j"
        return "processes-1" if first else "processes-2"
    return unit


if importlib.util.find_spec("xdist") is not None:
    from xdist.scheduler import LoadScopeScheduling

    class _ByUnit(LoadScopeScheduling):
        """Every in-process test is its own unit of work; see ``_UNITS`` for the others."""

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadScopeScheduling:
        return _ByUnit(config, log)
