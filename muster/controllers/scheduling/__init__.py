"""The scheduler loop and the Workload lifecycle around it.

It builds a :class:`muster.scheduler.Snapshot` from the cache (:mod:`.snapshot`,
:mod:`.cluster`), calls the pure ``schedule()``, and writes the decisions back (:mod:`.apply`:
admissions, preemptions, pending reasons) in :mod:`.loop`. The Workload controller
(:mod:`.workloads`) requeues evicted Workloads; :mod:`.priority` resolves PriorityClasses;
:mod:`.defaults` creates and sizes the default flavor and queues.
"""
