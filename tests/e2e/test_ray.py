"""End to end on a real Ray cluster (a head and two nodes of four GPUs declared through
resources): ``muster up --runtime ray`` admits, places and runs jobs; Ray runs the processes.

Every test checks that the pods ran on the Ray nodes of the Muster nodes the Workload's
admission names: Muster's scheduler decides every placement, never Ray's."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from muster.sdk.client import Client
from muster.testing import skip_or_fail, wait_for
from muster.testing.ray import LocalRayCluster
from muster.testing.up import MusterUp, run_cli
from tests.e2e.jobs import (
    DDP_SCRIPT,
    PYTHON,
    held_job,
    job_doc,
    live_pods,
    pod_log,
    priority_class,
    progress,
    python_job,
    serve,
    wait_condition,
)

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.timeout(300)]

Obj = dict[str, Any]


@pytest.fixture
def torch_installed() -> None:
    """The DDP script's replicas train with torch (gloo on CPU)."""
    if importlib.util.find_spec("torch") is None:
        skip_or_fail("the DDP job needs torch (pip install -e '.[torch]')")


@contextmanager
def ray_up(
    home: Path, cluster: LocalRayCluster, gang_timeout: float = 60
) -> Iterator[tuple[MusterUp, Client]]:
    """``muster up --runtime ray`` joined to ``cluster``; every job is deleted on the way out."""
    args = ["--runtime", "ray", "--ray-address", cluster.address, "--gang-timeout", str(gang_timeout)]
    with serve(home, args, timeout=90) as (up, client):
        wait_for(lambda: len(ready_nodes(client)) == 3, timeout=30, what="the three live Ray nodes")
        yield up, client


def ready_nodes(client: Client) -> list[Obj]:
    """The Nodes of live Ray nodes (a node an earlier test removed stays listed, NotReady)."""
    return [
        n
        for n in client.list("Node")["items"]
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
    ]


def ray_ids(client: Client) -> dict[str, str]:
    """Muster node name -> Ray node id."""
    return {
        n["metadata"]["name"]: n["metadata"]["labels"]["ray.io/node-id"] for n in client.list("Node")["items"]
    }


def placements(client: Client, workload: str) -> dict[str, str]:
    """Pod set -> the node the admission placed its (first) pod on."""
    wl = client.get("Workload", workload, "default")
    return {a["name"]: a["pods"][0]["node"] for a in wl["status"]["admission"]["podSetAssignments"]}


def placements_or_none(client: Client, workload: str) -> str | None:
    """The node of the admission's first pod; None while the Workload is not admitted."""
    wl = client.get("Workload", workload, "default")
    admission = (wl.get("status") or {}).get("admission")
    return admission["podSetAssignments"][0]["pods"][0]["node"] if admission else None


def pod_nodes(client: Client, workload: str) -> dict[str, str]:
    """``<pod set>-<index>`` -> the node the admission placed that pod on."""
    wl = client.get("Workload", workload, "default")
    return {
        f"{a['name']}-{i}": pod["node"]
        for a in wl["status"]["admission"]["podSetAssignments"]
        for i, pod in enumerate(a["pods"])
    }


def internal_ip(client: Client, node: str) -> str:
    """The node's address in Ray (NodeManagerAddress), as its Node object says."""
    addresses = client.get("Node", node)["status"]["addresses"]
    return next(a["address"] for a in addresses if a["type"] == "InternalIP")


def pod_actors() -> list[str]:
    import ray

    return [
        a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith("pod/")
    ]


def test_a_ddp_job_spans_both_nodes_where_its_admission_placed_it(
    muster_home: Path, ray_cluster, torch_installed
):
    with ray_up(muster_home, ray_cluster) as (up, client):
        nodes = ready_nodes(client)
        assert {n["status"]["runtime"] for n in nodes} == {"ray"}
        assert sorted(n["status"]["capacity"]["nvidia.com/gpu"] for n in nodes) == ["0", "4", "4"]
        # Four GPUs per pod: the two replicas cannot share a node.
        doc = job_doc("ddp", [PYTHON, DDP_SCRIPT], workers=1, master=True, gpus=4, env={"TRAIN_STEPS": "5"})
        client.apply([doc])
        job = wait_condition(client, "TrainingJob", "ddp", "Succeeded", timeout=180)
        assert job["status"]["replicaStatuses"]["Master"]["succeeded"] == 1
        placed = placements(client, "ddp")
        assert placed["master"] != placed["worker"]
        ids = ray_ids(client)
        wl = client.get("Workload", "ddp", "default")
        port = wl["metadata"]["annotations"]["muster.dev/master-port"]
        seen = {e["rank"]: e for e in progress(up.home, "ddp") if e["event"] == "env"}
        master_ip = internal_ip(client, placed["master"])
        for rank, pod_set in ((0, "master"), (1, "worker")):
            env = seen[rank]
            assert env["MUSTER_RAY_NODE_ID"] == ids[placed[pod_set]]  # where the admission said
            assert (env["RANK"], env["WORLD_SIZE"], env["PET_NNODES"]) == (str(rank), "2", "2")
            assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == (master_ip, port)  # the master's node
            assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
            assert env["MUSTER_CHECKPOINT_DIR"] == str(up.home / "checkpoints" / "default" / "ddp")
        assert [e["step"] for e in progress(up.home, "ddp") if e["event"] == "done"] == [5]
        pod = client.get("Pod", "ddp-master-0", "default")
        assert pod["status"]["hostIP"] == master_ip and pod["status"]["reason"] == "Completed"
        # Logs come back from the Ray nodes, through the API.
        logs = run_cli(up.home, "logs", "ddp-worker-0")
        assert logs.returncode == 0, logs.stderr
        assert logs.stdout == pod_log(up.home, "ddp-worker-0")


def test_after_the_last_job_ends_no_gpu_stays_reserved_in_ray(muster_home: Path, ray_cluster):
    """The manager polls the runtime while it has clean-up left, not only while pods run: the
    last gang's placement group is removed once its job ended, so Ray's GPUs are free again
    while Muster is idle."""
    import ray

    def muster_groups() -> list[str]:
        table = ray.util.placement_group_table().values()
        return [p["name"] for p in table if p["state"] == "CREATED" and p["name"].startswith("muster/")]

    with ray_up(muster_home, ray_cluster) as (_, client):
        free_before = ray.available_resources().get("GPU", 0)
        client.apply([python_job("short", "print('done')", gpus=2)])
        wait_condition(client, "TrainingJob", "short", "Succeeded", timeout=90)
        wait_for(lambda: not muster_groups(), timeout=30, what="the last gang's placement group to go")
        wait_for(
            lambda: ray.available_resources().get("GPU", 0) == free_before,
            timeout=30,
            what="Ray's GPUs to be free again",
        )


def test_a_gang_that_cannot_fit_starts_nothing(muster_home: Path, ray_cluster):
    from ray.util.placement_group import placement_group, remove_placement_group

    with ray_up(muster_home, ray_cluster, gang_timeout=3) as (up, client):
        before = set(pod_actors())
        # Twelve GPUs on a cluster of eight: the scheduler admits nothing and says why.
        client.apply([job_doc("huge", [PYTHON, "-c", "pass"], workers=2, master=True, gpus=4)])
        queued = wait_condition(client, "TrainingJob", "huge", "Queued", timeout=60)
        assert queued["status"]["conditions"][-1]["reason"] != "Admitted"
        assert not client.list("Pod")["items"]
        client.delete("TrainingJob", "huge", "default")
        # Work Muster does not see holds one GPU of each node: Muster admits a four-GPU pod,
        # Ray cannot reserve it, nothing runs and the job is requeued with the reason.
        held = [
            placement_group(
                [{"GPU": 1}],
                bundle_label_selector=[{"ray.io/node-id": n["metadata"]["labels"]["ray.io/node-id"]}],
            )
            for n in ready_nodes(client)
            if n["status"]["gpus"]
        ]
        try:
            assert all(h.wait(30) for h in held)
            marker = up.home / "ran"
            client.apply([python_job("squeezed", f"open({str(marker)!r}, 'w').close()", gpus=4)])
            queued = wait_condition(
                client, "TrainingJob", "squeezed", "Queued", reason="GangStartFailed", timeout=60
            )
            message = queued["status"]["conditions"][-1]["message"]
            assert (
                "Ray did not reserve the gang within 3s" in message and "squeezed-worker-0 needs" in message
            )
            assert not marker.exists() and set(pod_actors()) == before
            why = run_cli(up.home, "why", "trainingjob/squeezed")
            assert "GangStartFailed" in why.stdout, why.stdout + why.stderr
        finally:
            for h in held:
                remove_placement_group(h)
        # Room again: after the requeue backoff (10 s) it is admitted, placed and runs.
        done = wait_condition(client, "TrainingJob", "squeezed", "Succeeded", timeout=90)
        assert marker.exists() and done["status"].get("restartCount", 0) == 0


def test_preemption_checkpoints_requeues_and_resumes(
    muster_home: Path, ray_cluster, tmp_path: Path, torch_installed
):
    release, urgent_done = tmp_path / "release", tmp_path / "urgent-done"
    with ray_up(muster_home, ray_cluster) as (up, client):
        low = job_doc(
            "low",
            [PYTHON, DDP_SCRIPT],
            workers=2,
            gpus=4,
            env={"TRAIN_STEPS": "6", "TRAIN_HOLD_AT": "3", "TRAIN_RELEASE_FILE": str(release)},
            run_policy={"backoffLimit": 0},
        )
        client.apply([priority_class("urgent", 100), low])
        wait_condition(client, "TrainingJob", "low", "Running", timeout=120)
        first = pod_nodes(client, "low")
        wait_for(
            lambda: any(e["event"] == "step" and e["step"] >= 3 for e in progress(up.home, "low")),
            timeout=120,
            what="the victim to reach step 3",
        )
        urgent = held_job(
            "urgent",
            urgent_done,
            gpus=4,
            priorityClassName="urgent",
        )
        client.apply([urgent])
        preempted = wait_condition(client, "TrainingJob", "low", "Queued", timeout=90)
        assert preempted["status"]["preemptions"][0]["preemptor"] == "default/urgent"
        assert [e["step"] for e in progress(up.home, "low") if e["event"] == "checkpoint"] == [3]
        wait_condition(client, "TrainingJob", "urgent", "Running", timeout=90)
        assert "pod/default/urgent-worker-0/" in " ".join(pod_actors())
        release.touch()
        urgent_done.touch()
        wait_condition(client, "TrainingJob", "urgent", "Succeeded", timeout=60)
        done = wait_condition(client, "TrainingJob", "low", "Succeeded", timeout=180)
        assert done["status"].get("restartCount", 0) == 0
        events = progress(up.home, "low")
        assert [e["step"] for e in events if e["event"] == "resume"] == [3]
        assert [e["step"] for e in events if e["event"] == "step"] == [1, 2, 3, 4, 5, 6]
        # Each run's replicas ran where that run's admission placed them.
        again, ids = pod_nodes(client, "low"), ray_ids(client)
        envs = [e for e in events if e["event"] == "env"]
        assert len(envs) == 4
        for run, placed in ((envs[:2], first), (envs[2:], again)):
            for e in run:
                assert e["MUSTER_RAY_NODE_ID"] == ids[placed[f"worker-{e['MUSTER_REPLICA_INDEX']}"]]


def test_removing_a_node_restarts_the_gang_elsewhere(muster_home: Path, ray_cluster):
    """A gang across both GPU nodes loses one: every member fails or is stopped (NodeLost), the
    job waits (its gang no longer fits one node), and once a node joins it runs there whole."""
    script = "import os, time\nprint(os.environ['MUSTER_RAY_NODE_ID'], flush=True)\ntime.sleep(600)\n"
    pods = ("survivor-worker-0", "survivor-worker-1")

    def ran_where_admitted() -> bool:
        placed, ids = pod_nodes(client, "survivor"), ray_ids(client)
        return all(pod_log(up.home, f"survivor-{p}").strip() == ids[n] for p, n in placed.items())

    with ray_up(muster_home, ray_cluster) as (up, client):
        # Three GPUs a replica on nodes of four: the two replicas span both GPU nodes.
        client.apply([python_job("survivor", script, workers=2, gpus=3, run_policy={"backoffLimit": 0})])
        wait_condition(client, "TrainingJob", "survivor", "Running", timeout=120)
        first = pod_nodes(client, "survivor")
        assert len(set(first.values())) == 2
        wait_for(ran_where_admitted, timeout=30, what="each pod to report its Ray node")
        lost = first["worker-0"]
        ids = ray_ids(client)
        handle = next(w for w in ray_cluster.workers if w.node_id == ids[lost])
        try:
            ray_cluster.remove_node(handle)
            # The lost member fails NodeLost, the other is stopped, the Workload is requeued
            # and waits: one GPU node is left, too small for the gang.
            wait_for(
                lambda: placements_or_none(client, "survivor") is None and not live_pods(client),
                timeout=90,
                what="the gang to be stopped and requeued",
            )
            node = client.get("Node", lost)
            ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
            assert (ready["status"], ready["reason"]) == ("False", "NodeLost")
            reasons = [e["reason"] for e in client.list("Event", "default")["items"]]
            assert "NodeLost" in reasons
            joined = ray_cluster.add_gpu_node()
            job = wait_condition(client, "TrainingJob", "survivor", "Running", timeout=120)
            again = pod_nodes(client, "survivor")
            assert lost not in again.values()
            assert ray_ids(client)[again["worker-0"]] in (joined.node_id, ids[first["worker-1"]])
            wait_for(ran_where_admitted, timeout=60, what="each restarted pod to report its Ray node")
            assert job["status"].get("restartCount", 0) == 0  # not the job's failure
            assert {p["metadata"]["name"] for p in live_pods(client)} == set(pods)
        finally:
            if len(ray_cluster.workers) < ray_cluster.gpu_nodes:
                ray_cluster.add_gpu_node()
            ray_cluster.cluster.wait_for_nodes()
