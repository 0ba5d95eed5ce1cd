"""Leader election on a real Lease: one holder, a standby that waits, takeover on release and
on expiry (a leader that died without releasing)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from muster.testing import wait_for
from muster.testing.kubernetes import ControlPlane

pytestmark = pytest.mark.kubernetes


@pytest.fixture
def elect(k8s_control_plane: ControlPlane, k8s_namespace: str) -> Iterator[Any]:
    from muster.runtime.kubernetes.config import KubernetesConfig
    from muster.runtime.kubernetes.leader import LeaderElector

    made: list[LeaderElector] = []
    api = k8s_control_plane.admin_client()
    lease = f"lease-{secrets.token_hex(3)}"

    def elector(identity: str) -> LeaderElector:
        config = KubernetesConfig(
            lease_namespace=k8s_namespace,
            lease_name=lease,
            identity=identity,
            lease_seconds=2,
            renew_deadline_seconds=1.5,
            retry_seconds=0.2,
        )
        e = LeaderElector(api, config)
        e.start()
        made.append(e)
        return e

    yield elector
    for e in made:
        e.stop()
    api.close()


def _holder(plane: ControlPlane, ns: str, e: Any) -> str:
    from kubernetes import client

    lease = client.CoordinationV1Api(plane.core_api().api_client).read_namespaced_lease(e.name, ns)
    return lease.spec.holder_identity or ""


def test_one_leads_the_other_waits_and_takes_over_on_release(
    elect: Any, k8s_control_plane: ControlPlane, k8s_namespace: str
) -> None:
    a = elect("a")
    assert a.wait(10)
    b = elect("b")
    assert not b.wait(3)  # longer than the Lease: a keeps renewing it
    assert a.held() and _holder(k8s_control_plane, k8s_namespace, a) == "a"
    a.stop()  # empties the holder
    assert b.wait(2)
    assert not a.held()
    assert _holder(k8s_control_plane, k8s_namespace, b) == "b"


def test_a_leader_that_died_is_replaced_once_its_lease_expires(
    elect: Any, k8s_control_plane: ControlPlane, k8s_namespace: str
) -> None:
    import time

    a = elect("a")
    assert a.wait(10)
    b = elect("b")
    a.stop(release=False)  # a crash: the Lease still names a
    died = time.monotonic()
    assert _holder(k8s_control_plane, k8s_namespace, a) == "a"
    wait_for(b.held, timeout=10, what="b takes the expired Lease")
    assert time.monotonic() - died >= 1.5  # not before the Lease could have expired
    assert _holder(k8s_control_plane, k8s_namespace, b) == "b"
