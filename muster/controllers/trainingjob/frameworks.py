"""The framework environments of a TrainingJob's replicas besides PyTorch's (pods.py):
TensorFlow's ``TF_CONFIG`` and MPI's hostfile, as Kubeflow's TFJob and MPIJob give them.

TensorFlow (``framework: TensorFlow``), every replica:

=======================  ==========================================================
``TF_CONFIG``            JSON ``{"cluster": {...}, "task": {"type": T, "index": i},
                         "environment": "cloud"}``; ``cluster`` maps each replica type
                         (lower case: ``chief`` or ``master``, ``worker``, ``ps``) to the
                         ``host:port`` of its replicas in index order. The evaluator is not
                         part of the training cluster (TensorFlow's
                         ``tf.estimator.train_and_evaluate`` contract): it is in no
                         ``cluster``, yet its own ``task`` says ``evaluator``.
=======================  ==========================================================

The host is the replica's node address (127.0.0.1 on the local runtime, the pod's DNS name
on Kubernetes); the port is one chosen per replica when a run's pods are created (kept in the
Workload's ``muster.dev/replica-ports`` annotation, so a pod created late in the same run gets
the same cluster).

MPI (``framework: MPI``): the Workers start first; the Launcher is created once every Worker
runs (on a runtime that starts a gang's pods together, all at once), and gets:

==================================  =================================================
``MUSTER_MPI_HOSTFILE``             the hostfile: a ``HOST slots=N`` line per host of the
                                    Workers (``N`` = Workers there x ``slotsPerWorker``)
``OMPI_MCA_orte_default_hostfile``  the same file, for Open MPI 4 (``mpirun`` reads it)
``PRTE_MCA_prte_default_hostfile``  the same file, for Open MPI 5
``I_MPI_HYDRA_HOST_FILE``           the same file, for Intel MPI and MPICH's Hydra
``MUSTER_MPI_HOSTS``                ``HOST:N,HOST:N`` (Hydra's ``-hosts`` form)
``MUSTER_MPI_NP``                   the total number of slots (``mpirun -np``)
==================================  =================================================
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from muster.api.labels import REPLICA_PORTS_ANNOTATION

__all__ = [
    "EVALUATOR",
    "framework",
    "hostfile_path",
    "hostfile_text",
    "known_ports",
    "mpi_hosts",
    "mpi_launcher_env",
    "replica_endpoints",
    "replica_key",
    "tf_config",
    "write_hostfile",
]

Obj = dict[str, Any]
EVALUATOR = "Evaluator"  # TensorFlow's evaluator: not part of the training cluster


def framework(job: Obj) -> str:
    """The job's framework: PyTorch (the default), TensorFlow or MPI."""
    return str(job["spec"].get("framework") or "PyTorch")


def replica_key(rtype: str, index: int) -> str:
    """``worker-1``: how a replica is named in the Workload's ports annotation."""
    return f"{rtype.lower()}-{index}"


def known_ports(workload: Obj) -> dict[str, int]:
    """The per-replica ports a Workload's annotation holds (none for a PyTorch job)."""
    return json.loads((workload["metadata"].get("annotations") or {}).get(REPLICA_PORTS_ANNOTATION) or "{}")


def replica_endpoints(
    job: Obj,
    expected: Sequence[tuple[str, str, int, Obj]],
    ports: Mapping[str, int],
    address: Callable[[str, str], str],
) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[int, ...]]]:
    """Host and port of every replica by replica type, in index order, for a TensorFlow or
    MPI job (nothing for PyTorch's); ``expected`` lists (pod, replica type, index, placement),
    ``address(pod, node)`` is where the gang reaches a pod."""
    if framework(job) == "PyTorch":
        return {}, {}
    hosts: dict[str, list[str]] = {}
    chosen: dict[str, list[int]] = {}
    for pod, rtype, index, placement in expected:
        hosts.setdefault(rtype, []).append(address(pod, placement["node"]))
        chosen.setdefault(rtype, []).append(int(ports.get(replica_key(rtype, index)) or 0))
    return {k: tuple(v) for k, v in hosts.items()}, {k: tuple(v) for k, v in chosen.items()}


def hostfile_path(home: Path, job: Obj) -> Path:
    """Where an MPI job's hostfile is written for its Launcher (rewritten by every run)."""
    meta = job["metadata"]
    return home / "mpi" / (meta.get("namespace") or "default") / meta["name"] / "hostfile"


def write_hostfile(home: Path, job: Obj, worker_hosts: Sequence[str]) -> Path:
    """Write the hostfile of ``job``'s Workers (atomically: the Launcher reads it as it starts)
    and return its path."""
    path = hostfile_path(home, job)
    hosts = mpi_hosts(worker_hosts, int(job["spec"].get("slotsPerWorker") or 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(hostfile_text(hosts))
    tmp.replace(path)
    return path


def tf_config(addresses: Mapping[str, Sequence[str]], rtype: str, index: int) -> str:
    """``TF_CONFIG`` for replica ``index`` of ``rtype``; ``addresses`` holds the ``host:port``
    of every replica by replica type (as in the job's replicaSpecs), in index order."""
    cluster = {
        rt.lower(): list(addrs)
        for rt, addrs in sorted(addresses.items(), key=lambda kv: kv[0].lower())
        if rt != EVALUATOR and addrs
    }
    config = {"cluster": cluster, "task": {"type": rtype.lower(), "index": index}, "environment": "cloud"}
    return json.dumps(config, separators=(",", ":"))


def mpi_hosts(worker_hosts: Sequence[str], slots_per_worker: int) -> list[tuple[str, int]]:
    """(host, slots) per distinct host of the Workers, in the Workers' order: Workers that
    share a host (every Worker on the local runtime) add their slots up."""
    slots: dict[str, int] = {}
    for host in worker_hosts:
        slots[host] = slots.get(host, 0) + slots_per_worker
    return list(slots.items())


def hostfile_text(hosts: Sequence[tuple[str, int]]) -> str:
    """The hostfile of ``hosts``: ``HOST slots=N`` per line (Open MPI's format, which Intel MPI
    and MPICH's Hydra read too)."""
    return "".join(f"{host} slots={n}\n" for host, n in hosts)


def mpi_launcher_env(hostfile: Path, hosts: Sequence[tuple[str, int]]) -> dict[str, str]:
    """The Launcher's MPI variables (module docstring) for the hostfile at ``hostfile``."""
    path = str(hostfile)
    return {
        "MUSTER_MPI_HOSTFILE": path,
        "OMPI_MCA_orte_default_hostfile": path,
        "PRTE_MCA_prte_default_hostfile": path,
        "I_MPI_HYDRA_HOST_FILE": path,
        "MUSTER_MPI_HOSTS": ",".join(f"{host}:{n}" for host, n in hosts),
        "MUSTER_MPI_NP": str(sum(n for _, n in hosts)),
    }
