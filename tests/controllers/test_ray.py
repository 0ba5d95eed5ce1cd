"""The RayCluster and RayJob controllers through the manager, on a puppet runtime and a moved
clock: the gang, the ray start pods, states, restarts, suspension, the submitter, the job's
outcome, retries and the clean-up."""

from __future__ import annotations

import json
from typing import Any

from tests.controllers.conftest import Harness

Obj = dict[str, Any]


def group(gpus: int = 0, **fields: Any) -> Obj:
    container: Obj = {"name": "ray", "image": "rayproject/ray:2.9.0", "resources": {"limits": {"cpu": "1"}}}
    if gpus:
        container["resources"]["limits"]["nvidia.com/gpu"] = str(gpus)
    return {"rayStartParams": {}, "template": {"spec": {"containers": [container]}}, **fields}


def cluster_spec(workers: int = 2, gpus: int = 1) -> Obj:
    return {
        "headGroupSpec": group(),
        "workerGroupSpecs": [group(gpus, groupName="gpu", replicas=workers)],
    }


def raycluster(name: str = "rc", **spec: Any) -> Obj:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {**cluster_spec(), **spec},
    }


def rayjob(name: str = "job", **spec: Any) -> Obj:
    body = {"entrypoint": "python main.py", "rayClusterSpec": cluster_spec(workers=1), **spec}
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": name}, "spec": body}


def state(h: Harness, name: str) -> str:
    return ((h.get("RayCluster", name) or {}).get("status") or {}).get("state", "")


def job_status(h: Harness, name: str = "job") -> Obj:
    return (h.get("RayJob", name) or {}).get("status") or {}


def env_of(pod: Obj) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}


def ready_cluster(h: Harness, name: str) -> None:
    h.settle(lambda: h.rt.pods_by_uid)
    h.rt.run_all()
    h.settle(lambda: state(h, name) == "ready")


def test_a_cluster_is_one_gang_of_ray_start_pods(harness: Harness) -> None:
    h = harness
    h.apply(raycluster())
    ready_cluster(h, "rc")
    pods = h.pods()
    assert set(pods) == {"rc-head", "rc-gpu-worker-0", "rc-gpu-worker-1"}
    head, worker = pods["rc-head"], pods["rc-gpu-worker-1"]
    status = h.get("RayCluster", "rc")["status"]
    gcs = status["headAddress"].rsplit(":", 1)[1]
    assert head["spec"]["containers"][0]["command"][1:3] == ["start", "--head"]
    assert f"--port={gcs}" in head["spec"]["containers"][0]["command"]
    assert f"--address=127.0.0.1:{gcs}" in worker["spec"]["containers"][0]["command"]
    assert "--num-gpus=1" in worker["spec"]["containers"][0]["command"]
    assert env_of(worker)["RAY_ADDRESS"] == status["headAddress"] == f"127.0.0.1:{gcs}"
    assert env_of(worker)["RAY_AUTH_TOKEN"] == env_of(head)["RAY_AUTH_TOKEN"] != ""
    assert worker["spec"]["gpus"] and worker["metadata"]["labels"]["ray.io/node-type"] == "worker"
    assert status["readyWorkerReplicas"] == status["desiredWorkerReplicas"] == 2
    assert status["dashboardURL"].startswith("http://127.0.0.1:")
    wl = h.get("Workload", "rc")
    assert {s["name"]: s["count"] for s in wl["spec"]["podSets"]} == {"head": 1, "gpu": 2}


def test_a_cluster_that_does_not_fit_runs_nothing(harness: Harness) -> None:
    h = harness  # 4 GPUs
    h.apply(raycluster(workerGroupSpecs=[group(1, groupName="gpu", replicas=5)]))
    h.settle()
    assert state(h, "rc") == "pending" and h.pods() == {}
    reason = h.get("RayCluster", "rc")["status"]["reason"]
    assert reason.startswith("ExceedsMaxQuota:") and "5 nvidia.com/gpu" in reason


def test_a_pod_that_ends_restarts_the_cluster_and_one_that_never_ran_fails_it(harness: Harness) -> None:
    h = harness
    h.apply(raycluster())
    ready_cluster(h, "rc")
    h.rt.exit("default/rc-gpu-worker-0", 1)
    h.settle(
        lambda: h.get("RayCluster", "rc")["status"].get("restartCount") == 1 and len(h.rt.running()) == 0
    )
    h.settle(
        lambda: (
            len(h.pods()) == 3
            and all(p["metadata"]["labels"]["muster.dev/attempt"] == "0-1" for p in h.pods().values())
        )
    )
    h.rt.run_all()
    h.settle(lambda: state(h, "rc") == "ready")

    h.apply(raycluster("bad"))
    h.settle(lambda: "bad-head" in h.pods() and h.rt.find("default/bad-head") is not None)
    h.rt.exit("default/bad-head", 2)
    h.settle(lambda: state(h, "bad") == "failed")
    assert "before the cluster was ever ready" in h.get("RayCluster", "bad")["status"]["reason"]
    h.settle(lambda: h.has("Workload", "bad", "Finished", "Failed"))  # its quota is released


def test_suspending_a_cluster_stops_its_pods_and_resuming_starts_them(harness: Harness) -> None:
    h = harness
    h.apply(raycluster())
    ready_cluster(h, "rc")
    h.apply(raycluster(suspend=True))
    h.settle(lambda: state(h, "rc") == "suspended" and not h.rt.running())
    h.apply(raycluster(suspend=False))
    h.settle(lambda: state(h, "rc") == "pending" and len(h.rt.pods_by_uid) == 3)


def test_a_rayjob_runs_its_entrypoint_on_its_cluster_and_deletes_it(harness: Harness, tmp_path) -> None:
    h = harness
    runtime_env = f"env_vars: {{GREETING: hi}}\nworking_dir: {tmp_path}\npip: [requests]\n"
    h.apply(rayjob(runtimeEnvYAML=runtime_env, shutdownAfterJobFinishes=True, ttlSecondsAfterFinished=60))
    h.settle(lambda: h.get("RayCluster", "job-raycluster") is not None)
    assert job_status(h)["jobDeploymentStatus"] == "Initializing" and job_status(h)["jobStatus"] == "PENDING"
    ready_cluster(h, "job-raycluster")
    h.settle(lambda: "job-submitter-0" in h.pods())
    submitter = h.pods()["job-submitter-0"]
    env = env_of(submitter)
    container = submitter["spec"]["containers"][0]
    assert container["command"][:2] == ["/bin/sh", "-c"] and container["command"][2].endswith(
        "python main.py"
    )
    assert container["workingDir"] == str(tmp_path)
    assert (
        env["GREETING"] == "hi"
        and env["RAY_ADDRESS"] == h.get("RayCluster", "job-raycluster")["status"]["headAddress"]
    )
    assert env["MUSTER_RAY_NODES"] == "2"
    config = json.loads(env["RAY_JOB_CONFIG_JSON_ENV_VAR"])
    assert config["runtime_env"] == {"env_vars": {"GREETING": "hi"}, "working_dir": str(tmp_path)}
    assert config["metadata"]["job_submission_id"] == job_status(h)["jobId"]
    assert submitter["spec"]["nodeName"] == h.pods()["job-raycluster-head"]["spec"]["nodeName"]
    h.rt.run_all()
    h.settle(lambda: job_status(h).get("jobStatus") == "RUNNING")
    assert job_status(h)["jobDeploymentStatus"] == "Running"
    h.rt.exit("default/job-submitter-0", 0)
    h.settle(lambda: job_status(h).get("jobDeploymentStatus") == "Complete")
    assert job_status(h)["jobStatus"] == "SUCCEEDED" and job_status(h)["succeeded"] == 1
    h.settle()
    assert h.get("RayCluster", "job-raycluster") is not None  # ttlSecondsAfterFinished: not yet
    h.clock.advance(61)
    h.settle(lambda: h.get("RayCluster", "job-raycluster") is None)
    h.settle(lambda: not h.rt.running())


def test_a_failed_entrypoint_is_retried_on_a_new_cluster_then_fails(harness: Harness) -> None:
    h = harness
    h.apply(rayjob(backoffLimit=1))
    for run in (0, 1):
        h.settle(lambda: h.get("RayCluster", "job-raycluster") is not None)
        ready_cluster(h, "job-raycluster")
        h.settle(lambda run=run: f"job-submitter-{run}" in h.pods())
        h.rt.run_all()
        h.settle(lambda: job_status(h).get("jobStatus") == "RUNNING")
        uid = h.get("RayCluster", "job-raycluster")["metadata"]["uid"]
        h.rt.exit(f"default/job-submitter-{run}", 3)
        if run == 0:
            h.settle(
                lambda uid=uid: (
                    (h.get("RayCluster", "job-raycluster") or {}).get("metadata", {}).get("uid")
                    not in (None, uid)
                )
            )
    h.settle(lambda: job_status(h).get("jobDeploymentStatus") == "Failed")
    assert job_status(h)["jobStatus"] == "FAILED" and job_status(h)["failed"] == 2
    # without shutdownAfterJobFinishes the cluster stays
    assert h.get("RayCluster", "job-raycluster") is not None


def test_a_rayjob_uses_the_cluster_its_selector_names_and_never_deletes_it(harness: Harness) -> None:
    h = harness
    h.apply(raycluster("shared"))
    ready_cluster(h, "shared")
    job = rayjob(clusterSelector={"ray.io/cluster": "shared"}, shutdownAfterJobFinishes=True)
    del job["spec"]["rayClusterSpec"]
    h.apply(job)
    h.settle(lambda: "job-submitter-0" in h.pods())
    assert env_of(h.pods()["job-submitter-0"])["MUSTER_RAY_NODES"] == "3"
    h.rt.run_all()
    h.settle(lambda: job_status(h).get("jobStatus") == "RUNNING")
    h.rt.exit("default/job-submitter-0", 0)
    h.settle(lambda: job_status(h).get("jobDeploymentStatus") == "Complete")
    h.settle()
    assert state(h, "shared") == "ready" and job_status(h)["rayClusterName"] == "shared"
