"""Muster's controllers: level-triggered reconcilers that move objects through their lifecycles.

One subpackage per capability (docs/control-plane.md, "Code map"):

* :mod:`.manager`, :mod:`.context`, :mod:`.cache`: the manager that runs every controller and
  the scheduler loop in passes, what they share (store, cache, clock, runtimes) and the
  informer cache they read;
* :mod:`.scheduling`: the scheduler loop (snapshot, ``schedule()``, decisions written back),
  the Workload controller, priorities and the default queues;
* :mod:`.trainingjob`: the TrainingJob controller and the pods it makes;
* :mod:`.workflow`: the Workflow controller, its DAG, cache, retries and artifacts;
* :mod:`.pods`: the pod executor (bound pods to the runtime and back), stop requests, GC;
* :mod:`.nodes`: node registration, health (taints, NotReady, NodeLost, drain), GPU monitor;
* :mod:`.insight`: read-only views: why, doctor, usage, the GPU view and metrics.

Rules shared with the CLI and the dashboard (labels, conditions, lifecycles) live in
:mod:`muster.api`, below all of them.
"""
