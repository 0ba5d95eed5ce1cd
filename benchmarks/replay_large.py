"""``muster sched replay`` on a large scenario file: 5,000 nodes and 50,000 workloads.

Writes the scenario (YAML, and the same as JSON) to a temporary directory, then times
parsing, validating + building the snapshot, and the cycle, as the replayer does.

    python benchmarks/replay_large.py [--nodes 5000] [--workloads 50000]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import yaml

from muster.sim.replay import run
from muster.sim.scenario import load_scenario


def scenario(n_nodes: int, n_workloads: int, seed: int = 1) -> dict:
    rng = random.Random(seed)
    nodes = [
        {
            "name": f"node-{i:05d}",
            "capacity": {"cpu": 128, "memory": "1Ti", "nvidia.com/gpu": 8},
            "gpuModel": rng.choice(["A100", "A100", "H100"]),
            "gpuMemory": "80Gi",
            "labels": {"block": f"b{i // 256}", "rack": f"r{i // 16}"},
        }
        for i in range(n_nodes)
    ]
    pending = []
    for i in range(n_workloads):
        r = rng.random()
        if r < 0.7:
            ps = {"count": 1, "requests": {"cpu": 8, "memory": "64Gi", "nvidia.com/gpu": 1}}
        elif r < 0.9:
            g = rng.randint(2, 8)
            ps = {"count": 1, "requests": {"cpu": 8 * g, "memory": f"{64 * g}Gi", "nvidia.com/gpu": g}}
        else:
            ps = {
                "name": "worker",
                "count": rng.randint(2, 16),
                "requests": {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 8},
            }
        pending.append({"name": f"wl-{i:06d}", "queue": f"team-{i % 3}", "creationTime": i, "podSets": [ps]})
    gpus, cpu = n_nodes * 8, n_nodes * 128
    queues = [
        {
            "name": f"team-{k}",
            "cohort": "org",
            "quota": {
                "default": {"cpu": cpu // 3, "memory": f"{n_nodes // 3}Ti", "nvidia.com/gpu": gpus // 3}
            },
        }
        for k in range(3)
    ]
    return {
        "name": f"large: {n_nodes} nodes, {n_workloads} workloads",
        "flavors": [{"name": "default", "topology": ["block", "rack"]}],
        "clusterQueues": queues,
        "nodes": nodes,
        "pending": pending,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--workloads", type=int, default=50_000)
    args = ap.parse_args(argv)
    doc = scenario(args.nodes, args.workloads)
    with tempfile.TemporaryDirectory() as tmp:
        for suffix in (".yaml", ".json"):
            path = Path(tmp) / f"large{suffix}"
            if suffix == ".yaml":
                path.write_text(yaml.dump(doc, Dumper=yaml.CSafeDumper, sort_keys=False))
            else:
                path.write_text(json.dumps(doc))
            t0 = time.perf_counter()
            sc = load_scenario(path)
            loaded = time.perf_counter() - t0
            result = run(sc)
            d = result.decisions
            print(
                f"{suffix[1:]:>4}: {path.stat().st_size / 2**20:.1f} MiB, load {loaded:.2f}s "
                f"(of which snapshot build {sc.snapshot_seconds:.2f}s), cycle {result.cycle_seconds:.2f}s, "
                f"{len(d.admitted)} admitted, {d.pods_placed} pods placed, {len(d.pending)} pending",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
