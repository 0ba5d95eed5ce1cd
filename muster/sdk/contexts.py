"""The client config file: servers, credentials and contexts, in kubeconfig's shape.

``$MUSTER_HOME/config`` (or ``$MUSTER_CONFIG``), YAML, mode 0600 (it holds tokens)::

    apiVersion: muster.dev/v1
    kind: Config
    current-context: team-a
    clusters:
    - name: lab
      cluster: {server: http://gpu-box:7070}
    users:
    - name: alice
      user: {token: mst_...}
    contexts:
    - name: team-a
      context: {cluster: lab, user: alice, namespace: team-a}

A context names a cluster (its server), a user (its token) and a default namespace;
``muster config use-context NAME`` picks one, ``$MUSTER_CONTEXT`` overrides the pick for one
shell. :func:`muster.sdk.client.discover` reads it after ``--server``/``--token`` and
``MUSTER_SERVER``/``MUSTER_TOKEN``, before what a local ``muster up`` wrote.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from muster.home import config_path, home_dir

__all__ = [
    "ClientConfig",
    "ConfigError",
    "Resolved",
    "context_namespace",
    "current_context",
    "load_config",
    "save_config",
]

_KIND = "Config"
_API_VERSION = "muster.dev/v1"


class ConfigError(ValueError):
    """A config file that cannot be read or names something it does not define."""


@dataclass(frozen=True)
class Resolved:
    """What a context stands for."""

    name: str
    server: str | None
    token: str | None
    namespace: str | None


@dataclass
class ClientConfig:
    """The file as maps by name (the file keeps kubeconfig's lists)."""

    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    contexts: dict[str, dict[str, Any]] = field(default_factory=dict)
    current_context: str | None = None

    def resolve(self, name: str | None = None) -> Resolved | None:
        """The context ``name`` (default: the current one); None when there is none to use."""
        chosen = name or self.current_context
        if not chosen:
            return None
        context = self.contexts.get(chosen)
        if context is None:
            known = ", ".join(sorted(self.contexts)) or "none"
            raise ConfigError(f"context {chosen!r} is not in the config (known: {known})")
        cluster = self.clusters.get(str(context.get("cluster") or ""), {})
        user = self.users.get(str(context.get("user") or ""), {})
        return Resolved(
            name=chosen,
            server=cluster.get("server"),
            token=user.get("token"),
            namespace=context.get("namespace") or None,
        )

    def to_dict(self, redact: bool = False) -> dict[str, Any]:
        def user(data: dict[str, Any]) -> dict[str, Any]:
            return {**data, "token": "REDACTED"} if redact and data.get("token") else dict(data)

        return {
            "apiVersion": _API_VERSION,
            "kind": _KIND,
            "current-context": self.current_context or "",
            "clusters": [{"name": n, "cluster": dict(c)} for n, c in sorted(self.clusters.items())],
            "users": [{"name": n, "user": user(u)} for n, u in sorted(self.users.items())],
            "contexts": [{"name": n, "context": dict(c)} for n, c in sorted(self.contexts.items())],
        }


def load_config(path: Path) -> ClientConfig:
    """The config at ``path`` (an empty one when the file does not exist)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return ClientConfig()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    import yaml  # here: every CLI call looks for the file, few have one

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with clusters, users and contexts")
    return ClientConfig(
        clusters=_named(data, "clusters", "cluster", path),
        users=_named(data, "users", "user", path),
        contexts=_named(data, "contexts", "context", path),
        current_context=data.get("current-context") or None,
    )


def current_context(home: str | Path | None = None) -> Resolved | None:
    """The context in use: ``$MUSTER_CONTEXT``, else the file's current-context; None when
    there is none. Reads the environment directly (every CLI call comes here, see
    :mod:`muster.home`)."""
    return load_config(config_path(home_dir(home))).resolve(os.environ.get("MUSTER_CONTEXT") or None)


def context_namespace() -> str | None:
    """The namespace of the context in use, if it names one; None too when the file does not
    read (the command reports that when it connects)."""
    try:
        resolved = current_context()
    except ConfigError:
        return None
    return resolved.namespace if resolved else None


def save_config(path: Path, config: ClientConfig) -> None:
    """Write ``config`` to ``path`` atomically, readable by its owner only (0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    import yaml

    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(config.to_dict(), f, sort_keys=False)
        os.chmod(tmp, 0o600)  # O_CREAT's mode is masked by the umask; the file must be 0600 whatever it is
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _named(data: dict[str, Any], key: str, inner: str, path: Path) -> dict[str, dict[str, Any]]:
    items = data.get(key) or []
    if not isinstance(items, list):
        raise ConfigError(f"{path}: {key} must be a list of {{name, {inner}}}")
    out: dict[str, dict[str, Any]] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not item.get("name") or not isinstance(item.get(inner) or {}, dict):
            raise ConfigError(f"{path}: {key}[{i}] must be {{name: ..., {inner}: {{...}}}}")
        out[str(item["name"])] = dict(item.get(inner) or {})
    return out
