"""The NVIDIA device plugin's time-slicing ConfigMap as a GPUSharing: which config a node
uses, a warning per field Muster cannot honour, and any other ConfigMap refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from muster.api import registry
from muster.api.errors import InvalidObject
from muster.api.gpusharing import gpu_replicas, node_replicas

MANIFEST = Path(__file__).parent.parent / "manifests" / "device-plugin-time-slicing.yaml"


def _config_map(**data: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ts", "namespace": "x"},
        "data": data,
    }


def _slicing(replicas: int, **extra: object) -> str:
    slicing = {"resources": [{"name": "nvidia.com/gpu", "replicas": replicas}], **extra}
    return yaml.safe_dump({"version": "v1", "sharing": {"timeSlicing": slicing}})


def test_the_upstream_manifest_converts_with_a_warning_per_field_not_honoured() -> None:
    v = registry.validate(yaml.safe_load(MANIFEST.read_text()))
    assert v.obj is not None and v.obj["kind"] == "GPUSharing" and "namespace" not in v.obj["metadata"]
    spec = v.obj["spec"]
    assert spec["defaultConfig"] == "default"
    assert spec["configs"] == {
        "default": {"timeSlicing": {"replicas": 4}},
        "tesla-t4": {"timeSlicing": {"replicas": 2}},
        "a100-mps": {},
    }
    paths = sorted(w.split(": ")[0] for w in v.warnings)
    assert paths == [
        "data.a100-mps.sharing.mps",
        "data.tesla-t4.sharing.timeSlicing.failRequestsGreaterThanOne",
        "data.tesla-t4.sharing.timeSlicing.renameByDefault",
    ]


def test_a_node_takes_its_labelled_config_else_the_default() -> None:
    v = registry.validate(yaml.safe_load(MANIFEST.read_text()))
    sharings = [v.obj]
    assert node_replicas({}, sharings) == (4, "time-slicing-config")
    assert node_replicas({"nvidia.com/device-plugin.config": "tesla-t4"}, sharings) == (
        2,
        "time-slicing-config",
    )
    assert node_replicas({"nvidia.com/device-plugin.config": "a100-mps"}, sharings) == (
        1,
        "time-slicing-config",
    )
    labelled = {"metadata": {"labels": {"nvidia.com/gpu.replicas": "4"}}, "status": {"runtime": "local"}}
    assert gpu_replicas(labelled) == 4 and gpu_replicas({"metadata": {}}) == 1
    # a Kubernetes node's device plugin already offers each replica as a device
    assert gpu_replicas({**labelled, "status": {"runtime": "kubernetes"}}) == 1


def test_a_single_config_is_the_default_and_several_unnamed_ones_need_the_label() -> None:
    v = registry.validate(_config_map(any=_slicing(3, failRequestsGreaterThanOne=True)))
    assert v.obj["spec"]["defaultConfig"] == "any" and v.warnings == []
    v = registry.validate(
        _config_map(
            a=_slicing(2, failRequestsGreaterThanOne=True), b=_slicing(8, failRequestsGreaterThanOne=True)
        )
    )
    assert v.obj["spec"]["defaultConfig"] == ""
    assert node_replicas({}, [v.obj]) is None
    (warning,) = v.warnings
    assert warning.startswith("data: no config is named default")


def test_fields_that_cannot_be_honoured_are_warned() -> None:
    item = {"name": "nvidia.com/gpu", "replicas": 2, "rename": "gpu.shared", "devices": [0]}
    text = yaml.safe_dump(
        {
            "version": "v1",
            "flags": {"migStrategy": "mixed"},
            "sharing": {"timeSlicing": {"failRequestsGreaterThanOne": True, "resources": [item]}},
        }
    )
    v = registry.validate(_config_map(default=text))
    paths = sorted(w.split(": ")[0] for w in v.warnings)
    assert paths == [
        "data.default.flags.migStrategy",
        "data.default.sharing.timeSlicing.resources[0].devices",
        "data.default.sharing.timeSlicing.resources[0].rename",
    ]


@pytest.mark.parametrize(
    ("data", "path", "rule"),
    [
        (
            {"app.properties": "color=blue"},
            "data.app.properties",
            "accepted only as the NVIDIA device plugin's",
        ),
        ({"default": "version: v2"}, "data.default.version", "must be v1"),
        ({"default": _slicing(0)}, "data.default.sharing.timeSlicing.resources[0].replicas", "at least 1"),
    ],
)
def test_other_config_maps_and_broken_configs_are_refused(data: dict, path: str, rule: str) -> None:
    with pytest.raises(InvalidObject) as exc:
        registry.validate(_config_map(**data))
    (error,) = exc.value.errors
    assert error.path == path and rule in error.rule


def test_a_config_map_without_data_is_refused() -> None:
    with pytest.raises(InvalidObject) as exc:
        registry.validate({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "empty"}})
    assert exc.value.errors[0].path == "data"
