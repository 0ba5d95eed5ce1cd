"""Fake GPUs: the --fake-gpus N[:MODEL[:MEMORY]] spec, and devices whose readings tests set."""

from __future__ import annotations

import pytest

from muster.runtime.base import Container, DeviceBinding, GpuFault, PodPhase
from muster.runtime.local.fake import FakeGpus, FakeGpuSpecError, parse_fake_gpus
from tests.runtime.local.conftest import launch, py, run_pod

GiB = 1024**3


class TestParse:
    @pytest.mark.parametrize(
        ("spec", "count", "model", "memory"),
        [
            ("4", 4, "FAKE-GPU", 16 * GiB),
            ("2:A100", 2, "A100", 16 * GiB),
            ("4:A100:80Gi", 4, "A100", 80 * GiB),
            (" 1:NVIDIA H100 80GB HBM3:81559Mi ", 1, "NVIDIA H100 80GB HBM3", 81559 * 2**20),
            ("8:T4:16G", 8, "T4", 16 * 10**9),
        ],
    )
    def test_valid_specs(self, spec, count, model, memory):
        gpus = parse_fake_gpus(spec)
        assert [g.index for g in gpus] == list(range(count))
        assert {g.model for g in gpus} == {model} and {g.memory_bytes for g in gpus} == {memory}

    @pytest.mark.parametrize(
        ("spec", "words"),
        [
            ("4:A100:80GG", "memory '80GG' is not a quantity; write it like 80Gi"),
            ("4:A100:80", "must be at least 1Mi; a bare number counts bytes: did you mean 80Gi?"),
            ("4:A100:1.5", "must be at least 1Mi"),
            ("4:A100:1.5Ki", "must be at least 1Mi"),
            ("0", "count must be between 1 and 1024, got 0"),
            ("two", "count 'two' is not a whole number"),
            ("-1:A100", "count '-1' is not a whole number"),
            ("", "expected N[:MODEL[:MEMORY]]"),
            ("4:A100:80Gi:extra", "expected N[:MODEL[:MEMORY]]"),
            ("4::80Gi", "model '' must start with a letter or digit"),
            ("4:A100/SXM:80Gi", "model 'A100/SXM'"),
        ],
    )
    def test_bad_specs_say_what_is_wrong(self, spec, words):
        with pytest.raises(FakeGpuSpecError) as err:
            parse_fake_gpus(spec)
        assert words in str(err.value) and f"--fake-gpus {spec!r}" in str(err.value)

    def test_uuids_are_stable_and_distinct(self):
        a, b = parse_fake_gpus("4:A100:80Gi", "node-a"), parse_fake_gpus("4:A100:80Gi", "node-a")
        assert [g.uuid for g in a] == [g.uuid for g in b]
        assert len({g.uuid for g in a}) == 4 and all(g.uuid.startswith("GPU-") for g in a)
        assert a[0].uuid != parse_fake_gpus("4:A100:80Gi", "node-b")[0].uuid


class TestFakeDevices:
    def test_devices_form_one_nvlink_island(self):
        devices = FakeGpus(parse_fake_gpus("3")).devices()
        assert [d.nvlink_peers for d in devices] == [(1, 2), (0, 2), (0, 1)]
        assert {d.domain for d in devices} == {"nvlink-0"}

    def test_readings_and_health_are_settable(self):
        gpus = parse_fake_gpus("2:A100:80Gi")
        gpus[1].utilization_pct, gpus[1].memory_used_bytes, gpus[1].temperature_c, gpus[1].power_w = (
            97.5,
            GiB,
            81,
            390,
        )
        gpus[1].healthy, gpus[1].health_reason = False, "XID 79: fell off the bus"
        source = FakeGpus(gpus)
        sample = source.samples()[1]
        assert (sample.utilization_pct, sample.memory_used_bytes, sample.temperature_c, sample.power_w) == (
            97.5,
            GiB,
            81,
            390,
        )
        assert sample.memory_total_bytes == 80 * GiB
        assert (source.devices()[1].health, source.devices()[1].health_reason) == (
            "Unhealthy",
            "XID 79: fell off the bus",
        )

    def test_runtime_exposes_fake_gpus_and_their_samples(self, runtime):
        assert runtime.fake_gpus is not None and len(runtime.fake_gpus) == 4
        runtime.fake_gpus[2].utilization_pct = 42.0
        assert runtime.gpu_samples()[2].utilization_pct == 42.0

    def test_fault_injection_marks_a_gpu_unhealthy(self, runtime):
        runtime.set_gpu_health(1, False, "injected XID 48")
        (node,) = runtime.nodes()
        assert node.gpus[1].health == "Unhealthy" and node.gpus[1].health_reason == "injected XID 48"
        assert node.allocatable["nvidia.com/gpu"] == "3" and node.capacity["nvidia.com/gpu"] == "4"
        warnings = runtime.start(launch("on-bad-gpu", Container("main", ("true",))), DeviceBinding((1,)))
        assert warnings == ["GPU 1 is unhealthy (injected XID 48)"]
        runtime.set_gpu_health(1, True)
        assert runtime.nodes()[0].gpus[1].health == "Healthy"
        with pytest.raises(KeyError, match="no GPU 9"):
            runtime.set_gpu_health(9, False)

    def test_injected_xids_loss_and_readings(self, runtime):
        device = runtime.inject_gpu_fault("test-node", GpuFault(gpu=1, xid=79))
        assert device.health == "Unhealthy" and device.health_reason.startswith("XID 79 (GPU has fallen")
        (node,) = runtime.nodes()
        assert node.allocatable["nvidia.com/gpu"] == "3"
        condition = next(c for c in node.conditions if c.type == "GPUHealthy")
        assert (condition.status, condition.reason) == ("False", "GPUUnhealthy")
        # A pod bound to it before the fault still starts, with a warning.
        warnings = runtime.start(launch("on-bad-gpu", Container("main", ("true",))), DeviceBinding((1,)))
        assert warnings[0].startswith("GPU 1 is unhealthy (XID 79")
        runtime.inject_gpu_fault("test-node", GpuFault(gpu=2, xid=31))
        assert runtime.nodes()[0].gpus[2].health == "Healthy"
        assert "GPU 2 reported XID 31 (GPU memory page fault)" in runtime.nodes()[0].warnings[0]
        runtime.inject_gpu_fault("test-node", GpuFault(gpu=3, lost=True))
        lost = runtime.gpu_samples()[3]
        assert lost.utilization_pct is None and lost.power_w is None
        runtime.inject_gpu_fault("test-node", GpuFault(gpu=0, utilization_pct=12.5, temperature_c=88.0))
        assert (runtime.gpu_samples()[0].utilization_pct, runtime.gpu_samples()[0].temperature_c) == (
            12.5,
            88.0,
        )
        for index in (1, 3):
            assert runtime.inject_gpu_fault("test-node", GpuFault(gpu=index, clear=True)).health == "Healthy"
        assert runtime.nodes()[0].allocatable["nvidia.com/gpu"] == "4"

    def test_fault_injection_names_what_exists(self, runtime):
        with pytest.raises(KeyError, match="test-node"):
            runtime.inject_gpu_fault("other", GpuFault(gpu=0, xid=79))
        with pytest.raises(KeyError, match=r"GPUs: \[0, 1, 2, 3\]"):
            runtime.inject_gpu_fault("test-node", GpuFault(gpu=7, xid=79))

    def test_a_gpu_share_sees_its_one_gpu(self, runtime):
        pod = launch("share", Container("main", py("import os; print(os.environ['CUDA_VISIBLE_DEVICES'])")))
        final = run_pod(runtime, pod, DeviceBinding((2,), gpu_milli=250))
        assert final.phase == PodPhase.SUCCEEDED and "".join(runtime.logs(pod.ref)) == "2\n"
