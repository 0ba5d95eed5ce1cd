"""Read-only views over the cluster, pure functions of the objects: why a job is where it is
(:mod:`.explain`), what looks wrong (:mod:`.doctor`, :mod:`.checks`, :mod:`.findings`), usage
against capacity and quota (:mod:`.usage`), every GPU and its holders (:mod:`.gpuview`) and
the Prometheus metrics computed from them (:mod:`.metrics`).
"""
