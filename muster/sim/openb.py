"""Loaders of Alibaba's GPU-sharing trace (cluster-trace-gpu-v2023, "openb").

Nodes (``openb_node_list_*.csv``: ``sn,cpu_milli,memory_mib,gpu,model``) become scheduler
:class:`~muster.scheduler.Node` objects; pods (``openb_pod_list_*.csv``:
``name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...]``) become :class:`OpenbPod`
records, sorted by name as the FGD simulator sorts them. Only the columns the FGD experiment
uses are read: times, QoS and phase are ignored (reference/perf.md §2.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from muster.api.errors import FieldError, InvalidObject
from muster.scheduler import CPU, GPU_MILLI, MEMORY, Node, PodSet
from muster.scheduler.placement.fragmentation import PodShape
from muster.sim.traces import CsvTable, column, read_csv, resolve

__all__ = [
    "DEFAULT_NODES",
    "DEFAULT_PODS",
    "FOLDER",
    "OpenbPod",
    "load_nodes",
    "load_pods",
    "nodes_path",
    "pods_path",
]

FOLDER = "alibaba-gpu-v2023/csv"
DEFAULT_NODES = "openb_node_list_gpu_node"
DEFAULT_PODS = "openb_pod_list_default"
MIB = 2**20


@dataclass(frozen=True, slots=True)
class OpenbPod:
    """One pod of the trace: ``gpus`` devices with ``gpu_milli`` of each (a share below
    1000 only with one GPU; 0 for a CPU-only pod); ``gpu_models`` empty means any model."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    gpu_milli: int
    gpu_models: tuple[str, ...] = ()

    @property
    def gpu_request(self) -> int:
        """Milli-GPU the pod takes in all (what allocation and arrived load count)."""
        return self.gpus * self.gpu_milli

    def shape(self) -> PodShape:
        """The shape the typical pod set groups by: (cpu, milli per GPU, GPUs, models)."""
        return (self.cpu_milli, self.gpu_milli, self.gpus, self.gpu_models)

    def pod_set(self) -> PodSet:
        """The pod as a one-pod set for :func:`muster.scheduler.schedule`."""
        return PodSet(
            name="pod",
            count=1,
            requests={CPU: self.cpu_milli, MEMORY: self.memory_mib * MIB},
            gpus=self.gpus,
            gpu_milli=self.gpu_milli if self.gpus else GPU_MILLI,
            gpu_models=self.gpu_models,
        )


def nodes_path(root: Path, name: str = DEFAULT_NODES) -> Path:
    return resolve(root, FOLDER, name)


def pods_path(root: Path, name: str = DEFAULT_PODS) -> Path:
    return resolve(root, FOLDER, name)


def load_nodes(path: Path) -> list[Node]:
    """The node list; raises :class:`InvalidObject` naming each bad cell."""
    table = read_csv(path, ("sn", "cpu_milli", "memory_mib", "gpu", "model"))
    errors: list[FieldError] = []
    names, cpu, mem, gpus = _common_columns(table, ("sn", "node"), "gpu", errors)
    models = column(table, "model", str, "must be a string", None, errors)
    if not errors and len(set(names)) != len(names):
        seen: set[str] = set()
        dup = next(n for n in names if n in seen or seen.add(n))  # type: ignore[func-returns-value]
        errors.append(FieldError(f"{path.name} sn", "node names must be unique", dup))
    if errors:
        raise InvalidObject(errors, kind="trace", name=path.name)
    return [
        Node(
            name=n,
            allocatable={CPU: c, MEMORY: m * MIB},
            gpus=g,
            gpu_model=model if g else "",
            labels={"nvidia.com/gpu.product": model} if g else {},
        )
        for n, c, m, g, model in zip(names, cpu, mem, gpus, models, strict=True)
    ]


def load_pods(path: Path) -> list[OpenbPod]:
    """The pod list sorted by name; raises :class:`InvalidObject` naming each bad cell.

    ``gpu_milli`` must be 1..1000 for a pod with GPUs and exactly 1000 when it asks for more
    than one (shares are of a single device); it is ignored (taken as 0) without GPUs.
    """
    table = read_csv(path, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"))
    errors: list[FieldError] = []
    names, cpu, mem, gpus = _common_columns(table, ("name", "pod"), "num_gpu", errors)
    milli = column(table, "gpu_milli", int, "must be a whole number of milli-GPU >= 0", _nonneg, errors)
    spec = column(table, "gpu_spec", str, "must be a string") if "gpu_spec" in table.header else None
    if errors:
        raise InvalidObject(errors, kind="trace", name=path.name)
    pods = []
    for i, (n, c, m, g, gm) in enumerate(zip(names, cpu, mem, gpus, milli, strict=True)):
        where = f"{path.name}:{i + 2} gpu_milli"
        if g and not 0 < gm <= GPU_MILLI:
            errors.append(FieldError(where, "must be 1..1000 for a pod with GPUs", gm))
        elif g > 1 and gm != GPU_MILLI:
            errors.append(
                FieldError(
                    where, "must be 1000 for a pod with more than one GPU", gm, "shares are of one GPU"
                )
            )
        models = tuple(x for x in spec[i].split("|") if x) if spec is not None else ()
        pods.append(OpenbPod(n, c, m, g, gm if g else 0, models if g else ()))
        if len(errors) >= 20:
            break
    if errors:
        raise InvalidObject(errors, kind="trace", name=path.name)
    pods.sort(key=lambda p: p.name)
    return pods


def _common_columns(
    table: CsvTable, name: tuple[str, str], gpu_col: str, errors: list[FieldError]
) -> tuple[list[str], list[int], list[int], list[int]]:
    """Name, milli-CPU, MiB and GPU count columns, which nodes and pods both have."""
    return (
        column(table, name[0], str, f"must be a non-empty {name[1]} name", bool, errors),
        column(table, "cpu_milli", int, "must be a whole number of milli-CPU >= 0", _nonneg, errors),
        column(table, "memory_mib", int, "must be a whole number of MiB >= 0", _nonneg, errors),
        column(table, gpu_col, int, "must be a GPU count >= 0", _nonneg, errors),
    )


def _nonneg(v: int) -> bool:
    return v >= 0
