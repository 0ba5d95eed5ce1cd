"""TensorFlow and MPI TrainingJobs (Kubeflow's TFJob and MPIJob): the replicas' environment
(TF_CONFIG, the MPI hostfile), the MPI Launcher after its Workers, and each framework's
success rule, through the manager on a puppet runtime."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from muster.controllers.manager import Manager, ManagerConfig
from muster.controllers.trainingjob.frameworks import hostfile_text, mpi_hosts, mpi_launcher_env, tf_config
from muster.controllers.trainingjob.pods import GangShape, training_env
from muster.store import Store
from muster.testing.fake_gang_runtime import GangFakeRuntime
from tests.controllers.conftest import Harness

Obj = dict[str, Any]


def _replica(count: int, restart: str = "Never", gpus: int = 0) -> Obj:
    container: Obj = {"name": "main", "command": ["python", "train.py"]}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {"replicas": count, "restartPolicy": restart, "template": {"spec": {"containers": [container]}}}


def tfjob(name: str, **replicas: int) -> Obj:
    spec = {t: _replica(n) for t, n in replicas.items()}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {"tfReplicaSpecs": spec},
    }


def mpijob(name: str, workers: int, slots: int = 1) -> Obj:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "slotsPerWorker": slots,
            "mpiReplicaSpecs": {"Launcher": _replica(1), "Worker": _replica(workers, gpus=1)},
        },
    }


# -- the environment, built directly --------------------------------------------------------


def test_tf_config_of_one_chief_two_workers_and_a_ps_is_exactly_tensorflows_format():
    hosts = {"Chief": ("10.0.0.1",), "Worker": ("10.0.0.2", "10.0.0.3"), "PS": ("10.0.0.4",)}
    ports = {"Chief": (2222,), "Worker": (2223, 2224), "PS": (2225,)}
    shape = GangShape(0, 4, "10.0.0.1", 29500, hosts, ports)
    job = {"metadata": {"name": "tf", "namespace": "ml"}, "spec": {"framework": "TensorFlow"}}
    env = training_env(job, shape, "Worker", 1, 0, Path("/ckpt"))
    assert env["TF_CONFIG"] == (
        '{"cluster":{"chief":["10.0.0.1:2222"],"ps":["10.0.0.4:2225"],'
        '"worker":["10.0.0.2:2223","10.0.0.3:2224"]},'
        '"task":{"type":"worker","index":1},"environment":"cloud"}'
    )
    assert {k: env[k] for k in ("MUSTER_REPLICA_TYPE", "MUSTER_REPLICA_INDEX", "PYTHONUNBUFFERED")} == {
        "MUSTER_REPLICA_TYPE": "Worker",
        "MUSTER_REPLICA_INDEX": "1",
        "PYTHONUNBUFFERED": "1",
    }
    assert "MASTER_ADDR" not in env and "RANK" not in env  # torchrun's variables are PyTorch's
    chief = json.loads(training_env(job, shape, "Chief", 0, 0, Path("/ckpt"))["TF_CONFIG"])
    assert chief["task"] == {"type": "chief", "index": 0}
    ps = json.loads(training_env(job, shape, "PS", 0, 0, Path("/ckpt"))["TF_CONFIG"])
    assert ps["cluster"] == chief["cluster"] and ps["task"] == {"type": "ps", "index": 0}


def test_the_evaluator_is_not_part_of_the_cluster_but_knows_its_task():
    addresses = {"Chief": ["h0:1"], "Worker": ["h1:2"], "Evaluator": ["h2:3"]}
    config = json.loads(tf_config(addresses, "Evaluator", 0))
    assert config["cluster"] == {"chief": ["h0:1"], "worker": ["h1:2"]}
    assert config["task"] == {"type": "evaluator", "index": 0}


def test_hostfile_sums_the_slots_of_workers_sharing_a_host():
    hosts = mpi_hosts(["node-a", "node-b", "node-a"], 2)
    assert hosts == [("node-a", 4), ("node-b", 2)]
    assert hostfile_text(hosts) == "node-a slots=4\nnode-b slots=2\n"
    env = mpi_launcher_env(Path("/h/hostfile"), hosts)
    assert env == {
        "MUSTER_MPI_HOSTFILE": "/h/hostfile",
        "OMPI_MCA_orte_default_hostfile": "/h/hostfile",
        "PRTE_MCA_prte_default_hostfile": "/h/hostfile",
        "I_MPI_HYDRA_HOST_FILE": "/h/hostfile",
        "MUSTER_MPI_HOSTS": "node-a:4,node-b:2",
        "MUSTER_MPI_NP": "6",
    }


# -- through the controller ----------------------------------------------------------------


def test_tfjob_pods_share_one_cluster_with_a_port_each_and_the_chief_decides(harness: Harness):
    h = harness
    h.apply(tfjob("tf", Chief=1, Worker=2, PS=1))
    h.settle(lambda: len(h.rt.pods_by_uid) == 4)
    configs = {
        name: json.loads(h.rt.find(f"default/{name}").env["TF_CONFIG"])
        for name in ("tf-chief-0", "tf-worker-0", "tf-worker-1", "tf-ps-0")
    }
    cluster = configs["tf-chief-0"]["cluster"]
    assert all(c["cluster"] == cluster for c in configs.values())
    assert sorted(cluster) == ["chief", "ps", "worker"] and len(cluster["worker"]) == 2
    addresses = [a for addrs in cluster.values() for a in addrs]
    assert len(set(addresses)) == 4 and all(a.startswith("127.0.0.1:") for a in addresses)
    assert configs["tf-worker-1"]["task"] == {"type": "worker", "index": 1}
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "tf", "Running"))
    h.rt.exit("default/tf-worker-0", 0)
    h.rt.exit("default/tf-worker-1", 0)
    h.settle()
    assert not h.has("TrainingJob", "tf", "Succeeded")  # the chief decides
    h.rt.exit("default/tf-chief-0", 0)
    h.settle(lambda: h.has("TrainingJob", "tf", "Succeeded"))
    # The parameter server never ends by itself: stopped (cleanPodPolicy Running).
    h.settle(lambda: not h.rt.running())
    assert [ref for ref, _ in h.rt.stops] == ["default/tf-ps-0"]


def test_tfjob_without_chief_succeeds_with_worker_0_unless_all_workers_are_asked(harness: Harness):
    h = harness
    every = tfjob("every", Worker=2)
    every["spec"]["successPolicy"] = "AllWorkers"
    h.apply(tfjob("first", Worker=2), every)
    h.settle(lambda: len(h.rt.pods_by_uid) == 4)
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "first", "Running") and h.has("TrainingJob", "every", "Running"))
    h.rt.exit("default/first-worker-1", 0)
    h.rt.exit("default/every-worker-0", 0)
    h.settle()
    assert not h.has("TrainingJob", "first", "Succeeded") and not h.has("TrainingJob", "every", "Succeeded")
    h.rt.exit("default/first-worker-0", 0)
    h.settle(lambda: h.has("TrainingJob", "first", "Succeeded"))
    assert not h.has("TrainingJob", "every", "Succeeded")
    h.rt.exit("default/every-worker-1", 0)
    h.settle(lambda: h.has("TrainingJob", "every", "Succeeded"))


def test_a_failed_ps_fails_the_job_by_its_own_restart_policy(harness: Harness):
    h = harness
    h.apply(tfjob("tf", Chief=1, PS=1))
    h.settle(lambda: len(h.rt.pods_by_uid) == 2)
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "tf", "Running"))
    h.rt.exit("default/tf-ps-0", 1)
    h.settle(lambda: h.has("TrainingJob", "tf", "Failed", "ReplicaFailed"))
    assert "tf-ps-0 failed" in h.condition("TrainingJob", "tf", "Failed")["message"]


def test_mpi_launcher_comes_after_its_workers_with_the_hostfile_and_decides(harness: Harness):
    h = harness
    h.apply(mpijob("mpi", workers=2, slots=2))
    h.settle(lambda: len(h.rt.pods_by_uid) == 2)
    h.settle()
    assert sorted(h.pods()) == ["mpi-worker-0", "mpi-worker-1"]  # no launcher before they run
    h.rt.run_all()
    h.settle(lambda: "default/mpi-launcher-0" in h.rt.started)
    env = h.rt.find("default/mpi-launcher-0").env
    hostfile = Path(env["MUSTER_MPI_HOSTFILE"])
    assert hostfile == h.home / "mpi" / "default" / "mpi" / "hostfile"
    assert hostfile.read_text() == "127.0.0.1 slots=4\n"  # both workers on this node
    assert env["OMPI_MCA_orte_default_hostfile"] == str(hostfile) and env["MUSTER_MPI_NP"] == "4"
    assert "MUSTER_MPI_HOSTFILE" not in h.rt.find("default/mpi-worker-0").env
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "mpi", "Running"))
    h.rt.exit("default/mpi-launcher-0", 0)
    h.settle(lambda: h.has("TrainingJob", "mpi", "Succeeded"))
    h.settle(lambda: not h.rt.running())  # the workers are stopped


def test_on_a_gang_runtime_the_launcher_is_created_with_its_workers(sqlite_store: Store, tmp_path: Path):
    h = Harness(sqlite_store, tmp_path / "home")
    h.rt = GangFakeRuntime(gpus=4)
    h.manager.stop()
    h.manager = Manager(
        sqlite_store,
        ManagerConfig(home=h.home, clock=h.clock, resync_seconds=0, heartbeat_seconds=3600),
        runtime=h.rt,
    )
    h.manager.open()
    try:
        h.apply(mpijob("mpi", workers=2))
        h.settle(lambda: len(h.pods()) == 3)
        assert "MUSTER_MPI_HOSTFILE" in str(h.pods()["mpi-launcher-0"]["spec"]["containers"][0]["env"])
    finally:
        h.close()


def test_a_plain_pod_and_a_batch_job_run_as_one_pod_workloads_through_the_default_queue(harness: Harness):
    h = harness
    container = {"name": "main", "command": ["python", "-c", "print(1)"]}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "solo"},
        "spec": {"containers": [container]},
    }
    batch = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "batch"},
        "spec": {"template": {"spec": {"containers": [container], "restartPolicy": "Never"}}},
    }
    h.apply(pod, batch)
    h.settle(lambda: len(h.rt.pods_by_uid) == 2)
    for name in ("solo", "batch"):
        assert h.get("Workload", name)["spec"]["queueName"] == "default"
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "solo", "Running") and h.has("TrainingJob", "batch", "Running"))
    h.rt.exit("default/solo-worker-0", 0)
    h.rt.exit("default/batch-worker-0", 0)
    h.settle(lambda: h.has("TrainingJob", "solo", "Succeeded") and h.has("TrainingJob", "batch", "Succeeded"))
