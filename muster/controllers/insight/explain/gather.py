"""What :func:`explain` looks at, fetched around the object asked about.

The same gathering serves ``muster why`` (over the REST client) and ``GET /api/v1/why``
(over the store): both hand a :class:`Source` to :func:`gather`.
"""

from __future__ import annotations

from typing import Any, Protocol

from muster.api.labels import JOB_NAME_LABEL, WORKLOAD_LABEL
from muster.controllers.insight.explain.build import failing_pod
from muster.controllers.insight.explain.facts import WhyContext
from muster.controllers.insight.usage import is_pending

__all__ = ["Source", "gather"]

Obj = dict[str, Any]


class Source(Protocol):
    """Read access to the objects and pod logs of one cluster."""

    def get(self, kind: str, name: str, namespace: str | None) -> Obj | None:
        """The object, or None when it does not exist."""
        ...

    def list(self, kind: str, namespace: str | None = None, selector: str | None = None) -> list[Obj]:
        """Objects of ``kind`` (every namespace when ``namespace`` is None)."""
        ...

    def list_live(self, kind: str) -> list[Obj]:
        """The Workloads or TrainingJobs not finished, or more (all, where the source keeps no
        index of them): explain looks only at those, and a long-running server keeps 100,000
        finished ones."""
        ...

    def log_tail(self, pod: str, namespace: str, lines: int) -> list[str]:
        """The last ``lines`` lines of the pod's log; empty when there is none to read."""
        ...

    # Optional: ``events_about(objs) -> list[Obj]``, the Events about ``objs`` (else every
    # Event of the namespace is listed and explain picks).


def gather(source: Source, obj: Obj, tail: int = 20, now: float | None = None) -> WhyContext:
    """Everything :func:`explain` looks at, around ``obj`` (a TrainingJob, Workload or Pod)."""
    ns = obj["metadata"].get("namespace") or "default"
    name = obj["metadata"]["name"]
    labels = obj["metadata"].get("labels") or {}
    ctx = WhyContext(now=now)
    if obj["kind"] == "TrainingJob":
        ctx.job = obj
        ctx.workload = source.get("Workload", (obj.get("status") or {}).get("workload") or name, ns)
        ctx.pods = source.list("Pod", ns, f"{JOB_NAME_LABEL}={name}")
    elif obj["kind"] == "Workload":
        ctx.workload = obj
        owner = next(iter(obj["metadata"].get("ownerReferences") or []), None)
        if owner and owner.get("kind") == "TrainingJob":
            ctx.job = source.get("TrainingJob", owner["name"], ns)
        ctx.pods = source.list("Pod", ns, f"{WORKLOAD_LABEL}={name}")
    else:
        ctx.pods = [obj]
        if labels.get(JOB_NAME_LABEL):
            ctx.job = source.get("TrainingJob", labels[JOB_NAME_LABEL], ns)
        if labels.get(WORKLOAD_LABEL):
            ctx.workload = source.get("Workload", labels[WORKLOAD_LABEL], ns)
    ctx.cluster_queues = source.list("ClusterQueue")
    ctx.local_queues = source.list("LocalQueue")
    ctx.workloads = source.list_live("Workload")
    about = [o for o in (ctx.job, ctx.workload, *ctx.pods) if o is not None]
    events_about = getattr(source, "events_about", None)  # a source that can find them directly
    ctx.events = events_about(about) if events_about is not None else source.list("Event", ns)
    if ctx.workload is not None and is_pending(ctx.workload):
        # A waiting Workload's per-node breakdown and what-if simulation need the cluster.
        ctx.nodes = source.list("Node")
        ctx.all_pods = source.list("Pod")
        ctx.flavors = source.list("ResourceFlavor")
        ctx.topologies = source.list("Topology")
        ctx.cohorts = source.list("Cohort")
        ctx.priority_classes = source.list("PriorityClass")
        ctx.jobs = source.list_live("TrainingJob")
        ctx.node_claims = source.list("NodeClaim")
    failing = failing_pod(ctx.pods)
    if failing is not None and tail:
        pod = failing["metadata"]["name"]
        ctx.log_tails = {pod: source.log_tail(pod, ns, tail)}
    return ctx
