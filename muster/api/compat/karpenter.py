"""Karpenter's ``karpenter.sh/v1 NodePool`` to Muster's NodePool, field by field where they map.

What maps: ``spec.template.metadata.labels`` and ``spec.template.spec.taints`` (the nodes'
labels and taints), the requirement ``karpenter.sh/capacity-type`` (one value: the pool's
capacity type), the GPU requirements (``karpenter.k8s.aws/instance-gpu-count``,
``karpenter.k8s.aws/instance-gpu-name``, ``nvidia.com/gpu.count``, ``nvidia.com/gpu.product``),
any other requirement ``In`` one value (a node label, e.g. a zone), ``spec.limits``,
``spec.weight`` and ``spec.disruption.consolidationPolicy`` / ``consolidateAfter``.

What Karpenter leaves to the cloud and Muster needs is read from annotations of the document:
``muster.dev/provider`` (default ``kubernetes``), ``muster.dev/price-per-hour``,
``muster.dev/max-nodes`` (else the GPU limit over the GPUs per node, else 10),
``muster.dev/provisioning-delay-seconds``. Everything else (nodeClassRef, expireAfter,
budgets, requirements with several values or other operators, ...) is kept in the
``muster.dev/ignored-fields`` annotation with a warning naming its path.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from muster.api.base import API_VERSION
from muster.api.compat.base import Conversion, Converter
from muster.api.errors import FieldError
from muster.api.labels import GPU

__all__ = ["CONVERTERS", "parse_duration"]

_GROUP = "karpenter.sh"
_CAPACITY_KEY = "karpenter.sh/capacity-type"
_GPU_COUNT_KEYS = ("karpenter.k8s.aws/instance-gpu-count", "nvidia.com/gpu.count")
_GPU_MODEL_KEYS = ("karpenter.k8s.aws/instance-gpu-name", "nvidia.com/gpu.product")
_ANNOTATIONS = {
    "muster.dev/provider": "provider",
    "muster.dev/price-per-hour": "pricePerHour",
    "muster.dev/max-nodes": "maxNodes",
    "muster.dev/provisioning-delay-seconds": "provisioningDelaySeconds",
}
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?$")
_DEFAULT_MAX_NODES = 10


def parse_duration(text: str) -> float | None:
    """A Go duration such as ``30s``, ``5m``, ``1h30m`` in seconds; None when it is not one."""
    m = _DURATION.match(text.strip()) if isinstance(text, str) and text.strip() else None
    if m is None or not any(m.groups()):
        return None
    h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return h * 3600 + mi * 60 + s


def _node_pool(doc: Mapping[str, Any]) -> Conversion:
    src = copy.deepcopy(dict(doc))
    meta = dict(src.get("metadata") or {})
    annotations = dict(meta.get("annotations") or {})
    spec = src.get("spec") if isinstance(src.get("spec"), dict) else {}
    template = spec.get("template") if isinstance(spec.get("template"), dict) else {}
    tmeta = template.get("metadata") if isinstance(template.get("metadata"), dict) else {}
    tspec = template.get("spec") if isinstance(template.get("spec"), dict) else {}
    out_meta = {k: v for k, v in meta.items() if k != "annotations"}
    kept_annotations = {k: v for k, v in annotations.items() if k not in _ANNOTATIONS}
    if kept_annotations:
        out_meta["annotations"] = kept_annotations
    native: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "NodePool", "metadata": out_meta}
    conversion = Conversion(doc=native)
    pool: dict[str, Any] = {"provider": annotations.get("muster.dev/provider", "kubernetes")}
    node: dict[str, Any] = {}
    labels = dict(tmeta.get("labels") or {})
    for key, value in tmeta.items():
        if key != "labels":
            conversion.keep(f"spec.template.metadata.{key}", value)
    for key, value in tspec.items():
        if key == "taints":
            node["taints"] = value
        elif key != "requirements":
            conversion.keep(f"spec.template.spec.{key}", value)
    _requirements(tspec.get("requirements") or [], pool, node, labels, conversion)
    if labels:
        node["labels"] = labels
    pool["template"] = node
    for key, value in spec.items():
        if key == "limits":
            pool["limits"] = value
        elif key == "weight":
            pool["weight"] = value
        elif key == "disruption":
            _disruption(value if isinstance(value, dict) else {}, pool, conversion)
        elif key != "template":
            conversion.keep(f"spec.{key}", value)
    _from_annotations(annotations, pool, conversion)
    if "maxNodes" not in pool:
        pool["maxNodes"] = _max_nodes(pool, conversion)
    if "pricePerHour" not in pool:
        conversion.warnings.append(
            FieldError(
                "metadata.annotations[muster.dev/price-per-hour]",
                "absent: Karpenter reads prices from the cloud, Muster from the pool; the price is 0",
                hint="set the annotation to what one node costs per hour",
            )
        )
    conversion.warnings.append(
        FieldError(
            "spec.template.spec.requirements",
            "node CPU and memory come from the instance types in Karpenter; the converted pool "
            f"offers {node.get('cpu', '8')} CPUs and {node.get('memory', '64Gi')} per node",
            hint="write a muster.dev/v1 NodePool to set template.cpu and template.memory",
        )
    )
    native["spec"] = pool
    conversion.paths = (
        ("spec.template.labels", "spec.template.metadata.labels"),
        ("spec.template.taints", "spec.template.spec.taints"),
        ("spec.consolidation", "spec.disruption"),
        *((f"spec.{field}", f"metadata.annotations[{key}]") for key, field in _ANNOTATIONS.items()),
    )
    return conversion


def _requirements(
    reqs: Any, pool: dict[str, Any], node: dict[str, Any], labels: dict[str, str], conversion: Conversion
) -> None:
    for i, req in enumerate(reqs if isinstance(reqs, list) else []):
        path = f"spec.template.spec.requirements[{i}]"
        if not isinstance(req, dict):
            conversion.keep(path, req)
            continue
        key, op, values = req.get("key"), req.get("operator"), list(req.get("values") or [])
        single = op == "In" and len(values) == 1
        if key == _CAPACITY_KEY and op == "In" and values:
            if len(values) == 1 and values[0] in ("spot", "on-demand"):
                pool["capacityType"] = values[0]
                continue
            pool["capacityType"] = "on-demand"
            conversion.warnings.append(
                FieldError(
                    path,
                    f"allows {', '.join(map(str, values))}: a Muster pool has one capacity type; "
                    "converted as on-demand",
                    hint="add a second NodePool with capacityType: spot (the autoscaler prefers spot "
                    "for work that tolerates it)",
                )
            )
        elif key in _GPU_COUNT_KEYS and single and str(values[0]).isdigit():
            node["gpus"] = int(values[0])
        elif key in _GPU_MODEL_KEYS and single:
            node["gpuModel"] = str(values[0])
        elif single and isinstance(key, str):
            labels[key] = str(values[0])
        else:
            conversion.keep(path, req)


def _disruption(value: dict[str, Any], pool: dict[str, Any], conversion: Conversion) -> None:
    rule: dict[str, Any] = {}
    for key, item in value.items():
        path = f"spec.disruption.{key}"
        if key == "consolidationPolicy" and item in ("WhenEmpty", "WhenEmptyOrUnderutilized"):
            rule["repackUnderutilized"] = item == "WhenEmptyOrUnderutilized"
        elif key == "consolidateAfter" and parse_duration(str(item)) is not None:
            rule["ttlSecondsAfterEmpty"] = parse_duration(str(item))
        else:
            conversion.keep(path, item)
    if rule:
        pool["consolidation"] = rule


def _from_annotations(annotations: dict[str, Any], pool: dict[str, Any], conversion: Conversion) -> None:
    for key, field in _ANNOTATIONS.items():
        if key not in annotations or field == "provider":
            continue
        text = str(annotations[key])
        try:
            pool[field] = int(text) if field == "maxNodes" else float(text)
        except ValueError:
            conversion.warnings.append(
                FieldError(f"metadata.annotations[{key}]", "must be a number; ignored", text)
            )


def _max_nodes(pool: dict[str, Any], conversion: Conversion) -> int:
    gpus = int((pool.get("template") or {}).get("gpus") or 0)
    limit = (pool.get("limits") or {}).get(GPU)
    if gpus and limit is not None and str(limit).isdigit():
        return max(int(limit) // gpus, 0)
    conversion.warnings.append(
        FieldError(
            "metadata.annotations[muster.dev/max-nodes]",
            f"absent and no nvidia.com/gpu limit to derive it from: maxNodes is {_DEFAULT_MAX_NODES}",
            hint="set the annotation, or spec.limits[nvidia.com/gpu]",
        )
    )
    return _DEFAULT_MAX_NODES


CONVERTERS: dict[tuple[str, str], Converter] = {(f"{_GROUP}/v1", "NodePool"): _node_pool}
