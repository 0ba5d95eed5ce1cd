"""Readiness probes: a replica gets traffic only once its readiness path answered 200.

A replica that is not ready (starting, or taken out of routing because a request could not
reach it) is probed every 20 ms, so a held request goes out within 20 ms of its replica turning
ready; a ready one every second, and three failed probes in a row take it out of routing. Every
change of a replica's readiness pokes the control plane, which records it in the status.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

from muster.gateway.table import ReplicaState, RevisionState, ServiceState
from muster.gateway.upstream import Failed

if TYPE_CHECKING:
    from muster.gateway.gateway import Gateway

__all__ = ["probe_loop"]

PROBE_STARTING = 0.02
PROBE_READY = 1.0
PROBE_FAILURES = 3  # consecutive failed probes that take a ready replica out of routing
_PROBE_TIMEOUT = 1.0


async def probe_loop(gateway: Gateway, wake: asyncio.Event) -> None:
    """Probe every replica when it is due, until cancelled; ``wake`` says the routes changed."""
    loop = asyncio.get_running_loop()
    running: set[asyncio.Task[None]] = set()
    while True:
        now = time.monotonic()
        nearest = now + PROBE_READY
        for svc in list(gateway.services.values()):
            for rev in list(svc.revisions.values()):
                for r in list(rev.replicas.values()):
                    if r.next_probe <= now and not r.probing:
                        r.probing = True
                        r.next_probe = now + (PROBE_READY if r.routable else PROBE_STARTING)
                        task = loop.create_task(_probe(gateway, svc, rev, r))
                        running.add(task)
                        task.add_done_callback(running.discard)
                    nearest = min(nearest, r.next_probe)
        wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), max(0.001, nearest - time.monotonic()))


async def _probe(gateway: Gateway, svc: ServiceState, rev: RevisionState, r: ReplicaState) -> None:
    b = r.backend
    ok = False
    try:
        async with asyncio.timeout(_PROBE_TIMEOUT):
            response = await gateway.pool.request(b.host, b.port, "GET", b.readiness_path.encode(), [])
            await response.read()
            response.release()
            ok = response.status == 200
    except (Failed, TimeoutError):
        ok = False
    finally:
        r.probing = False
    if r.gone or r.backend is not b:
        return
    was = r.routable
    if ok:
        r.probe_failures = 0
        r.ready, r.down = True, False
    else:
        r.probe_failures += 1
        if not r.ready or r.probe_failures >= PROBE_FAILURES:
            r.ready = False
    if r.routable != was:
        rev.router.set_members(rev.members())
        if r.routable:
            gateway.dispatch(svc, rev)
        gateway.poke(svc.route.namespace, svc.route.name)
