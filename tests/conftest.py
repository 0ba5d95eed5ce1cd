from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from muster.testing.kubernetes import ControlPlane


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
