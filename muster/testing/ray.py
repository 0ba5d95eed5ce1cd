"""A Ray cluster on this machine for tests and benchmarks: a head and GPU nodes whose GPUs
are declared through resources (``num_gpus`` and ``accelerator_type:<MODEL>``), started with
``ray.cluster_utils.Cluster`` (one raylet per node, all on 127.0.0.1).

Ray is made to behave on a shared machine (docs/ray.md, "Testing"): its temporary files go
to a private short directory (``RAY_TMPDIR``), token auth and usage stats are off, and node
IPs stay on loopback (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``; without it a driver rewrites
127.0.0.1 to the machine's address and retries forever). Every node gets one CPU, so Ray
prestarts few idle workers. ``muster up`` processes started by the test inherit the
environment, so they join the same cluster with ``--ray-address``.

    with LocalRayCluster(gpu_nodes=2, gpus=4) as cluster:
        runtime = RayRuntime(home, address=cluster.address)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

__all__ = ["RAY_ENV", "LocalRayCluster"]

RAY_ENV = {
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
}


class LocalRayCluster:
    """A head (no GPUs) and ``gpu_nodes`` nodes of ``gpus`` GPUs of ``model`` each."""

    def __init__(self, gpu_nodes: int = 2, gpus: int = 4, model: str = "H100", cpus: int = 1) -> None:
        self.gpu_nodes = gpu_nodes
        self.gpus = gpus
        self.model = model
        self.cpus = cpus
        self.cluster: Any = None
        self.workers: list[Any] = []
        self.tmpdir = ""
        self._saved: dict[str, str | None] = {}

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def start(self) -> LocalRayCluster:
        # Short: Ray's Unix sockets live below it and a socket path must stay under 108 bytes.
        self.tmpdir = tempfile.mkdtemp(prefix="mray-", dir="/tmp")
        for key, value in {**RAY_ENV, "RAY_TMPDIR": self.tmpdir}.items():
            self._saved.setdefault(key, os.environ.get(key))
            os.environ[key] = value
        import ray
        import ray._private.ray_constants as ray_constants
        from ray.cluster_utils import Cluster

        # Ray reads this switch when it is first imported, maybe before this ran (a test module
        # importing the runtime): without it this driver's 127.0.0.1 becomes the machine's IP.
        ray_constants.ENABLE_RAY_CLUSTER = False
        self.cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": self.cpus,
                "num_gpus": 0,
                "node_ip_address": "127.0.0.1",
                "include_dashboard": False,
                # A killed node is declared dead after ~3 missed 1 s health checks, not ~15 s.
                "_system_config": {"health_check_period_ms": 1000, "health_check_failure_threshold": 3},
            },
        )
        for _ in range(self.gpu_nodes):
            self.add_gpu_node(wait=False)
        self.cluster.wait_for_nodes()
        ray.init(address=self.address, namespace="muster", log_to_driver=False)
        return self

    def add_gpu_node(self, wait: bool = True) -> Any:
        """One more GPU node; its handle (for :meth:`remove_node`)."""
        node = self.cluster.add_node(
            num_cpus=self.cpus,
            num_gpus=self.gpus,
            resources={f"accelerator_type:{self.model}": 1},
            node_ip_address="127.0.0.1",
            wait=wait,
        )
        self.workers.append(node)
        return node

    def remove_node(self, node: Any) -> None:
        """The node dies (its raylet and workers are killed), as a machine that lost power."""
        self.workers.remove(node)
        self.cluster.remove_node(node, allow_graceful=False)

    def shutdown(self) -> None:
        import ray

        ray.shutdown()
        if self.cluster is not None:
            self.cluster.shutdown()
            self.cluster = None
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def __enter__(self) -> LocalRayCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
