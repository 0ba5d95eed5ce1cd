"""The Node of this machine: capacity, allocatable, labels, conditions."""

from __future__ import annotations

import os

import psutil

from muster.api.quantity import parse_quantity
from muster.runtime.local.fake import FakeGpus, parse_fake_gpus
from muster.runtime.local.gpus import NoGpus
from muster.runtime.local.node import local_node, node_name


def test_capacity_counts_this_machine():
    node = local_node(FakeGpus(parse_fake_gpus("2:A100:80Gi")), name="n1")
    assert node.name == "n1" and node.runtime == "local"
    assert parse_quantity(node.capacity["cpu"]).as_int() == len(os.sched_getaffinity(0))
    assert parse_quantity(node.capacity["memory"]).as_int() == psutil.virtual_memory().total
    assert node.capacity["nvidia.com/gpu"] == "2"
    assert node.labels["nvidia.com/gpu.product"] == "A100" and node.labels["nvidia.com/gpu.memory"] == "81920"
    assert node.labels["nvidia.com/gpu.count"] == "2" and node.labels["muster.dev/fake-gpus"] == "true"
    assert node.labels["kubernetes.io/hostname"] == "n1"
    assert [(c.type, c.status) for c in node.conditions] == [("Ready", "True"), ("GPUHealthy", "True")]


def test_reserved_resources_come_off_allocatable():
    node = local_node(NoGpus(), name="n1", reserved={"cpu": "500m", "memory": "1Gi"})
    cpu, alloc_cpu = parse_quantity(node.capacity["cpu"]), parse_quantity(node.allocatable["cpu"])
    assert cpu - alloc_cpu == parse_quantity("500m")
    mem, alloc_mem = parse_quantity(node.capacity["memory"]), parse_quantity(node.allocatable["memory"])
    assert mem - alloc_mem == parse_quantity("1Gi")


def test_product_label_follows_gpu_feature_discovery():
    node = local_node(FakeGpus(parse_fake_gpus("1:NVIDIA A100-SXM4-80GB:80Gi")), name="n1")
    assert node.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"


def test_node_name_is_a_dns_name():
    name = node_name()
    assert name and name == name.lower() and " " not in name and "_" not in name
