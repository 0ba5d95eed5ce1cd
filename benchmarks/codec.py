"""The store's JSON text (muster.store.codec) against the standard library's json, on the
objects a burst of jobs writes: examples/trainingjob.yaml with the status a running job has,
and a Workload, a Pod and an Event shaped as the controllers write them.

Prints, per object and for the mix a one-pod job writes (the job 4 times, its Workload 3, its
Pod 2, 6 Events), the microseconds to encode and to decode, and the ratio. A write in the store
encodes the object once (the answer is the object written, not a decoded copy); a watch
decodes it.

    .venv/bin/python benchmarks/codec.py [--repeat 20000]
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
from pathlib import Path
from typing import Any

import yaml

from muster.store import codec

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TIME = "2026-11-27T01:02:03.123456Z"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=20000, help="encodes and decodes timed per object")
    n = parser.parse_args().repeat
    objects = _objects()
    mix = {"TrainingJob": 4, "Workload": 3, "Pod": 2, "Event": 6}
    heads = ("json enc", "codec enc", "json dec", "codec dec")
    print(f"{'object':12s} {'bytes':>6s} " + " ".join(f"{h:>10s}" for h in heads))
    per_job = {"json": 0.0, "codec": 0.0}
    for kind, obj in objects.items():
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
        if codec.loads(codec.dumps(obj)) != obj or json.loads(codec.dumps(obj)) != obj:
            sys.exit(f"{kind}: the codec's text does not decode to the object")
        t = {
            "json enc": _us(lambda o=obj: json.dumps(o, separators=(",", ":"), ensure_ascii=False), n),
            "codec enc": _us(lambda o=obj: codec.dumps(o), n),
            "json dec": _us(lambda s=text: json.loads(s), n),
            "codec dec": _us(lambda s=text: codec.loads(s), n),
        }
        print(f"{kind:12s} {len(text.encode()):6d} " + " ".join(f"{t[h]:9.1f}µ" for h in heads))
        # A store write encodes; a watch following the store decodes.
        per_job["json"] += mix[kind] * (t["json enc"] + t["json dec"])
        per_job["codec"] += mix[kind] * (t["codec enc"] + t["codec dec"])
    print(
        f"one job's writes (an encode and a decode each): json {per_job['json']:.0f} µs, "
        f"codec {per_job['codec']:.0f} µs, ratio {per_job['json'] / per_job['codec']:.2f}"
    )


def _us(fn: Any, repeat: int) -> float:
    return min(timeit.repeat(fn, number=repeat, repeat=3)) / repeat * 1e6


def _objects() -> dict[str, dict[str, Any]]:
    job = yaml.safe_load((EXAMPLES / "trainingjob.yaml").read_text())
    job["metadata"].update(
        namespace="default", uid="7f1c2a9e-1111-2222-3333-444455556666", resourceVersion="12345"
    )
    job["metadata"].update(generation=1, creationTimestamp=TIME)
    job["status"] = {
        "phase": "Running",
        "startTime": TIME,
        "conditions": [
            _condition("Created", "TrainingJob default/demo is created."),
            _condition("Admitted", "admitted by ClusterQueue default"),
            _condition("Running", "all pods are running"),
        ],
        "replicaStatuses": {"Worker": {"active": 2, "succeeded": 0, "failed": 0}},
    }
    workload = {
        "apiVersion": "muster.dev/v1",
        "kind": "Workload",
        "metadata": {"name": "trainingjob-demo", "namespace": "default", "resourceVersion": "12346"},
        "spec": {
            "queueName": "default",
            "priority": 0,
            "podSets": [{"name": "Worker", "count": 2, "requests": {"nvidia.com/gpu": 1, "cpu": 1}}],
        },
        "status": {
            "admission": {"clusterQueue": "default", "podSetAssignments": [{"name": "Worker", "count": 2}]},
            "conditions": [_condition("QuotaReserved", "quota reserved"), _condition("Admitted", "admitted")],
        },
    }
    pod = {
        "apiVersion": "muster.dev/v1",
        "kind": "Pod",
        "metadata": {"name": "demo-worker-0", "namespace": "default", "resourceVersion": "12347"},
        "spec": {
            "nodeName": "local",
            "gpus": ["GPU-0"],
            "containers": [{"name": "main", "command": ["true"]}],
        },
        "status": {"phase": "Running", "startTime": TIME, "hostIP": "127.0.0.1"},
    }
    event = {
        "apiVersion": "muster.dev/v1",
        "kind": "Event",
        "metadata": {"name": "demo.1873a2b4c5d6e7f8", "namespace": "default", "resourceVersion": "12348"},
        "involvedObject": {"kind": "TrainingJob", "name": "demo", "namespace": "default"},
        "reason": "Admitted",
        "message": "admitted by ClusterQueue default",
        "type": "Normal",
        "firstTimestamp": TIME,
        "lastTimestamp": TIME,
        "count": 1,
    }
    return {"TrainingJob": job, "Workload": workload, "Pod": pod, "Event": event}


def _condition(type_: str, message: str) -> dict[str, str]:
    return {"type": type_, "status": "True", "reason": type_, "message": message, "lastTransitionTime": TIME}


if __name__ == "__main__":
    main()
