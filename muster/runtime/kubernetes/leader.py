"""One active Muster per cluster: leader election on a ``coordination.k8s.io/v1`` Lease.

The rules are client-go's (``k8s.io/client-go/tools/leaderelection``), so they read the same to
anyone who runs kube-scheduler or kube-controller-manager:

* the holder renews the Lease every ``retry_seconds``; it leads while its last successful
  renewal is younger than ``renew_deadline_seconds``. Past that it stops at once (every write of
  the runtime asks :meth:`LeaderElector.held` first), whether or not anyone took over;
* a candidate takes the Lease once its holder is empty (released on a clean stop) or once the
  Lease has not changed for ``lease_seconds`` *as this candidate observed it*: expiry is
  measured on the candidate's own monotonic clock from when it last saw the record change, so
  clock skew between machines cannot make two leaders. ``renew_deadline < lease``, so the old
  leader has stopped writing before a candidate may take over;
* every write of the Lease carries the ``resourceVersion`` it read: of two candidates racing,
  the API server lets one win (409 for the other).

Lifecycle of this elector (``_state``):

=========  ===========  =====================================================================
from       to           edge
=========  ===========  =====================================================================
standby    leading      the Lease was created, found empty, or found expired, and taken
leading    leading      renewed in time
leading    standby      a renewal failed for ``renew_deadline_seconds`` (or another took it)
leading    stopped      :meth:`stop`: the Lease is released (holder emptied) for a fast handover
standby    stopped      :meth:`stop`
=========  ===========  =====================================================================
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from muster.api.conditions import wire_time
from muster.runtime.kubernetes.api import api_message, read_json, status_of
from muster.runtime.kubernetes.config import MANAGED_BY_LABEL, MANAGED_BY_VALUE, KubernetesConfig

__all__ = ["LeaderElector"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
_NOT_FOUND, _CONFLICT = 404, 409


class LeaderElector:
    """Campaigns for the Lease on a thread of its own from :meth:`start` until :meth:`stop`.

    ``api`` is a ``kubernetes.client.ApiClient``; ``clock`` is monotonic (tests pass their own).
    """

    def __init__(
        self, api: Any, config: KubernetesConfig, clock: Callable[[], float] = time.monotonic
    ) -> None:
        from kubernetes import client

        self.leases = client.CoordinationV1Api(api)
        self.config = config
        self.namespace = config.namespace_of_lease()
        self.name = config.lease_name
        self.identity = config.identity
        self.clock = clock
        self._cond = threading.Condition()
        self._renewed_at: float | None = None  # our last successful acquire or renewal
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.transitions = 0  # times this elector became the leader

    # -- public --------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="muster-k8s-leader", daemon=True)
        self._thread.start()

    def held(self) -> bool:
        """Whether this server leads now (renewed within the renew deadline)."""
        with self._cond:
            return self._held_locked()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for leadership; whether it is held."""
        deadline = self.clock() + timeout
        with self._cond:
            while not self._held_locked():
                left = deadline - self.clock()
                if left <= 0 or self._stop.is_set():
                    return False
                self._cond.wait(min(left, self.config.retry_seconds))
            return True

    def stop(self, release: bool = True) -> None:
        """Stop campaigning; a leader empties the Lease so a standby takes over at once
        (``release=False`` leaves it to expire, as a crashed server would)."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=self.config.renew_deadline_seconds)
        was_leading = self.held()
        with self._cond:
            self._renewed_at = None
        if release and was_leading:
            self._release()

    # -- the campaign (on the elector's thread) ------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            leading = self.held()
            try:
                self._try_acquire_or_renew()
            except Exception as exc:  # the API server away: try again, leadership lapses meanwhile
                log.warning("leader election on Lease %s/%s: %s", self.namespace, self.name, api_message(exc))
            now_leading = self.held()
            if now_leading and not leading:
                self.transitions += 1
                log.info("leading: holding Lease %s/%s as %s", self.namespace, self.name, self.identity)
            elif leading and not now_leading:
                log.warning("lost the leader Lease %s/%s: standing by", self.namespace, self.name)
            with self._cond:
                self._cond.notify_all()
            # Renewals and a candidate's tries alike come every RetryPeriod, as in client-go.
            self._stop.wait(self.config.retry_seconds)

    def _try_acquire_or_renew(self) -> bool:
        now = self.clock()
        try:
            lease = read_json(
                self.leases.read_namespaced_lease(self.name, self.namespace, _preload_content=False)
            )
        except Exception as exc:
            if status_of(exc) != _NOT_FOUND:
                raise
            return self._write(None, now)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        duration = float(spec.get("leaseDurationSeconds") or self.config.lease_seconds)
        if holder and holder != self.identity:
            with self._cond:
                self._renewed_at = None  # taken from us (we were too slow to renew): stop now
            if now < self._observed_at + duration:
                return False  # another leads, and its Lease is fresh
        return self._write(lease, now)

    def _write(self, lease: Obj | None, now: float) -> bool:
        stamp = _micro_time()
        mine = lease is not None and (lease.get("spec") or {}).get("holderIdentity") == self.identity
        spec: Obj = dict((lease or {}).get("spec") or {})
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=int(self.config.lease_seconds),
            renewTime=stamp,
        )
        if not mine:
            spec["acquireTime"] = stamp
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (lease is not None)
        try:
            if lease is None:
                body = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {
                        "name": self.name,
                        "namespace": self.namespace,
                        "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE},
                    },
                    "spec": spec,
                }
                written = read_json(
                    self.leases.create_namespaced_lease(self.namespace, body, _preload_content=False)
                )
            else:
                body = {**lease, "spec": spec}  # metadata keeps its resourceVersion: optimistic
                written = read_json(
                    self.leases.replace_namespaced_lease(
                        self.name, self.namespace, body, _preload_content=False
                    )
                )
        except Exception as exc:
            if status_of(exc) == _CONFLICT:
                return False  # another candidate wrote first
            raise
        written_spec = written.get("spec") or {}
        with self._cond:
            self._renewed_at = now
            self._observed = (self.identity, str(written_spec.get("renewTime") or stamp))
            self._observed_at = now
        return True

    def _release(self) -> None:
        try:
            lease = read_json(
                self.leases.read_namespaced_lease(self.name, self.namespace, _preload_content=False)
            )
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            spec = {**lease["spec"], "holderIdentity": "", "leaseDurationSeconds": 1}
            read_json(
                self.leases.replace_namespaced_lease(
                    self.name, self.namespace, {**lease, "spec": spec}, _preload_content=False
                )
            )
            log.info("released Lease %s/%s", self.namespace, self.name)
        except Exception as exc:  # it expires on its own
            log.warning("cannot release Lease %s/%s: %s", self.namespace, self.name, api_message(exc))

    def _held_locked(self) -> bool:
        return (
            self._renewed_at is not None
            and self.clock() - self._renewed_at < self.config.renew_deadline_seconds
        )


def _micro_time() -> str:
    """Now as a Kubernetes MicroTime (RFC 3339 with microseconds)."""
    return wire_time(datetime.now(UTC))
