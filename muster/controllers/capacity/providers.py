"""Opening the provider of a NodePool (or of a NodeClaim, which keeps its pool's settings).

Providers are opened once per (name, settings) and kept; an error opening one (an unknown
class, a missing client library) is a :class:`ProviderError`, which leaves the claim pending
with the message, as a failed call does.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from muster.providers.base import NodeProvider, ProviderError
from muster.runtime.kubernetes.config import KubernetesConfig

__all__ = ["Providers"]


class Providers:
    """The providers in use, by name and settings."""

    def __init__(
        self, runtime: Any, clock: Callable[[], float], kubernetes: KubernetesConfig | None = None
    ) -> None:
        self.runtime = runtime
        self.clock = clock
        self.kubernetes = kubernetes
        self._open: dict[tuple[str, tuple[tuple[str, str], ...]], NodeProvider] = {}

    def of(self, name: str, config: Mapping[str, str]) -> NodeProvider:
        key = (name, tuple(sorted(config.items())))
        provider = self._open.get(key)
        if provider is None:
            provider = self._open[key] = self._make(name, config)
        return provider

    def opened(self) -> list[NodeProvider]:
        return list(self._open.values())

    def close(self) -> None:
        for provider in self._open.values():
            close = getattr(provider, "close", None)
            if callable(close):
                close()
        self._open.clear()

    def _make(self, name: str, config: Mapping[str, str]) -> NodeProvider:
        if name == "local":
            from muster.providers.local import LocalProvider

            return LocalProvider(self.runtime, self.clock)
        if name == "hook":
            from muster.providers.hook import HookProvider

            return HookProvider(config)
        if name == "kubernetes":
            from muster.providers.kubernetes import KubernetesProvider

            return KubernetesProvider(dict(config), self.kubernetes)
        if name == "python":
            return _load(config)
        raise ProviderError(f"unknown provider {name!r}")


def _load(config: Mapping[str, str]) -> NodeProvider:
    target = config.get("class") or ""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ProviderError(f"providerConfig.class {target!r} must be module:Class, e.g. mycloud:Provider")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ProviderError(f"cannot load provider class {target}: {exc}") from None
    try:
        provider = cls(dict(config))
    except Exception as exc:  # the user's constructor: whatever it raises is its message
        raise ProviderError(f"provider class {target} failed to start: {exc}") from None
    if not isinstance(provider, NodeProvider):
        raise ProviderError(f"{target} is not a NodeProvider (it needs name, create, get, list and delete)")
    return provider
