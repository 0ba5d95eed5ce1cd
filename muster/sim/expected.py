"""The FGD simulator's published results, to print beside ours.

``alibaba-gpu-v2023/fgd_expected_results/`` holds the simulator's cached results for 17 pod
lists x 6 policies x 10 seeds (42..51), each a row of values per whole arrived percentage
0..130: allocation (``analysis_allo_discrete.csv``), fragmented GPUs as % of the cluster
(``analysis_frag_discrete.csv``) and fragmented share of idle GPUs (``..._frag_ratio_...``).
The paper plots the median over seeds, and so do we. They were computed on the 1213 GPU
nodes of ``openb_node_list_gpu_node.csv`` with inflation to 1.3x.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from pathlib import Path

from muster.sim.traces import open_text

__all__ = ["MEASURES", "POLICY_NAMES", "Expected", "load_expected"]

FOLDER = "alibaba-gpu-v2023/fgd_expected_results"
POLICY_NAMES = {
    "01-Random": "random",
    "02-DotProd": "dotprod",
    "03-GpuClustering": "gpu-clustering",
    "04-GpuPacking": "gpu-packing",
    "05-BestFit": "bestfit",
    "06-FGD": "fgd",
}
MEASURES = {
    "allocation": "analysis_allo_discrete.csv",
    "fragmentation": "analysis_frag_discrete.csv",
    "frag_ratio": "analysis_frag_ratio_discrete.csv",
}


@dataclass(slots=True)
class Expected:
    """measure -> policy -> arrived % -> median over seeds; ``seeds`` per policy."""

    workload: str
    medians: dict[str, dict[str, dict[int, float]]]
    seeds: dict[str, list[int]]

    def get(self, measure: str, policy: str, arrived: int) -> float | None:
        return self.medians.get(measure, {}).get(policy, {}).get(arrived)


def load_expected(trace_root: Path, workload: str, ratio: float = 1.3) -> Expected | None:
    """The published medians for pod list ``workload`` (e.g. ``openb_pod_list_default``)
    at tune ``ratio``; None when the files are absent or do not cover it."""
    folder = trace_root / FOLDER
    medians: dict[str, dict[str, dict[int, float]]] = {}
    seeds: dict[str, list[int]] = {}
    for measure, name in MEASURES.items():
        path = next((p for p in (folder / name, folder / f"{name}.gz") if p.is_file()), None)
        if path is None:
            continue
        cells: dict[str, dict[int, list[float]]] = {}
        with open_text(path) as f:
            for row in csv.DictReader(f):
                policy = POLICY_NAMES.get(row.get("sc_policy", ""))
                if row.get("workload") != workload or policy is None or not _same(row.get("tune"), ratio):
                    continue
                if measure == "allocation":
                    seeds.setdefault(policy, []).append(int(row["seed"]))
                per = cells.setdefault(policy, {})
                for k, v in row.items():
                    if k.isdigit() and v not in ("", None):
                        per.setdefault(int(k), []).append(float(v))
        if cells:
            medians[measure] = {
                p: {k: statistics.median(v) for k, v in per.items()} for p, per in cells.items()
            }
    if not medians:
        return None
    return Expected(workload, medians, {p: sorted(s) for p, s in seeds.items()})


def _same(tune: str | None, ratio: float) -> bool:
    try:
        return tune is not None and abs(float(tune) - ratio) < 1e-9
    except ValueError:
        return False
