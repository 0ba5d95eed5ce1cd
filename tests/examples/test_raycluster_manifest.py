"""examples/ray/raycluster.yaml (docs/ray.md): the Ray it names is the Ray Muster pins, the GPU
workers ask Kubernetes for GPUs, and every pod mounts the shared MUSTER_HOME at one path."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_the_raycluster_example_matches_the_pinned_ray_and_shares_muster_home():
    docs = list(yaml.safe_load_all((ROOT / "examples/ray/raycluster.yaml").read_text()))
    claim = next(d for d in docs if d["kind"] == "PersistentVolumeClaim")
    cluster = next(d for d in docs if d["kind"] == "RayCluster")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    pinned = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["ray"]
    assert pinned == [f"ray=={cluster['spec']['rayVersion']}"]
    groups = [cluster["spec"]["headGroupSpec"], *cluster["spec"]["workerGroupSpecs"]]
    for group in groups:
        spec = group["template"]["spec"]
        (container,) = spec["containers"]
        assert cluster["spec"]["rayVersion"] in container["image"]
        shared = {
            v["name"]
            for v in spec["volumes"]
            if v.get("persistentVolumeClaim", {}).get("claimName") == claim["metadata"]["name"]
        }
        # One path on the driver (the head) and on every worker.
        assert [m["mountPath"] for m in container["volumeMounts"] if m["name"] in shared] == ["/muster"]
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert {"name": "MUSTER_HOME", "value": "/muster"} in head["env"]
    (gpu,) = cluster["spec"]["workerGroupSpecs"]
    assert int(gpu["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]) > 0
