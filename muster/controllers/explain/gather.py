"""Fetching what :func:`~muster.controllers.explain.explain` looks at, around one object.

The same gathering serves ``muster why`` (over HTTP, through :class:`muster.sdk.client.Client`)
and the server's own views (the dashboard reads the store in-process): both hand in an
:class:`ObjectReader` and a way to read a pod's last log lines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from muster.controllers.explain.build import failing_pod
from muster.controllers.explain.facts import WhyContext
from muster.controllers.pods import JOB_NAME_LABEL, WORKLOAD_LABEL
from muster.store import NotFound

__all__ = ["LogTail", "ObjectReader", "gather"]

# (pod name, namespace, lines) -> the pod's last lines; empty when there is no log to read.
LogTail = Callable[[str, str, int], Sequence[str]]


class ObjectReader(Protocol):
    """Reads objects as wire dicts; ``get`` raises :class:`muster.store.NotFound` (the SDK's
    ``ApiNotFound`` is one)."""

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]: ...

    def list(self, kind: str, namespace: str | None = None, selector: str | None = None) -> dict[str, Any]:
        """The ``{Kind}List``: ``items`` is what is used."""
        ...


def gather(reader: ObjectReader, obj: dict[str, Any], log_tail: LogTail, tail: int = 20) -> WhyContext:
    """Everything :func:`~muster.controllers.explain.explain` looks at, around ``obj``: its
    job, Workload and pods, the queues, every Workload, the namespace's events and the last
    ``tail`` log lines of the replica that failed first."""
    ns = obj["metadata"].get("namespace") or "default"
    name = obj["metadata"]["name"]
    labels = obj["metadata"].get("labels") or {}
    ctx = WhyContext()
    if obj["kind"] == "TrainingJob":
        ctx.job = obj
        ctx.workload = _get(reader, "Workload", (obj.get("status") or {}).get("workload") or name, ns)
        ctx.pods = reader.list("Pod", ns, f"{JOB_NAME_LABEL}={name}")["items"]
    elif obj["kind"] == "Workload":
        ctx.workload = obj
        owner = next(iter(obj["metadata"].get("ownerReferences") or []), None)
        if owner and owner.get("kind") == "TrainingJob":
            ctx.job = _get(reader, "TrainingJob", owner["name"], ns)
        ctx.pods = reader.list("Pod", ns, f"{WORKLOAD_LABEL}={name}")["items"]
    else:
        ctx.pods = [obj]
        if labels.get(JOB_NAME_LABEL):
            ctx.job = _get(reader, "TrainingJob", labels[JOB_NAME_LABEL], ns)
        if labels.get(WORKLOAD_LABEL):
            ctx.workload = _get(reader, "Workload", labels[WORKLOAD_LABEL], ns)
    ctx.cluster_queues = reader.list("ClusterQueue")["items"]
    ctx.local_queues = reader.list("LocalQueue")["items"]
    ctx.workloads = reader.list("Workload")["items"]
    ctx.events = reader.list("Event", ns)["items"]
    failing = failing_pod(ctx.pods)
    if failing is not None and tail:
        pod = failing["metadata"]["name"]
        ctx.log_tails = {pod: list(log_tail(pod, ns, tail))}
    return ctx


def _get(reader: ObjectReader, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
    try:
        return reader.get(kind, name, namespace)
    except NotFound:
        return None
