"""The ``kubernetes`` provider: a ProvisioningRequest per node, for the cluster autoscaler.

For a claim it creates, in ``providerConfig.namespace`` (default ``default``), a PodTemplate
``muster-<claim>`` (one pod asking for the whole node: its GPUs, with the pool's labels as
node selector and its taints tolerated) and a ``ProvisioningRequest``
(``autoscaling.x-k8s.io/v1``, class ``providerConfig.provisioningClassName``, default
``best-effort-atomic-scale-up.autoscaling.x-k8s.io``) asking for one such pod. The cluster
autoscaler (``--enable-provisioning-requests``) scales the node group whose template matches;
the request's conditions give the machine's state: ``Provisioned=True`` running, ``Failed=True``
or ``CapacityRevoked=True`` failed, else pending. The new Node registers with the node group's
labels, which must include the pool's template labels: the capacity controller binds the
first new Ready Node carrying them (and the pool label when the node group sets it) to the
claim. Deleting gives the request back; the cluster autoscaler removes the node once it is
empty (its own ``--scale-down-unneeded-time``), after Muster drained it.
"""

from __future__ import annotations

from typing import Any

from muster.api.labels import GPU
from muster.providers.base import Instance, NodeRequest, ProviderError
from muster.runtime.kubernetes.config import MANAGED_BY_LABEL, MANAGED_BY_VALUE, KubernetesConfig, api_client

__all__ = ["CLAIM_LABEL", "DEFAULT_CLASS", "GROUP", "PLURAL", "VERSION", "KubernetesProvider"]

GROUP = "autoscaling.x-k8s.io"
VERSION = "v1"
PLURAL = "provisioningrequests"
DEFAULT_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CLAIM_LABEL = "muster.dev/nodeclaim"

Obj = dict[str, Any]


class KubernetesProvider:
    name = "kubernetes"

    def __init__(self, config: dict[str, str], cluster: KubernetesConfig | None = None) -> None:
        self.namespace = config.get("namespace") or "default"
        self.klass = config.get("provisioningClassName") or DEFAULT_CLASS
        try:
            from kubernetes import client
        except ImportError:
            raise ProviderError(
                "the kubernetes provider needs the kubernetes client: pip install 'muster[k8s]'"
            ) from None
        try:
            self.api = api_client(cluster or KubernetesConfig(leader_election=False))
        except ValueError as exc:
            raise ProviderError(str(exc)) from None
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self._exc = client.exceptions.ApiException

    def create(self, request: NodeRequest) -> Instance:
        name = f"muster-{request.claim}"
        labels = {MANAGED_BY_LABEL: MANAGED_BY_VALUE, CLAIM_LABEL: request.claim}
        template = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": name, "namespace": self.namespace, "labels": labels},
            "template": {"metadata": {"labels": labels}, "spec": _pod_spec(request)},
        }
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ProvisioningRequest",
            "metadata": {"name": request.claim, "namespace": self.namespace, "labels": labels},
            "spec": {
                "provisioningClassName": self.klass,
                "podSets": [{"podTemplateRef": {"name": name}, "count": 1}],
            },
        }
        self._call(
            lambda: self.core.create_namespaced_pod_template(self.namespace, template), conflict_ok=True
        )
        self._call(
            lambda: self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, body),
            conflict_ok=True,
        )
        found = self.get(request.claim)
        if found is None:
            raise ProviderError(
                f"ProvisioningRequest {self.namespace}/{request.claim} vanished right after creation"
            )
        return found

    def get(self, claim: str) -> Instance | None:
        try:
            obj = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, claim)
        except self._exc as exc:
            if exc.status == 404:
                return None
            raise ProviderError(_message(exc, f"read ProvisioningRequest {self.namespace}/{claim}")) from None
        return _instance(obj)

    def list(self) -> list[Instance]:
        selector = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"
        out = self._call(
            lambda: self.custom.list_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, label_selector=selector
            )
        )
        return [_instance(item) for item in (out or {}).get("items") or []]

    def delete(self, claim: str) -> None:
        self._call(
            lambda: self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, claim
            ),
            missing_ok=True,
        )
        self._call(
            lambda: self.core.delete_namespaced_pod_template(f"muster-{claim}", self.namespace),
            missing_ok=True,
        )

    def close(self) -> None:
        self.api.close()

    def _call(self, fn: Any, conflict_ok: bool = False, missing_ok: bool = False) -> Any:
        try:
            return fn()
        except self._exc as exc:
            if (conflict_ok and exc.status == 409) or (missing_ok and exc.status == 404):
                return None
            if exc.status == 404 and "provisioningrequests" in str(exc.body or ""):
                raise ProviderError(
                    "the cluster serves no ProvisioningRequest (autoscaling.x-k8s.io/v1): install the "
                    "cluster autoscaler's CRD and run it with --enable-provisioning-requests"
                ) from None
            raise ProviderError(_message(exc, "the Kubernetes API refused the call")) from None
        except OSError as exc:
            raise ProviderError(f"cannot reach the Kubernetes API: {exc}") from None


def _pod_spec(request: NodeRequest) -> Obj:
    resources: Obj = {"cpu": "100m"}
    if request.gpus:
        resources[GPU] = str(request.gpus)
    selector = {k: v for k, v in request.labels.items() if not k.startswith("muster.dev/")}
    spec: Obj = {
        "containers": [
            {
                "name": "capacity",
                "image": "registry.k8s.io/pause:3.9",
                "resources": {"requests": resources, "limits": resources},
            }
        ],
        "nodeSelector": selector,
    }
    if request.taints:
        spec["tolerations"] = [
            {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect} for t in request.taints
        ]
    return spec


def _instance(obj: Obj) -> Instance:
    meta = obj.get("metadata") or {}
    conditions = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}

    def true(kind: str) -> Obj | None:
        c = conditions.get(kind)
        return c if c is not None and c.get("status") == "True" else None

    failed = true("Failed") or true("CapacityRevoked")
    if failed is not None:
        state, message = (
            "failed",
            f"{failed.get('reason') or failed['type']}: {failed.get('message') or ''}".strip(),
        )
    elif true("Provisioned") is not None:
        state, message = "running", "provisioned by the cluster autoscaler"
    else:
        state, message = "pending", "waiting for the cluster autoscaler"
    return Instance(
        claim=(meta.get("labels") or {}).get(CLAIM_LABEL) or meta.get("name", ""),
        provider_id=f"provisioningrequest://{meta.get('namespace')}/{meta.get('name')}",
        state=state,  # type: ignore[arg-type]
        message=message,
    )


def _message(exc: Any, what: str) -> str:
    return f"{what}: {exc.status} {exc.reason}"
