"""End to end: the NVIDIA device plugin's time-slicing ConfigMap applied as written on
`muster up --fake-gpus 1` makes the node offer its GPU as 4 replicas, and two v1 Pods asking
for one `nvidia.com/gpu` each run at the same time on that one GPU. Any other ConfigMap is
refused, naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from muster.sdk.errors import ApiError
from muster.testing import wait_for
from tests.e2e.jobs import PYTHON, REPO, cluster

pytestmark = pytest.mark.slow

MANIFEST = REPO / "tests" / "api" / "manifests" / "device-plugin-time-slicing.yaml"


def _pod(name: str, release: Path) -> dict[str, Any]:
    script = (
        "import os, time\nprint(os.environ.get('CUDA_VISIBLE_DEVICES'), flush=True)\n"
        f"while not os.path.exists({str(release)!r}): time.sleep(0.05)\n"
    )
    container = {
        "name": "cuda",
        "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
        "command": [PYTHON, "-c", script],
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [container]},
    }


def test_time_slicing_configmap_puts_two_one_gpu_pods_on_one_gpu(muster_home: Path) -> None:
    config_map = yaml.safe_load(MANIFEST.read_text())
    release = muster_home / "release"
    with cluster(muster_home, gpus=1) as (_up, client):
        (result,) = client.apply([config_map])
        assert (result["kind"], result["name"]) == ("GPUSharing", "time-slicing-config")
        warned = {w.split(":")[0] for w in result["warnings"]}
        assert "data.a100-mps.sharing.mps" in warned
        assert "data.tesla-t4.sharing.timeSlicing.renameByDefault" in warned

        def sliced() -> dict[str, Any] | None:
            (node,) = client.list("Node")["items"]
            return node if node["metadata"].get("labels", {}).get("nvidia.com/gpu.replicas") == "4" else None

        wait_for(sliced, timeout=30, interval=0.1, what="the node to be time-sliced")
        client.apply([_pod("share-a", release), _pod("share-b", release)])

        def both_running() -> list[dict[str, Any]] | None:
            pods = [
                p for p in client.list("Pod")["items"] if (p.get("status") or {}).get("phase") == "Running"
            ]
            return pods if len(pods) == 2 else None

        try:
            pods = wait_for(both_running, timeout=60, interval=0.1, what="both pods to run")
            # one GPU, a quarter of it each, at the same time
            assert {
                (p["spec"]["nodeName"], tuple(p["spec"]["gpus"]), p["spec"]["gpuMilli"]) for p in pods
            } == {(pods[0]["spec"]["nodeName"], (0,), 250)}
            cq = client.get("ClusterQueue", "default")
            gpu_quota = [
                r["nominalQuota"]
                for g in cq["spec"]["resourceGroups"]
                for f in g["flavors"]
                for r in f["resources"]
                if r["name"] == "nvidia.com/gpu"
            ]
            assert gpu_quota == ["4"]  # the default queue counts replicas, as the plugin advertises
        finally:
            release.touch()

        other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"}, "data": {"a": "b"}}
        with pytest.raises(ApiError) as refused:
            client.apply([other])
        (error,) = refused.value.errors
        assert error["path"] == "data.a" and "accepted only as the NVIDIA device plugin's" in error["rule"]
        assert "give a pod its settings as env values" in error["hint"]
