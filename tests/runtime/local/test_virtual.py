"""Virtual nodes of the local runtime (what the local provider of a NodePool makes): offered
once booted, their pods run as local processes on that node's GPUs, switched off with their
processes, kept across a restart."""

from __future__ import annotations

import time
from pathlib import Path

from muster.runtime.base import Container, DeviceBinding, GpuFault, NodeTaint, PodReason, VirtualNodeSpec
from muster.runtime.local.fake import parse_fake_gpus
from muster.runtime.local.runtime import LocalRuntime
from tests.runtime.local.conftest import IGNORES_TERM, Watcher, launch, py, shutdown, wait_log

SPEC = VirtualNodeSpec(
    name="spot-abcde",
    gpus=2,
    gpu_model="H100",
    gpu_memory_bytes=80 << 30,
    cpu="16",
    memory="128Gi",
    labels={"muster.dev/nodepool": "spot", "topology.kubernetes.io/zone": "a"},
    taints=(NodeTaint("muster.dev/capacity-type", "spot", "NoSchedule"),),
)


def test_a_virtual_node_is_offered_once_booted_with_its_template(runtime: LocalRuntime):
    booting = runtime.add_virtual_node(VirtualNodeSpec(**{**SPEC.__dict__, "ready_at": time.time() + 3600}))
    assert [n.name for n in runtime.nodes()] == ["test-node"] and not runtime.nodes_changed()
    assert runtime.add_virtual_node(SPEC) == booting, "adding a known node keeps it"
    runtime.remove_virtual_node(SPEC.name)
    runtime.add_virtual_node(SPEC)
    assert runtime.nodes_changed()
    node = next(n for n in runtime.nodes() if n.name == SPEC.name)
    assert node.capacity == {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "2"}
    assert (
        node.labels["topology.kubernetes.io/zone"] == "a" and node.labels["nvidia.com/gpu.product"] == "H100"
    )
    assert node.initial_taints == SPEC.taints and node.taints is None
    assert [g.model for g in node.gpus] == ["H100", "H100"]
    assert not runtime.nodes_changed()
    device = runtime.inject_gpu_fault(SPEC.name, GpuFault(gpu=1, xid=79))
    assert device.health == "Unhealthy"
    assert next(n for n in runtime.nodes() if n.name == SPEC.name).allocatable["nvidia.com/gpu"] == "1"


def test_pods_on_a_virtual_node_see_its_gpus_and_die_with_it(runtime: LocalRuntime, watcher: Watcher):
    runtime.add_virtual_node(SPEC)
    pod = launch("on-spot", Container("main", command=py(IGNORES_TERM)), node=SPEC.name)
    runtime.start(pod, DeviceBinding(gpus=(1,)))
    wait_log(runtime, pod.ref, "ready")
    env = (runtime.dir / "pods" / "default" / "on-spot" / "uid-on-spot" / "main.spec.json").read_text()
    assert '"CUDA_VISIBLE_DEVICES":"1"' in env.replace(" ", "")
    runtime.remove_virtual_node(SPEC.name)
    final = watcher.wait_final(pod.ref)
    assert final.reason is PodReason.NODE_LOST and "spot-abcde was terminated" in final.message
    assert [n.name for n in runtime.nodes()] == ["test-node"]


def test_virtual_nodes_survive_a_restart(muster_home: Path):
    first = LocalRuntime(muster_home, fake_gpus=parse_fake_gpus("1"), node="test-node")
    first.add_virtual_node(SPEC)
    uuids = [g.uuid for g in next(n for n in first.nodes() if n.name == SPEC.name).gpus]
    shutdown(first)
    second = LocalRuntime(muster_home, fake_gpus=parse_fake_gpus("1"), node="test-node")
    try:
        assert [s.name for s in second.virtual_nodes()] == [SPEC.name]
        again = next(n for n in second.nodes() if n.name == SPEC.name)
        assert [g.uuid for g in again.gpus] == uuids, "stable GPU UUIDs"
    finally:
        shutdown(second)
