"""Retention: what keeps a long-running server's store and memory bounded.

It owns the removal of Events older than their time to live or beyond a number per object
(:mod:`.events`), and of finished Pods beyond a threshold once their Workload is done
(:mod:`.pods`, Kubernetes' terminated-pod garbage collection). Its limits are settings
(``MUSTER_EVENT_TTL_SECONDS``, ``MUSTER_EVENTS_PER_OBJECT``, ``MUSTER_FINISHED_POD_LIMIT``,
docs/operations.md).
"""
