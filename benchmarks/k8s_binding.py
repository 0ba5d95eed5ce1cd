"""Pods bound per second, and submit-to-bound latency, through a real kube-apiserver.

100 Nodes (8 GPUs each) are registered through the API; then gangs of ``--gang`` pods are
handed to the Kubernetes runtime as the executor hands them (``start_gang``), placed round
robin. A separate watch (as admin) notes when each Pod is seen with its ``nodeName``: the
latency is from the ``start_gang`` call to that moment, the rate is pods over the time from
the first call to the last bound Pod. Each gang costs its pods' creations, its headless
Service and one Binding per pod. For comparison, kube-scheduler binds about 50 pods/s through
a real API server at its default client QPS (50, burst 100).

Needs scripts/k8s-build.sh to have run. The control plane shares this machine's cores.
Usage: python benchmarks/k8s_binding.py [--pods 1000] [--gang 1] [--nodes 100] [--workers 8] [--rate R]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import threading
import time
from typing import Any

from muster.controllers.pods.launch import device_binding, pod_launch
from muster.runtime.base import GangLaunch, GangMember
from muster.runtime.kubernetes.config import KubernetesConfig
from muster.runtime.kubernetes.runtime import KubernetesRuntime
from muster.testing.kubernetes import ControlPlane, NodeRegistry, find_binaries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--gang", type=int, default=1, help="pods per gang")
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--workers", type=int, default=8, help="the runtime's concurrent API writers")
    parser.add_argument(
        "--rate", type=float, default=0.0, help="pods submitted per second (default: all at once, a burst)"
    )
    args = parser.parse_args()
    if find_binaries() is None:
        sys.exit("Kubernetes control plane binaries not built: run scripts/k8s-build.sh")
    with ControlPlane() as plane:
        nodes = NodeRegistry(plane)
        began = time.monotonic()
        names = [nodes.add(gpus=8) for _ in range(args.nodes)]
        print(f"registered {len(names)} nodes in {time.monotonic() - began:.1f} s")
        ns = f"bench-{secrets.token_hex(3)}"
        plane.create_namespace(ns)
        bound = _BoundWatch(plane, ns, args.pods)
        with plane.admin_client() as api:
            config = KubernetesConfig(workers=args.workers, leader_election=False)
            runtime = KubernetesRuntime(config, api=api)
            try:
                submitted = _submit(runtime, ns, names, args.pods, args.gang, args.rate)
                bound.done.wait(timeout=600)
            finally:
                runtime.close()
        bound.stop()
    _report(submitted, bound.at, args)


class _BoundWatch:
    """Notes when each Pod of ``ns`` is first seen bound (a watch of its own, as admin)."""

    def __init__(self, plane: ControlPlane, ns: str, expected: int) -> None:
        from kubernetes import client, watch

        self.at: dict[str, float] = {}
        self.done = threading.Event()
        self._expected = expected
        self._api = plane.admin_client()
        self._watch = watch.Watch()
        core = client.CoreV1Api(self._api)
        self._thread = threading.Thread(target=self._run, args=(core, ns), daemon=True)
        self._thread.start()

    def _run(self, core: Any, ns: str) -> None:
        for event in self._watch.stream(core.list_namespaced_pod, ns, timeout_seconds=900):
            pod = event["object"]
            if pod.spec.node_name and pod.metadata.name not in self.at:
                self.at[pod.metadata.name] = time.monotonic()
                if len(self.at) >= self._expected:
                    self.done.set()
                    return

    def stop(self) -> None:
        self._watch.stop()
        self._api.close()


def _submit(
    runtime: KubernetesRuntime, ns: str, nodes: list[str], pods: int, gang: int, rate: float
) -> dict[str, float]:
    submitted: dict[str, float] = {}
    start = time.monotonic()
    for g in range(pods // gang):
        if rate > 0:
            time.sleep(max(0.0, start + g * gang / rate - time.monotonic()))
        workload = f"g{g}"
        members = []
        for i in range(gang):
            name = f"{workload}-worker-{i}"
            pod = _muster_pod(ns, name, workload, nodes[(g * gang + i) % len(nodes)])
            members.append(
                GangMember(pod_launch(pod, "", native=True), device_binding(pod), pod["spec"]["nodeName"])
            )
        launch = GangLaunch(ns, workload, secrets.token_hex(8), tuple(members), timeout_seconds=600)
        now = time.monotonic()
        runtime.start_gang(launch)
        for m in members:
            submitted[m.pod.ref.name] = now
    return submitted


def _muster_pod(ns: str, name: str, workload: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": secrets.token_hex(8),
            "labels": {"muster.dev/workload": workload, "muster.dev/job-name": workload},
        },
        "spec": {
            "nodeName": node,
            "gpus": [0],
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["true"],
                    "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "100m"}},
                }
            ],
        },
    }


def _report(submitted: dict[str, float], bound: dict[str, float], args: argparse.Namespace) -> None:
    done = [name for name in submitted if name in bound]
    if not done:
        sys.exit("no pod was bound")
    latencies = sorted(bound[n] - submitted[n] for n in done)
    span = max(bound[n] for n in done) - min(submitted.values())
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
    print(
        f"{len(done)}/{len(submitted)} pods bound (gangs of {args.gang}, {args.nodes} nodes, "
        f"{args.workers} writers, {f'{args.rate:g} pods/s offered' if args.rate else 'one burst'}) "
        f"in {span:.2f} s: {len(done) / span:.1f} pods/s"
    )
    print(
        f"submit-to-bound latency: p50 {q[49] * 1000:.0f} ms  p90 {q[89] * 1000:.0f} ms  "
        f"p99 {q[98] * 1000:.0f} ms  max {latencies[-1] * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
