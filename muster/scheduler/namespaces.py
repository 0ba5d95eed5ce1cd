"""Namespace quotas (ResourceQuota) in a cycle: what each limited namespace's admitted workloads
hold, and whether a workload's pods fit on top.

A namespace quota is a hard gate before cluster-queue quota: a workload that would take its
namespace over any limit of any of its quotas stays pending with ``ResourceQuotaExceeded``
(preemption does not make room: ResourceQuota is not a scheduling policy in Kubernetes either),
and a partial admission (``minCount``) may still take the counts that fit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from muster.scheduler.snapshot import NamespaceQuota, Snapshot, format_units

__all__ = ["PODS", "NamespaceLedger"]

PODS = "pods"


class _PodSetLike(Protocol):
    def quota_requests(self) -> dict[str, int]: ...


class NamespaceLedger:
    """Usage per limited namespace, charged as the cycle admits."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.quotas: dict[str, list[NamespaceQuota]] = {}
        for q in snapshot.namespace_quotas:
            self.quotas.setdefault(q.namespace, []).append(q)
        self.used: dict[str, dict[str, int]] = {ns: {} for ns in self.quotas}
        for w in snapshot.admitted:
            if w.namespace in self.quotas:
                self._add(w.namespace, demand(w.pod_sets, [ps.count for ps in w.pod_sets]))

    def limited(self, namespace: str) -> bool:
        return namespace in self.quotas

    def blocked(
        self, namespace: str, pod_sets: Sequence[_PodSetLike], counts: Sequence[int]
    ) -> tuple[str, dict] | None:
        """Why these counts would exceed a quota of the namespace (message, details), or None."""
        quotas = self.quotas.get(namespace)
        if not quotas:
            return None
        need = demand(pod_sets, counts)
        used = self.used[namespace]
        for q in quotas:
            for res, hard in sorted(q.hard.items()):
                asked = need.get(res, 0)
                if asked and used.get(res, 0) + asked > hard:
                    key = q.keys.get(res, res)
                    have = used.get(res, 0)
                    message = (
                        f"ResourceQuota {namespace}/{q.name}: {key}: {_fmt(res, have)} used + "
                        f"{_fmt(res, asked)} requested > {_fmt(res, hard)} limited; it is admitted when "
                        f"the admitted workloads of namespace {namespace} hold less, or raise the quota"
                    )
                    details = {
                        "resourceQuota": f"{namespace}/{q.name}",
                        "key": key,
                        "resource": res,
                        "used": have,
                        "requested": asked,
                        "hard": hard,
                    }
                    return message, details
        return None

    def charge(self, namespace: str, pod_sets: Sequence[_PodSetLike], counts: Sequence[int]) -> None:
        if namespace in self.quotas:
            self._add(namespace, demand(pod_sets, counts))

    def _add(self, namespace: str, amounts: dict[str, int]) -> None:
        used = self.used[namespace]
        for res, v in amounts.items():
            used[res] = used.get(res, 0) + v


def demand(pod_sets: Iterable[_PodSetLike], counts: Sequence[int]) -> dict[str, int]:
    """Pods and per-resource quota charge (GPUs in milli) of ``counts`` pods of each pod set."""
    out: dict[str, int] = {PODS: 0}
    for ps, count in zip(pod_sets, counts, strict=True):
        if not count:
            continue
        out[PODS] += count
        for res, v in ps.quota_requests().items():
            out[res] = out.get(res, 0) + v * count
    return out


def _fmt(resource: str, value: int) -> str:
    return str(value) if resource == PODS else format_units(resource, value)
