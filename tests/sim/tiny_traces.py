"""Tiny hand-checkable traces for the simulator tests, written into a trace directory."""

from __future__ import annotations

from pathlib import Path

# 3 nodes, 4 GPUs: two of model A on n0, one A on n1, one B on n2.
TINY_NODES = """sn,cpu_milli,memory_mib,gpu,model
n0,8000,32768,2,A
n1,8000,32768,1,A
n2,4000,16384,1,B
"""

# 6 pods in arrival order p0..p5 (names sort in that order): a whole GPU, two shares, a
# CPU-only pod, a 2-GPU pod and a share that only model B may take.
TINY_PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec
p0,1000,1024,1,1000,
p1,2000,1024,1,500,
p2,1000,1024,1,600,
p3,2000,1024,0,0,
p4,1000,1024,2,1000,
p5,1000,1024,1,500,B
"""


def write_openb(root: Path, nodes: str = TINY_NODES, pods: str = TINY_PODS) -> Path:
    """A trace root holding ``alibaba-gpu-v2023/csv/tiny_nodes.csv`` and ``tiny_pods.csv``."""
    folder = root / "alibaba-gpu-v2023" / "csv"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiny_nodes.csv").write_text(nodes)
    (folder / "tiny_pods.csv").write_text(pods)
    return root


def write_philly(root: Path, rows: list[tuple[str, float, int, str]], name: str = "tiny") -> Path:
    """A trace root holding ``philly/<name>.csv`` with (timestamp, duration, gpus, vc) rows."""
    folder = root / "philly"
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    lines += [f"{ts},{d},{g},{d * g},{vc}" for ts, d, g, vc in rows]
    (folder / f"{name}.csv").write_text("\n".join(lines) + "\n")
    return root
