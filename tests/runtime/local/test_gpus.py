"""NVML discovery against a fake pynvml (this machine has no GPU), and the no-driver path."""

from __future__ import annotations

import pynvml
import pytest

from muster.runtime.base import GPU_MEMORY_LABEL, GPU_PRODUCT_LABEL, GPU_RESOURCE, GpuFault, PodRuntimeError
from muster.runtime.local.gpus import NO_DRIVER_MESSAGE, NoGpuDriver, NoGpus, NvmlGpus, open_gpu_source
from muster.runtime.local.node import local_node
from muster.runtime.local.runtime import LocalRuntime
from tests.runtime.local.fake_nvml import SWITCH_BUS, FakeDevice, FakeMig, FakeNvml

GiB = 1024**3
B = ["0000:07:00.0", "00000000:0F:00.0", "0000:47:00.0", "0000:4e:00.0", "0000:87:00.0", "0000:90:00.0"]


def machine() -> list[FakeDevice]:
    return [
        # 0 and 1: an NVLink bridge pair (two active links and one inactive); NVML's long bus form on 1.
        FakeDevice(
            "NVIDIA A100-SXM4-80GB",
            "GPU-aaaa-0",
            B[0],
            80 * GiB,
            used=GiB,
            util=55,
            temp=61,
            links=["00000000:0f:00.0", "00000000:0F:00.0", None],
            mig=[],
        ),
        FakeDevice("NVIDIA A100-SXM4-80GB", "GPU-aaaa-1", B[1], 80 * GiB, links=[B[0], B[0]], mig=[]),
        # 2 and 3: both on an NVSwitch; 3 is in MIG mode with an empty slot in the middle.
        FakeDevice(
            "NVIDIA H100 80GB HBM3", "GPU-hhhh-2", B[2], 80 * GiB, links=[SWITCH_BUS, SWITCH_BUS], mig=[]
        ),
        FakeDevice(
            "NVIDIA H100 80GB HBM3",
            "GPU-hhhh-3",
            B[3],
            80 * GiB,
            power_mw=None,
            links=[SWITCH_BUS],
            mig_enabled=True,
            mig=[
                FakeMig("MIG-1", "NVIDIA H100 80GB HBM3 MIG 1g.10gb", 10 * GiB),
                None,
                FakeMig("MIG-3", "NVIDIA H100 80GB HBM3 MIG", 40 * GiB, slices=3),
            ],
        ),
        # 4: PCIe only, an old binding returning bytes, no MIG support at all.
        FakeDevice(b"Tesla T4", b"GPU-tttt-4", B[4], 16 * GiB),
        # 5: fell off the bus after enumeration.
        FakeDevice("Tesla T4", "GPU-tttt-5", B[5], 16 * GiB, lost={"name", "memory"}),
    ]


@pytest.fixture
def nvml(monkeypatch) -> FakeNvml:
    return FakeNvml(monkeypatch, machine())


class TestDiscovery:
    def test_identity_model_memory(self, nvml):
        devices = NvmlGpus(pynvml).devices()
        assert [(d.index, d.uuid, d.model, d.memory_bytes // GiB) for d in devices[:5]] == [
            (0, "GPU-aaaa-0", "NVIDIA A100-SXM4-80GB", 80),
            (1, "GPU-aaaa-1", "NVIDIA A100-SXM4-80GB", 80),
            (2, "GPU-hhhh-2", "NVIDIA H100 80GB HBM3", 80),
            (3, "GPU-hhhh-3", "NVIDIA H100 80GB HBM3", 80),
            (4, "GPU-tttt-4", "Tesla T4", 16),
        ]

    def test_nvlink_peers_and_domains(self, nvml):
        devices = NvmlGpus(pynvml).devices()
        assert [d.nvlink_peers for d in devices] == [(1,), (0,), (3,), (2,), (), ()]
        assert [d.domain for d in devices] == ["nvlink-0", "nvlink-0", "nvlink-2", "nvlink-2", "pcie", "pcie"]

    def test_mig_mode_and_devices(self, nvml):
        devices = NvmlGpus(pynvml).devices()
        assert [d.mig_mode for d in devices] == [False, False, False, True, False, False]
        migs = devices[3].mig_devices
        assert [(m.index, m.uuid, m.profile, m.memory_bytes // GiB) for m in migs] == [
            (0, "MIG-1", "1g.10gb", 10),
            (2, "MIG-3", "3g.40gb", 40),  # no profile in the name: rebuilt from slices and memory
        ]

    def test_a_lost_gpu_stays_listed_as_unhealthy(self, nvml):
        devices = NvmlGpus(pynvml).devices()
        assert [d.health for d in devices] == ["Healthy"] * 5 + ["Unhealthy"]
        assert "GPU is lost" in devices[5].health_reason

    def test_a_gpu_that_cannot_be_opened_is_unhealthy_not_dropped(self, monkeypatch):
        devs = machine()[:2]
        devs[1].lost = {"handle"}
        FakeNvml(monkeypatch, devs)
        gpus = NvmlGpus(pynvml)
        devices = gpus.devices()
        assert len(devices) == 2 and devices[1].health == "Unhealthy"
        assert "cannot open GPU 1" in devices[1].health_reason
        assert [s.index for s in gpus.samples()] == [0]

    def test_cuda_visible_devices_uses_uuids(self, nvml):
        assert NvmlGpus(pynvml).visible_devices([0, 2]) == "GPU-aaaa-0,GPU-hhhh-2"

    def test_samples_for_metrics(self, nvml):
        samples = NvmlGpus(pynvml).samples()
        s0, s3 = samples[0], samples[3]
        assert (
            s0.utilization_pct,
            s0.memory_used_bytes,
            s0.memory_total_bytes,
            s0.temperature_c,
            s0.power_w,
        ) == (
            55.0,
            GiB,
            80 * GiB,
            61.0,
            300.0,
        )
        assert s3.power_w is None  # not supported by the device

    def test_close_shuts_nvml_down(self, nvml):
        NvmlGpus(pynvml).close()
        assert nvml.shutdowns == 1


class TestHealthEvents:
    """XID errors arrive as NVML events, read without waiting on every look at the GPUs."""

    def test_a_critical_xid_makes_its_gpu_unhealthy_for_good(self, nvml):
        gpus = NvmlGpus(pynvml)
        assert len(nvml.registered) == 6
        nvml.xid(0, 79)
        gpus.samples()  # the sample reads the event
        devices = gpus.devices()
        assert devices[0].health == "Unhealthy"
        assert devices[0].health_reason.startswith("XID 79 (GPU has fallen off the bus)")
        assert [d.health for d in devices[1:5]] == ["Healthy"] * 4
        assert gpus.devices()[0].health == "Unhealthy"  # NVML announces no recovery

    def test_an_application_xid_only_warns(self, nvml):
        gpus = NvmlGpus(pynvml)
        nvml.xid(1, 13)
        assert gpus.devices()[1].health == "Healthy"
        assert gpus.warnings == (
            "GPU 1 reported XID 13 (graphics engine exception): an application error, the GPU stays healthy",
        )

    def test_an_event_without_a_device_concerns_them_all(self, nvml):
        gpus = NvmlGpus(pynvml)
        nvml.xid(None, 48)
        assert all(d.health == "Unhealthy" for d in gpus.devices())

    def test_a_gpu_lost_while_sampled_turns_unhealthy(self, monkeypatch):
        devs = machine()[:2]
        FakeNvml(monkeypatch, devs)
        gpus = NvmlGpus(pynvml)
        devs[1].lost = {"util", "temp", "memory", "power"}
        sample = gpus.samples()[1]
        assert sample.utilization_pct is None and sample.temperature_c is None
        devs[1].lost = set()  # answers again, but NVML never heals a lost GPU
        assert "GPU is lost" in gpus.devices()[1].health_reason

    def test_real_gpus_take_no_injected_faults(self, nvml, muster_home):
        runtime = LocalRuntime(muster_home, gpu_source=NvmlGpus(pynvml), node="box")
        try:
            with pytest.raises(PodRuntimeError, match="fault injection is for fake GPUs only"):
                runtime.inject_gpu_fault("box", GpuFault(gpu=0, xid=79))
        finally:
            runtime.close()

    def test_close_frees_the_event_set(self, nvml):
        NvmlGpus(pynvml).close()
        assert nvml.freed == 1


class TestNodeFromNvml:
    def test_gfd_labels_and_capacity_with_mig_slices(self, nvml):
        node = local_node(NvmlGpus(pynvml), name="gpu-box")
        assert node.labels[GPU_PRODUCT_LABEL] == "NVIDIA-A100-SXM4-80GB"
        assert node.labels[GPU_MEMORY_LABEL] == "81920"
        assert node.capacity[GPU_RESOURCE] == "5"  # GPU 3 is offered as its MIG slices
        assert node.allocatable[GPU_RESOURCE] == "4"  # GPU 5 is unhealthy
        assert (
            node.capacity["nvidia.com/mig-1g.10gb"] == "1" and node.capacity["nvidia.com/mig-3g.40gb"] == "1"
        )
        gpu_cond = next(c for c in node.conditions if c.type == "GPUHealthy")
        assert gpu_cond.status == "False" and "GPU 5" in gpu_cond.message


class TestNoDriver:
    def test_missing_library_gives_the_clear_message(self, monkeypatch):
        FakeNvml(monkeypatch, [], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
        with pytest.raises(NoGpuDriver) as err:
            NvmlGpus(pynvml)
        assert str(err.value) == NO_DRIVER_MESSAGE
        assert "--fake-gpus N[:MODEL[:MEMORY]]" in NO_DRIVER_MESSAGE

    def test_driver_not_loaded_says_so(self, monkeypatch):
        FakeNvml(monkeypatch, [], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
        with pytest.raises(NoGpuDriver, match="driver is not loaded"):
            NvmlGpus(pynvml)

    def test_no_driver_means_no_gpus_and_a_node_warning(self, monkeypatch, muster_home):
        FakeNvml(monkeypatch, [], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
        source = open_gpu_source()
        assert isinstance(source, NoGpus) and source.warnings == (NO_DRIVER_MESSAGE,)
        rt = LocalRuntime(muster_home)
        try:
            (node,) = rt.nodes()
        finally:
            rt.close()
        assert node.warnings == (NO_DRIVER_MESSAGE,) and node.gpus == ()
        assert GPU_RESOURCE not in node.capacity and GPU_PRODUCT_LABEL not in node.labels
        gpu_cond = next(c for c in node.conditions if c.type == "GPUHealthy")
        assert (gpu_cond.status, gpu_cond.message) == ("Unknown", NO_DRIVER_MESSAGE)

    def test_the_real_library_on_a_machine_without_a_driver(self):
        try:
            gpus = NvmlGpus()
        except NoGpuDriver as exc:
            assert "--fake-gpus" in str(exc)
        else:  # a machine with a driver: discovery must work for real
            assert all(d.uuid.startswith(("GPU-", "MIG-")) for d in gpus.devices())
            gpus.close()
