"""The TrainingJob controller: a job, its Workload, its gang of pods, its conditions.

One reconcile of a job, level-triggered (everything is derived from the job, its Workload and
its pods as they are now, so a pass interrupted anywhere is completed by the next):

1. first sight: Created; a finished job only gets its clean-up (``cleanPodPolicy``, the
   Workload marked Finished, ``ttlSecondsAfterFinished``);
2. the Workload is created (queue, priority, one pod set per replica type), or kept active
   or deactivated as ``runPolicy.suspend`` says;
3. the job's phase follows the Workload: waiting (Queued, with the pending reason), being
   evicted (Preempted, not counted against backoffLimit; an eviction that is the
   infrastructure's doing, :data:`~muster.controllers.scheduling.workloads.REQUEUE_EVICTIONS` such as a
   failed GPU, a lost or drained node or a gang the runtime could not place, requeues it the
   same way, straight to Queued), requeued (Queued again);
4. once admitted, the pods of the current run are created, bound to the admission's
   placements; pods of an earlier run are stopped and removed first (a gang restart reuses
   the same admission, so the new pods take the same GPUs); an MPI job's Launcher is created
   once its Workers run (where the runtime starts pods one by one), with the hostfile written;
5. the pods' outcomes decide: Running, Succeeded, a gang restart (OnFailure, ExitCode with
   a code >= 128, within backoffLimit) or Failed (Never, ExitCode 1-127, BackoffLimitExceeded);
   ``activeDeadlineSeconds`` counts from the first time the gang ran (reset on resume).

Every phase change goes through :func:`muster.api.lifecycle.move_job` and is
recorded as an Event.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from muster.api.compat.jobs import PRIORITY_LABEL, QUEUE_LABEL
from muster.api.conditions import condition, epoch, iso
from muster.api.labels import (
    ATTEMPT_LABEL,
    JOB_NAME_LABEL,
    MASTER_PORT_ANNOTATION,
    REPLICA_INDEX_LABEL,
    REPLICA_PORTS_ANNOTATION,
    REPLICA_TYPE_LABEL,
    pod_name,
)
from muster.api.lifecycle import (
    KEEPS_QUEUE_PLACE,
    EventSpec,
    JobPhase,
    WorkloadState,
    describe_failure,
    exit_code,
    finish_workload,
    is_final,
    job_phase,
    move_job,
    phase,
    set_job_message,
    workload_state,
)
from muster.api.trainingjob import REPLICA_TYPES
from muster.controllers.context import Context
from muster.controllers.pods.stop import StopReasons, clear_pods, stop_requested
from muster.controllers.scheduling.priority import PriorityClassMissing, priority_of
from muster.controllers.scheduling.snapshot import DEFAULT_QUEUE
from muster.controllers.scheduling.workloads import REQUEUE_EVICTIONS
from muster.controllers.trainingjob.frameworks import (
    framework,
    known_ports,
    replica_endpoints,
    replica_key,
    write_hostfile,
)
from muster.controllers.trainingjob.pods import (
    GangShape,
    build_pod,
    checkpoint_dir,
    latest_checkpoint,
    pick_port,
    port_free,
    training_env,
    workload_for,
)
from muster.runtime.base import PodReason
from muster.store import codec

__all__ = ["TrainingJobController"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
MasterAddress = Callable[[str, str, str, str], str]
_ACTIVE = (JobPhase.QUEUED, JobPhase.RUNNING, JobPhase.RESTARTING)
DEADLINE_EXCEEDED = "DeadlineExceeded"
_TYPE_OF_LABEL = {rtype.lower(): rtype for rtype in REPLICA_TYPES}
GANG_START_FAILED = PodReason.GANG_START_FAILED.value
_RESIZES_KEPT = 20


class TrainingJobController:
    def __init__(
        self, ctx: Context, master_address: MasterAddress | None = None, *, staged_start: bool = True
    ) -> None:
        self.ctx = ctx
        # (namespace, workload, pod, its node) -> the address the gang reaches that pod at: its
        # node's (127.0.0.1 on the local runtime) or a DNS name (Kubernetes)
        self.master_address: MasterAddress = master_address or (lambda _ns, _wl, _pod, _node: "127.0.0.1")
        # Whether the runtime starts pods one by one (an MPI Launcher then waits for its
        # Workers); a runtime that starts a gang as one unit needs every pod at once.
        self.staged_start = staged_start

    def reconcile(self, job: Obj) -> None:
        _Pass(self, job).run()


class _Pass:
    """One reconcile of one job: edits a copy of it, writes its status once at the end."""

    def __init__(self, ctl: TrainingJobController, job: Obj) -> None:
        self.ctl = ctl
        self.ctx = ctl.ctx
        self.original = job
        # A finished job's status never changes again (only its clean-up runs): no copy.
        self.done = job_phase(job) in (JobPhase.SUCCEEDED, JobPhase.FAILED)
        if self.done:
            self.job = job
            self.status: Obj = self.job.get("status") or {}
        else:
            # Only the status is edited (spec and metadata are read): copy just that.
            self.job = {
                **job,
                "metadata": dict(job["metadata"]),
                "status": codec.copy(job.get("status") or {}),
            }
            self.status = self.job["status"]
        self.events: list[EventSpec] = []
        self.now = self.ctx.now()
        meta = job["metadata"]
        self.name, self.ns = meta["name"], meta.get("namespace") or "default"

    # -- the pass --------------------------------------------------------------------------

    def run(self) -> None:
        if self.done:
            self._finished()
            return
        if job_phase(self.job) is None:
            self._move(JobPhase.CREATED, "Created", "the job was accepted")
        self._active()
        stored = self._write()
        if stored is not None and job_phase(stored) in (JobPhase.SUCCEEDED, JobPhase.FAILED):
            # The outcome is stored: the clean-up may act on it now (a crash before this
            # point leaves a finished job whose next pass does it).
            _Pass(self.ctl, stored).run()

    def _active(self) -> None:
        wl = self._workload()
        if wl is None:
            return
        suspend = bool((self.job["spec"].get("runPolicy") or {}).get("suspend"))
        if wl["spec"].get("active", True) == suspend:
            changed = codec.copy(wl)
            changed["spec"]["active"] = not suspend
            wl = self.ctx.update(changed) or wl
        current = job_phase(self.job)
        if suspend:
            if current is not JobPhase.SUSPENDED:
                self._move(
                    JobPhase.SUSPENDED, "Suspended", "runPolicy.suspend is set: pods stopped, quota released"
                )
            self._count_replicas(self._pods(wl))
            return
        if current is JobPhase.SUSPENDED:
            self.status.pop("startTime", None)  # activeDeadlineSeconds counts afresh after a resume
            self._move(JobPhase.QUEUED, "Resumed", "runPolicy.suspend was cleared: queued again")
        state = workload_state(wl)
        evicted = condition(wl, "Evicted") or {}
        preempted = evicted.get("status") == "True" and evicted.get("reason") == "Preempted"
        # The infrastructure's evictions (workloads.REQUEUE_EVICTIONS) requeue it to run
        # elsewhere, never the job's failure.
        moved = evicted.get("status") == "True" and evicted.get("reason") in REQUEUE_EVICTIONS
        if state is WorkloadState.EVICTING and preempted:
            self._preempted(wl, evicted)
        elif state is WorkloadState.EVICTING and moved:
            self._moved_off(evicted, waiting=True)
        elif state is WorkloadState.PENDING:
            if moved:
                self._moved_off(evicted)
            self._queued(wl, preempted)
        elif state is WorkloadState.ADMITTED:
            self._admitted(wl)
        self._count_replicas(self._pods(wl))
        self._check_deadline(wl)

    # -- the Workload ------------------------------------------------------------------------

    def _workload(self) -> Obj | None:
        wl = self.ctx.cache.get("Workload", self.name, self.ns)
        uid = self.job["metadata"]["uid"]
        if wl is not None:
            owners = [r.get("uid") for r in wl["metadata"].get("ownerReferences") or []]
            if uid in owners:
                return wl
            self.ctx.delete(wl)  # left by an earlier job of the same name: garbage
            return None
        priority = self._priority()
        if priority is None:
            return None
        value, class_name = priority
        labels = self.job["metadata"].get("labels") or {}
        queue = self.job["spec"].get("queueName") or labels.get(QUEUE_LABEL)
        if not queue and self.ctx.cache.get("LocalQueue", DEFAULT_QUEUE, self.ns) is not None:
            queue = DEFAULT_QUEUE
        created = self.ctx.create(
            workload_for(
                self.job, queue=queue, priority=value, priority_class=class_name, master_port=pick_port()
            )
        )
        if created is None:
            return None
        self.status["workload"] = self.name
        if job_phase(self.job) is JobPhase.CREATED and created["spec"].get("active", True):
            self._move(JobPhase.QUEUED, "Queued", f"waiting in queue {queue or DEFAULT_QUEUE}")
        return created

    def _priority(self) -> tuple[int, str | None] | None:
        """The job's priority value and class (the globalDefault class when it names none);
        None, with the reason in the Created condition, when the named class is missing."""
        labels = self.job["metadata"].get("labels") or {}
        named = self.job["spec"].get("priorityClassName") or labels.get(PRIORITY_LABEL)
        try:
            return priority_of(self.ctx.cache.list("PriorityClass"), named)
        except PriorityClassMissing as exc:
            message = str(exc)
            if set_job_message(self.job, "PriorityClassNotFound", message, self.now):
                self.events.append(EventSpec("Warning", "PriorityClassNotFound", message))
            return None

    def _preempted(self, wl: Obj, evicted: Obj) -> None:
        if job_phase(self.job) is JobPhase.PREEMPTED:
            return
        message = evicted.get("message") or "preempted"
        self._move(
            JobPhase.PREEMPTED, "Preempted", f"{message}; it resumes from its checkpoint when requeued"
        )
        wstatus = wl.get("status") or {}
        record = {
            "time": evicted.get("lastTransitionTime") or iso(self.now),
            "reason": (condition(wl, "Preempted") or {}).get("reason", ""),
            "message": message,
        }
        if wstatus.get("preemptedBy"):
            record["preemptor"] = wstatus["preemptedBy"]
        self.status.setdefault("preemptions", []).append(record)

    def _moved_off(self, evicted: Obj, waiting: bool = False) -> None:
        """Its gang could not be placed, its GPU or node failed, or its node is drained: requeued
        to run elsewhere. Not the job's fault, so nothing counts against backoffLimit. A job whose
        gang never ran stays Queued and says why while its Workload is ``waiting`` for the
        eviction to finish."""
        reason, message = evicted.get("reason") or "Evicted", evicted.get("message") or ""
        current = job_phase(self.job)
        if current in (JobPhase.RUNNING, JobPhase.RESTARTING):
            self._move(JobPhase.QUEUED, reason, message)
            self.events[-1] = EventSpec("Warning", reason, message)
            if reason in KEEPS_QUEUE_PLACE:
                # A spot interruption ends a run the way a preemption does (SIGTERM, checkpoint):
                # recorded with it, so the next run notes whether it found the checkpoint.
                record = {"time": evicted.get("lastTransitionTime") or iso(self.now), "reason": reason}
                self.status.setdefault("preemptions", []).append({**record, "message": message})
        elif current is JobPhase.QUEUED and waiting and set_job_message(self.job, reason, message, self.now):
            self.events.append(EventSpec("Warning", reason, message))

    def _queued(self, wl: Obj, preempted: bool) -> None:
        current = job_phase(self.job)
        if current in (JobPhase.RUNNING, JobPhase.RESTARTING) and preempted:
            self._preempted(wl, condition(wl, "Evicted") or {})
            current = JobPhase.PREEMPTED
        if current is JobPhase.PREEMPTED:
            self._move(JobPhase.QUEUED, "Requeued", "its pods are gone; waiting to be admitted again")
        elif current is JobPhase.CREATED:
            self._move(JobPhase.QUEUED, "Queued", "waiting for admission")
        pending = (wl.get("status") or {}).get("pending")
        if pending and job_phase(self.job) is JobPhase.QUEUED:
            evicted = condition(wl, "Evicted") or {}
            if evicted.get("status") == "True" and evicted.get("reason") in REQUEUE_EVICTIONS:
                # Moved off failed hardware or a drained node: until admitted again, the job says
                # why it left (docs/operations.md), and what keeps it out now after that.
                reason = evicted["reason"]
                message = (
                    f"{evicted.get('message') or reason}; now waiting for admission: "
                    f"{pending['reason']}: {pending.get('message', '')}"
                )
            else:
                reason, message = pending["reason"], pending.get("message", "")
            set_job_message(self.job, reason, message, self.now)

    # -- the gang ------------------------------------------------------------------------------

    def _admitted(self, wl: Obj) -> None:
        if job_phase(self.job) is JobPhase.PREEMPTED:
            # Requeued and admitted again between two looks (its GPUs were free at once).
            self._move(JobPhase.QUEUED, "Requeued", "its pods are gone; admitted again")
        wstatus = wl.get("status") or {}
        requeues = (wstatus.get("requeueState") or {}).get("count", 0)
        attempt = f"{requeues}-{self.status.get('restartCount', 0)}"
        resizes = int((wstatus.get("elastic") or {}).get("resizes") or 0)
        if resizes:
            attempt += f"-{resizes}"  # every size is a new run of the gang
        resized = self._resized(wl)
        pods = self._pods(wl)
        stale = [p for p in pods if (p["metadata"].get("labels") or {}).get(ATTEMPT_LABEL) != attempt]
        current = [p for p in pods if p not in stale]
        if self._clear(stale, StopReasons.RESIZED if resized else StopReasons.GANG_RESTART):
            return  # the previous run's processes hold the GPUs the next run is bound to
        if job_phase(self.job) is JobPhase.QUEUED and not current:
            queue = wl["status"]["admission"]["clusterQueue"]
            set_job_message(
                self.job, "Admitted", f"admitted by ClusterQueue {queue}; starting its pods", self.now
            )
        expected = self._expected(wl)
        have = {p["metadata"]["name"] for p in current}
        missing = [e for e in expected if e[0] not in have and self._may_create(e[1], current)]
        if missing:
            self._create_pods(wl, expected, missing, attempt, fresh=not have)
            current = self._pods(wl)
            current = [
                p for p in current if (p["metadata"].get("labels") or {}).get(ATTEMPT_LABEL) == attempt
            ]
        live = [p for p in current if not stop_requested(p)]
        if any((p.get("status") or {}).get("reason") == GANG_START_FAILED for p in live):
            return  # not the job's failure: the executor deletes them and evicts the Workload
        failed = sorted(
            (p for p in live if phase(p) == "Failed"),
            key=lambda p: (p.get("status") or {}).get("finishTime") or "",
        )
        if failed:
            if self._failure(failed[0]):
                # The whole gang stops now: this reconcile's write of the job is no news to
                # the next pass, which would otherwise leave the survivors running until a
                # full resync; their deletion brings the job back to start the next run.
                self._clear(live, StopReasons.GANG_RESTART)
        elif self._succeeded(live):
            self._move(JobPhase.SUCCEEDED, "Succeeded", "the job's training completed")
            self.status["completionTime"] = iso(self.now)
        elif self._gang_running(live, expected):
            self.status.setdefault("startTime", iso(self.now))
            self._move(JobPhase.RUNNING, "Running", f"all {len(live)} pod(s) of the gang are running")

    def _resized(self, wl: Obj) -> bool:
        """Record a resize of the Workload not yet recorded on the job (docs/trainingjob.md,
        "Elastic jobs"): its event, and Running -> Restarting while the gang restarts at the new
        size (not counted against backoffLimit: the job did not fail). True while the newest
        resize's gang has not started yet."""
        elastic = (wl.get("status") or {}).get("elastic") or {}
        last, when = elastic.get("lastResize"), elastic.get("lastResizeTime")
        if not last or not when:
            return False
        records = self.status.setdefault("resizes", [])
        if records and records[-1].get("time") == when:
            return not records[-1].get("started")
        before = int((last.get("from") or {}).get("worker", 0))
        after = int((last.get("to") or {}).get("worker", 0))
        message = f"{before} -> {after} workers: {last.get('why') or last.get('message', '')}"
        records.append({"time": when, "from": before, "to": after, "reason": last.get("reason", "")})
        records[-1]["message"] = message
        del records[:-_RESIZES_KEPT]
        if job_phase(self.job) in (JobPhase.RUNNING, JobPhase.RESTARTING):
            self._move(JobPhase.RESTARTING, "Resized", message)
            self.events.pop()  # a resize is no failure: a Normal event, not the restart's Warning
        self.events.append(EventSpec("Normal", "Resized", message))
        return True

    def _gang_running(self, live: list[Obj], expected: list) -> bool:
        """Every pod of the run exists and runs (or already succeeded), at least one runs,
        and the job is not yet Running."""
        phases = [phase(p) for p in live]
        return (
            len(live) == len(expected)
            and all(p in ("Running", "Succeeded") for p in phases)
            and "Running" in phases
            and job_phase(self.job) in (JobPhase.QUEUED, JobPhase.RESTARTING)
        )

    def _expected(self, wl: Obj) -> list[tuple[str, str, int, Obj]]:
        """(pod name, replica type, index, placement) of every pod the admission placed."""
        out = []
        by_set = {a["name"]: a for a in wl["status"]["admission"]["podSetAssignments"]}
        for rtype in REPLICA_TYPES:
            assignment = by_set.get(rtype.lower())
            if assignment is None:
                continue
            for i, placement in enumerate(assignment.get("pods") or []):
                out.append((pod_name(self.name, rtype, i), rtype, i, placement))
        return out

    def _may_create(self, rtype: str, current: list[Obj]) -> bool:
        """An MPI Launcher is created once every Worker of the run runs (when pods start one by
        one): it is the one to reach them, as Kubeflow's MPIJob waits for its workers."""
        if rtype != "Launcher" or framework(self.job) != "MPI" or not self.ctl.staged_start:
            return True
        workers = [
            p for p in current if (p["metadata"].get("labels") or {}).get(REPLICA_TYPE_LABEL) == "worker"
        ]
        want = int((self.job["spec"]["replicaSpecs"].get("Worker") or {}).get("replicas") or 0)
        return len(workers) >= want and all(phase(p) in ("Running", "Succeeded") for p in workers)

    def _create_pods(
        self, wl: Obj, expected: list[tuple[str, str, int, Obj]], missing: list, attempt: str, *, fresh: bool
    ) -> None:
        """Create the ``missing`` pods of the run; ``fresh``: none of its pods exists yet."""
        masters = sum(1 for e in expected if e[1] == "Master")
        first = expected[0]
        port = int(wl["metadata"].get("annotations", {}).get(MASTER_PORT_ANNOTATION) or 0)
        stale = not port or (fresh and not port_free(port))
        ports = self._replica_ports(wl, expected, fresh)
        if stale or ports is not None:
            if stale:
                port = pick_port()  # taken meanwhile by something else: the new run needs its own
            changed = codec.copy(wl)
            annotations = changed["metadata"].setdefault("annotations", {})
            annotations[MASTER_PORT_ANNOTATION] = str(port)
            if ports is not None:
                annotations[REPLICA_PORTS_ANNOTATION] = json.dumps(ports, sort_keys=True)
            wl = self.ctx.update(changed)
            if wl is None:
                return
        addr = self.ctl.master_address(self.ns, wl["metadata"]["name"], first[0], first[3]["node"])
        where = replica_endpoints(
            self.job,
            expected,
            known_ports(wl),
            lambda pod, node: self.ctl.master_address(self.ns, wl["metadata"]["name"], pod, node),
        )
        shape = GangShape(masters, len(expected) - masters, addr, port, *where)
        checkpoints = checkpoint_dir(self.ctx.home, self.job)
        checkpoints.mkdir(parents=True, exist_ok=True)
        if fresh:
            self._note_resume(checkpoints)
            self._note_resize(checkpoints)
        launcher = any(e[1] == "Launcher" for e in missing)
        hostfile = (
            write_hostfile(self.ctx.home, self.job, shape.hosts.get("Worker", ())) if launcher else None
        )
        restarts = int(self.status.get("restartCount") or 0)
        for name, rtype, index, placement in missing:
            env = training_env(self.job, shape, rtype, index, restarts, checkpoints, hostfile)
            if self.ctx.create(build_pod(self.job, rtype, index, placement, attempt, env)) is None:
                log.info("pod %s/%s exists already; looking again next pass", self.ns, name)

    def _replica_ports(self, wl: Obj, expected: list[tuple[str, str, int, Obj]], fresh: bool) -> dict | None:
        """A TensorFlow job's new per-replica ports (its TF_CONFIG's cluster) when a run starts
        afresh or lacks some; None when the Workload's are to be kept (or it needs none)."""
        if framework(self.job) != "TensorFlow":
            return None
        known = known_ports(wl)
        names = [replica_key(rtype, index) for _, rtype, index, _ in expected]
        if not fresh and all(n in known for n in names):
            return None
        return {n: pick_port() for n in names}

    def _note_resume(self, checkpoints: Path) -> None:
        """The first run after a preemption: record whether a checkpoint was there to resume from."""
        records = self.status.get("preemptions") or []
        if not records or records[-1].get("resumedAt"):
            return
        record = records[-1]
        found = latest_checkpoint(checkpoints)
        record["resumedAt"] = iso(self.now)
        record["checkpointFound"] = found is not None
        if found is not None:
            record["checkpoint"] = found
            self.events.append(
                EventSpec(
                    "Normal", "ResumedFromCheckpoint", f"resuming after preemption; newest checkpoint {found}"
                )
            )
        else:
            self.events.append(
                EventSpec(
                    "Warning",
                    "NoCheckpoint",
                    f"resuming after preemption, but {checkpoints} holds no checkpoint: it starts over",
                )
            )

    def _note_resize(self, checkpoints: Path) -> None:
        """The first run at a new size: record the checkpoint it resumes from."""
        records = self.status.get("resizes") or []
        if not records or records[-1].get("started"):
            return
        record = records[-1]
        record["started"] = iso(self.now)
        found = latest_checkpoint(checkpoints)
        if found is not None:
            record["checkpoint"] = found
        where = (
            f"newest checkpoint {found}" if found else f"{checkpoints} holds no checkpoint: it starts over"
        )
        self.events.append(
            EventSpec("Normal", "ResumedFromCheckpoint", f"restarting at {record['to']} workers; {where}")
        )

    def _succeeded(self, live: list[Obj]) -> bool:
        """The framework's success rule: PyTorch's Master (else every Worker, with elasticPolicy
        any); TensorFlow's Chief or Master (else worker 0, or every Worker with successPolicy
        AllWorkers); MPI's Launcher."""
        by_type: dict[str, list[Obj]] = {}
        for p in live:
            by_type.setdefault((p["metadata"].get("labels") or {}).get(REPLICA_TYPE_LABEL, ""), []).append(p)
        kind = framework(self.job)
        lead = by_type.get("launcher") if kind == "MPI" else by_type.get("chief") or by_type.get("master")
        if lead or kind == "MPI":
            return bool(lead) and all(phase(p) == "Succeeded" for p in lead or [])
        workers = by_type.get("worker", [])
        spec = self.job["spec"]
        if kind == "TensorFlow" and spec.get("successPolicy") != "AllWorkers":
            first = [
                p for p in workers if (p["metadata"].get("labels") or {}).get(REPLICA_INDEX_LABEL) == "0"
            ]
            return any(phase(p) == "Succeeded" for p in first)
        if spec.get("elasticPolicy") is not None:
            return any(phase(p) == "Succeeded" for p in workers)
        return bool(workers) and all(phase(p) == "Succeeded" for p in workers)

    def _failure(self, pod: Obj) -> bool:
        """Decide what the failure of ``pod`` does to the job: fail it, or restart the gang
        (True)."""
        labels = pod["metadata"].get("labels") or {}
        rtype = _TYPE_OF_LABEL.get(str(labels.get(REPLICA_TYPE_LABEL)), "Worker")
        policy = (self.job["spec"]["replicaSpecs"].get(rtype) or {}).get("restartPolicy", "OnFailure")
        code = exit_code(pod)
        what = describe_failure(pod)
        never_ran = (pod.get("status") or {}).get("reason") == "Error" and not (pod.get("status") or {}).get(
            "startTime"
        )
        if never_ran:
            self._fail("ReplicaFailed", f"{what} (it could not start; a retry would fail the same way)")
            return False
        if policy == "Never":
            self._fail("ReplicaFailed", f"{what} (restartPolicy Never)")
            return False
        if policy == "ExitCode" and code is not None and 1 <= code <= 127:
            self._fail("ReplicaFailed", f"{what} (restartPolicy ExitCode: exit codes 1-127 are permanent)")
            return False
        restarts = int(self.status.get("restartCount") or 0)
        limit = (self.job["spec"].get("runPolicy") or {}).get("backoffLimit")
        if limit is not None and restarts >= limit:
            self._fail(
                "BackoffLimitExceeded",
                f"the gang was restarted {restarts} time(s) and backoffLimit is {limit}; "
                f"last failure: {what}",
            )
            return False
        self.status["restartCount"] = restarts + 1
        self._move(JobPhase.RESTARTING, "Restarting", f"gang restart {restarts + 1}: {what}")
        replicas = sum(int(r.get("replicas", 1) or 0) for r in self.job["spec"]["replicaSpecs"].values())
        self.ctx.metrics.pod_restarts.labels(self.ns).inc(replicas)
        return True

    # -- ends ----------------------------------------------------------------------------------

    def _fail(self, reason: str, message: str) -> None:
        self._move(JobPhase.FAILED, reason, message)
        self.status["completionTime"] = iso(self.now)

    def _check_deadline(self, wl: Obj) -> None:
        limit = (self.job["spec"].get("runPolicy") or {}).get("activeDeadlineSeconds")
        started = epoch(self.status.get("startTime"))
        if limit is None or started is None or job_phase(self.job) not in (*_ACTIVE, JobPhase.PREEMPTED):
            return
        if self.now >= started + limit:
            self._fail(DEADLINE_EXCEEDED, f"the job ran longer than activeDeadlineSeconds ({limit}s)")
        else:
            self.ctx.wake_at(started + limit, self.original)

    def _finished(self) -> None:
        """Clean-up of a finished job: its Workload Finished (quota released), its pods per
        cleanPodPolicy (a deadline stops them all), then ttlSecondsAfterFinished."""
        succeeded = job_phase(self.job) is JobPhase.SUCCEEDED
        failed = condition(self.job, "Failed") or {}
        deadline = failed.get("status") == "True" and failed.get("reason") == DEADLINE_EXCEEDED
        stop = StopReasons.DEADLINE_EXCEEDED if deadline else StopReasons.JOB_FINISHED
        wl = self.ctx.cache.get("Workload", self.name, self.ns)
        if wl is not None and workload_state(wl) is not WorkloadState.FINISHED:
            updated = codec.copy(wl)
            done = "Succeeded" if succeeded else "Failed"
            event = finish_workload(updated, done, f"the job {done.lower()}", self.now)
            stored = self.ctx.update_status(updated)
            if stored is not None:
                self.ctx.event(stored, event)
        policy = (self.job["spec"].get("runPolicy") or {}).get("cleanPodPolicy") or "Running"
        if deadline:
            policy = "Running" if policy == "None" else policy
        pods = self.ctx.cache.pods_labelled(JOB_NAME_LABEL, self.name, self.ns)
        pods = [p for p in pods if _owned(p, self.job)]
        if policy in ("Running", "All"):
            self._clear([p for p in pods if not is_final(p)], stop)
        if policy == "All":
            for p in pods:
                if is_final(p):
                    self.ctx.delete(p)
        self._ttl()

    def _ttl(self) -> None:
        ttl = (self.job["spec"].get("runPolicy") or {}).get("ttlSecondsAfterFinished")
        done = epoch(self.status.get("completionTime"))
        if ttl is None or done is None:
            return
        if self.now >= done + ttl:
            if self.ctx.delete(self.original):
                log.info("deleted %s/%s: ttlSecondsAfterFinished passed", self.ns, self.name)
        else:
            self.ctx.wake_at(done + ttl, self.original)

    def _clear(self, pods: list[Obj], reason: str) -> bool:
        """Stop the unfinished ``pods`` and delete the finished ones; True while any remain."""
        return clear_pods(self.ctx, pods, reason, self.now)

    # -- helpers ---------------------------------------------------------------------------------

    def _pods(self, _wl: Obj) -> list[Obj]:
        pods = self.ctx.cache.pods_labelled(JOB_NAME_LABEL, self.name, self.ns)
        return [p for p in pods if _owned(p, self.job)]

    def _count_replicas(self, pods: list[Obj]) -> None:
        counts: dict[str, Obj] = {}
        for p in pods:
            labels = p["metadata"].get("labels") or {}
            rtype = _TYPE_OF_LABEL.get(str(labels.get(REPLICA_TYPE_LABEL)), "Worker")
            entry = counts.setdefault(rtype, {"active": 0, "succeeded": 0, "failed": 0})
            key = {"Succeeded": "succeeded", "Failed": "failed"}.get(phase(p), "active")
            entry[key] += 1
        self.status["replicaStatuses"] = counts

    def _move(self, to: JobPhase, reason: str, message: str) -> None:
        self.events.append(move_job(self.job, to, reason, message, self.now))

    def _write(self) -> Obj | None:
        """Store the job's new status (and record its events); the stored job, or None when
        nothing changed or it changed meanwhile (the next pass decides again)."""
        if self.status == (self.original.get("status") or {}):
            return None
        stored = self.ctx.update_status(self.job)
        if stored is not None:
            for event in self.events:
                self.ctx.event(stored, event)
        return stored


def _owned(pod: Obj, job: Obj) -> bool:
    uid = job["metadata"]["uid"]
    return any(r.get("uid") == uid for r in pod["metadata"].get("ownerReferences") or [])
