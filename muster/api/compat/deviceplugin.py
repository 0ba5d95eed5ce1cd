"""The NVIDIA k8s-device-plugin's time-slicing ConfigMap (``v1 ConfigMap``) to a GPUSharing.

The ConfigMap's ``data`` holds named device plugin configs (YAML text, ``version: v1``); a
node picks one with its ``nvidia.com/device-plugin.config`` label, and nodes without the label
use the config named ``default``, else the only config (the plugin's "named" and "single"
fallbacks). What maps: ``sharing.timeSlicing.resources[name: nvidia.com/gpu].replicas`` and
``failRequestsGreaterThanOne: true`` (Muster never gives a pod asking for more than one GPU
replicas of a time-sliced node). What does not is warned per field: ``renameByDefault`` and
``rename`` (replicas stay ``nvidia.com/gpu``), ``devices`` other than ``all``, other resources
(MIG slices), ``sharing.mps``, and device plugin flags other than ``migStrategy: none``.

Muster has no ConfigMaps of its own: any other ConfigMap is refused with an error saying how a
pod gets its settings instead (environment variables, or files on a volume), so that nothing a
pod would mount is dropped silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from muster.api.base import API_VERSION
from muster.api.compat.base import Conversion, Converter
from muster.api.errors import FieldError, InvalidObject
from muster.api.labels import DEVICE_PLUGIN_CONFIG_LABEL, GPU

__all__ = ["CONVERTERS"]

# libyaml's loader where PyYAML was built with it (the pure-Python one is ~10x slower).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_NOT_PLUGIN_HINT = (
    "Muster has no ConfigMaps: give a pod its settings as env values, or as files on a "
    "persistentVolumeClaim or hostPath volume (docs/api.md, 'NVIDIA device plugin time-slicing ConfigMap')"
)


def _config_map(doc: Mapping[str, Any]) -> Conversion:
    meta = dict(doc.get("metadata") or {})
    data = doc.get("data")
    parsed = _plugin_configs(data)
    native_meta = {k: v for k, v in meta.items() if k != "namespace"}
    conversion = Conversion(doc=None)
    configs: dict[str, Any] = {}
    for key, config in parsed.items():
        configs[key] = _config(key, config, conversion)
    for key in doc:
        if key not in ("apiVersion", "kind", "metadata", "data"):
            conversion.keep(key, doc[key])
    default = "default" if "default" in configs else next(iter(configs)) if len(configs) == 1 else ""
    if not default:
        conversion.warnings.append(
            FieldError(
                "data",
                f"no config is named default: only nodes labelled {DEVICE_PLUGIN_CONFIG_LABEL}=<key> "
                "share their GPUs",
            )
        )
    spec: dict[str, Any] = {"nodeLabel": DEVICE_PLUGIN_CONFIG_LABEL, "configs": configs}
    if default:
        spec["defaultConfig"] = default
    conversion.doc = {"apiVersion": API_VERSION, "kind": "GPUSharing", "metadata": native_meta, "spec": spec}
    conversion.paths = (("spec.configs", "data"),)
    return conversion


def _plugin_configs(data: Any) -> dict[str, dict[str, Any]]:
    """Each data value as a device plugin config; InvalidObject when the ConfigMap is not one."""
    if not isinstance(data, Mapping) or not data:
        raise InvalidObject([_not_plugin("data", "has no data")])
    out: dict[str, dict[str, Any]] = {}
    for key, text in data.items():
        path = f"data.{key}"
        try:
            config = yaml.load(text, Loader=_LOADER) if isinstance(text, str) else None
        except yaml.YAMLError as exc:
            raise InvalidObject([_not_plugin(path, f"is not YAML ({exc.__class__.__name__})")]) from None
        if not isinstance(config, dict) or "version" not in config:
            raise InvalidObject(
                [_not_plugin(path, "is not a device plugin config (a mapping with version: v1)")]
            )
        if config["version"] != "v1":
            raise InvalidObject(
                [FieldError(f"{path}.version", "must be v1", config["version"], "write version: v1")]
            )
        out[str(key)] = config
    return out


def _not_plugin(path: str, what: str) -> FieldError:
    return FieldError(
        path,
        f"a v1 ConfigMap is accepted only as the NVIDIA device plugin's time-slicing config; this one {what}",
        hint=_NOT_PLUGIN_HINT,
    )


def _config(key: str, config: dict[str, Any], conversion: Conversion) -> dict[str, Any]:
    """One device plugin config as a GPUSharing config; warnings name ``data.<key>...`` paths."""
    base = f"data.{key}"
    for name, value in config.items():
        if name == "flags":
            _flags(f"{base}.flags", value, conversion)
        elif name not in ("version", "sharing"):
            conversion.keep(f"{base}.{name}", value)
    sharing = config.get("sharing") or {}
    if not isinstance(sharing, dict):
        raise InvalidObject([FieldError(f"{base}.sharing", "must be a mapping", sharing)])
    for name, value in sharing.items():
        if name == "mps":
            conversion.warnings.append(
                FieldError(
                    f"{base}.sharing.mps",
                    "MPS is not supported by Muster; ignored (pods share GPUs by time-slicing only)",
                )
            )
        elif name != "timeSlicing":
            conversion.keep(f"{base}.sharing.{name}", value)
    slicing = sharing.get("timeSlicing")
    if slicing is None:
        return {}
    if not isinstance(slicing, dict):
        raise InvalidObject([FieldError(f"{base}.sharing.timeSlicing", "must be a mapping", slicing)])
    return {"timeSlicing": {"replicas": _replicas(f"{base}.sharing.timeSlicing", slicing, conversion)}}


def _flags(path: str, flags: Any, conversion: Conversion) -> None:
    if not isinstance(flags, dict):
        conversion.keep(path, flags)
        return
    for name, value in flags.items():
        if name == "migStrategy" and value == "none":
            continue
        conversion.keep(f"{path}.{name}", value)


def _replicas(path: str, slicing: dict[str, Any], conversion: Conversion) -> int:
    """The replicas of nvidia.com/gpu; warnings for what cannot be honoured."""
    if slicing.get("renameByDefault"):
        conversion.warnings.append(
            FieldError(
                f"{path}.renameByDefault",
                f"replicas stay {GPU} in Muster (not {GPU}.shared); pods asking for {GPU}.shared fit no "
                f"node: ask for {GPU}",
            )
        )
    if not slicing.get("failRequestsGreaterThanOne"):
        conversion.warnings.append(
            FieldError(
                f"{path}.failRequestsGreaterThanOne",
                f"not set: Muster places a pod asking for more than one {GPU} only on nodes whose GPUs "
                "are not time-sliced (as if it were true)",
            )
        )
    for name, value in slicing.items():
        if name not in ("renameByDefault", "failRequestsGreaterThanOne", "resources"):
            conversion.keep(f"{path}.{name}", value)
    resources = slicing.get("resources")
    if not isinstance(resources, list) or not resources:
        raise InvalidObject(
            [FieldError(f"{path}.resources", "must list the shared resources", resources, f"name: {GPU}")]
        )
    replicas = 1
    for i, item in enumerate(resources):
        where = f"{path}.resources[{i}]"
        if not isinstance(item, dict):
            raise InvalidObject([FieldError(where, "must be a mapping with name and replicas", item)])
        if item.get("name") != GPU:
            conversion.warnings.append(
                FieldError(
                    f"{where}.name",
                    f"only {GPU} is time-sliced by Muster; {item.get('name')} is offered unshared",
                )
            )
            continue
        value = item.get("replicas")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidObject([FieldError(f"{where}.replicas", "must be an integer of at least 1", value)])
        replicas = value
        if item.get("rename"):
            conversion.warnings.append(
                FieldError(f"{where}.rename", f"replicas stay {GPU} in Muster; ask for {GPU}", item["rename"])
            )
        devices = item.get("devices", "all")
        if devices != "all":
            conversion.warnings.append(
                FieldError(
                    f"{where}.devices", "Muster time-slices every GPU of the node (as devices: all)", devices
                )
            )
        for name, other in item.items():
            if name not in ("name", "replicas", "rename", "devices"):
                conversion.keep(f"{where}.{name}", other)
    return replicas


CONVERTERS: dict[tuple[str, str], Converter] = {("v1", "ConfigMap"): _config_map}
