"""Orderings: inside a queue, between queue heads, and between preemption candidates.

* Inside a ClusterQueue (Kueue's heap): higher priority, then older queue time (creation,
  or eviction after a requeue), then namespace/name.
* Between heads, classical: no borrowing before borrowing (lower borrowing height first),
  then higher priority, then older queue time; fair sharing: lower dominant resource share
  after admission first, then higher priority, then older queue time.
* Preemption candidates (Kueue's CandidatesOrdering): already evicted first, other queues
  before the preemptor's own, lower priority first, most recently admitted first, then
  namespace/name.
"""

from __future__ import annotations

from muster.scheduler.snapshot import AdmittedWorkload, PendingWorkload

__all__ = ["candidate_key", "classical_head_key", "fair_head_key", "queue_key"]


def queue_key(w: PendingWorkload) -> tuple:
    return (-w.priority, w.queue_time, w.namespace, w.name)


def classical_head_key(w: PendingWorkload, borrow: int) -> tuple:
    return (borrow, -w.priority, w.queue_time, w.namespace, w.name)


def fair_head_key(w: PendingWorkload, share: float) -> tuple:
    return (share, -w.priority, w.queue_time, w.namespace, w.name)


def candidate_key(w: AdmittedWorkload) -> tuple:
    """Order within one group of candidates (the evicted/other-queue split is by group)."""
    return (w.priority, -w.admission_time, w.namespace, w.name)
