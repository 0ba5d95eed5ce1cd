"""The environment contract of DESIGN §7, and the pods and Workload a job turns into."""

from __future__ import annotations

from pathlib import Path

from muster.api import registry
from muster.controllers.trainingjob.pods import GangShape, build_pod, training_env, workload_for
from tests.controllers.conftest import job

CKPT = Path("/home/u/.muster/checkpoints/default/train")


def stored(doc: dict) -> dict:
    obj = registry.validate(doc).obj
    assert obj is not None
    obj["metadata"]["uid"] = "uid-1"
    return obj


def test_master_and_workers_get_torchrun_variables():
    j = stored(job("train", workers=2, master=True, nprocPerNode=2))
    shape = GangShape(masters=1, workers=2, master_addr="10.0.0.5", master_port=29500)
    master = training_env(j, shape, "Master", 0, 0, CKPT)
    worker1 = training_env(j, shape, "Worker", 1, 3, CKPT)
    assert master == {
        "PYTHONUNBUFFERED": "1",
        "MASTER_ADDR": "10.0.0.5",
        "MASTER_PORT": "29500",
        "WORLD_SIZE": "6",  # 3 pods x nprocPerNode 2
        "RANK": "0",
        "PET_MASTER_ADDR": "10.0.0.5",
        "PET_MASTER_PORT": "29500",
        "PET_NNODES": "3",
        "PET_NODE_RANK": "0",
        "PET_NPROC_PER_NODE": "2",
        "MUSTER_JOB_NAME": "train",
        "MUSTER_NAMESPACE": "default",
        "MUSTER_REPLICA_TYPE": "Master",
        "MUSTER_REPLICA_INDEX": "0",
        "MUSTER_RESTART_COUNT": "0",
        "MUSTER_CHECKPOINT_DIR": str(CKPT),
    }
    assert (worker1["RANK"], worker1["PET_NODE_RANK"], worker1["MUSTER_REPLICA_INDEX"]) == ("2", "2", "1")
    assert worker1["MUSTER_RESTART_COUNT"] == "3" and worker1["MUSTER_REPLICA_TYPE"] == "Worker"


def test_worker_only_job_ranks_from_zero_and_auto_counts_pods():
    j = stored(job("train", workers=3))
    shape = GangShape(masters=0, workers=3, master_addr="127.0.0.1", master_port=4000)
    envs = [training_env(j, shape, "Worker", i, 0, CKPT) for i in range(3)]
    assert [e["RANK"] for e in envs] == ["0", "1", "2"]
    assert {e["WORLD_SIZE"] for e in envs} == {"3"} and {e["PET_NPROC_PER_NODE"] for e in envs} == {"auto"}


def test_elastic_jobs_get_the_admitted_count_and_rendezvous():
    j = stored(job("el", workers=4, elasticPolicy={"minReplicas": 2, "maxReplicas": 4, "maxRestarts": 3}))
    env = training_env(j, GangShape(0, 3, "127.0.0.1", 5000), "Worker", 2, 0, CKPT)
    assert (env["WORLD_SIZE"], env["PET_NNODES"]) == ("3", "3")
    assert env["PET_RDZV_ENDPOINT"] == "127.0.0.1:5000" and env["PET_MAX_RESTARTS"] == "3"
    wl = workload_for(j, queue="q", priority=0, priority_class=None, master_port=5000)
    (ps,) = wl["spec"]["podSets"]
    assert (ps["count"], ps["minCount"]) == (4, 2)


def test_pods_are_bound_labelled_and_the_contract_wins_over_the_template():
    doc = job("train", workers=1, master=True, gpus=2)
    container = doc["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "RANK", "value": "99"}, {"name": "MINE", "value": "x"}]
    doc["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["restartPolicy"] = "Always"
    j = stored(doc)
    env = {"RANK": "1", "WORLD_SIZE": "2"}
    pod = build_pod(j, "Worker", 0, {"node": "n1", "gpus": [2, 3]}, "0-0", env)
    assert pod["metadata"]["name"] == "train-worker-0"
    assert pod["metadata"]["labels"] == {
        "muster.dev/job-name": "train",
        "muster.dev/replica-type": "worker",
        "muster.dev/replica-index": "0",
        "muster.dev/workload": "train",
        "muster.dev/attempt": "0-0",
    }
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert (pod["spec"]["nodeName"], pod["spec"]["gpus"]) == ("n1", [2, 3])
    assert "restartPolicy" not in pod["spec"]
    assert pod["spec"]["containers"][0]["env"] == [
        {"name": "MINE", "value": "x"},
        {"name": "RANK", "value": "1"},
        {"name": "WORLD_SIZE", "value": "2"},
    ]
    assert registry.validate(pod).obj is not None  # a valid Pod


def test_workload_of_a_job():
    doc = job("train", workers=2, master=True, gpus=1, queueName="team", priorityClassName="high")
    tspec = doc["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]
    tspec["nodeSelector"] = {"nvidia.com/gpu.product": "A100"}
    tspec["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    wl = workload_for(stored(doc), queue="team", priority=1000, priority_class="high", master_port=1234)
    assert registry.validate(wl).obj is not None
    master, worker = wl["spec"]["podSets"]
    assert (master["name"], master["count"], worker["name"], worker["count"]) == ("master", 1, "worker", 2)
    assert worker["requests"] == {"nvidia.com/gpu": "1"}
    assert worker["nodeSelector"] == {"nvidia.com/gpu.product": "A100"}
    assert worker["tolerations"][0] | {"value": "", "effect": ""} == {
        "key": "gpu",
        "operator": "Exists",
        "value": "",
        "effect": "",
    }
    assert (wl["spec"]["queueName"], wl["spec"]["priority"], wl["spec"]["priorityClassName"]) == (
        "team",
        1000,
        "high",
    )
    assert wl["metadata"]["annotations"] == {"muster.dev/master-port": "1234"}
