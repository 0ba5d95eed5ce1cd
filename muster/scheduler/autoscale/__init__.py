"""The autoscaler's decision: which nodes to ask of which pools, and which idle ones to give back.

Pure, like the rest of the core (no I/O, no clock: ``now`` is passed in), so the control plane
and the simulator run the same decision and a benchmark can time it. Decide-then-apply, as in
Ray's autoscaler v2: :func:`plan` reads the cluster and the *scheduler's own verdicts* (the
gangs it left pending because no node could take them) and returns a :class:`ScalePlan`; the
caller applies it (writes NodeClaims and events, asks providers).

**Scale up.** Gangs are taken in queue order (priority, then queue time). Each is placed, pod
by pod (largest first), on the room there is: free room on Ready nodes, nodes coming up, and
nodes this plan already asked for (so two 4-GPU jobs share one new 8-GPU node). Whatever is
left goes onto new nodes of *one* pool (new nodes of one pool share its topology labels, so a
gang stays in one zone or rack), the pool chosen as Karpenter chooses: highest ``weight``
first, then spot where the gang tolerates it (the spot taint), then the lowest cost of the
nodes needed, then the fewest nodes, then the name. A gang needing a topology level the
pool's template does not label (per-node levels such as the hostname) must fit one node. A
gang the scheduler could not place on the Ready nodes is never planned onto them alone: the
scheduler's verdict wins over this simpler arithmetic. Pools below ``min_nodes`` are topped
up.

**Scale down.** A node of a pool that is empty (nothing runs there), planned for no gang, and
has been empty for the pool's TTL is removed, oldest-empty first, as long as the pool keeps
``min_nodes``.

Speed: gangs are grouped by shape (pod sets, flavors); per shape the pools that could host
it are ranked once, and the nodes one pool needs for a shape are computed once, so a plan for
1,000 pending gangs and 50 pools takes tens of milliseconds (``benchmarks/autoscale_decision.py``).
"""

from collections.abc import Sequence

from muster.scheduler.autoscale.model import Bin, Gang, NewNode, Pool, ScalePlan
from muster.scheduler.autoscale.planner import Planner

__all__ = ["Bin", "Gang", "NewNode", "Pool", "ScalePlan", "plan"]


def plan(
    gangs: Sequence[Gang],
    pools: Sequence[Pool],
    bins: Sequence[Bin],
    now: float = 0.0,
    *,
    ready_verdict: bool = True,
) -> ScalePlan:
    """Decide the scale-up for ``gangs`` and the scale-down of idle pool nodes (module doc).

    ``ready_verdict`` False drops the rule that a gang the scheduler could not place is never
    planned onto Ready nodes alone: for gangs that run (may they move elsewhere?), and for
    verdicts older than a Ready node (the scheduler has not seen its room yet). Nothing
    passed in is changed."""
    planner = Planner(pools, bins, ready_verdict)
    out = ScalePlan()
    for gang in sorted(gangs, key=lambda g: (-g.priority, g.queue_time, g.namespace, g.name)):
        planner.place(gang, out)
    planner.top_up(out)
    out.remove = planner.idle(now, out)
    return out
