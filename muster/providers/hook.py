"""The ``hook`` provider: an executable of yours makes and removes the machines.

Set ``providerConfig.command`` (split like a shell command line, no shell) and optionally
``providerConfig.timeoutSeconds`` (default 30). Muster runs ``COMMAND ACTION`` with a JSON
document on stdin and reads one JSON document from stdout:

=========  =======================================  =============================================
action     stdin                                    stdout
=========  =======================================  =============================================
create     the NodeRequest (below)                  an instance
get        ``{"claim": NAME}``                      an instance, or ``null``
list       ``{}``                                   a list of instances
delete     ``{"claim": NAME}``                      anything (ignored)
=========  =======================================  =============================================

A NodeRequest is ``{claim, pool, capacityType, pricePerHour, gpus, gpuModel, gpuMemoryBytes,
cpu, memory, labels, taints: [{key, value, effect}], migProfile, migSlices, readyInSeconds,
config}``; an instance is ``{claim, providerId, state: pending|running|failed|terminated,
nodeName?, message?, interruption?: {time: RFC 3339 or epoch seconds, action?}}``. A non-zero
exit status is an error whose message is the last line of stderr. ``create`` must be
idempotent per claim: a repeated create for a claim returns the machine already made.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from muster.api.conditions import epoch
from muster.providers.base import Instance, Interruption, NodeRequest, ProviderError

__all__ = ["HookProvider", "request_document"]

_STATES = ("pending", "running", "failed", "terminated")


class HookProvider:
    name = "hook"

    def __init__(self, config: Mapping[str, str]) -> None:
        command = config.get("command") or ""
        self.argv = shlex.split(command)
        if not self.argv:
            raise ProviderError("the hook provider needs providerConfig.command")
        try:
            self.timeout = float(config.get("timeoutSeconds") or 30)
        except ValueError:
            raise ProviderError(
                f"providerConfig.timeoutSeconds must be a number of seconds, got {config['timeoutSeconds']!r}"
            ) from None

    def create(self, request: NodeRequest) -> Instance:
        out = self._call("create", request_document(request))
        instance = _instance(out, "create")
        if instance is None:
            raise ProviderError(f"hook {self.argv[0]} create answered null; it must describe the machine")
        return instance

    def get(self, claim: str) -> Instance | None:
        return _instance(self._call("get", {"claim": claim}), "get")

    def list(self) -> list[Instance]:
        out = self._call("list", {})
        if not isinstance(out, list):
            raise ProviderError(f"hook {self.argv[0]} list must print a JSON list, got {type(out).__name__}")
        return [i for i in (_instance(item, "list") for item in out) if i is not None]

    def delete(self, claim: str) -> None:
        self._call("delete", {"claim": claim})

    def _call(self, action: str, body: Any) -> Any:
        try:
            done = subprocess.run(
                [*self.argv, action],
                input=json.dumps(body),
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
            )
        except FileNotFoundError:
            raise ProviderError(f"hook command {self.argv[0]} not found") from None
        except PermissionError:
            raise ProviderError(f"hook command {self.argv[0]} is not executable") from None
        except subprocess.TimeoutExpired:
            raise ProviderError(f"hook {self.argv[0]} {action} timed out after {self.timeout:g}s") from None
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            why = lines[-1] if lines else f"exit status {done.returncode}"
            raise ProviderError(f"hook {self.argv[0]} {action} failed: {why}")
        try:
            return json.loads(done.stdout or "null")
        except json.JSONDecodeError as exc:
            raise ProviderError(f"hook {self.argv[0]} {action} printed no JSON ({exc.msg})") from None


def request_document(request: NodeRequest) -> dict[str, Any]:
    """The JSON form of a request (camelCase keys), as a hook reads it."""
    data = asdict(request)
    return {
        "claim": data["claim"],
        "pool": data["pool"],
        "capacityType": data["capacity_type"],
        "pricePerHour": data["price_per_hour"],
        "gpus": data["gpus"],
        "gpuModel": data["gpu_model"],
        "gpuMemoryBytes": data["gpu_memory_bytes"],
        "cpu": data["cpu"],
        "memory": data["memory"],
        "labels": dict(request.labels),
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in request.taints],
        "migProfile": data["mig_profile"],
        "migSlices": data["mig_slices"],
        "readyInSeconds": data["ready_in_seconds"],
        "config": dict(request.config),
    }


def _instance(data: Any, action: str) -> Instance | None:
    if data is None:
        return None
    if not isinstance(data, dict) or not data.get("claim") or data.get("state") not in _STATES:
        raise ProviderError(
            f"hook {action} answered {json.dumps(data)[:200]}: an instance needs claim and state "
            f"({'|'.join(_STATES)})"
        )
    interruption = None
    notice = data.get("interruption")
    if isinstance(notice, dict) and notice.get("time") is not None:
        when = notice["time"]
        at = float(when) if isinstance(when, (int, float)) else epoch(str(when))
        if at is None:
            raise ProviderError(f"hook {action}: interruption.time {when!r} is not a time")
        interruption = Interruption(at, str(notice.get("action") or "terminate"))
    return Instance(
        claim=str(data["claim"]),
        provider_id=str(data.get("providerId") or ""),
        state=data["state"],
        node_name=str(data.get("nodeName") or ""),
        message=str(data.get("message") or ""),
        interruption=interruption,
    )
