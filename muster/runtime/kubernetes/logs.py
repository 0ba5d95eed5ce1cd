"""Container logs of a cluster's Pods, through the pods/log API.

A Pod's log lives as long as the Pod: Muster keeps a Pod that ended until its Muster pod is
deleted (see the runtime's ``retain_only``), so ``muster logs`` reads a finished job's output.
An earlier incarnation (a Pod recreated under the same name, e.g. after a gang restart) is
gone with its Pod: ``previous`` is refused with a message saying so.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from muster.runtime.base import PodNotFound, PodRef, SupportsLogs
from muster.runtime.kubernetes.api import api_message, close_response, interrupt_response

__all__ = ["PodLogs"]

_CHUNK = 16 * 1024
_CANCEL_CHECK = 0.2


class PodLogs(SupportsLogs):
    """Reads logs for anyone with an API client (the leader's runtime, or a standby server)."""

    def __init__(self, api: Any) -> None:
        from kubernetes import client

        self.core = client.CoreV1Api(api)

    def logs(
        self,
        pod: PodRef,
        container: str | None = None,
        *,
        follow: bool = False,
        previous: bool = False,
        cancel: threading.Event | None = None,
    ) -> Iterator[str]:
        if previous:
            raise PodNotFound(
                f"pod {pod}: logs of an earlier incarnation are not kept on Kubernetes (a Pod recreated "
                "under the same name starts a new log)"
            )
        from kubernetes.client.exceptions import ApiException

        kwargs: dict[str, Any] = {"follow": follow, "_preload_content": False}
        if container:
            kwargs["container"] = container
        try:
            response = self.core.read_namespaced_pod_log(pod.name, pod.namespace, **kwargs)
        except ApiException as exc:
            raise PodNotFound(f"pod {pod}: {api_message(exc)}") from None
        return _lines(response, cancel)


def _lines(response: Any, cancel: threading.Event | None) -> Iterator[str]:
    done = threading.Event()

    def close_on_cancel() -> None:
        # A followed log blocks in a read; closing the response from here ends it.
        while cancel is not None and not done.wait(_CANCEL_CHECK):
            if cancel.is_set():
                interrupt_response(response)
                return

    watcher = threading.Thread(target=close_on_cancel, name="muster-k8s-log-cancel", daemon=True)
    if cancel is not None:
        watcher.start()
    pending = b""
    try:
        for chunk in response.stream(_CHUNK, decode_content=False):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line.decode("utf-8", errors="replace") + "\n"
            if cancel is not None and cancel.is_set():
                return
    except Exception:  # the reader went away and the response was closed under us
        if cancel is None or not cancel.is_set():
            raise
    finally:
        done.set()
        close_response(response)
    if pending:
        yield pending.decode("utf-8", errors="replace")
