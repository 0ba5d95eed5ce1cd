"""The cluster and the queues a Philly replay runs on: a YAML file, or derived from the trace.

.. code-block:: yaml

    cluster: {nodes: 100, gpusPerNode: 8, gpuModel: V100}
    queues:                      # one per virtual cluster of the trace; omit to derive them
      - {name: 6214e9, nominalGpus: 40}
      - {name: ee9e8c, nominalGpus: 134, borrowingLimitGpus: 64, fairWeight: 2}

Every virtual cluster (VC) becomes a ClusterQueue in one cohort, so idle quota is lent to
the others (Kueue borrowing). Without ``queues`` each VC's nominal quota is its share of the
replayed jobs' GPU-time, applied to the cluster's GPUs by largest remainders so the quotas
add up to the cluster exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml
from pydantic import Field, ValidationError

from muster.api.base import MusterModel
from muster.api.errors import FieldError, InvalidObject, errors_from_pydantic

__all__ = ["ClusterConfig", "QueueConfig", "ReplayConfig", "derive_quotas", "load_config", "queue_configs"]


class ClusterConfig(MusterModel):
    """Identical GPU nodes."""

    nodes: int = Field(100, ge=1, description="Number of nodes.")
    gpus_per_node: int = Field(8, ge=1, le=64, description="GPUs on each node.")
    gpu_model: str = Field("V100", min_length=1, description="GPU model label of every node (informational).")

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


class QueueConfig(MusterModel):
    """A virtual cluster's ClusterQueue: quota in whole GPUs (Kueue nominalQuota,
    borrowingLimit, lendingLimit; unset limits are unlimited) and fair-sharing weight."""

    name: str = Field(
        min_length=1, description="The virtual cluster, as the trace's cluster column names it."
    )
    nominal_gpus: int = Field(ge=0, description="Nominal quota in GPUs.")
    borrowing_limit_gpus: int | None = Field(
        None, ge=0, description="Most GPUs borrowed above nominal from the cohort; unset is unlimited."
    )
    lending_limit_gpus: int | None = Field(
        None, ge=0, description="Most of its unused nominal GPUs lent to the cohort; unset is unlimited."
    )
    fair_weight: float = Field(1.0, gt=0, description="Fair-sharing weight (the fair policy only).")


class ReplayConfig(MusterModel):
    """The replay's cluster and queues."""

    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="The nodes.")
    queues: list[QueueConfig] = Field(
        default_factory=list, description="One queue per virtual cluster; empty derives them from GPU-time."
    )


def load_config(path: Path) -> ReplayConfig:
    """Read a YAML config; raises :class:`InvalidObject` with paths prefixed by the file name."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise InvalidObject([FieldError(path.name, f"is not valid YAML: {exc}")]) from exc
    try:
        cfg = ReplayConfig.model_validate(data)
    except ValidationError as exc:
        raise InvalidObject(errors_from_pydantic(exc, prefix=path.name)) from exc
    names = [q.name for q in cfg.queues]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise InvalidObject([FieldError(f"{path.name} queues", "queue names must be unique", dups)])
    return cfg


def derive_quotas(gpu_seconds: Sequence[float], gpus: int) -> list[int]:
    """Split ``gpus`` in proportion to ``gpu_seconds`` (largest remainders, ties to the
    earlier queue); all zeros split evenly."""
    weights = np.asarray(gpu_seconds, dtype=np.float64)
    if not len(weights):
        return []
    if weights.sum() <= 0:
        weights = np.ones(len(weights))
    exact = weights / weights.sum() * gpus
    out = np.floor(exact).astype(np.int64)
    left = gpus - int(out.sum())
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[:left]:
        out[i] += 1
    return [int(v) for v in out]


def queue_configs(
    cfg: ReplayConfig, names: Sequence[str], gpu_seconds: Sequence[float], source: str = "config"
) -> list[QueueConfig]:
    """The queues for the VCs ``names``: from ``cfg`` when it lists queues (it must list
    every VC that has jobs; one without jobs may be left out and gets no quota), else derived
    from ``gpu_seconds``."""
    if not cfg.queues:
        quotas = derive_quotas(gpu_seconds, cfg.cluster.gpus)
        return [QueueConfig(name=n, nominal_gpus=q) for n, q in zip(names, quotas, strict=True)]
    given = {q.name: q for q in cfg.queues}
    missing = [n for n, w in zip(names, gpu_seconds, strict=True) if n not in given and w > 0]
    if missing:
        raise InvalidObject(
            [
                FieldError(
                    f"{source} queues",
                    "must list every virtual cluster of the replayed jobs",
                    missing,
                    "add them (nominalGpus: 0 lets a queue only borrow) or drop queues to derive all",
                )
            ]
        )
    return [given.get(n) or QueueConfig(name=n, nominal_gpus=0) for n in names]
