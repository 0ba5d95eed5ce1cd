"""Namespaces and their quotas: the Namespace controller gives a new Namespace its ``default``
LocalQueue (once; docs/access-control.md, "Namespaces"), and the quota controller keeps each
ResourceQuota's ``status.used`` (what the namespace's admitted Workloads hold). Enforcing the
quotas is the scheduler's (:mod:`muster.scheduler.namespaces`)."""
