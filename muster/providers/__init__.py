"""Node providers: where a NodePool's nodes come from (docs/capacity.md).

A provider makes and removes machines on request; the capacity controller
(:mod:`muster.controllers.capacity`) decides when, records each request as a NodeClaim first,
and calls the provider with the claim's name as the idempotency key. The contract is
:class:`muster.providers.base.NodeProvider` (one file to implement for a cloud); the ones
Muster ships are ``local`` (fake-GPU nodes inside ``muster up``), ``hook`` (an executable
speaking JSON, e.g. a script that scales a cloud node group), ``kubernetes`` (a
ProvisioningRequest per node for the cluster autoscaler) and ``python`` (a class of yours).
"""
