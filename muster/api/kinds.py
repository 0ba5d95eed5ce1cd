"""The names of every kind Muster serves, and how a name a user types resolves to one.

Plain data and the standard library only: the CLI and the SDK client resolve ``tj``,
``trainingjobs`` or ``TrainingJob`` on every call and must not pay for the pydantic models
(:mod:`muster.api.registry` pairs each kind here with its model, and a test keeps the two in
step).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

__all__ = ["API_VERSION", "CONVERTED", "GROUP", "Kind", "UnknownKind", "category", "kinds", "lookup", "names"]

GROUP = "muster.dev"
API_VERSION = f"{GROUP}/v1"


@dataclass(frozen=True)
class Kind:
    """What the layers above need to know about a kind's names and shape."""

    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    namespaced: bool
    has_status: bool
    # Groups a user can ask for at once (``muster get all``), as Kubernetes' categories.
    categories: tuple[str, ...] = ()
    # The foreign kinds converted into this one (``kubeflow.org/v1/PyTorchJob``); their names
    # are accepted as aliases (``muster get pytorchjobs``), as a user's manifests call them.
    converted_from: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()


class UnknownKind(LookupError):
    """A kind name that is not served; the message lists the close matches."""

    def __init__(self, name: str, candidates: list[str]) -> None:
        close = difflib.get_close_matches(name.lower(), candidates, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        super().__init__(f"unknown kind {name!r}{hint} (docs/api.md lists every kind)")
        self.name = name
        self.close_matches = close


# The native kind each foreign kind converts into (muster.api.compat).
# tests/api/test_registry.py holds it to the converters.
CONVERTED: dict[tuple[str, str], str] = {
    ("kubeflow.org/v1", "PyTorchJob"): "TrainingJob",
    ("kubeflow.org/v1", "TFJob"): "TrainingJob",
    ("kubeflow.org/v1", "MPIJob"): "TrainingJob",
    ("batch/v1", "Job"): "TrainingJob",
    **{
        (f"kueue.x-k8s.io/{version}", kind): kind
        for version in ("v1beta1", "v1beta2")
        for kind in ("ResourceFlavor", "Topology", "LocalQueue", "ClusterQueue", "Cohort")
    },
    ("kueue.x-k8s.io/v1alpha1", "Cohort"): "Cohort",
    ("kueue.x-k8s.io/v1alpha1", "Topology"): "Topology",
    ("kueue.x-k8s.io/v1beta1", "WorkloadPriorityClass"): "PriorityClass",
    ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass"): "PriorityClass",
    ("scheduling.k8s.io/v1", "PriorityClass"): "PriorityClass",
    ("v1", "Pod"): "TrainingJob",
    ("serving.kserve.io/v1beta1", "InferenceService"): "InferenceService",
    ("kubeai.org/v1", "Model"): "InferenceService",
    **{
        (f"ray.io/{version}", kind): kind
        for version in ("v1", "v1alpha1")
        for kind in ("RayCluster", "RayJob")
    },
    ("kubeflow.org/v1beta1", "Experiment"): "Experiment",
    ("karpenter.sh/v1", "NodePool"): "NodePool",
    ("argoproj.io/v1alpha1", "Workflow"): "Workflow",
    ("v1", "Namespace"): "Namespace",
    ("v1", "ResourceQuota"): "ResourceQuota",
    ("v1", "ConfigMap"): "GPUSharing",
    ("v1", "ServiceAccount"): "ServiceAccount",
    **{
        ("rbac.authorization.k8s.io/v1", kind): kind
        for kind in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
    },
}
# The foreign kinds whose names are aliases; a v1 Pod's names stay the native Pod's.
_FOREIGN_PLURALS = {
    "PyTorchJob": "pytorchjobs",
    "TFJob": "tfjobs",
    "MPIJob": "mpijobs",
    "Job": "jobs",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "Model": "models",
    "ConfigMap": "configmaps",
}


def _k(
    kind: str,
    plural: str,
    short: tuple[str, ...],
    namespaced: bool,
    status: bool = True,
    categories: tuple[str, ...] = (),
) -> Kind:
    sources = sorted(key for key, target in CONVERTED.items() if target == kind)
    foreign = dict.fromkeys(name for _, name in sources if name != kind)
    aliases = tuple(
        name for f in foreign if f in _FOREIGN_PLURALS for name in (f.lower(), _FOREIGN_PLURALS[f])
    )
    converted = tuple(f"{version}/{name}" for version, name in sources)
    return Kind(kind, plural, kind.lower(), short, namespaced, status, categories, converted, aliases)


# In a stable order (`muster get` and the docs list them so).
KINDS: tuple[Kind, ...] = (
    _k("Namespace", "namespaces", ("ns",), namespaced=False),
    _k("Node", "nodes", ("no",), namespaced=False),
    _k("ResourceFlavor", "resourceflavors", ("rf", "flavor", "flavors"), namespaced=False, status=False),
    _k("Topology", "topologies", (), namespaced=False, status=False),
    _k("GPUSharing", "gpusharings", (), namespaced=False, status=False),
    _k("ClusterQueue", "clusterqueues", ("cq",), namespaced=False),
    _k("Cohort", "cohorts", (), namespaced=False),
    _k("LocalQueue", "localqueues", ("lq", "queue", "queues"), namespaced=True),
    _k("PriorityClass", "priorityclasses", ("pc",), namespaced=False, status=False),
    _k("TrainingJob", "trainingjobs", ("tj",), namespaced=True, categories=("all",)),
    _k("Workflow", "workflows", ("wf",), namespaced=True, categories=("all",)),
    _k("CacheEntry", "cacheentries", ("ce",), namespaced=True, status=False),
    _k("Experiment", "experiments", ("exp",), namespaced=True, categories=("all",)),
    _k("Trial", "trials", (), namespaced=True),
    _k("TrialMetrics", "trialmetrics", (), namespaced=True, status=False),
    _k("InferenceService", "inferenceservices", ("isvc",), namespaced=True, categories=("all",)),
    _k("RayCluster", "rayclusters", (), namespaced=True, categories=("all",)),
    _k("RayJob", "rayjobs", (), namespaced=True, categories=("all",)),
    _k("Workload", "workloads", ("wl",), namespaced=True, categories=("all",)),
    _k("Pod", "pods", ("po",), namespaced=True, categories=("all",)),
    _k("Event", "events", ("ev",), namespaced=True, status=False),
    _k("ResourceQuota", "resourcequotas", ("quota",), namespaced=True),
    _k("Role", "roles", (), namespaced=True, status=False),
    _k("RoleBinding", "rolebindings", (), namespaced=True, status=False),
    _k("ServiceAccount", "serviceaccounts", ("sa",), namespaced=True, status=False),
    _k("ClusterRole", "clusterroles", (), namespaced=False, status=False),
    _k("ClusterRoleBinding", "clusterrolebindings", (), namespaced=False, status=False),
    _k("NodePool", "nodepools", ("np",), namespaced=False),
    _k("NodeClaim", "nodeclaims", ("nc",), namespaced=False),
    _k("UsageRecord", "usagerecords", ("ur",), namespaced=False, status=False),
)

_BY_NAME: dict[str, Kind] = {}
for _entry in KINDS:
    for _name in (_entry.kind, _entry.plural, _entry.singular, *_entry.short_names, *_entry.aliases):
        _BY_NAME[_name.lower()] = _entry


def kinds() -> list[Kind]:
    """Every native kind, in a stable order."""
    return list(KINDS)


def names() -> list[str]:
    """Every name :func:`lookup` accepts (lower case, sorted): for shell completion."""
    return sorted(_BY_NAME)


def category(name: str) -> list[Kind]:
    """The kinds in category ``name`` (``all``), in the table's order; empty when none."""
    return [entry for entry in KINDS if name.lower() in entry.categories]


def lookup(name: str) -> Kind:
    """The kind a user means by ``name``: a Kind, plural, singular or short name, or the name
    of a foreign kind converted into it (``pytorchjobs``), any case."""
    found = _BY_NAME.get(name.strip().lower())
    if found is None:
        raise UnknownKind(name, sorted(_BY_NAME))
    return found
