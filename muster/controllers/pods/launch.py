"""A bound Pod's wire dict as the runtime's :class:`PodLaunch` and :class:`DeviceBinding`.

``env[].valueFrom`` is resolved here (the runtime takes plain values): ``fieldRef`` to the
pod's metadata (name, namespace, uid, a label, an annotation), ``spec.nodeName``,
``spec.serviceAccountName``, ``status.hostIP`` and ``status.podIP``; ``resourceFieldRef`` to
a container's requests and limits. Anything else is a :class:`LaunchError` naming the field.

A runtime with pods of its own (:class:`~muster.runtime.base.SupportsNativePods`, Kubernetes)
resolves ``valueFrom`` and runs init containers itself: for it (``native=True``) nothing is
resolved or refused here, and the launch carries the Pod's wire spec as stored.
"""

from __future__ import annotations

import math
import re
from typing import Any

from muster.api.base import controller_ref
from muster.api.quantity import Quantity, QuantityError
from muster.runtime.base import Container, DeviceBinding, LaunchError, PodLaunch, PodRef, Volume, VolumeMount
from muster.store import codec

__all__ = ["device_binding", "pod_launch", "pod_ref"]

Obj = dict[str, Any]
_DEFAULT_GRACE = 30.0
_META_REF = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")
_VOLUME_SOURCES = ("persistentVolumeClaim", "emptyDir", "hostPath")


def pod_ref(pod: Obj) -> PodRef:
    meta = pod["metadata"]
    return PodRef(meta.get("namespace") or "default", meta["name"], meta["uid"])


def device_binding(pod: Obj) -> DeviceBinding:
    spec = pod["spec"]
    return DeviceBinding(gpus=tuple(spec.get("gpus") or ()), gpu_milli=int(spec.get("gpuMilli") or 1000))


def pod_launch(pod: Obj, host_ip: str, *, native: bool = False) -> PodLaunch:
    """The launch of ``pod`` on a node reachable at ``host_ip``; LaunchError for what cannot run
    (nothing, with ``native``: the runtime's cluster decides)."""
    spec = pod["spec"]
    if spec.get("initContainers") and not native:
        raise LaunchError(
            "spec.initContainers",
            "are not run by the local runtime",
            "run the preparation step at the start of the container's command instead",
        )
    containers = tuple(
        _container(pod, c, f"spec.containers[{i}]", host_ip, native) for i, c in enumerate(spec["containers"])
    )
    grace = spec.get("terminationGracePeriodSeconds")
    return PodLaunch(
        ref=pod_ref(pod),
        containers=containers,
        volumes=tuple(_volume(v) for v in spec.get("volumes") or ()),
        termination_grace_seconds=_DEFAULT_GRACE if grace is None else float(grace),
        labels=dict(pod["metadata"].get("labels") or {}),
        node=spec.get("nodeName") or "",
        spec=codec.copy(spec),
        annotations=dict(pod["metadata"].get("annotations") or {}),
        owner=controller_ref(pod) if pod["metadata"].get("ownerReferences") else {},
    )


def _container(pod: Obj, c: Obj, path: str, host_ip: str, native: bool) -> Container:
    resources = c.get("resources") or {}
    limits = dict(resources.get("limits") or {})
    requests = {**limits, **(resources.get("requests") or {})}
    env: dict[str, str] = {}
    for j, var in enumerate(c.get("env") or ()):
        name = var["name"]
        if var.get("valueFrom") is None:
            env[name] = var.get("value") or ""
        elif not native:  # a native runtime's cluster resolves it from spec
            env[name] = _value_from(pod, c, var["valueFrom"], f"{path}.env[{j}].valueFrom", host_ip)
    return Container(
        name=c["name"],
        command=tuple(c.get("command") or ()),
        args=tuple(c.get("args") or ()),
        env=env,
        working_dir=c.get("workingDir") or "",
        volume_mounts=tuple(
            VolumeMount(
                name=m["name"],
                mount_path=m["mountPath"],
                sub_path=m.get("subPath") or "",
                read_only=bool(m.get("readOnly")),
            )
            for m in c.get("volumeMounts") or ()
        ),
        limits=limits,
        requests=requests,
        image=c.get("image") or "",
    )


def _value_from(pod: Obj, c: Obj, source: Obj, path: str, host_ip: str) -> str:
    field_ref = source.get("fieldRef")
    if field_ref is not None:
        return _field(pod, field_ref.get("fieldPath", ""), f"{path}.fieldRef.fieldPath", host_ip)
    resource_ref = source.get("resourceFieldRef")
    if resource_ref is not None:
        return _resource(c, resource_ref, f"{path}.resourceFieldRef")
    kinds = ", ".join(sorted(source)) or "nothing"
    raise LaunchError(path, f"{kinds} cannot be resolved here", "use fieldRef, resourceFieldRef or a value")


def _field(pod: Obj, field_path: str, path: str, host_ip: str) -> str:
    meta = pod["metadata"]
    simple = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta.get("namespace") or "default",
        "metadata.uid": meta.get("uid") or "",
        "spec.nodeName": pod["spec"].get("nodeName") or "",
        "spec.serviceAccountName": pod["spec"].get("serviceAccountName") or "default",
        "status.hostIP": host_ip,
        "status.podIP": host_ip,  # processes share the host's network
    }
    if field_path in simple:
        return simple[field_path]
    m = _META_REF.match(field_path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    raise LaunchError(
        path,
        f"field {field_path!r} is not supported",
        "use metadata.name, metadata.namespace, metadata.uid, metadata.labels['KEY'], "
        "metadata.annotations['KEY'], spec.nodeName, spec.serviceAccountName, status.hostIP or status.podIP",
    )


def _resource(c: Obj, ref: Obj, path: str) -> str:
    kind, _, name = str(ref.get("resource", "")).partition(".")
    resources = c.get("resources") or {}
    if kind not in ("limits", "requests") or not name:
        raise LaunchError(f"{path}.resource", "must be limits.NAME or requests.NAME", ref.get("resource"))
    amounts = dict(resources.get("limits") or {})
    if kind == "requests":
        amounts.update(resources.get("requests") or {})
    try:
        value = Quantity.parse(amounts.get(name, "0"))
        divisor = Quantity.parse(ref.get("divisor") or "1")
    except QuantityError as exc:
        raise LaunchError(path, str(exc)) from None
    if divisor <= Quantity(0):
        raise LaunchError(f"{path}.divisor", "must be positive", ref.get("divisor"))
    # Kubernetes rounds up to the divisor's unit.
    return str(math.ceil(value.milli() / divisor.milli()))


def _volume(v: Obj) -> Volume:
    name = v["name"]
    if "persistentVolumeClaim" in v:
        return Volume(name, "persistentVolumeClaim", claim_name=v["persistentVolumeClaim"]["claimName"])
    if "emptyDir" in v or not any(k in v for k in v if k != "name"):
        empty = v.get("emptyDir") or {}
        return Volume(
            name, "emptyDir", medium=empty.get("medium") or "", size_limit=empty.get("sizeLimit") or ""
        )
    if "hostPath" in v:
        host = v["hostPath"]
        return Volume(name, "hostPath", path=host["path"], host_path_type=host.get("type") or "")
    other = next(k for k in v if k != "name")
    return Volume(name, other)
