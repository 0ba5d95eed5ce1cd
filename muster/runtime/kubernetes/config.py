"""How Muster reaches a cluster, and the names it writes there.

The connection follows kubectl's rules: ``--kubeconfig PATH`` (else ``$KUBECONFIG``, else
``~/.kube/config``) with ``--context NAME`` (else the file's current context); inside a pod
with no kubeconfig given, the pod's service account (in-cluster config).

Importing this module does not import the ``kubernetes`` package (an optional dependency, the
``k8s`` extra): ``muster up --help`` and the local runtime never pay for it.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "GANG_LABEL",
    "MANAGED_BY_LABEL",
    "MANAGED_BY_VALUE",
    "SCHEDULER_NAME",
    "UID_ANNOTATION",
    "KubernetesConfig",
    "MissingClient",
    "api_client",
    "in_cluster",
    "in_cluster_namespace",
]

# Every object Muster creates in the cluster carries this label (the selector of its watches).
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "muster"
# The uid of the Muster Pod a Kubernetes Pod materialises (its own uid is the cluster's).
UID_ANNOTATION = "muster.dev/pod-uid"
# The Workload a pod belongs to: the controllers' label (muster.controllers.pods.stop.WORKLOAD_LABEL),
# here the selector of the gang's headless Service.
GANG_LABEL = "muster.dev/workload"
SCHEDULER_NAME = "muster"
_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class MissingClient(RuntimeError):
    """The ``kubernetes`` python package is not installed."""

    def __init__(self) -> None:
        super().__init__(
            "the Kubernetes runtime needs the kubernetes python client: pip install 'muster[k8s]'"
        )


@dataclass(frozen=True)
class KubernetesConfig:
    """``muster up --runtime kubernetes`` options: the cluster, the Lease, and API concurrency.

    ``lease_seconds`` / ``renew_deadline_seconds`` / ``retry_seconds`` follow client-go's leader
    election (15 s, 10 s, 2 s): a leader that cannot renew for ``renew_deadline_seconds`` stops
    binding, and a standby takes over once the Lease is ``lease_seconds`` old.
    """

    kubeconfig: Path | None = None
    context: str | None = None
    lease_namespace: str | None = None  # None: the namespace Muster runs in, else "default"
    lease_name: str = "muster"
    lease_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_seconds: float = 2.0
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}")
    workers: int = 8  # concurrent API writes (pod creations, bindings, deletions)
    leader_election: bool = True  # off: this server writes unconditionally (one server only)

    def __post_init__(self) -> None:
        if not 0 < self.retry_seconds < self.renew_deadline_seconds < self.lease_seconds:
            raise ValueError(
                "leader election: need 0 < retry_seconds < renew_deadline_seconds < lease_seconds, got "
                f"{self.retry_seconds}, {self.renew_deadline_seconds}, {self.lease_seconds}"
            )
        if self.workers < 1:
            raise ValueError(f"workers: must be >= 1, got {self.workers}")

    def namespace_of_lease(self) -> str:
        return self.lease_namespace or in_cluster_namespace() or "default"


def in_cluster() -> bool:
    """Whether this process runs in a Kubernetes pod (the service's environment is injected)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and _SERVICE_ACCOUNT_NAMESPACE.exists()


def in_cluster_namespace() -> str | None:
    try:
        return _SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or None
    except OSError:
        return None


def api_client(config: KubernetesConfig) -> Any:
    """A ``kubernetes.client.ApiClient`` for ``config`` (close it when done)."""
    try:
        from kubernetes import client
        from kubernetes import config as kube_config
    except ImportError:
        raise MissingClient() from None
    configuration = client.Configuration()
    # The writers, two watches, the Lease and the manager's own calls each hold a connection.
    configuration.connection_pool_maxsize = config.workers + 8
    if config.kubeconfig is None and config.context is None and in_cluster():
        kube_config.load_incluster_config(client_configuration=configuration)
        return client.ApiClient(configuration)
    path = str(config.kubeconfig) if config.kubeconfig is not None else None
    try:
        return kube_config.new_client_from_config(
            config_file=path, context=config.context, client_configuration=configuration
        )
    except kube_config.ConfigException as exc:
        where = path or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise ValueError(f"cannot use kubeconfig {where}: {exc}") from None
