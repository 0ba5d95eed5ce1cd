"""Why is this job (Workload, pod) where it is? Pure functions from objects to an answer.

:func:`explain` takes the object asked about and a :class:`WhyContext` (the objects around
it, fetched by the caller: its job, Workload, pods, the queues, every Workload, events, the
failing replica's log tail) and builds an :class:`Explanation`: the state, one headline,
the reason code and message, and the facts behind them, chosen by state:

* waiting: the Workload's pending reason and the scheduler's message (numbers and the
  unblocking condition), its position in its ClusterQueue by the queue order (priority,
  then queue time: creation, or eviction after a requeue), the quota of the queue against
  what it asks, and what would unblock it (:mod:`.pending`); and, named first, the root cause
  when the scheduler's constraint is only its consequence: an unhealthy GPU, a cordoned or
  lost node, no GPUs at all, a queue's borrowing or lending limit (:mod:`.rootcause`);
* failed or restarting: the classified reason (BackoffLimitExceeded, DeadlineExceeded, a
  replica's OOMKilled or exit code) and the log tail of the replica that failed first;
* preempted or requeued: by whom and when;
* running: where each pod runs (node, GPUs).

``muster why`` renders it; the server and the dashboard can serve ``to_dict()`` as is.
"""

from muster.controllers.insight.explain.build import explain, failing_pod
from muster.controllers.insight.explain.facts import (
    Explanation,
    FailureFacts,
    PodFacts,
    PreemptionFacts,
    QueueFacts,
    RootCause,
    WhyContext,
)

__all__ = [
    "Explanation",
    "FailureFacts",
    "PodFacts",
    "PreemptionFacts",
    "QueueFacts",
    "RootCause",
    "WhyContext",
    "explain",
    "failing_pod",
]
