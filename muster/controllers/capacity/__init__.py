"""Capacity: NodePools that grow while work waits and shrink when idle, spot interruptions, and
the cost ledger (docs/capacity.md, docs/cost.md).

It owns NodeClaims (spec and status), the status of NodePools and the UsageRecords of the cost
ledger, and writes on Nodes only what a drain asks (cordon, the interruption annotation) and
their deletion once their machine is gone:

* :mod:`.autoscaler` applies the pure decision :func:`muster.scheduler.autoscale.plan` to the
  scheduler's verdicts: it writes a NodeClaim for every node to ask for (before any provider is
  called) and the claim of every idle node to give back, each with an Event;
* :mod:`.claims` takes each NodeClaim through its lifecycle (:mod:`.lifecycle`): the provider
  call with backoff, registration, Ready, drain, termination, and the removal of machines no
  claim accounts for;
* :mod:`.interruption` turns a spot notice (injected, or reported by the provider) into a
  drain whose evictions keep the work's place in its queue;
* :mod:`.ledger` writes the cost ledger (a UsageRecord per pod run and per node lifetime);
* :mod:`.pools` reads NodePools and NodeClaims into what the others need; :mod:`.providers`
  opens each pool's provider.
"""
