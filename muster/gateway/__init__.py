"""The serving gateway: the OpenAI-compatible (and KServe v2) front door of the
InferenceServices, which ``muster up`` serves on a port of its own (docs/serving.md).

:mod:`.gateway` routes requests by model to a revision and a replica, holds them while no
replica can take them (at zero, while one starts, all busy), retries a failed one once on
another replica and streams replies through; :mod:`.routing` holds the load-balancing
strategies, :mod:`.probe` the readiness probes, :mod:`.upstream` the hop to a replica,
:mod:`.table` what the control plane hands over (routes) and gets back (load), :mod:`.server`
the thread and port it runs on, :mod:`.metrics` its Prometheus metrics. It imports nothing
from the control plane: the serving controller pushes routes in and reads the load out.
"""
