"""The runtime's writes to the cluster: namespaces, Pods, the gang's Service, Bindings, deletions.

Each call is one or two API requests made on a writer thread, never on the manager's. A
write that cannot be made raises :class:`WriteError` with the API server's words. Every
write first asks the ``fence`` (the leader Lease, see :mod:`.leader`): a server that no
longer holds the Lease writes nothing, so two Muster servers never both bind.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

from muster.runtime.kubernetes.api import api_message, api_reason, read_json, status_of
from muster.runtime.kubernetes.pods import binding, gang_service, muster_uid

__all__ = ["ClusterWriter", "Verdict", "WriteError"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
# What to do about a Pod that holds the name of one being created.
Verdict = Literal["replace", "wait", "refuse"]
_FORBIDDEN, _NOT_FOUND, _CONFLICT, _TOO_MANY = 403, 404, 409, 429
_RETRY_PAUSE = 0.1


class WriteError(Exception):
    """A write the cluster refused (the message says why) or that this server may not make."""


class ClusterWriter:
    """Writes through ``core`` (a CoreV1Api) while ``fence()`` holds."""

    def __init__(self, core: Any, fence: Callable[[], bool]) -> None:
        self.core = core
        self.fence = fence
        self._namespaces: set[str] = set()
        self._lock = threading.Lock()

    def ensure_namespace(self, namespace: str) -> None:
        """Create the namespace unless this writer saw it exist (creating is how it finds out)."""
        with self._lock:
            if namespace in self._namespaces:
                return
        self._check_fence()
        try:
            read_json(
                self.core.create_namespace(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                    _preload_content=False,
                )
            )
        except Exception as exc:
            if status_of(exc) != _CONFLICT:
                raise WriteError(f"cannot create namespace {namespace}: {api_message(exc)}") from None
        with self._lock:
            self._namespaces.add(namespace)

    def create_pod(self, manifest: Obj, deadline: float, leftover: Callable[[Obj], Verdict]) -> Obj:
        """Create the Pod; the stored Pod. A Pod of that name already there is taken as is when it
        materialises the same Muster pod (a start repeated after a restart); otherwise
        ``leftover`` says whether to delete it first (an earlier incarnation that ended), wait for
        it to go (one still stopping) or give up (a Pod Muster did not create)."""
        meta = manifest["metadata"]
        ns, name = meta["namespace"], meta["name"]
        while True:
            self._check_fence()
            try:
                return read_json(self.core.create_namespaced_pod(ns, manifest, _preload_content=False))
            except Exception as exc:
                if _try_again(exc) and time.monotonic() < deadline:
                    time.sleep(_RETRY_PAUSE)
                    continue
                if status_of(exc) != _CONFLICT:
                    raise WriteError(f"cannot create pod {ns}/{name}: {api_message(exc)}") from None
            existing = self._read_pod(ns, name)
            if existing is None:
                continue  # deleted meanwhile
            if muster_uid(existing) == muster_uid(manifest):
                return existing
            verdict = leftover(existing)
            if verdict == "replace":
                log.info("deleting pod %s/%s, left by an earlier incarnation, to create the next", ns, name)
                self.delete_pod(ns, name, existing["metadata"]["uid"], 0)
                continue
            if verdict == "refuse":
                raise WriteError(f"a pod named {ns}/{name} that Muster did not create exists")
            if time.monotonic() >= deadline:
                raise WriteError(f"pod {ns}/{name} of an earlier run is still stopping")
            time.sleep(_RETRY_PAUSE)

    def ensure_service(self, namespace: str, workload: str, pods: Sequence[Obj]) -> None:
        """The gang's headless Service, owned by ``pods`` (created, or handed to them)."""
        body = gang_service(namespace, workload, pods)
        for _ in range(3):  # the garbage collector may remove an old one between two calls
            self._check_fence()
            try:
                read_json(self.core.create_namespaced_service(namespace, body, _preload_content=False))
                return
            except Exception as exc:
                if status_of(exc) != _CONFLICT:
                    raise WriteError(
                        f"cannot create the headless Service {namespace}/{workload}: {api_message(exc)}"
                    ) from None
            owners = body["metadata"]["ownerReferences"]
            patch = [{"op": "replace", "path": "/metadata/ownerReferences", "value": owners}]
            try:
                read_json(
                    self.core.patch_namespaced_service(workload, namespace, patch, _preload_content=False)
                )
                return
            except Exception as exc:
                if status_of(exc) != _NOT_FOUND:
                    raise WriteError(
                        f"cannot adopt the headless Service {namespace}/{workload}: {api_message(exc)}"
                    ) from None
        raise WriteError(f"the headless Service {namespace}/{workload} keeps disappearing")

    def bind(self, pod: Obj, node: str) -> None:
        """Bind the Pod (that incarnation) to ``node`` through the Binding subresource."""
        self._check_fence()
        meta = pod["metadata"]
        try:
            # The typed call binds but cannot parse 1.20's answer (a Status): read it raw.
            read_json(
                self.core.create_namespaced_binding(
                    meta["namespace"], binding(pod, node), _preload_content=False
                )
            )
        except Exception as exc:
            raise WriteError(
                f"binding pod {meta['namespace']}/{meta['name']} to node {node} failed: {api_message(exc)}"
            ) from None

    def delete_pod(self, namespace: str, name: str, uid: str, grace: float) -> None:
        """Delete that incarnation of the Pod with ``grace`` seconds; gone already is fine."""
        if not self.fence():
            log.warning("not deleting pod %s/%s: this server does not hold the leader Lease", namespace, name)
            return
        body = {"gracePeriodSeconds": math.ceil(grace), "preconditions": {"uid": uid}}
        try:
            read_json(self.core.delete_namespaced_pod(name, namespace, body=body, _preload_content=False))
        except Exception as exc:
            if status_of(exc) not in (_NOT_FOUND, _CONFLICT):  # gone, or a newer incarnation
                log.warning("cannot delete pod %s/%s: %s", namespace, name, api_message(exc))

    # -- helpers ----------------------------------------------------------------------------------

    def _read_pod(self, namespace: str, name: str) -> Obj | None:
        try:
            return read_json(self.core.read_namespaced_pod(name, namespace, _preload_content=False))
        except Exception as exc:
            if status_of(exc) == _NOT_FOUND:
                return None
            raise WriteError(f"cannot read pod {namespace}/{name}: {api_message(exc)}") from None

    def _check_fence(self) -> None:
        if not self.fence():
            raise WriteError("this Muster server does not hold the leader Lease")


def _try_again(exc: Exception) -> bool:
    """A refusal the API server means as "not yet": its ServiceAccount admission plugin waiting
    for a new namespace's ServiceAccount or its token (kube-controller-manager makes them
    shortly: 403 "error looking up service account", 500 ServerTimeout "No API token found"),
    or a server asking to slow down (429)."""
    status = status_of(exc)
    if status == _FORBIDDEN:
        return "service account" in api_message(exc)
    return status == _TOO_MANY or api_reason(exc) in ("ServerTimeout", "Timeout")
