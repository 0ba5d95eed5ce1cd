"""The runtime contract: what the controllers ask of "where pods run", and what comes back.

A runtime turns bound pods into running things and reports what becomes of them. The
contract is :class:`Runtime` (a Protocol every runtime satisfies) plus capability mixins
(:class:`SupportsLogs`, :class:`SupportsReadoption`, :class:`SupportsGpuMetrics`,
:class:`SupportsFaultInjection`) that a runtime inherits when it can do more; callers test
``isinstance(runtime, SupportsLogs)`` instead of reading boolean flags.

Everything that crosses the contract is a plain dataclass, independent of pydantic: the
controllers translate Pod and Node wire dicts (``apiVersion/kind/metadata/spec/status``,
camelCase keys, see CONTRIBUTING "Wire form") to and from these. Each class's docstring
gives its wire mapping.

Timestamps are RFC 3339 UTC strings with a ``Z`` suffix, as on the wire.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

# The wire form of times (RFC 3339 UTC with a Z suffix), shared with the object model.
from muster.api.conditions import iso as iso_from_epoch

__all__ = [
    "GPU_COUNT_LABEL",
    "GPU_MEMORY_LABEL",
    "GPU_PRODUCT_LABEL",
    "GPU_RESOURCE",
    "STOP_REASONS",
    "Container",
    "ContainerStatus",
    "DeviceBinding",
    "GangLaunch",
    "GangMember",
    "GpuDevice",
    "GpuFault",
    "GpuSample",
    "LaunchError",
    "MachineShape",
    "MigDevice",
    "NodeCondition",
    "NodeInfo",
    "NodeTaint",
    "PodExists",
    "PodLaunch",
    "PodNotFound",
    "PodPhase",
    "PodReason",
    "PodRef",
    "PodRuntimeError",
    "PodStatusChange",
    "PodStillRunning",
    "Runtime",
    "StopReason",
    "SupportsFaultInjection",
    "SupportsGangStart",
    "SupportsGpuMetrics",
    "SupportsLeadership",
    "SupportsLogs",
    "SupportsNativePods",
    "SupportsNodeWatch",
    "SupportsReadoption",
    "SupportsRetention",
    "SupportsVirtualNodes",
    "SupportsWakeup",
    "VirtualNodeSpec",
    "Volume",
    "VolumeMount",
    "iso_from_epoch",
]

GPU_RESOURCE = "nvidia.com/gpu"
# Label names follow NVIDIA GPU feature discovery so node selectors written for Kubernetes work.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"


# -- errors ----------------------------------------------------------------------------------


class PodRuntimeError(Exception):
    """Base of runtime errors; the message is fit to show to a user."""


class LaunchError(PodRuntimeError):
    """A pod cannot be started as given. Nothing was started and nothing was left behind.

    ``path`` names the offending field of the Pod wire form (``spec.containers[0].command``),
    ``rule`` what it must satisfy, ``hint`` how to fix it.
    """

    def __init__(self, path: str, rule: str, hint: str = "") -> None:
        self.path, self.rule, self.hint = path, rule, hint
        super().__init__(f"{path}: {rule}" + (f" ({hint})" if hint else ""))


class PodExists(PodRuntimeError):
    """``start`` was called for a pod this runtime already runs (same uid, or same name still active)."""


class PodNotFound(PodRuntimeError):
    """The runtime has no record of the pod (never started here, or already released)."""


class PodStillRunning(PodRuntimeError):
    """``release`` was called for a pod that has not reached a final phase; stop it first."""


# -- nodes -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MigDevice:
    """One MIG slice of a GPU. Wire: ``status.gpus[i].migDevices[j] {profile, uuid}``."""

    index: int
    uuid: str
    profile: str  # e.g. "1g.10gb", the name the resource nvidia.com/mig-1g.10gb carries
    memory_bytes: int


@dataclass(frozen=True)
class GpuDevice:
    """One GPU of a node.

    Wire: ``status.gpus[i] {index, uuid, model, memory, migMode, migDevices, nvlinkPeers,
    domain, health, healthReason}`` where ``memory`` is the quantity ``str(memory_bytes)``
    in binary SI (``80Gi``).
    """

    index: int
    uuid: str
    model: str
    memory_bytes: int
    mig_mode: bool = False
    mig_devices: tuple[MigDevice, ...] = ()
    # Indices of the GPUs of this node reachable over NVLink (directly or through NVSwitch).
    nvlink_peers: tuple[int, ...] = ()
    # GPUs sharing a domain are close (one NVLink island); placement prefers one domain per gang.
    domain: str = ""
    health: Literal["Healthy", "Unhealthy"] = "Healthy"
    health_reason: str = ""


@dataclass(frozen=True)
class GpuSample:
    """A reading of one GPU for metrics. ``None`` where the device cannot report the value."""

    index: int
    uuid: str
    utilization_pct: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int
    temperature_c: float | None
    power_w: float | None


@dataclass(frozen=True)
class NodeCondition:
    """Wire: ``status.conditions[] {type, status, reason, message}`` (Ready, GPUHealthy)."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class NodeTaint:
    """Wire: ``spec.taints[] {key, value, effect}`` (effect NoSchedule, PreferNoSchedule or NoExecute)."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class NodeInfo:
    """A machine as a runtime sees it; the Node controller writes it to the store.

    Wire: ``metadata.name`` = ``name``, ``metadata.labels`` = ``labels``;
    ``status.capacity`` / ``status.allocatable`` = the two resource maps (quantity strings:
    ``{"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4"}``), ``status.gpus`` = ``gpus``,
    ``status.conditions`` = ``conditions``, ``status.runtime`` = ``runtime``,
    ``status.addresses`` = ``address`` (InternalIP) and the name (Hostname). ``warnings``
    are for the operator (``muster up`` prints them, the controller records them as events),
    e.g. that no NVIDIA driver was found. ``address`` is where the node's pods reach each
    other (``status.addresses[InternalIP]``, a pod's ``status.hostIP``, ``MASTER_ADDR`` when
    the master runs there): loopback for the local machine, the node's IP on a cluster.

    ``used_by_others`` (wire: ``status.usedByOthers``, quantity strings) is what things the
    runtime runs but Muster did not create hold on the node (on Kubernetes: pods bound by
    kube-scheduler, daemonsets), whole GPUs under ``nvidia.com/gpu`` and their count under
    ``pods``; the scheduler never places onto it.

    ``taints`` and ``unschedulable``, when not None, belong to the runtime (a Kubernetes
    Node's ``spec.taints`` and cordon): the Node controller writes them to ``spec``. None
    leaves ``spec`` to users (``muster`` edits on the local runtime). ``initial_taints`` are
    the taints a Node is *created* with when the runtime does not own them (a virtual node
    made from a NodePool's template): users and controllers own them afterwards.
    """

    name: str
    capacity: Mapping[str, str]
    allocatable: Mapping[str, str]
    labels: Mapping[str, str]
    gpus: tuple[GpuDevice, ...] = ()
    conditions: tuple[NodeCondition, ...] = ()
    runtime: str = "local"
    warnings: tuple[str, ...] = ()
    address: str = "127.0.0.1"
    used_by_others: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[NodeTaint, ...] | None = None
    unschedulable: bool | None = None
    initial_taints: tuple[NodeTaint, ...] = ()


# -- pods ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodRef:
    """Identifies one pod incarnation: a pod recreated under the same name has a new uid.

    Wire: ``metadata.namespace``, ``metadata.name``, ``metadata.uid``.
    """

    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class VolumeMount:
    """Wire: ``spec.containers[i].volumeMounts[j] {name, mountPath, subPath, readOnly}``."""

    name: str
    mount_path: str
    sub_path: str = ""
    read_only: bool = False


@dataclass(frozen=True)
class Volume:
    """A pod volume. Wire: ``spec.volumes[j]`` with exactly one source:

    * ``{name, persistentVolumeClaim: {claimName}}`` -> ``type="persistentVolumeClaim"``,
      ``claim_name``;
    * ``{name, emptyDir: {medium, sizeLimit}}`` -> ``type="emptyDir"``, ``medium``
      (``""`` or ``"Memory"``), ``size_limit`` (quantity string or ``""``);
    * ``{name, hostPath: {path, type}}`` -> ``type="hostPath"``, ``path``, ``host_path_type``.

    Any other source is passed with its wire key as ``type`` so the runtime can reject it by name.
    """

    name: str
    type: str
    claim_name: str = ""
    medium: str = ""
    size_limit: str = ""
    path: str = ""
    host_path_type: str = ""


@dataclass(frozen=True)
class Container:
    """One container of a pod. Wire: ``spec.containers[i]``.

    ``command``/``args`` as in Kubernetes (the process runs ``command + args``, ``$(VAR)``
    references to the container's env are expanded); ``env`` is ``env[] {name, value}``
    with ``valueFrom`` already resolved by the controller, in order; ``working_dir`` is
    ``workingDir``; ``limits``/``requests`` are ``resources.limits``/``resources.requests``
    (quantity strings); ``image`` is recorded only (the local runtime runs processes).
    """

    name: str
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    working_dir: str = ""
    volume_mounts: tuple[VolumeMount, ...] = ()
    limits: Mapping[str, str] = field(default_factory=dict)
    requests: Mapping[str, str] = field(default_factory=dict)
    image: str = ""


@dataclass(frozen=True)
class PodLaunch:
    """Everything a runtime needs to start a pod. Wire: a Pod with ``spec.nodeName`` set.

    ``termination_grace_seconds`` is ``spec.terminationGracePeriodSeconds`` (default 30):
    the grace a stop uses when the caller gives none. ``node`` is ``spec.nodeName`` (a
    runtime with several nodes starts the pod there). ``spec`` and ``annotations`` are the
    Pod's wire ``spec`` and ``metadata.annotations`` as stored, for a runtime that
    materialises the whole pod itself (:class:`SupportsNativePods`); ``owner`` is its
    controller (``{kind, name, uid}`` of its ownerReference; empty for a pod nothing owns), for
    the logs; the other fields are what a process runtime needs, already resolved.
    """

    ref: PodRef
    containers: tuple[Container, ...]
    volumes: tuple[Volume, ...] = ()
    termination_grace_seconds: float = 30.0
    labels: Mapping[str, str] = field(default_factory=dict)
    node: str = ""
    spec: Mapping[str, Any] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    owner: Mapping[str, str] = field(default_factory=dict)

    def log_owner(self) -> dict[str, str]:
        """Whom this incarnation's logs are written for: :attr:`owner` (the pod's controller,
        ``{kind, name, uid}``), else the pod itself."""
        return dict(self.owner) or {"kind": "Pod", "name": self.ref.name, "uid": self.ref.uid}


@dataclass(frozen=True)
class DeviceBinding:
    """The devices the scheduler bound a pod to on its node.

    Wire: the pod's placement (``Workload.status.admission`` per-pod devices). ``gpus`` are
    GPU indices of the node (``GpuDevice.index``); ``gpu_milli`` is the share of one GPU
    (1000 = whole GPUs; a shared pod has one index and ``gpu_milli < 1000``). Shares are
    not isolated (time-slicing semantics): the runtime exposes the GPU and records the share.
    """

    gpus: tuple[int, ...] = ()
    gpu_milli: int = 1000


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class StopReason(StrEnum):
    """Why the caller stops a pod; the final status carries it when the stop ended the pod."""

    PREEMPTED = "Preempted"  # the scheduler chose the pod as a victim; the job is requeued
    STOPPED = "Stopped"  # deleted, suspended, or its gang is restarted
    DEADLINE_EXCEEDED = "DeadlineExceeded"  # activeDeadlineSeconds ran out
    EVICTED = "Evicted"  # the node is drained or short of a resource
    GPU_UNHEALTHY = "GPUUnhealthy"  # a bound GPU went unhealthy


class PodReason(StrEnum):
    """The classified reason of a final pod phase (stable API: controllers branch on it)."""

    COMPLETED = "Completed"  # every container exited 0 on its own
    ERROR = "Error"  # a container exited non-zero on its own, or could not be executed
    OOM_KILLED = "OOMKilled"  # a container exceeded its memory limit (exit code 137)
    NODE_LOST = "NodeLost"  # the process's fate is unknown (its shim died without a record)
    PREEMPTED = StopReason.PREEMPTED.value
    STOPPED = StopReason.STOPPED.value
    DEADLINE_EXCEEDED = StopReason.DEADLINE_EXCEEDED.value
    EVICTED = StopReason.EVICTED.value
    GPU_UNHEALTHY = StopReason.GPU_UNHEALTHY.value
    # the runtime could not place the whole gang (SupportsGangStart): nothing of it ran
    GANG_START_FAILED = "GangStartFailed"


STOP_REASONS = frozenset(PodReason(r.value) for r in StopReason)


@dataclass(frozen=True)
class ContainerStatus:
    """Wire: ``status.containerStatuses[i]`` with ``state`` ``waiting``/``running``/``terminated``
    and, when terminated, ``exitCode``, ``signal``, ``reason``, ``message``, ``startedAt``,
    ``finishedAt``. ``exit_code`` is the shell convention: 128 + N when killed by signal N;
    ``None`` when the process never ran or its exit was not observed.
    """

    name: str
    state: Literal["waiting", "running", "terminated"]
    exit_code: int | None = None
    signal: int | None = None
    reason: PodReason | None = None
    message: str = ""
    started_at: str | None = None
    finished_at: str | None = None
    pid: int | None = None


@dataclass(frozen=True)
class PodStatusChange:
    """A pod's new phase as the runtime observed it. Wire: ``status {phase, reason, message,
    startTime, containerStatuses}``.

    ``pod_ip`` is the pod's own address where the runtime gives pods one (Kubernetes' podIP;
    wire ``status.podIP``); None where pods share their node's network (the node's address is
    theirs).

    ``reason`` is set exactly when the phase is final. Precedence when containers differ:
    a stop reason (the caller's), then OOMKilled, NodeLost, Error, Completed; ``message`` and
    ``exit_code`` are those of the first container with that reason.
    """

    ref: PodRef
    phase: PodPhase
    reason: PodReason | None = None
    message: str = ""
    exit_code: int | None = None
    containers: tuple[ContainerStatus, ...] = ()
    started_at: str | None = None
    finished_at: str | None = None
    pod_ip: str | None = None

    @property
    def final(self) -> bool:
        return self.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)


# -- the contract ------------------------------------------------------------------------------


@runtime_checkable
class Runtime(Protocol):
    """Where pods run. Every method is safe to call from the one controller thread that owns the
    runtime; none blocks longer than its ``timeout`` (``poll``) or a few file writes.
    """

    name: str

    def nodes(self) -> list[NodeInfo]:
        """Discover (first call) or refresh (later calls) the nodes this runtime offers.

        Devices that cannot be queried are reported with ``health="Unhealthy"`` and a reason
        rather than dropped, so a placement bound to them is not silently lost. A missing GPU
        driver is not an error: the node has no GPUs and ``warnings`` says why.
        """
        ...

    def start(self, pod: PodLaunch, devices: DeviceBinding) -> list[str]:
        """Start every container of ``pod`` on the bound ``devices``; return warnings.

        Returns once the launch is recorded and the processes are being started; the pod is
        Pending until ``poll`` reports it Running. Warnings name what was accepted but is not
        honoured here (an image, a read-only mount, a CPU limit): the caller records them as
        events. Raises :class:`LaunchError` (field path, rule, hint) for a launch that cannot
        work, :class:`PodExists` for a pod already running; in both cases nothing runs and
        nothing is left behind. A command that turns out not to be executable is not an
        error here: the pod fails with reason Error, exit code 127/126 and a message.
        """
        ...

    def stop(self, pod: PodRef, grace_seconds: float | None, reason: StopReason) -> None:
        """Ask ``pod`` to end: SIGTERM now, SIGKILL after ``grace_seconds`` (``None``: the pod's
        ``termination_grace_seconds``).

        Returns at once; ``poll`` reports the final status, whose reason is ``reason`` for
        every container that was still running when the stop arrived (a container that had
        already exited keeps its own reason). Stopping a pod that is still starting prevents
        its processes from starting. Stopping an already final pod does nothing; stopping
        again shortens the grace if the new one is shorter and keeps the first reason.
        Raises :class:`PodNotFound` for a pod this runtime does not know.
        """
        ...

    def poll(self, timeout: float = 0.0) -> list[PodStatusChange]:
        """Phase changes since the last call, at most one per pod; waits up to ``timeout``
        seconds for one when there is none (without spinning), then returns what it has,
        maybe nothing. A pod that started and ended between two calls is reported once, final.

        Each change is reported once per runtime object. A runtime re-created on the same
        state (after a crash) reports the current status of every pod it adopts once, so
        delivery is at-least-once across restarts: the caller persists a final status, then
        calls :meth:`release`.
        """
        ...

    def pods(self) -> list[PodStatusChange]:
        """The current status of every pod the runtime keeps a record of (not yet released)."""
        ...

    def release(self, pod: PodRef) -> None:
        """Forget a final pod: drop its records and per-pod scratch space (emptyDir volumes).

        Logs and persistent volumes stay. Releasing an unknown pod does nothing (idempotent).
        Raises :class:`PodStillRunning` if the pod has not reached a final phase.
        """
        ...

    def close(self) -> None:
        """Detach from the pods without stopping them (a later runtime may re-adopt them)."""
        ...


@dataclass(frozen=True)
class GangMember:
    """One pod of a gang: what :meth:`Runtime.start` would take, plus the node the scheduler
    chose for it (wire: ``spec.nodeName``)."""

    pod: PodLaunch
    devices: DeviceBinding
    node: str


@dataclass(frozen=True)
class GangLaunch:
    """Every not-yet-started pod of one admitted Workload, started as one unit.

    Wire: the Workload (``namespace``/``name``/``uid``) and its Pods labelled
    ``muster.dev/workload=<name>``. ``timeout_seconds`` bounds how long the runtime may wait
    for the whole gang to be placed before it gives up.
    """

    namespace: str
    workload: str
    uid: str
    members: tuple[GangMember, ...]
    timeout_seconds: float = 60.0


class SupportsGangStart(ABC):
    """A runtime that must start a gang as one unit: a Ray placement group whose bundles are
    pinned to the scheduler's nodes, a set of Kubernetes Bindings.

    The executor calls :meth:`start_gang` instead of :meth:`Runtime.start` once every pod of
    an admitted Workload exists, and never starts a member alone. All or none: until the whole
    gang is placed every member is reported Pending; if it cannot be placed within
    ``timeout_seconds`` (or a bind fails), the runtime releases whatever it reserved and
    reports every member Failed with reason :attr:`PodReason.GANG_START_FAILED` and a message
    naming the cause, and no member's process runs. The executor then evicts the Workload
    with that reason, so it is requeued without counting against any backoff
    (docs/control-plane.md, "Gangs on distributed runtimes").
    """

    @abstractmethod
    def start_gang(self, gang: GangLaunch) -> list[str]:
        """Begin starting every member; return warnings (as :meth:`Runtime.start` does).

        Returns at once: readiness is reported through :meth:`Runtime.poll`. Raises
        :class:`LaunchError` for a gang that can never start (nothing is reserved then) and
        :class:`PodExists` when a member is already known.
        """


class SupportsNativePods(ABC):
    """A runtime whose pods are pods of a cluster of their own (Kubernetes), not processes it runs.

    It takes the Pod's whole wire spec (:attr:`PodLaunch.spec`) and leaves to the cluster what
    the cluster resolves: ``env[].valueFrom``, init containers, probes, the image's entrypoint
    when a container has no ``command``. So the controllers pass those through unresolved and
    unchecked. Its pods reach each other by DNS name, not by their node's address: the
    TrainingJob controller asks :meth:`pod_address` for ``MASTER_ADDR``.
    """

    @abstractmethod
    def pod_address(self, namespace: str, workload: str, pod: str) -> str:
        """The name pod ``pod`` of the gang ``workload`` is reached at from the gang's other pods."""


class SupportsNodeWatch(ABC):
    """A runtime whose nodes change on their own: a cluster's Nodes join and leave, turn NotReady,
    are cordoned or tainted. It says when :meth:`Runtime.nodes` has news, so the Node controller
    syncs at once instead of at its next heartbeat, and a node it no longer lists is gone: the
    Node controller deletes its Node object.
    """

    @abstractmethod
    def nodes_changed(self) -> bool:
        """Whether the nodes changed since the last :meth:`Runtime.nodes` call (which resets it)."""


class SupportsLeadership(ABC):
    """A runtime shared by several servers of which one may act: a cluster with Muster servers
    campaigning for a leader Lease. The manager runs no pass (no controller, no scheduling, no
    start or stop) while :meth:`leading` is false, and when it becomes true it re-adopts the
    runtime's pods (:class:`SupportsReadoption`) before its first pass, since the previous
    leader may have started or ended pods meanwhile.
    """

    @abstractmethod
    def leading(self) -> bool:
        """Whether this server may act now."""

    @abstractmethod
    def wait_leading(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds to lead; whether this server leads."""


class SupportsWakeup(ABC):
    """A runtime whose :meth:`Runtime.poll` can be interrupted, so the caller waits on the
    runtime's reports and on work of its own at once (the manager: a store change ends the
    wait at once, not at the next poll timeout)."""

    @abstractmethod
    def wake(self) -> None:
        """Make a ``poll`` in progress (or the next one) return at once. Any thread may call it."""


class SupportsRetention(ABC):
    """A runtime that keeps what a released pod leaves in place until its Pod object is deleted:
    a Kubernetes Pod that ended keeps its logs (and shows in ``kubectl``) as long as it exists.
    The executor names the pods that still exist on every full resync.
    """

    @abstractmethod
    def retain_only(self, existing: set[str]) -> None:
        """Remove the remains of released pods whose uid is not in ``existing`` (returns at once)."""


class SupportsCleanup(ABC):
    """A runtime with work left after its last pod is released (a Ray gang's placement group
    is removed only once its actors' clean-up ran), which it does in :meth:`Runtime.poll`."""

    @abstractmethod
    def cleaning_up(self) -> bool:
        """Whether :meth:`Runtime.poll` still has clean-up to finish: whoever drives the
        runtime keeps polling while this is True, even when no pod is left to report on."""


class SupportsLogs(ABC):
    """A runtime that keeps each container's output and can stream it."""

    @abstractmethod
    def logs(
        self,
        pod: PodRef,
        container: str | None = None,
        *,
        follow: bool = False,
        previous: bool = False,
        cancel: threading.Event | None = None,
    ) -> Iterator[str]:
        """Yield the container's output as text lines (newline kept), from the beginning.

        ``pod.uid`` may be empty: logs are kept per namespace/name, across incarnations.
        ``container`` may be omitted when the pod has one container; otherwise the error
        lists the names. ``follow`` keeps yielding new output until the container has ended
        and its output is drained (a pod that is not running ends the stream at once), or
        until ``cancel`` is set (the reader went away): the stream then ends within a
        moment, without waiting for more output. ``previous`` reads the preceding
        incarnation's output instead (never followed). Raises :class:`PodNotFound` at the
        call, before anything is yielded, when there is no such log, naming what exists.
        """

    def log_owner(
        self, pod: PodRef, container: str | None = None, *, previous: bool = False
    ) -> dict[str, str] | None:
        """Whom the log :meth:`logs` would read was written for (``{kind, name, uid}``: the
        pod's controller, e.g. its TrainingJob, or the pod itself), or None when unknown or
        there is no such log. A reader compares it with the objects that exist now, so the
        log of a deleted job is not served as that of a new job reusing its pod names."""
        return None


class SupportsReadoption(ABC):
    """A runtime whose pods outlive the server process and are adopted by the next one."""

    @abstractmethod
    def readopt(self) -> list[PodRef]:
        """Find the pods a previous runtime on the same state left, and adopt them.

        Adopted pods that are still running are watched again (their process identity is
        verified, so a reused pid is never mistaken for them); pods that ended meanwhile get
        their recorded final status; pods whose fate cannot be known are reported Failed
        with reason NodeLost and a message. Each adopted pod's status is reported by the
        next ``poll``. Pods already tracked are skipped; returns the newly adopted ones.
        """


class SupportsGpuMetrics(ABC):
    """A runtime that can read GPU utilisation, memory, temperature and power."""

    @abstractmethod
    def gpu_samples(self) -> list[GpuSample]:
        """One sample per GPU of the node(s), in index order; empty without GPUs."""


@dataclass(frozen=True)
class GpuFault:
    """What fault injection does to one GPU: for tests and drills only, never in production.

    ``xid`` reports an XID error as NVML's XidCriticalError event would (a critical one makes
    the GPU unhealthy; an application error such as 13 or 31 does not); ``lost`` makes the GPU
    fall off the bus (NVML_ERROR_GPU_IS_LOST: unhealthy, no readings); ``clear`` forgets
    every injected fault (healthy again). The readings, when given, are what the GPU reports
    from now on (``utilization_pct`` 0-100). Fields left None change nothing.
    """

    gpu: int
    xid: int | None = None
    lost: bool = False
    clear: bool = False
    utilization_pct: float | None = None
    memory_used_bytes: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None


class SupportsFaultInjection(ABC):
    """A runtime whose GPU health can be overridden, to test how the system reacts to faults."""

    @abstractmethod
    def inject_gpu_fault(self, node: str, fault: GpuFault) -> GpuDevice:
        """Apply ``fault`` to GPU ``fault.gpu`` of ``node``; returns the device as :meth:`nodes`
        reports it from now on. Only fake GPUs take faults: a runtime with real GPUs raises
        :class:`PodRuntimeError` saying so. Raises KeyError naming the known nodes or GPUs
        for an unknown one.
        """


@dataclass(frozen=True, kw_only=True)
class MachineShape:
    """What a machine has: ``gpus`` GPUs of ``gpu_model`` with ``gpu_memory_bytes`` each (cut
    into ``mig_slices`` slices of ``mig_profile`` when set), ``cpu`` and ``memory`` (quantity
    strings), and the ``labels`` and ``taints`` its Node carries. Shared by what the capacity
    controller asks a provider for and what a runtime hosts, so the two cannot drift."""

    gpus: int
    gpu_model: str
    gpu_memory_bytes: int
    cpu: str
    memory: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[NodeTaint, ...] = ()
    mig_profile: str = ""
    mig_slices: int = 0


@dataclass(frozen=True)
class VirtualNodeSpec(MachineShape):
    """A node named ``name`` that a runtime hosts beside its own machine, made on request (a
    capacity provider's "machine": docs/capacity.md), with fake GPUs; the taints apply on
    creation. It is offered by :meth:`Runtime.nodes` from ``ready_at`` (epoch seconds) on, as
    a machine that finished booting."""

    name: str
    ready_at: float = 0.0


class SupportsVirtualNodes(ABC):
    """A runtime that can host more nodes than its own machine: nodes a capacity provider adds
    and removes (the local provider's fake-GPU nodes). Pods bound to a virtual node run like any
    other pod of the runtime; they see that node's GPUs. The runtime keeps its virtual nodes
    across restarts (written before :meth:`add_virtual_node` returns).
    """

    @abstractmethod
    def add_virtual_node(self, spec: VirtualNodeSpec) -> VirtualNodeSpec:
        """Add the node (idempotent: a node of that name is kept as it is and returned)."""

    @abstractmethod
    def remove_virtual_node(self, name: str) -> None:
        """Take the node away, as a machine that is switched off: the processes of its pods
        are killed and the pods end NodeLost (or with the reason of a stop asked before).
        Removing an unknown node does nothing."""

    @abstractmethod
    def virtual_nodes(self) -> list[VirtualNodeSpec]:
        """Every virtual node, booting or up, by name."""
