"""Start/stop times of the test Kubernetes control plane and the latency of the kubelet-role writes.

Needs scripts/k8s-build.sh to have run. Usage: python benchmarks/k8s_control_plane.py [rounds]
"""

from __future__ import annotations

import statistics
import sys
import time

from muster.testing.kubernetes import ControlPlane, find_binaries


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    if find_binaries() is None:
        sys.exit("Kubernetes control plane binaries not built: run scripts/k8s-build.sh")
    starts: dict[str, list[float]] = {}
    stops: list[float] = []
    for _ in range(rounds):
        began = time.monotonic()
        with ControlPlane() as plane:
            starts.setdefault("total", []).append(time.monotonic() - began)
            for name, seconds in plane.start_seconds.items():
                starts.setdefault(name, []).append(seconds)
            writes = _kubelet_writes(plane)
            stopping = time.monotonic()
        stops.append(time.monotonic() - stopping)
    for name, values in starts.items():
        print(f"start {name:<24} median {statistics.median(values):6.2f} s  (n={len(values)})")
    print(f"stop  {'all':<24} median {statistics.median(stops):6.2f} s")
    for name, seconds in writes.items():
        print(f"{name:<30} {seconds * 1000:7.1f} ms")


def _kubelet_writes(plane: ControlPlane) -> dict[str, float]:
    """Latency of one of each kubelet-role write (the last round's)."""
    timings: dict[str, float] = {}
    began = time.monotonic()
    plane.create_namespace("bench")
    timings["create_namespace (+SA token)"] = time.monotonic() - began
    began = time.monotonic()
    plane.register_node("bench-node", {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": 8})
    timings["register_node"] = time.monotonic() - began
    pod = {
        "metadata": {"name": "p"},
        "spec": {"nodeName": "bench-node", "containers": [{"name": "c", "image": "x"}]},
    }
    plane.core_api().create_namespaced_pod("bench", pod)
    began = time.monotonic()
    plane.set_pod_status("bench", "p", "Running")
    timings["set_pod_status"] = time.monotonic() - began
    return timings


if __name__ == "__main__":
    main()
