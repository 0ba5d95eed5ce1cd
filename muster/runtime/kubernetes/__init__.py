"""The Kubernetes runtime: Muster as the batch scheduler and job controller of a real cluster.

Muster keeps its own store and API and decides admission and placement itself; this runtime
turns each admitted gang into Pods bound (through the Binding subresource) to the nodes the
scheduler chose, follows Nodes and Pods by watch, and holds a Lease so that one Muster server
binds at a time. See docs/kubernetes.md.

Submodules: :mod:`.config` (connection, names), :mod:`.runtime` (the runtime),
:mod:`.pods` / :mod:`.nodes` (conversions), :mod:`.informer` (watches), :mod:`.writer` (API
writes), :mod:`.logs` (pods/log), :mod:`.leader` (the Lease). Only :mod:`.config` may be
imported without the ``kubernetes`` package installed.
"""
