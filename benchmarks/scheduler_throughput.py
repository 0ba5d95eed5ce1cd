"""Scheduler throughput: pods placed and workloads decided per second, per policy.

Clusters of 1,000 and 5,000 nodes with 8 GPUs each (A100/H100/L40S mixed, 1% tainted
unhealthy, labelled by block and rack); 10k / 50k pending workloads (70% one-GPU pods, 20%
single pods of 2-8 GPUs, 10% gangs of 2-16 pods x 8 GPUs, a third of the gangs preferring
one rack) spread over three queues in a cohort. Cycles run until nothing more is admitted;
rates count time spent in ``schedule()`` only, on one core. A preemption-heavy case fills
a cluster with low-priority one-GPU pods and measures preemption decisions per second for
high-priority 8-GPU and 2-GPU workloads.

    python benchmarks/scheduler_throughput.py                 # full table
    python benchmarks/scheduler_throughput.py --quick         # 1,000 nodes only
    python benchmarks/scheduler_throughput.py --policies binpack,fgd --sizes 5000
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace

from muster.scheduler import (
    AdmittedPodSet,
    AdmittedWorkload,
    ClusterQueue,
    Flavor,
    FlavorQuotas,
    Node,
    PendingWorkload,
    PodBinding,
    PodSet,
    Policy,
    PreemptionConfig,
    ResourceGroup,
    ResourceQuota,
    Snapshot,
    Taint,
    apply_decisions,
    schedule,
)

GiB = 2**30
MODELS = (("A100", 0.6), ("H100", 0.3), ("L40S", 0.1))
SIZES = {1000: 10_000, 5000: 50_000}
POLICIES = ("binpack", "spread", "bestfit", "dotprod", "gpu-packing", "gpu-clustering", "fgd", "random")


def cluster(n: int, rng: random.Random) -> list[Node]:
    nodes = []
    for i in range(n):
        r = rng.random()
        model = "A100" if r < 0.6 else "H100" if r < 0.9 else "L40S"
        taints = (Taint("nvidia.com/gpu", "unhealthy", "NoSchedule"),) if rng.random() < 0.01 else ()
        nodes.append(
            Node(
                name=f"node-{i:05d}",
                allocatable={"cpu": 128_000, "memory": 1024 * GiB},
                labels={"block": f"b{i // 256}", "rack": f"r{i // 16}", "nvidia.com/gpu.product": model},
                taints=taints,
                gpus=8,
                gpu_model=model,
                gpu_memory=80 * GiB,
            )
        )
    return nodes


def queues(n_nodes: int, preemption: PreemptionConfig | None = None, share: int = 3) -> list[ClusterQueue]:
    gpus, cpu, mem = n_nodes * 8 * 1000, n_nodes * 128_000, n_nodes * 1024 * GiB
    out = []
    for k in range(share):
        quota = {
            "cpu": ResourceQuota(cpu // share),
            "memory": ResourceQuota(mem // share),
            "nvidia.com/gpu": ResourceQuota(gpus // share),
        }
        group = ResourceGroup(("cpu", "memory", "nvidia.com/gpu"), [FlavorQuotas("default", quota)])
        out.append(
            ClusterQueue(
                name=f"team-{k}",
                resource_groups=[group],
                cohort="org" if share > 1 else None,
                preemption=preemption or PreemptionConfig(),
            )
        )
    return out


def workloads(count: int, rng: random.Random, n_queues: int = 3) -> list[PendingWorkload]:
    out = []
    for i in range(count):
        r = rng.random()
        if r < 0.7:
            ps = PodSet("main", 1, {"cpu": 8000, "memory": 64 * GiB}, gpus=1)
        elif r < 0.9:
            g = rng.randint(2, 8)
            ps = PodSet("main", 1, {"cpu": 8000 * g, "memory": 64 * GiB * g}, gpus=g)
        else:
            pods = rng.randint(2, 16)
            pref = "rack" if rng.random() < 1 / 3 else None
            ps = PodSet("worker", pods, {"cpu": 64_000, "memory": 512 * GiB}, gpus=8, topology_preferred=pref)
        out.append(PendingWorkload(f"wl-{i:06d}", f"team-{i % n_queues}", [ps], creation_time=float(i)))
    return out


def run_until_full(snap: Snapshot, policy: Policy) -> tuple[int, int, float, int]:
    """(pods placed, workloads decided, seconds in schedule(), cycles)."""
    pods = decided = cycles = 0
    spent = 0.0
    while True:
        t0 = time.perf_counter()
        d = schedule(snap, policy)
        spent += time.perf_counter() - t0
        cycles += 1
        pods += d.pods_placed
        decided += d.workloads_considered
        if not d.admitted:
            return pods, decided, spent, cycles
        snap = apply_decisions(snap, d, now=float(cycles))


def throughput(n_nodes: int, policies: list[str], seed: int = 1) -> list[tuple]:
    rng = random.Random(seed)
    nodes = cluster(n_nodes, rng)
    pending = workloads(SIZES[n_nodes], rng)
    flavor = Flavor("default", topology_levels=("block", "rack"))
    rows = []
    for name in policies:
        snap = Snapshot(cluster_queues=queues(n_nodes), pending=pending, flavors=[flavor], nodes=nodes)
        pods, decided, spent, cycles = run_until_full(snap, Policy(placement=name, seed=seed))
        rows.append((n_nodes, len(pending), name, pods, pods / spent, decided / spent, spent, cycles))
        print(_fmt(rows[-1]), flush=True)
    return rows


def preemption_heavy(n_nodes: int, seed: int = 1) -> tuple:
    """A full cluster of priority-0 one-GPU pods; priority-10 8-GPU and 2-GPU workloads
    arrive in the same queue (withinClusterQueue LowerPriority)."""
    rng = random.Random(seed)
    nodes = cluster(n_nodes, rng)
    qs = queues(n_nodes, PreemptionConfig(within_cluster_queue="LowerPriority"), share=1)
    admitted = []
    order = list(range(n_nodes * 8))
    rng.shuffle(order)  # admission order unrelated to node order: victims are scattered
    used = {n.name: 0 for n in nodes}
    for k, slot in enumerate(order):
        node = nodes[slot // 8]
        if node.taints:
            continue
        dev = slot % 8
        used[node.name] += 1
        ps = AdmittedPodSet(
            "main",
            1,
            {"cpu": 8000, "memory": 64 * GiB},
            gpus=1,
            flavors={"cpu": "default", "memory": "default", "nvidia.com/gpu": "default"},
            pods=(PodBinding(node.name, (dev,)),),
        )
        admitted.append(AdmittedWorkload(f"low-{k:06d}", "team-0", [ps], admission_time=float(k)))
    nodes = [
        replace(
            n,
            used={"cpu": 8000 * used[n.name], "memory": 64 * GiB * used[n.name]},
            gpu_free=tuple(0 if not n.taints else 1000 for _ in range(8)),
        )
        for n in nodes
    ]
    pending = []
    for i in range(n_nodes // 2):
        g = 8 if i % 2 == 0 else 2
        ps = PodSet("main", 1, {"cpu": 8000 * g, "memory": 64 * GiB * g}, gpus=g)
        pending.append(PendingWorkload(f"high-{i:05d}", "team-0", [ps], priority=10, creation_time=float(i)))
    snap = Snapshot(
        cluster_queues=qs, pending=pending, admitted=admitted, flavors=[Flavor("default")], nodes=nodes
    )
    t0 = time.perf_counter()
    d = schedule(snap, Policy(placement="binpack", seed=seed))
    spent = time.perf_counter() - t0
    preemptors = sum(1 for p in d.pending if p.reason == "WaitingForPreemption")
    return n_nodes, len(pending), preemptors, len(d.preempted), preemptors / spent, spent


def _fmt(row: tuple) -> str:
    n, wl, name, pods, pps, wps, spent, cycles = row
    cells = (
        f"{n:>5}",
        f"{wl:>6}",
        f"{name:<14}",
        f"{pods:>7}",
        f"{pps:>9.0f}",
        f"{wps:>10.0f}",
        f"{spent:>7.2f}",
    )
    return "| " + " | ".join(cells) + f" | {cycles:>6} |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1,000 nodes only")
    ap.add_argument("--sizes", default="", help="comma-separated node counts (1000, 5000)")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--no-preemption", action="store_true")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s] or ([1000] if args.quick else [1000, 5000])
    policies = [p for p in args.policies.split(",") if p]
    print("| nodes | pending | policy         |  pods   |  pods/s   | decided/s  | sched s | cycles |")
    print("|------:|-------:|:---------------|--------:|----------:|-----------:|--------:|-------:|")
    for n in sizes:
        throughput(n, policies)
    if not args.no_preemption:
        print()
        print("| nodes | preemptors pending | decided (waiting) | victims | decisions/s | sched s |")
        print("|------:|-------------------:|------------------:|--------:|------------:|--------:|")
        for n in sizes:
            n_, wanted, waiting, victims, rate, spent = preemption_heavy(n)
            cells = (f"{n_:>5}", f"{wanted:>18}", f"{waiting:>17}", f"{victims:>7}", f"{rate:>11.0f}")
            print("| " + " | ".join(cells) + f" | {spent:>7.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
