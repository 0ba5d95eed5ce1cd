"""The RayJob controller: a job's cluster, its submitter pod, its status and its clean-up.

One reconcile, level-triggered:

1. ``Initializing``: the RayCluster ``<job>-raycluster`` is created from ``rayClusterSpec``
   (owned by the job, through the job's queue) or the one ``clusterSelector`` names is looked
   up; the job waits until the cluster is ``ready``;
2. the submitter pod ``<job>-submitter-<run>`` is created on the head's node: it waits until
   the head's GCS answers (``ray health-check``), then runs ``entrypoint`` as the job's driver
   with ``RAY_ADDRESS`` set and the runtime environment given to Ray the way ``ray job
   submit`` gives it (``env_vars`` also in the driver's environment, a local ``working_dir``
   its working directory); ``jobStatus`` follows the pod: PENDING, RUNNING, SUCCEEDED, FAILED;
3. a failed run is retried ``backoffLimit`` times, each on a new cluster when the job made
   its own (``Retrying``); ``activeDeadlineSeconds`` fails the job (``DeadlineExceeded``);
4. once finished (``Complete`` or ``Failed``), with ``shutdownAfterJobFinishes`` the cluster
   it created is deleted ``ttlSecondsAfterFinished`` after the end (a selected cluster is
   never deleted). ``spec.suspend`` deletes the created cluster and the submitter.

``muster logs rayjob/NAME`` shows the submitter's output: the entrypoint's.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

from muster.api.base import API_VERSION
from muster.api.compat.jobs import PRIORITY_LABEL, QUEUE_LABEL
from muster.api.conditions import epoch, iso
from muster.api.labels import RAY_JOB_LABEL
from muster.api.lifecycle import EventSpec, describe_failure, is_final, phase
from muster.api.ray import CLUSTER_SELECTOR_LABEL, runtime_env_of
from muster.controllers.context import Context
from muster.controllers.pods.stop import StopReasons, stop_requested, stop_requested_object
from muster.controllers.ray.cluster import cluster_connection
from muster.controllers.ray.lifecycle import move_job
from muster.controllers.ray.pods import submitter_command
from muster.controllers.trainingjob.pods import bound_pod_spec, owner_reference

__all__ = ["RayJobController", "job_cluster_name", "submitter_name"]

Obj = dict[str, Any]
_DONE = ("Complete", "Failed")


def job_cluster_name(job: str) -> str:
    """The RayCluster a RayJob with rayClusterSpec creates."""
    return f"{job}-raycluster"


def submitter_name(job: str, run: int) -> str:
    return f"{job}-submitter-{run}"


class RayJobController:
    def __init__(self, ctx: Context, ray: str = "ray", local: bool = True) -> None:
        self.ctx = ctx
        self.ray = ray
        self.local = local  # the driver runs on this machine: the server's environment's PATH

    def reconcile(self, job: Obj) -> None:
        _Pass(self, job).run()


class _Pass:
    def __init__(self, ctl: RayJobController, job: Obj) -> None:
        self.ctl, self.ctx = ctl, ctl.ctx
        self.original = job
        self.job = {**job, "status": copy.deepcopy(job.get("status") or {})}
        self.status: Obj = self.job["status"]
        self.spec: Obj = job["spec"]
        self.events: list[EventSpec] = []
        self.now = self.ctx.now()
        meta = job["metadata"]
        self.name, self.ns = meta["name"], meta.get("namespace") or "default"
        self.own = self.spec.get("rayClusterSpec") is not None

    def run(self) -> None:
        deployment = self.status.get("jobDeploymentStatus") or ""
        if deployment in _DONE:
            self._finished()
        elif self.spec.get("suspend"):
            self._suspend()
        else:
            if deployment in ("", "Suspended", "Retrying"):
                self._start_run(deployment)
            self._active()
        self._write()

    # -- a run ---------------------------------------------------------------------------------

    def _start_run(self, deployment: str) -> None:
        if deployment == "Retrying" and self.own and self._cluster() is not None:
            return  # the failed run's cluster is being deleted
        self.status.setdefault(
            "jobId", self.spec.get("jobId") or f"{self.name}-{self.job['metadata']['uid'][:8]}"
        )
        self.status.setdefault("startTime", iso(self.now))
        self.status["jobStatus"] = "PENDING"
        self._move("Initializing", "Initializing", "waiting for its RayCluster to be ready")

    def _active(self) -> None:
        if self.status.get("jobDeploymentStatus") not in ("Initializing", "Running"):
            return
        if self._deadline():
            return
        cluster = self._cluster()
        if cluster is None:
            cluster = self._create_cluster()
            if cluster is None:
                return
        cstatus = cluster.get("status") or {}
        self.status["rayClusterName"] = cluster["metadata"]["name"]
        if cstatus.get("dashboardURL"):
            self.status["dashboardURL"] = cstatus["dashboardURL"]
        if cstatus.get("state") == "failed":
            self._end("Failed", "ClusterFailed", f"its RayCluster failed: {cstatus.get('reason') or ''}")
            return
        run = int(self.status.get("failed") or 0)
        pod = self.ctx.cache.get("Pod", submitter_name(self.name, run), self.ns)
        if pod is None or not _owned(pod, self.job):
            if cstatus.get("state") != "ready":
                reason = cstatus.get("reason") or "starting"
                self.status["message"] = f"waiting for RayCluster {cluster['metadata']['name']}: {reason}"
                return
            connection = cluster_connection(self.ctx, cluster)
            if connection is not None:
                self.ctx.create(self._submitter(run, *connection))
                self.status["submitter"] = submitter_name(self.name, run)
            return
        self._follow(pod)

    def _follow(self, pod: Obj) -> None:
        current = phase(pod)
        if current == "Running" or (
            current in ("Succeeded", "Failed") and self.status.get("jobStatus") == "PENDING"
        ):
            self.status["jobStatus"] = "RUNNING"
            self._move("Running", "Running", f"the entrypoint runs in pod {pod['metadata']['name']}")
        if current == "Succeeded":
            self.status["succeeded"] = int(self.status.get("succeeded") or 0) + 1
            self._end("Complete", "Succeeded", "the entrypoint exited 0", job_status="SUCCEEDED")
        elif current == "Failed":
            self._failed(pod)

    def _failed(self, pod: Obj) -> None:
        failed = int(self.status.get("failed") or 0) + 1
        self.status["failed"] = failed
        what = f"the entrypoint failed: {describe_failure(pod)}"
        limit = int(self.spec.get("backoffLimit") or 0)
        if failed <= limit:
            self.status["jobStatus"] = "FAILED"
            self._move("Retrying", "Retrying", f"{what}; run {failed + 1} of {limit + 1} follows")
            if self.own and (cluster := self._cluster()) is not None:
                self.ctx.delete(cluster)
        else:
            self._end("Failed", "AppFailed", what, job_status="FAILED")

    def _deadline(self) -> bool:
        limit = self.spec.get("activeDeadlineSeconds")
        started = epoch(self.status.get("startTime"))
        if limit is None or started is None:
            return False
        if self.now >= started + int(limit):
            self._end(
                "Failed", "DeadlineExceeded", f"the job ran longer than activeDeadlineSeconds ({limit}s)"
            )
            return True
        self.ctx.wake_at(started + int(limit), self.original)
        return False

    def _end(self, to: str, reason: str, message: str, job_status: str | None = None) -> None:
        if job_status is None:
            job_status = (
                "FAILED"
                if self.status.get("jobStatus") in ("RUNNING", "PENDING", "")
                else self.status["jobStatus"]
            )
        self.status["jobStatus"] = job_status
        self.status["endTime"] = iso(self.now)
        self._move(to, reason, message)

    # -- the cluster -------------------------------------------------------------------------------

    def _cluster(self) -> Obj | None:
        if self.own:
            cluster = self.ctx.cache.get("RayCluster", job_cluster_name(self.name), self.ns)
            return cluster if cluster is not None and _owned(cluster, self.job) else None
        name = (self.spec.get("clusterSelector") or {}).get(CLUSTER_SELECTOR_LABEL, "")
        cluster = self.ctx.cache.get("RayCluster", name, self.ns)
        if cluster is None:
            self.status["message"] = f"no RayCluster {name!r} in namespace {self.ns} (clusterSelector)"
        return cluster

    def _create_cluster(self) -> Obj | None:
        if not self.own:
            return None
        spec = copy.deepcopy(self.spec["rayClusterSpec"])
        labels = self.job["metadata"].get("labels") or {}
        for field, label in (("queueName", QUEUE_LABEL), ("priorityClassName", PRIORITY_LABEL)):
            value = self.spec.get(field) or labels.get(label)
            if value and not spec.get(field):
                spec[field] = value
        spec.pop("suspend", None)
        return self.ctx.create(
            {
                "apiVersion": API_VERSION,
                "kind": "RayCluster",
                "metadata": {
                    "name": job_cluster_name(self.name),
                    "namespace": self.ns,
                    "labels": {RAY_JOB_LABEL: self.name},
                    "ownerReferences": [owner_reference(self.job)],
                },
                "spec": spec,
            }
        )

    def _submitter(self, run: int, env: dict[str, str], node: str) -> Obj:
        runtime_env = runtime_env_of(self.spec.get("runtimeEnvYAML"))
        honoured = {k: runtime_env[k] for k in ("env_vars", "working_dir") if k in runtime_env}
        if "://" in str(honoured.get("working_dir", "")):
            del honoured["working_dir"]
        env = {**{str(k): str(v) for k, v in (honoured.get("env_vars") or {}).items()}, **env}
        metadata = {"job_submission_id": self.status["jobId"], **(self.spec.get("metadata") or {})}
        env["RAY_JOB_CONFIG_JSON_ENV_VAR"] = json.dumps({"runtime_env": honoured, "metadata": metadata})
        if self.ctl.local and Path(self.ctl.ray).is_absolute():
            env["PATH"] = f"{Path(self.ctl.ray).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        template = copy.deepcopy(self.spec.get("submitterPodTemplate") or self._default_template())
        container = template["spec"]["containers"][0]
        beside = Path(self.ctl.ray).parent / "python"
        python = str(beside) if self.ctl.local and beside.is_absolute() else "python"
        container["command"] = submitter_command(python, self.spec["entrypoint"])
        container.pop("args", None)
        if honoured.get("working_dir"):
            container["workingDir"] = str(honoured["working_dir"])
        return {
            "apiVersion": API_VERSION,
            "kind": "Pod",
            "metadata": {
                "name": submitter_name(self.name, run),
                "namespace": self.ns,
                "labels": {RAY_JOB_LABEL: self.name},
                "ownerReferences": [owner_reference(self.job)],
            },
            "spec": bound_pod_spec(template, {"node": node}, env),
        }

    def _default_template(self) -> Obj:
        cluster_spec = self.spec.get("rayClusterSpec") or {}
        head = ((cluster_spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
        image = ((head.get("containers") or [{}])[0]).get("image")
        container: Obj = {"name": "ray-job-submitter"}
        if image:
            container["image"] = image
        return {"spec": {"containers": [container]}}

    # -- ends ----------------------------------------------------------------------------------------

    def _suspend(self) -> None:
        if self.status.get("jobDeploymentStatus") == "Suspended":
            return
        self._stop_submitters()
        if self.own and (cluster := self._cluster()) is not None:
            self.ctx.delete(cluster)
        self.status["jobStatus"] = ""
        self.status.pop("startTime", None)
        self._move("Suspended", "Suspended", "spec.suspend is set: its cluster is deleted, nothing runs")

    def _finished(self) -> None:
        self._stop_submitters()
        if not (self.own and self.spec.get("shutdownAfterJobFinishes")):
            return
        cluster = self._cluster()
        ended = epoch(self.status.get("endTime"))
        if cluster is None or ended is None:
            return
        due = ended + int(self.spec.get("ttlSecondsAfterFinished") or 0)
        if self.now >= due:
            if self.ctx.delete(cluster):
                self.events.append(
                    EventSpec(
                        "Normal",
                        "ClusterDeleted",
                        f"deleted RayCluster {cluster['metadata']['name']} (shutdownAfterJobFinishes)",
                    )
                )
        else:
            self.ctx.wake_at(due, self.original)

    def _stop_submitters(self) -> None:
        for pod in self.ctx.cache.pods_labelled(RAY_JOB_LABEL, self.name, self.ns):
            if _owned(pod, self.job) and not is_final(pod) and not stop_requested(pod):
                self.ctx.update(stop_requested_object(pod, StopReasons.JOB_FINISHED, self.now))

    def _move(self, to: str, reason: str, message: str) -> None:
        event = move_job(self.job, to, reason, message, self.now)
        if event is not None:
            self.events.append(event)

    def _write(self) -> None:
        if self.status == (self.original.get("status") or {}) and not self.events:
            return
        stored = (
            self.ctx.update_status(self.job)
            if self.status != (self.original.get("status") or {})
            else self.original
        )
        if stored is not None:
            for event in self.events:
                self.ctx.event(stored, event)


def _owned(obj: Obj, owner: Obj) -> bool:
    uid = owner["metadata"]["uid"]
    return any(r.get("uid") == uid for r in obj["metadata"].get("ownerReferences") or [])
