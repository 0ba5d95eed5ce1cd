"""On a machine with an NVIDIA driver and GPU: NVML discovery agrees with the driver, a pod's
CUDA sees exactly the GPU it was bound (``CUDA_VISIBLE_DEVICES`` holds UUIDs), a DDP job
trains on NCCL, the GPU metrics are live readings, and two time-sliced pods share one GPU.

Everywhere else (CI included: no runner has a GPU, and none can be installed) these tests
are skipped, also under ``MUSTER_TEST_REQUIRE_ALL=1``; the fake-GPU tests cover the same
paths without a driver. Run them with ``pytest -m gpu`` on a GPU machine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from muster.runtime.local.gpus import NvmlGpus
from muster.testing import wait_for
from tests.e2e.jobs import PYTHON, REPO, job_doc, pod_log, python_job, serve, wait_condition
from tests.e2e.test_health import metric

GiB = 1024**3


@dataclass(frozen=True)
class DriverGpu:
    uuid: str
    name: str
    memory_bytes: int


def _driver_gpus() -> list[DriverGpu]:
    """The GPUs as NVML itself lists them (none without a driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return []
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            out.append(
                DriverGpu(
                    _str(pynvml.nvmlDeviceGetUUID(h)),
                    _str(pynvml.nvmlDeviceGetName(h)),
                    int(pynvml.nvmlDeviceGetMemoryInfo(h).total),
                )
            )
        return out
    finally:
        pynvml.nvmlShutdown()


def _str(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


GPUS = _driver_gpus()

pytestmark = [
    pytest.mark.slow,
    pytest.mark.gpu,
    pytest.mark.skipif(not GPUS, reason="no NVIDIA GPU on this machine (NVML lists none): run on a GPU host"),
]

# What a pod reports of the CUDA it sees; it holds ``hold`` GiB on the GPU until ``release`` exists.
_PROBE = """
import json, os, time, torch
props = torch.cuda.get_device_properties(0)
block = torch.empty(int({hold} * 2**30), dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("PROBE " + json.dumps({{"visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
    "count": torch.cuda.device_count(), "uuid": "GPU-" + str(props.uuid), "name": props.name}}), flush=True)
while not os.path.exists({release!r}):
    time.sleep(0.05)
"""


def _probe(release: Path, hold: float = 1.0) -> str:
    return _PROBE.format(hold=hold, release=str(release))


def _probe_report(home: Path, pod: str, container: str = "main") -> dict[str, object] | None:
    for line in pod_log(home, pod, container).splitlines():
        if line.startswith("PROBE "):
            return json.loads(line.removeprefix("PROBE "))
    return None


def test_discovery_agrees_with_the_driver() -> None:
    gpus = NvmlGpus()
    try:
        devices = gpus.devices()
        samples = gpus.samples()
    finally:
        gpus.close()
    assert [(d.uuid, d.model, d.memory_bytes) for d in devices] == [
        (g.uuid, g.name, g.memory_bytes) for g in GPUS
    ]
    assert all(d.health == "Healthy" for d in devices), [d.health_reason for d in devices]
    assert [s.uuid for s in samples] == [g.uuid for g in GPUS]
    for s in samples:
        assert s.memory_total_bytes == next(g.memory_bytes for g in GPUS if g.uuid == s.uuid)
        assert s.temperature_c is None or 0 < s.temperature_c < 110
        assert s.power_w is None or s.power_w > 0
        assert s.utilization_pct is None or 0 <= s.utilization_pct <= 100


def test_a_pod_sees_only_its_gpu_and_the_metrics_read_it(muster_home: Path) -> None:
    release = muster_home / "release"
    with serve(muster_home, []) as (up, client):
        (node,) = client.list("Node")["items"]
        assert node["status"]["capacity"]["nvidia.com/gpu"] == str(len(GPUS))
        assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == GPUS[0].name.replace(" ", "-")
        assert "muster.dev/fake-gpus" not in node["metadata"]["labels"]
        client.apply([python_job("probe", _probe(release, hold=2.0), workers=1, gpus=1)])
        try:
            report = wait_for(
                lambda: _probe_report(up.home, "probe-worker-0"), timeout=120, what="the probe's report"
            )
            bound = client.get("Pod", "probe-worker-0", "default")["spec"]["gpus"]
            (index,) = bound
            uuid = GPUS[index].uuid
            assert report == {"visible": uuid, "count": 1, "uuid": uuid, "name": GPUS[index].name}

            def held() -> float | None:
                text = client.metrics()
                used = metric(text, "muster_gpu_memory_used_bytes", uuid=uuid)
                share = metric(text, "muster_gpu_allocated_ratio", uuid=uuid)
                return used if used is not None and used >= 2 * GiB and share == 1.0 else None

            wait_for(held, timeout=60, interval=0.5, what="the metrics to show the pod's 2 GiB on its GPU")
            text = client.metrics()
            assert metric(text, "muster_gpu_memory_total_bytes", uuid=uuid) == GPUS[index].memory_bytes
            assert metric(text, "muster_gpu_healthy", uuid=uuid) == 1.0
        finally:
            release.touch()
        wait_condition(client, "TrainingJob", "probe", "Succeeded", timeout=60)


def test_a_ddp_job_trains_on_nccl(muster_home: Path) -> None:
    script = str(REPO / "examples" / "ddp_train.py")
    args = ["--steps", "40", "--checkpoint-every", "20", "--log-every", "20"]
    with serve(muster_home, []) as (up, client):
        client.apply([job_doc("nccl", [PYTHON, script, *args], workers=0, master=True, gpus=1)])
        wait_condition(client, "TrainingJob", "nccl", "Succeeded", timeout=180)
        log = pod_log(up.home, "nccl-master-0")
        env = json.loads(
            next(ln for ln in log.splitlines() if ln.startswith("MUSTER_DDP_ENV ")).split(" ", 1)[1]
        )
        done = json.loads(
            next(ln for ln in log.splitlines() if ln.startswith("MUSTER_DDP_DONE ")).split(" ", 1)[1]
        )
        (index,) = client.get("Pod", "nccl-master-0", "default")["spec"]["gpus"]
        assert env["backend"] == "nccl", log
        assert env["CUDA_VISIBLE_DEVICES"] == GPUS[index].uuid
        assert (env["RANK"], env["WORLD_SIZE"]) == ("0", "1")
        assert done["step"] == 40 and done["inSync"] is True


def test_two_time_sliced_pods_share_one_gpu(muster_home: Path) -> None:
    manifest = REPO / "tests" / "api" / "manifests" / "device-plugin-time-slicing.yaml"
    release = muster_home / "release"
    with serve(muster_home, []) as (up, client):
        client.apply([yaml.safe_load(manifest.read_text())])
        wait_for(
            lambda: (
                client.list("Node")["items"][0]["metadata"]["labels"].get("nvidia.com/gpu.replicas") == "4"
            ),
            timeout=30,
            what="the node to be time-sliced",
        )
        jobs = [python_job(f"share-{x}", _probe(release, hold=0.5), workers=1, gpus=1) for x in "ab"]
        client.apply(jobs)
        try:
            reports = [
                wait_for(
                    lambda x=x: _probe_report(up.home, f"share-{x}-worker-0"), timeout=120, what=f"share-{x}"
                )
                for x in "ab"
            ]

            def both_running() -> list[dict[str, object]] | None:
                pods = [client.get("Pod", f"share-{x}-worker-0", "default") for x in "ab"]
                return pods if all(p["status"].get("phase") == "Running" for p in pods) else None

            # Both hold their memory at once: they run at the same time, on one GPU.
            pods = wait_for(both_running, timeout=30, what="both sharers to run")
            assert pods[0]["spec"]["gpus"] == pods[1]["spec"]["gpus"]
            uuid = GPUS[pods[0]["spec"]["gpus"][0]].uuid
            assert [r["visible"] for r in reports] == [uuid, uuid]
            assert [r["uuid"] for r in reports] == [uuid, uuid]
        finally:
            release.touch()
        for x in "ab":
            wait_condition(client, "TrainingJob", f"share-{x}", "Succeeded", timeout=60)
