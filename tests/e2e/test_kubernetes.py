"""End to end on a real kube-apiserver: Muster's manager (controllers, scheduler loop, the
Kubernetes runtime) as the batch scheduler of a cluster, authenticated as a user that holds
nothing but deploy/kubernetes/clusterrole.yaml. The tests play the kubelet: they register
Nodes and patch Pod status (Running, Succeeded, Failed with exit codes and reasons)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from muster.api import registry
from muster.api.lifecycle import JobPhase, job_phase
from muster.controllers.manager import Manager, ManagerConfig
from muster.controllers.scheduling.defaults import create_defaults
from muster.store import Store, open_store
from muster.store.base import NotFound
from muster.testing import wait_for
from muster.testing.factories import local_queue
from muster.testing.kubernetes import MUSTER, ControlPlane, NodeRegistry
from tests.e2e.jobs import job_doc

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow]

Obj = dict[str, Any]
CLUSTER_ROLE = Path(__file__).parents[2] / "deploy" / "kubernetes" / "clusterrole.yaml"


@pytest.fixture(scope="module")
def muster_user(k8s_control_plane: ControlPlane) -> Iterator[Path]:
    """The kubeconfig of the user ``muster``, bound to the shipped ClusterRole and nothing else."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    rbac = client.RbacAuthorizationV1Api(k8s_control_plane.core_api().api_client)
    role = yaml.safe_load(CLUSTER_ROLE.read_text())
    binding = {
        "metadata": {"name": "muster-e2e"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "muster"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": MUSTER}],
    }
    with k8s_control_plane.client(MUSTER) as api, pytest.raises(ApiException) as refused:
        client.CoreV1Api(api).list_node()
    assert refused.value.status == 403  # alone, the user may do nothing: the role is what grants
    rbac.create_cluster_role(role)
    rbac.create_cluster_role_binding(binding)
    try:
        yield k8s_control_plane.kubeconfig(MUSTER)
    finally:
        rbac.delete_cluster_role_binding("muster-e2e")
        rbac.delete_cluster_role("muster")


class Muster:
    """One Muster server's manager on ``store``, campaigning for the Lease in ``lease_ns``."""

    def __init__(self, store: Store, home: Path, kubeconfig: Path, lease_ns: str, name: str = "a") -> None:
        from muster.runtime.kubernetes.config import KubernetesConfig

        cluster = KubernetesConfig(
            kubeconfig=kubeconfig,
            lease_namespace=lease_ns,
            identity=f"muster-{name}",
            lease_seconds=3,
            renew_deadline_seconds=2,
            retry_seconds=0.25,
        )
        config = ManagerConfig(
            runtime="kubernetes", kubernetes=cluster, home=home / name, resync_seconds=2, heartbeat_seconds=5
        )
        self.manager = Manager(store, config)
        self.manager.start()

    def stop(self) -> None:
        self.manager.stop()


class Cluster:
    """The test's namespace (in Muster and in the cluster), its store and its servers."""

    def __init__(self, plane: ControlPlane, ns: str, store: Store, home: Path, kubeconfig: Path) -> None:
        self.plane, self.ns, self.store, self.home, self.kubeconfig = plane, ns, store, home, kubeconfig
        self.servers: list[Muster] = []

    def start(self, name: str = "a") -> Muster:
        server = Muster(self.store, self.home, self.kubeconfig, self.ns, name)
        self.servers.append(server)
        return server

    def apply(self, *docs: Obj) -> None:
        objs = [registry.validate(d).obj for d in docs]
        self.store.apply([o for o in objs if o is not None])

    def get(self, kind: str, name: str) -> Obj | None:
        try:
            return self.store.get(kind, name, self.ns)
        except NotFound:
            return None

    def job_phase(self, name: str) -> JobPhase | None:
        job = self.get("TrainingJob", name)
        return job_phase(job) if job else None

    def wait_phase(self, name: str, phase: JobPhase, timeout: float = 30) -> Obj:
        wait_for(lambda: self.job_phase(name) is phase, timeout=timeout, what=f"job {name} {phase.value}")
        job = self.get("TrainingJob", name)
        assert job is not None
        return job

    def k8s_pod(self, name: str) -> Obj | None:
        from kubernetes.client.exceptions import ApiException

        core = self.plane.core_api()
        try:
            return core.api_client.sanitize_for_serialization(core.read_namespaced_pod(name, self.ns))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def bound(self, name: str, timeout: float = 30, off: str | None = None) -> Obj:
        """Wait for the pod to be bound (to a node other than `off`, where given: the old
        incarnation stays bound there until Muster has seen the node go)."""

        def found() -> Obj | None:
            pod = self.k8s_pod(name)
            node = pod["spec"].get("nodeName") if pod else None
            return pod if node and node != off and not pod["metadata"].get("deletionTimestamp") else None

        try:
            return wait_for(found, timeout=timeout, what=f"pod {name} bound")
        except TimeoutError:
            raise AssertionError(f"pod {name} not bound; Muster's view:\n{self.describe()}") from None

    def describe(self) -> str:
        lines = []
        for kind in ("Node", "Workload", "Pod", "Event"):
            for obj in self.store.list(kind).items:
                meta, status = obj["metadata"], obj.get("status") or {}
                if kind == "Event":
                    lines.append(f"Event {obj.get('reason')}: {obj.get('message')}")
                    continue
                conds = [
                    (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
                    for c in status.get("conditions") or []
                ]
                lines.append(
                    f"{kind} {meta.get('namespace')}/{meta['name']} phase={status.get('phase')} {conds}"
                )
        return "\n".join(lines)

    def k8s_pods(self) -> list[str]:
        return sorted(p.metadata.name for p in self.plane.core_api().list_namespaced_pod(self.ns).items)

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


@pytest.fixture
def cluster(
    k8s_control_plane: ControlPlane, k8s_namespace: str, muster_user: Path, tmp_path: Path
) -> Iterator[Cluster]:
    store = open_store(f"sqlite:///{tmp_path / 'muster.db'}")
    create_defaults(store)
    c = Cluster(k8s_control_plane, k8s_namespace, store, tmp_path, muster_user)
    c.apply(local_queue("default", namespace=k8s_namespace))
    try:
        yield c
    finally:
        c.stop()
        store.close()


def job(
    name: str,
    ns: str,
    *,
    replicas: int = 2,
    gpus: int = 2,
    grace: int | None = None,
    priority: str | None = None,
    restart: str = "OnFailure",
    backoff: int = 3,
) -> Obj:
    extra = {"priorityClassName": priority} if priority else {}
    doc = job_doc(
        name,
        ["python3", "train.py"],
        workers=replicas,
        gpus=gpus,
        restart_policy=restart,
        run_policy={"backoffLimit": backoff},
        namespace=ns,
        queueName="default",
        **extra,
    )
    pod_spec = doc["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]
    pod_spec["containers"][0]["image"] = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
    if grace is not None:
        pod_spec["terminationGracePeriodSeconds"] = grace
    return doc


def _env(pod: Obj) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env") or []}


# -- the tests ---------------------------------------------------------------------------------


def test_a_two_replica_job_runs_as_bound_pods_and_succeeds(cluster: Cluster, k8s_nodes: NodeRegistry) -> None:
    nodes = {k8s_nodes.add(gpus=2), k8s_nodes.add(gpus=2)}
    cluster.start()
    cluster.apply(job("train", cluster.ns))

    pods = [cluster.bound(f"train-worker-{i}") for i in range(2)]
    chosen = {p["metadata"]["name"]: cluster.get("Pod", p["metadata"]["name"]) for p in pods}
    for pod in pods:
        name = pod["metadata"]["name"]
        muster_pod = chosen[name]
        assert muster_pod is not None
        assert pod["spec"]["nodeName"] == muster_pod["spec"]["nodeName"]  # where Muster chose
        assert pod["spec"]["schedulerName"] == "muster"
        labels = pod["metadata"]["labels"]
        assert labels["muster.dev/job-name"] == "train"
        assert labels["muster.dev/replica-type"] == "worker"
        assert labels["muster.dev/replica-index"] == name.rsplit("-", 1)[1]
        workload = labels["muster.dev/workload"]
        assert workload == muster_pod["metadata"]["labels"]["muster.dev/workload"]
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        assert limits["nvidia.com/gpu"] == "2"
        env = _env(pod)
        assert env["MASTER_ADDR"] == f"train-worker-0.{workload}"
        assert (env["WORLD_SIZE"], env["RANK"]) == ("2", name.rsplit("-", 1)[1])
        assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == (name, workload)
    assert {p["spec"]["nodeName"] for p in pods} == nodes  # 2 GPUs each: one pod per node
    service = cluster.plane.core_api().read_namespaced_service(workload, cluster.ns)
    assert service.spec.cluster_ip == "None"
    assert service.spec.selector["muster.dev/workload"] == workload
    # One gang, bound as one: the Service is owned by both Pods.
    assert sorted(o.name for o in service.metadata.owner_references) == ["train-worker-0", "train-worker-1"]

    for pod in pods:
        cluster.plane.set_pod_status(cluster.ns, pod["metadata"]["name"], "Running")
    cluster.wait_phase("train", JobPhase.RUNNING)
    for pod in pods:
        cluster.plane.set_pod_status(cluster.ns, pod["metadata"]["name"], "Succeeded")
    cluster.wait_phase("train", JobPhase.SUCCEEDED)


def test_a_gang_that_cannot_fit_creates_no_pod(cluster: Cluster, k8s_nodes: NodeRegistry) -> None:
    k8s_nodes.add(gpus=2)
    k8s_nodes.add(gpus=2)
    cluster.start()
    cluster.apply(job("big", cluster.ns, replicas=2, gpus=4))  # no node has 4 GPUs
    wait_for(
        lambda: (cluster.get("Workload", "big") or {}).get("status", {}).get("conditions"),
        what="the scheduler looked at it",
    )
    assert cluster.job_phase("big") is JobPhase.QUEUED
    assert cluster.k8s_pods() == []


def test_preemption_deletes_the_victims_pods_with_their_grace_and_requeues_it(
    cluster: Cluster, k8s_nodes: NodeRegistry
) -> None:
    high = {
        "apiVersion": "muster.dev/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 100,
    }
    cluster.apply(high)
    k8s_nodes.add(gpus=4)
    cluster.start()
    cluster.apply(job("victim", cluster.ns, replicas=1, gpus=4, grace=20))
    cluster.bound("victim-worker-0")
    cluster.plane.set_pod_status(cluster.ns, "victim-worker-0", "Running")
    cluster.wait_phase("victim", JobPhase.RUNNING)

    cluster.apply(job("urgent", cluster.ns, replicas=1, gpus=4, priority="high"))
    deleting = wait_for(
        lambda: (p := cluster.k8s_pod("victim-worker-0")) and p["metadata"].get("deletionTimestamp") and p,
        what="the victim's pod deleted",
    )
    assert deleting["metadata"]["deletionGracePeriodSeconds"] == 20
    assert cluster.k8s_pod("urgent-worker-0") is None  # the GPUs are not free yet
    # The kubelet: SIGTERM, the trainer checkpoints and exits 143.
    cluster.plane.set_pod_status(cluster.ns, "victim-worker-0", "Failed", exit_code=143)
    urgent = cluster.bound("urgent-worker-0")
    assert urgent["spec"]["nodeName"] == deleting["spec"]["nodeName"]
    victim = cluster.wait_phase("victim", JobPhase.QUEUED)
    assert [p["preemptor"] for p in victim["status"]["preemptions"]] == [f"{cluster.ns}/urgent"]


def test_an_oom_killed_pod_is_classified(cluster: Cluster, k8s_nodes: NodeRegistry) -> None:
    k8s_nodes.add(gpus=1)
    cluster.start()
    cluster.apply(job("hungry", cluster.ns, replicas=1, gpus=1, restart="Never", backoff=0))
    cluster.bound("hungry-worker-0")
    cluster.plane.set_pod_status(cluster.ns, "hungry-worker-0", "Running")
    cluster.plane.set_pod_status(cluster.ns, "hungry-worker-0", "Failed", exit_code=137, reason="OOMKilled")
    cluster.wait_phase("hungry", JobPhase.FAILED)
    pod = cluster.get("Pod", "hungry-worker-0")
    assert pod is not None
    assert pod["status"]["reason"] == "OOMKilled"
    assert pod["status"]["containerStatuses"][0]["exitCode"] == 137


def test_a_lost_node_fails_its_pods_and_the_gang_restarts_elsewhere(
    cluster: Cluster, k8s_nodes: NodeRegistry
) -> None:
    first = k8s_nodes.add(gpus=2)
    cluster.start()
    cluster.apply(job("moving", cluster.ns, replicas=1, gpus=2))
    assert cluster.bound("moving-worker-0")["spec"]["nodeName"] == first
    cluster.plane.set_pod_status(cluster.ns, "moving-worker-0", "Running")
    cluster.wait_phase("moving", JobPhase.RUNNING)
    second = k8s_nodes.add(gpus=2)

    cluster.plane.set_node_ready(first, False)
    assert cluster.bound("moving-worker-0", off=first)["spec"]["nodeName"] == second
    events = [e for e in cluster.store.list("Event", cluster.ns).items if e.get("reason") == "NodeLost"]
    assert events, "no NodeLost event"


def test_capacity_held_by_foreign_pods_is_respected_and_why_says_so(
    cluster: Cluster, k8s_nodes: NodeRegistry
) -> None:
    from muster.controllers.insight.explain import explain
    from muster.controllers.insight.explain.gather import gather
    from muster.server.views import StoreSource

    node = k8s_nodes.add(gpus=4)
    core = cluster.plane.core_api()
    core.create_namespaced_pod(
        cluster.ns,
        {
            "metadata": {"name": "kube-scheduled"},
            "spec": {
                "nodeName": node,
                "containers": [
                    {"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "3"}}}
                ],
            },
        },
    )
    cluster.plane.set_pod_status(cluster.ns, "kube-scheduled", "Running")
    cluster.start()
    wait_for(
        lambda: (
            ((cluster.store.get("Node", node, None).get("status") or {}).get("usedByOthers") or {}).get(
                "nvidia.com/gpu"
            )
            == "3"
        ),
        what="the foreign pod's GPUs on the Node",
    )
    cluster.apply(job("squeezed", cluster.ns, replicas=1, gpus=2))
    workload = wait_for(
        lambda: (wl := cluster.get("Workload", "squeezed")) and wl.get("status", {}).get("conditions") and wl,
        what="the scheduler looked at it",
    )
    assert cluster.k8s_pods() == ["kube-scheduled"]

    said = explain(workload, gather(StoreSource(cluster.store), workload))
    verdicts = {v.node: v for v in said.nodes}
    assert (verdicts[node].fits, verdicts[node].reason) == (False, "FreeGPUs")
    assert verdicts[node].message == (
        "1 of 4 GPUs free, a pod needs 2; pods Muster did not create (kube-scheduler's, daemonsets) "
        "hold nvidia.com/gpu 3"
    )

    core.delete_namespaced_pod("kube-scheduled", cluster.ns, grace_period_seconds=0)
    cluster.bound("squeezed-worker-0")


def test_the_cluster_role_grants_nothing_more(k8s_control_plane: ControlPlane, muster_user: Path) -> None:
    """What the role does not name stays refused (the fixture saw the user hold nothing before)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    with k8s_control_plane.client(MUSTER) as api:
        core = client.CoreV1Api(api)
        assert core.list_node(limit=1) is not None
        for call in (core.list_secret_for_all_namespaces, lambda: core.delete_node("any")):
            with pytest.raises(ApiException) as refused:
                call()
            assert refused.value.status == 403


def test_a_second_server_does_not_bind_while_the_first_leads_and_takes_over(
    cluster: Cluster, k8s_nodes: NodeRegistry
) -> None:
    k8s_nodes.add(gpus=2)
    k8s_nodes.add(gpus=2)
    first = cluster.start("a")
    wait_for(lambda: first.manager.leading, what="the first server leads")
    second = cluster.start("b")
    cluster.apply(job("one", cluster.ns, replicas=1, gpus=2))
    cluster.bound("one-worker-0")
    assert not second.manager.leading
    assert second.manager.executor.active == 0  # it started nothing

    first.stop()  # releases the Lease
    wait_for(lambda: second.manager.leading, timeout=15, what="the second server leads")
    cluster.apply(job("two", cluster.ns, replicas=1, gpus=2))
    cluster.bound("two-worker-0")
    # It adopted the first server's pod: its end is seen and the job succeeds.
    cluster.plane.set_pod_status(cluster.ns, "one-worker-0", "Running")
    cluster.plane.set_pod_status(cluster.ns, "one-worker-0", "Succeeded")
    cluster.wait_phase("one", JobPhase.SUCCEEDED)


def test_muster_up_runs_on_the_cluster_of_its_kubeconfig(
    k8s_control_plane: ControlPlane, k8s_nodes: NodeRegistry, muster_user: Path, muster_home: Path
) -> None:
    from muster.sdk.client import Client
    from muster.testing.up import MusterUp

    node = k8s_nodes.add(gpus=8)
    args = ["--runtime", "kubernetes", "--kubeconfig", str(muster_user), "--context", "muster"]
    with MusterUp(muster_home, extra_args=args) as up, Client(up.url, up.token) as client:
        registered = wait_for(
            lambda: next(
                (
                    n
                    for n in client.list("Node")["items"]
                    if n["metadata"]["name"] == node and n.get("status", {}).get("allocatable")
                ),
                None,
            ),
            what="the cluster's node registered with its status",
        )
        assert registered["status"]["runtime"] == "kubernetes"
        assert registered["status"]["allocatable"]["nvidia.com/gpu"] == "8"
