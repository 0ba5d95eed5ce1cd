"""Small builders for scheduler snapshots in unit tests."""

from __future__ import annotations

from muster.scheduler import (
    GPU,
    AdmittedPodSet,
    AdmittedWorkload,
    ClusterQueue,
    FlavorQuotas,
    Node,
    PendingWorkload,
    PodBinding,
    PodSet,
    PreemptionConfig,
    ResourceGroup,
    ResourceQuota,
)


def cq(
    name: str,
    quota: dict[str, int | ResourceQuota] | None = None,
    cohort: str | None = None,
    flavors: tuple[str, ...] = ("default",),
    within: str = "Never",
    reclaim: str = "Never",
    borrow: str = "Never",
    threshold: int | None = None,
    **kw: object,
) -> ClusterQueue:
    """A queue whose flavors all cover the same resources with the same quota (units)."""
    quota = quota if quota is not None else {"cpu": 4000}
    rq = {r: q if isinstance(q, ResourceQuota) else ResourceQuota(q) for r, q in quota.items()}
    group = ResourceGroup(tuple(rq), [FlavorQuotas(f, dict(rq)) for f in flavors])
    return ClusterQueue(
        name=name,
        resource_groups=[group],
        cohort=cohort,
        preemption=PreemptionConfig(within, reclaim, borrow, threshold),
        **kw,  # type: ignore[arg-type]
    )


def wl(
    name: str,
    queue: str = "q",
    cpu: int = 1000,
    gpus: int = 0,
    milli: int = 1000,
    count: int = 1,
    priority: int = 0,
    t: float = 0.0,
    **ps: object,
) -> PendingWorkload:
    requests = {"cpu": cpu} if cpu else {}
    pod_set = PodSet("main", count, requests, gpus=gpus, gpu_milli=milli, **ps)  # type: ignore[arg-type]
    return PendingWorkload(name, queue, [pod_set], priority=priority, creation_time=t)


def running(
    name: str,
    queue: str = "q",
    cpu: int = 1000,
    gpus: int = 0,
    milli: int = 1000,
    count: int = 1,
    priority: int = 0,
    t: float = 0.0,
    flavor: str = "default",
    pods: tuple[PodBinding, ...] = (),
    **kw: object,
) -> AdmittedWorkload:
    requests = {"cpu": cpu} if cpu else {}
    flavors = {r: flavor for r in requests} | ({GPU: flavor} if gpus else {})
    ps = AdmittedPodSet("main", count, requests, gpus=gpus, gpu_milli=milli, flavors=flavors, pods=pods)
    return AdmittedWorkload(name, queue, [ps], priority=priority, creation_time=t, admission_time=t, **kw)  # type: ignore[arg-type]


def node(name: str, cpu: int = 32_000, gpus: int = 0, model: str = "A100", **kw: object) -> Node:
    return Node(name, {"cpu": cpu, "memory": 256 * 2**30}, gpus=gpus, gpu_model=model if gpus else "", **kw)  # type: ignore[arg-type]
