"""The Kubernetes runtime against a real kube-apiserver: gangs bound all or none, status from the
pod watch, stops with the grace period, lost nodes, and what others hold on a node."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from muster.runtime.base import PodPhase, PodReason, PodStatusChange, StopReason
from muster.testing import wait_for
from muster.testing.kubernetes import ControlPlane
from muster.testing.kubernetes import NodeRegistry as Nodes
from tests.runtime.kubernetes.conftest import gang, muster_pod

pytestmark = pytest.mark.kubernetes


class Reports:
    """What the runtime's poll() said, per Muster pod uid (the latest report)."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.latest: dict[str, PodStatusChange] = {}

    def wait(self, uid: str, phase: PodPhase, timeout: float = 15) -> PodStatusChange:
        def seen() -> PodStatusChange | None:
            for change in self.runtime.poll(0.05):
                self.latest[change.ref.uid] = change
            got = self.latest.get(uid)
            return got if got is not None and got.phase is phase else None

        return wait_for(seen, timeout=timeout, what=f"pod {uid} reported {phase.value}")


@pytest.fixture
def runtime(k8s_control_plane: ControlPlane) -> Iterator[Any]:
    from muster.runtime.kubernetes.config import KubernetesConfig
    from muster.runtime.kubernetes.runtime import KubernetesRuntime

    with k8s_control_plane.admin_client() as api:
        rt = KubernetesRuntime(KubernetesConfig(leader_election=False), api=api)
        yield rt
        rt.close()


def _k8s_pod(plane: ControlPlane, ns: str, name: str) -> dict[str, Any] | None:
    from kubernetes.client.exceptions import ApiException

    core = plane.core_api()
    try:
        return core.api_client.sanitize_for_serialization(core.read_namespaced_pod(name, ns))
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _bound(plane: ControlPlane, ns: str, name: str) -> dict[str, Any] | None:
    pod = _k8s_pod(plane, ns, name)
    return pod if pod is not None and pod["spec"].get("nodeName") else None


def test_a_gang_becomes_pods_bound_to_the_chosen_nodes(
    runtime: Any, k8s_control_plane: ControlPlane, k8s_namespace: str, k8s_nodes: Nodes
) -> None:
    plane, ns = k8s_control_plane, k8s_namespace
    a, b = k8s_nodes.add(), k8s_nodes.add()
    env = {"MASTER_ADDR": runtime.pod_address(ns, "trainer", "trainer-master-0"), "RANK": "0"}
    master = muster_pod(ns, "trainer-master-0", a, workload="trainer", gpus=2, grace=45, env=env)
    worker = muster_pod(ns, "trainer-worker-0", b, workload="trainer", gpus=2, env={**env, "RANK": "1"})
    assert runtime.start_gang(gang(ns, "trainer", [master, worker])) == []

    made = wait_for(lambda: _bound(plane, ns, "trainer-master-0"), what="the master bound")
    assert made["spec"]["nodeName"] == a
    assert wait_for(lambda: _bound(plane, ns, "trainer-worker-0"))["spec"]["nodeName"] == b
    assert made["spec"]["schedulerName"] == "muster"
    assert made["spec"]["restartPolicy"] == "Never"
    assert made["spec"]["terminationGracePeriodSeconds"] == 45
    assert (made["spec"]["hostname"], made["spec"]["subdomain"]) == ("trainer-master-0", "trainer")
    assert made["metadata"]["labels"] == {
        "muster.dev/job-name": "trainer",
        "muster.dev/replica-type": "master",
        "muster.dev/replica-index": "0",
        "muster.dev/workload": "trainer",
        "app.kubernetes.io/managed-by": "muster",
    }
    assert made["metadata"]["annotations"]["muster.dev/pod-uid"] == master["metadata"]["uid"]
    container = made["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert container["resources"]["requests"] == {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "2"}
    assert {e["name"]: e["value"] for e in container["env"]} == {
        "MASTER_ADDR": "trainer-master-0.trainer",
        "RANK": "0",
    }
    service = plane.core_api().read_namespaced_service("trainer", ns)
    assert service.spec.cluster_ip == "None"
    assert service.spec.selector == {
        "muster.dev/workload": "trainer",
        "app.kubernetes.io/managed-by": "muster",
    }
    assert sorted(o.name for o in service.metadata.owner_references) == [
        "trainer-master-0",
        "trainer-worker-0",
    ]

    reports = Reports(runtime)
    for name in ("trainer-master-0", "trainer-worker-0"):
        plane.set_pod_status(ns, name, "Running")
    running = reports.wait(master["metadata"]["uid"], PodPhase.RUNNING)
    assert running.started_at is not None
    plane.set_pod_status(ns, "trainer-master-0", "Succeeded")
    done = reports.wait(master["metadata"]["uid"], PodPhase.SUCCEEDED)
    assert (done.reason, done.exit_code) == (PodReason.COMPLETED, 0)

    # A finished Pod stays (with its logs) until its Muster pod is gone.
    runtime.release(done.ref)
    runtime.retain_only({master["metadata"]["uid"]})
    assert _k8s_pod(plane, ns, "trainer-master-0") is not None
    runtime.retain_only(set())
    wait_for(lambda: _k8s_pod(plane, ns, "trainer-master-0") is None, what="the finished Pod deleted")


def test_an_oom_killed_container_is_classified(
    runtime: Any, k8s_control_plane: ControlPlane, k8s_namespace: str, k8s_nodes: Nodes
) -> None:
    plane, ns = k8s_control_plane, k8s_namespace
    pod = muster_pod(ns, "big-worker-0", k8s_nodes.add(), workload="big")
    runtime.start_gang(gang(ns, "big", [pod]))
    wait_for(lambda: _bound(plane, ns, "big-worker-0"))
    reports = Reports(runtime)
    plane.set_pod_status(ns, "big-worker-0", "Running")
    reports.wait(pod["metadata"]["uid"], PodPhase.RUNNING)
    plane.set_pod_status(ns, "big-worker-0", "Failed", exit_code=137, reason="OOMKilled")
    failed = reports.wait(pod["metadata"]["uid"], PodPhase.FAILED)
    assert (failed.reason, failed.exit_code) == (PodReason.OOM_KILLED, 137)
    assert failed.containers[0].reason is PodReason.OOM_KILLED
    assert "exit code 137" in failed.message


def test_evicted_and_error_exits_are_classified(
    runtime: Any, k8s_control_plane: ControlPlane, k8s_namespace: str, k8s_nodes: Nodes
) -> None:
    plane, ns = k8s_control_plane, k8s_namespace
    node = k8s_nodes.add()
    pods = [muster_pod(ns, f"w{i}-worker-0", node, workload=f"w{i}") for i in range(2)]
    for i, p in enumerate(pods):
        runtime.start_gang(gang(ns, f"w{i}", [p]))
        wait_for(lambda p=p: _bound(plane, ns, p["metadata"]["name"]))
    reports = Reports(runtime)
    plane.set_pod_status(
        ns,
        "w0-worker-0",
        "Failed",
        exit_code=137,
        pod_reason="Evicted",
        message="The node was low on memory.",
    )
    plane.set_pod_status(ns, "w1-worker-0", "Failed", exit_code=3)
    evicted = reports.wait(pods[0]["metadata"]["uid"], PodPhase.FAILED)
    assert (evicted.reason, evicted.message) == (PodReason.EVICTED, "The node was low on memory.")
    error = reports.wait(pods[1]["metadata"]["uid"], PodPhase.FAILED)
    assert (error.reason, error.exit_code) == (PodReason.ERROR, 3)


def test_a_stop_deletes_the_pod_with_its_grace_period(
    runtime: Any, k8s_control_plane: ControlPlane, k8s_namespace: str, k8s_nodes: Nodes
) -> None:
    plane, ns = k8s_control_plane, k8s_namespace
    pod = muster_pod(ns, "victim-worker-0", k8s_nodes.add(), workload="victim", grace=20)
    runtime.start_gang(gang(ns, "victim", [pod]))
    wait_for(lambda: _bound(plane, ns, "victim-worker-0"))
    reports = Reports(runtime)
    plane.set_pod_status(ns, "victim-worker-0", "Running")
    ref = reports.wait(pod["metadata"]["uid"], PodPhase.RUNNING).ref

    runtime.stop(ref, None, StopReason.PREEMPTED)
    stopping = wait_for(
        lambda: (
            (p := _k8s_pod(plane, ns, "victim-worker-0")) and p["metadata"].get("deletionTimestamp") and p
        ),
        what="the Pod deleted gracefully",
    )
    assert stopping["metadata"]["deletionGracePeriodSeconds"] == 20
    assert runtime.poll(0.2) == []  # still running until the kubelet ends it
    # The kubelet sends SIGTERM, the process exits, the kubelet removes the Pod.
    plane.set_pod_status(ns, "victim-worker-0", "Failed", exit_code=143)
    final = reports.wait(pod["metadata"]["uid"], PodPhase.FAILED)
    assert final.reason is PodReason.PREEMPTED
    assert final.containers[0].reason is PodReason.PREEMPTED


def test_a_node_going_not_ready_fails_its_pods_with_node_lost(
    runtime: Any, k8s_control_plane: ControlPlane, k8s_namespace: str, k8s_nodes: Nodes
) -> None:
    plane, ns = k8s_control_plane, k8s_namespace
    node = k8s_nodes.add()
    pod = muster_pod(ns, "lost-worker-0", node, workload="lost")
    runtime.start_gang(gang(ns, "lost", [pod]))
    wait_for(lambda: _bound(plane, ns, "lost-worker-0"))
    reports = Reports(runtime)
    plane.set_pod_status(ns, "lost-worker-0", "Running")
    reports.wait(pod["metadata"]["uid"], PodPhase.RUNNING)
    plane.set_node_ready(node, False)
    lost = reports.wait(pod["metadata"]["uid"], PodPhase.FAILED)
    assert lost.reason is PodReason.NODE_LOST
    assert node in lost.message
    # Nothing will confirm the end on that node: the Pod is removed at once, freeing its name.
    wait_for(lambda: _k8s_pod(plane, ns, "lost-worker-0") is None, what="the lost Pod deleted")

    def seen() -> Any:
        return next(n for n in runtime.nodes() if n.name == node)

    # The Ready condition and the taint are two writes, so two watch events: the pod is lost on
    # the first, and the runtime's view of the node has the taint once the second arrives.
    wait_for(
        lambda: {t.key for t in seen().taints or ()} == {"node.kubernetes.io/not-ready"}, what="the taint"
    )
    assert seen().conditions[0].status == "False"


def test_a_gang_aimed_at_a_node_that_is_not_ready_creates_nothing(
    runtime: Any, k8s_control_plane: ControlPlane, k8s_namespace: str, k8s_nodes: Nodes
) -> None:
    plane, ns = k8s_control_plane, k8s_namespace
    good, bad = k8s_nodes.add(), k8s_nodes.add()
    plane.set_node_ready(bad, False)
    wait_for(lambda: next(n for n in runtime.nodes() if n.name == bad).conditions[0].status != "True")
    pods = [
        muster_pod(ns, "half-master-0", good, workload="half"),
        muster_pod(ns, "half-worker-0", bad, workload="half"),
    ]
    runtime.start_gang(gang(ns, "half", pods))
    reports = Reports(runtime)
    for p in pods:
        failed = reports.wait(p["metadata"]["uid"], PodPhase.FAILED)
        assert failed.reason is PodReason.GANG_START_FAILED
        assert bad in failed.message
    assert plane.core_api().list_namespaced_pod(ns).items == []


def test_a_gpu_share_cannot_be_asked_of_the_device_plugin(
    runtime: Any, k8s_namespace: str, k8s_nodes: Nodes
) -> None:
    from muster.runtime.base import LaunchError

    pod = muster_pod(k8s_namespace, "share-worker-0", k8s_nodes.add(), workload="share")
    pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "500m"}
    with pytest.raises(
        LaunchError, match=r"spec.containers\[0\].resources.requests\[nvidia.com/gpu\]: a GPU share"
    ):
        runtime.start_gang(gang(k8s_namespace, "share", [pod]))
    assert pod["metadata"]["uid"] not in {s.ref.uid for s in runtime.pods()}


def test_pods_muster_did_not_create_count_on_their_node(
    runtime: Any, k8s_control_plane: ControlPlane, k8s_namespace: str, k8s_nodes: Nodes
) -> None:
    node = k8s_nodes.add(gpus=4)
    core = k8s_control_plane.core_api()
    core.create_namespaced_pod(
        k8s_namespace,
        {
            "metadata": {"name": "someone-else"},
            "spec": {
                "nodeName": node,
                "containers": [
                    {
                        "name": "c",
                        "image": "cuda",
                        "resources": {"limits": {"nvidia.com/gpu": "3"}, "requests": {"cpu": "2"}},
                    }
                ],
            },
        },
    )

    def used() -> dict[str, str] | None:
        info = next(n for n in runtime.nodes() if n.name == node)
        return dict(info.used_by_others) or None

    assert wait_for(used, what="the foreign pod counted") == {"cpu": "2", "nvidia.com/gpu": "3", "pods": "1"}
    k8s_control_plane.set_pod_status(k8s_namespace, "someone-else", "Succeeded")
    wait_for(lambda: used() is None, what="the ended pod no longer counted")


def test_the_namespace_is_created_and_the_priority_class_passed_through(
    runtime: Any, k8s_control_plane: ControlPlane, k8s_nodes: Nodes
) -> None:
    import secrets

    from kubernetes import client

    plane = k8s_control_plane
    ns = f"fresh-{secrets.token_hex(3)}"
    klass = f"urgent-{secrets.token_hex(3)}"
    scheduling = client.SchedulingV1Api(plane.core_api().api_client)
    scheduling.create_priority_class({"metadata": {"name": klass}, "value": 1000})
    probe = {
        "metadata": {"name": "probe"},
        "spec": {"priorityClassName": klass, "containers": [{"name": "c", "image": "x"}]},
    }
    # The Priority admission plugin reads classes from a cache of its own: wait until it has this one.
    wait_for(lambda: plane.core_api().create_namespaced_pod("default", probe, dry_run="All"))
    try:
        node = k8s_nodes.add()
        known = muster_pod(ns, "ranked-worker-0", node, workload="ranked", priorityClassName=klass)
        unknown = muster_pod(ns, "ranked-worker-1", node, workload="ranked", priorityClassName="nope")
        warnings = runtime.start_gang(gang(ns, "ranked", [known, unknown]))
        assert warnings == [
            "priorityClassName 'nope': the cluster has no PriorityClass of that name, so pod "
            "ranked-worker-1 runs without one (create it in the cluster too)"
        ]
        failed: list[PodStatusChange] = []

        def bound_or_failed() -> Any:
            mine = (known["metadata"]["uid"], unknown["metadata"]["uid"])
            failed.extend(c for c in runtime.poll(0.05) if c.phase is PodPhase.FAILED and c.ref.uid in mine)
            return failed or _bound(plane, ns, "ranked-worker-0")

        made = wait_for(bound_or_failed, what="a pod in the new namespace")
        assert not failed, [(c.reason, c.message) for c in failed]
        assert made["spec"]["priorityClassName"] == klass
        assert made["spec"]["priority"] == 1000  # the Priority admission plugin resolved it
        assert made["spec"]["terminationGracePeriodSeconds"] == 30
        other = wait_for(lambda: _bound(plane, ns, "ranked-worker-1"))
        assert "priorityClassName" not in other["spec"]
        assert plane.core_api().read_namespace(ns).status.phase == "Active"
    finally:
        scheduling.delete_priority_class(klass)
        plane.core_api().delete_namespace(ns)
