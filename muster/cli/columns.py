"""The columns ``muster get`` shows for each kind, as data: a header, a path into the wire
dict and a format. A new kind adds an entry to :data:`COLUMNS`, not code.

Paths are dotted field names with three extras: ``*`` takes every value of a map or list,
``[type=Ready]`` keeps the list items whose field equals the value, and ``["nvidia.com/gpu"]``
names a key that contains dots. Formats turn the values found into the cell text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = ["COLUMNS", "Column", "age", "columns_for", "evaluate", "row"]

Format = Literal[
    "text",
    "age",
    "sum",
    "count",
    "state",
    "ref",
    "map",
    "unique",
    "bytes",
    "pairs",
    "number",
    "replicas",
    "traffic",
]
NONE = "<none>"


@dataclass(frozen=True)
class Column:
    header: str
    path: str
    format: Format = "text"
    wide: bool = False  # only with -o wide


NAME = Column("NAME", "metadata.name")
AGE = Column("AGE", "metadata.creationTimestamp", "age")
_GPU = '["nvidia.com/gpu"]'

COLUMNS: dict[str, list[Column]] = {
    "Node": [
        NAME,
        Column("READY", "status.conditions[type=Ready].status"),
        Column("GPUS", f"status.allocatable{_GPU}"),
        Column("MODEL", "status.gpus.*.model", "unique"),
        Column("CPU", "status.allocatable.cpu"),
        Column("MEMORY", "status.allocatable.memory", "bytes"),
        AGE,
        Column("RUNTIME", "status.runtime", wide=True),
        Column("UNSCHEDULABLE", "spec.unschedulable", wide=True),
        Column("TAINTS", "spec.taints", "count", wide=True),
    ],
    "ResourceFlavor": [NAME, Column("NODE-LABELS", "spec.nodeLabels", "map"), AGE],
    "Topology": [NAME, Column("LEVELS", "spec.levels.*.nodeLabel"), AGE],
    "ClusterQueue": [
        NAME,
        Column("COHORT", "spec.cohort"),
        Column("STRATEGY", "spec.queueingStrategy"),
        Column("PENDING", "status.pendingWorkloads", "sum"),
        Column("ADMITTED", "status.admittedWorkloads", "sum"),
        AGE,
        Column("FLAVORS", "spec.resourceGroups.*.flavors.*.name", "unique", wide=True),
        Column("PREEMPTION", "spec.preemption.withinClusterQueue", wide=True),
        Column("STOP", "spec.stopPolicy", wide=True),
    ],
    "Cohort": [NAME, Column("PARENT", "spec.parentName"), AGE],
    "LocalQueue": [
        NAME,
        Column("CLUSTERQUEUE", "spec.clusterQueue"),
        Column("PENDING", "status.pendingWorkloads", "sum"),
        Column("ADMITTED", "status.admittedWorkloads", "sum"),
        AGE,
    ],
    "PriorityClass": [
        NAME,
        Column("VALUE", "value"),
        Column("GLOBAL-DEFAULT", "globalDefault"),
        Column("PREEMPTION", "preemptionPolicy"),
        AGE,
    ],
    "TrainingJob": [
        NAME,
        Column("STATE", "status.conditions", "state"),
        Column("REPLICAS", "spec.replicaSpecs.*.replicas", "sum"),
        Column("QUEUE", "spec.queueName"),
        AGE,
        Column("PRIORITY", "spec.priorityClassName", wide=True),
        Column("RESTARTS", "status.restartCount", "sum", wide=True),
        Column("WORKLOAD", "status.workload", wide=True),
    ],
    "Workload": [
        NAME,
        Column("QUEUE", "spec.queueName"),
        Column("STATE", "status.conditions", "state"),
        Column("ADMITTED-BY", "status.admission.clusterQueue"),
        Column("PENDING-REASON", "status.pending.reason"),
        AGE,
        Column("PRIORITY", "spec.priority", wide=True),
        Column("MESSAGE", "status.pending.message", wide=True),
    ],
    "Pod": [
        NAME,
        Column("PHASE", "status.phase"),
        Column("REASON", "status.reason"),
        Column("NODE", "spec.nodeName"),
        Column("GPUS", "spec.gpus.*"),
        Column("RESTARTS", "status.containerStatuses.*.restartCount", "sum"),
        AGE,
    ],
    "InferenceService": [
        NAME,
        Column("URL", "status.url"),
        Column("MODELS", "status.modelNames.*"),
        Column("READY", "status.conditions[type=Ready].status"),
        Column("REPLICAS", "status", "replicas"),
        Column("TRAFFIC", "status.traffic", "traffic"),
        AGE,
        Column("REVISION", "status.latestCreatedRevision", wide=True),
        Column("ROLLED-OUT", "status.latestRolledoutRevision", wide=True),
        Column("REASON", "status.conditions[type=Ready].reason", wide=True),
    ],
    # KubeRay's printer columns.
    "RayCluster": [
        NAME,
        Column("DESIRED WORKERS", "status.desiredWorkerReplicas"),
        Column("AVAILABLE WORKERS", "status.availableWorkerReplicas"),
        Column("STATUS", "status.state"),
        Column("HEAD ADDRESS", "status.headAddress"),
        AGE,
        Column("DASHBOARD", "status.dashboardURL", wide=True),
        Column("REASON", "status.reason", wide=True),
    ],
    "RayJob": [
        NAME,
        Column("JOB STATUS", "status.jobStatus"),
        Column("DEPLOYMENT STATUS", "status.jobDeploymentStatus"),
        Column("RAY CLUSTER", "status.rayClusterName"),
        Column("START TIME", "status.startTime"),
        Column("END TIME", "status.endTime"),
        AGE,
        Column("MESSAGE", "status.message", wide=True),
    ],
    "Workflow": [
        NAME,
        Column("PHASE", "status.phase"),
        Column("PROGRESS", "status.progress"),
        AGE,
        Column("TASKS", "status.taskPhases", "map", wide=True),
        Column("MESSAGE", "status.message", wide=True),
    ],
    "Experiment": [
        NAME,
        Column("STATE", "status.conditions", "state"),
        Column("TRIALS", "status.trials"),
        Column("RUNNING", "status.trialsRunning"),
        Column("PENDING", "status.trialsPending"),
        Column("STOPPED", "status.trialsEarlyStopped"),
        Column("BEST-TRIAL", "status.currentOptimalTrial.bestTrialName"),
        Column("OBJECTIVE", "status.currentOptimalTrial.objectiveValue", "number"),
        Column("PARAMETERS", "status.currentOptimalTrial.parameterAssignments", "pairs"),
        AGE,
        Column("ALGORITHM", "spec.algorithm.algorithmName", wide=True),
        Column("METRIC", "spec.objective.objectiveMetricName", wide=True),
        Column("QUEUE", "spec.queueName", wide=True),
        Column("FAILED", "status.trialsFailed", wide=True),
        Column("GPU-SECONDS", "status.gpuSeconds", "number", wide=True),
    ],
    "Trial": [
        NAME,
        Column("PHASE", "status.phase"),
        Column("OBJECTIVE", "status.objectiveValue", "number"),
        Column("PARAMETERS", "spec.parameterAssignments", "pairs"),
        AGE,
        Column("EXPERIMENT", "spec.experiment", wide=True),
        Column("REASON", "status.reason", wide=True),
        Column("GPU-SECONDS", "status.gpuSeconds", "number", wide=True),
        Column("MESSAGE", "status.message", wide=True),
    ],
    "TrialMetrics": [NAME, Column("TRIAL", "spec.trial"), Column("SEGMENT", "spec.segment"), AGE],
    "CacheEntry": [
        NAME,
        Column("TASK", "spec.task"),
        Column("VERSION", "spec.version"),
        AGE,
        Column("SAVED", "spec.savedAt", wide=True),
    ],
    "Event": [
        Column("LAST-SEEN", "lastTimestamp", "age"),
        Column("TYPE", "type"),
        Column("REASON", "reason"),
        Column("OBJECT", "involvedObject", "ref"),
        Column("COUNT", "count", "sum"),
        Column("MESSAGE", "message"),
    ],
    "Namespace": [
        NAME,
        Column("STATUS", "status.phase"),
        AGE,
        Column("DEFAULT-QUEUE", "status.defaultLocalQueue", wide=True),
        Column("LABELS", "metadata.labels", "map", wide=True),
    ],
    "ResourceQuota": [NAME, Column("USED", "status.used", "map"), Column("HARD", "spec.hard", "map"), AGE],
    "Role": [NAME, AGE],
    "RoleBinding": [
        NAME,
        Column("ROLE", "roleRef.name"),
        AGE,
        Column("SUBJECTS", "subjects.*.name", "unique", wide=True),
    ],
    "ServiceAccount": [NAME, AGE],
    "ClusterRole": [NAME, AGE],
    "ClusterRoleBinding": [
        NAME,
        Column("ROLE", "roleRef.name"),
        AGE,
        Column("SUBJECTS", "subjects.*.name", "unique", wide=True),
    ],
    "GPUSharing": [
        NAME,
        Column("LABEL", "spec.nodeLabel"),
        Column("DEFAULT", "spec.defaultConfig"),
        Column("CONFIGS", "spec.configs", "count"),
        Column("REPLICAS", "spec.configs.*.timeSlicing.replicas", "unique"),
        AGE,
    ],
    "NodePool": [
        NAME,
        Column("PROVIDER", "spec.provider"),
        Column("CAPACITY", "spec.capacityType"),
        Column("GPUS", "spec.template.gpus"),
        Column("MODEL", "spec.template.gpuModel"),
        Column("PRICE", "spec.pricePerHour"),
        Column("READY", "status.readyNodes"),
        Column("COMING", "status.provisioning"),
        Column("MAX", "spec.maxNodes"),
        AGE,
        Column("MIN", "spec.minNodes", wide=True),
        Column("COST/H", "status.costPerHour", wide=True),
    ],
    "NodeClaim": [
        NAME,
        Column("POOL", "spec.nodePool"),
        Column("PHASE", "status.phase"),
        Column("NODE", "status.nodeName"),
        Column("CAPACITY", "spec.capacityType"),
        Column("FOR", "status.workloads", "count"),
        AGE,
        Column("PROVIDER-ID", "status.providerId", wide=True),
        Column("ERROR", "status.lastError", wide=True),
    ],
    "UsageRecord": [
        NAME,
        Column("TYPE", "spec.type"),
        Column("NAMESPACE", "spec.namespace"),
        Column("OBJECT", "spec.name"),
        Column("NODE", "spec.node"),
        Column("GPUS", "spec.gpus"),
        Column("START", "spec.start", "age"),
        Column("END", "spec.end", "age"),
    ],
}


def columns_for(kind: str, wide: bool = False, namespace_column: bool = False) -> list[Column]:
    """The columns of ``kind`` (NAME and AGE for a kind without an entry)."""
    cols = [c for c in COLUMNS.get(kind, [NAME, AGE]) if wide or not c.wide]
    return [Column("NAMESPACE", "metadata.namespace"), *cols] if namespace_column else cols


def row(obj: dict[str, Any], columns: Iterable[Column], now: datetime | None = None) -> list[str]:
    """The cells of one object."""
    return [_FORMATS[c.format](evaluate(obj, c.path), now or datetime.now(UTC)) for c in columns]


def evaluate(obj: Any, path: str) -> list[Any]:
    """Every value ``path`` reaches in ``obj`` (missing fields reach nothing)."""
    values = [obj]
    for step in _steps(path):
        values = [out for v in values for out in _step(v, step)]
    return [v for v in values if v is not None]


def age(timestamp: str | None, now: datetime) -> str:
    """``5s``, ``3m``, ``2h``, ``4d`` since ``timestamp`` (RFC 3339), as kubectl prints ages."""
    if not timestamp:
        return NONE
    try:
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return NONE
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "m" else 1):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


_STEP = re.compile(r'\["(?P<key>[^"]+)"\]|\[(?P<field>[^=\]]+)=(?P<value>[^\]]*)\]|(?P<name>[^.\[]+)')


def _steps(path: str) -> list[tuple[str, ...]]:
    steps: list[tuple[str, ...]] = []
    for m in _STEP.finditer(path):
        if m.group("key") is not None:
            steps.append(("key", m.group("key")))
        elif m.group("field") is not None:
            steps.append(("filter", m.group("field"), m.group("value")))
        elif m.group("name") == "*":
            steps.append(("all",))
        else:
            steps.append(("key", m.group("name")))
    return steps


def _step(value: Any, step: tuple[str, ...]) -> list[Any]:
    if step[0] == "key":
        return [value[step[1]]] if isinstance(value, dict) and step[1] in value else []
    if step[0] == "all":
        if isinstance(value, dict):
            return list(value.values())
        return list(value) if isinstance(value, list) else []
    _, field, wanted = step
    items = value if isinstance(value, list) else []
    return [i for i in items if isinstance(i, dict) and str(i.get(field)) == wanted]


def _text(values: list[Any], _now: datetime) -> str:
    return ",".join(_scalar(v) for v in values) if values else NONE


def _unique(values: list[Any], now: datetime) -> str:
    return _text(list(dict.fromkeys(_scalar(v) for v in values)), now)


def _sum(values: list[Any], _now: datetime) -> str:
    """A count or total: 0 when nothing was counted yet (a status not written), as kubectl."""
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return str(sum(numbers))


def _bytes(values: list[Any], _now: datetime) -> str:
    """A memory quantity in the largest binary unit that keeps it at 1 or more, one decimal:
    ``24683656Ki`` is ``23.5Gi``."""
    if not values:
        return NONE
    from muster.api.quantity import Quantity, QuantityError  # fractions and decimal: when needed

    try:
        amount = float(Quantity.parse(values[0]).value)
    except (QuantityError, ValueError, TypeError):
        return _scalar(values[0])
    unit = ""
    for name in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"):
        if amount < 1024:
            break
        amount, unit = amount / 1024, name
    text = f"{amount:.1f}".removesuffix(".0")
    return f"{text}{unit}"


def _count(values: list[Any], _now: datetime) -> str:
    if len(values) == 1 and isinstance(values[0], list | dict):
        return str(len(values[0]))
    return str(len(values))


def _state(values: list[Any], _now: datetime) -> str:
    """The type of the most recent True condition (how kubectl shows a PyTorchJob's STATE)."""
    conditions = values[0] if values and isinstance(values[0], list) else []
    true = [c for c in conditions if isinstance(c, dict) and c.get("status") == "True"]
    if not true:
        return NONE
    latest = max(enumerate(true), key=lambda ic: (ic[1].get("lastTransitionTime") or "", ic[0]))[1]
    return str(latest.get("type", NONE))


def _ref(values: list[Any], _now: datetime) -> str:
    ref = values[0] if values and isinstance(values[0], dict) else {}
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}" if ref else NONE


def _map(values: list[Any], _now: datetime) -> str:
    mapping = values[0] if values and isinstance(values[0], dict) else {}
    return ",".join(f"{k}={v}" for k, v in sorted(mapping.items())) or NONE


def _pairs(values: list[Any], _now: datetime) -> str:
    """``[{name: lr, value: 0.01}, ...]`` as ``lr=0.01,...`` (parameter assignments)."""
    items = values[0] if values and isinstance(values[0], list) else []
    return ",".join(f"{i.get('name')}={i.get('value')}" for i in items if isinstance(i, dict)) or NONE


def _number(values: list[Any], _now: datetime) -> str:
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return ",".join(f"{v:.6g}" for v in numbers) if numbers else NONE


def _replicas(values: list[Any], _now: datetime) -> str:
    """``ready/desired`` of an InferenceService's status."""
    status = values[0] if values and isinstance(values[0], dict) else {}
    return f"{status.get('readyReplicas', 0)}/{status.get('desiredReplicas', 0)}"


def _traffic(values: list[Any], _now: datetime) -> str:
    """``rev-00002=20%,rev-00001=80%`` of a traffic split."""
    targets = values[0] if values and isinstance(values[0], list) else []
    return (
        ",".join(f"{t.get('revisionName')}={t.get('percent')}%" for t in targets if isinstance(t, dict))
        or NONE
    )


def _age(values: list[Any], now: datetime) -> str:
    return age(values[0] if values else None, now)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_FORMATS: dict[str, Callable[[list[Any], datetime], str]] = {
    "text": _text,
    "age": _age,
    "sum": _sum,
    "count": _count,
    "state": _state,
    "ref": _ref,
    "map": _map,
    "unique": _unique,
    "bytes": _bytes,
    "pairs": _pairs,
    "number": _number,
    "replicas": _replicas,
    "traffic": _traffic,
}
