"""From a :class:`PodLaunch` to what each container's shim runs: argv, env, cwd, limits.

Checks everything that can be checked before anything is created, so a bad launch raises
:class:`LaunchError` (field path, rule, hint) and leaves nothing behind.

Environment of a process, later entries winning:

1. the runtime's base environment (the server's, minus ``MUSTER_*`` settings such as the
   token or the store URL, and minus ``CUDA_VISIBLE_DEVICES``), with the pods' Python first
   on ``PATH`` (:func:`pod_python`: ``muster up --python``, else the server's own virtual
   environment when it runs in one) and ``VIRTUAL_ENV`` set when that is a virtual environment;
2. the container's ``env``, in order, ``$(VAR)`` references expanded as Kubernetes does
   against the entries before it (``$$(VAR)`` stays literal, unknown references stay as is);
3. ``MUSTER_VOLUME_<NAME>`` per mounted volume, then ``CUDA_VISIBLE_DEVICES`` = the bound GPUs
   (indices for fake GPUs, UUIDs for real ones; empty, hiding every GPU, when none is bound).

``command + args`` are expanded the same way against the final environment.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from muster.api.podspec import NO_COMMAND_HINT, entrypoint_clause
from muster.api.quantity import QuantityError, parse_quantity
from muster.runtime.base import Container, DeviceBinding, GpuDevice, LaunchError, PodLaunch
from muster.runtime.local.volumes import MountedVolume, VolumePlan, plan_volumes

__all__ = [
    "ContainerPlan",
    "LaunchPlan",
    "base_environment",
    "expand",
    "plan_launch",
    "pod_python",
    "resolve_python",
    "spec_document",
]

_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NOT_HONOURED_LIMITS = ("cpu", "ephemeral-storage")


@dataclass(frozen=True)
class ContainerPlan:
    name: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    memory_limit: int | None
    mounts: list[MountedVolume]
    # The runtime makes ``cwd`` before the launch returns (a workingDir it cannot make is a
    # launch error; mounts are linked into it); else it is the pod's own working directory
    # under the home, which the shim makes (the shim makes ``cwd`` in any case).
    make_cwd: bool = True


@dataclass(frozen=True)
class LaunchPlan:
    containers: list[ContainerPlan]
    volumes: VolumePlan
    warnings: list[str]


def base_environment(environ: Mapping[str, str] | None = None, python: Path | None = None) -> dict[str, str]:
    """The environment every container starts from: this process's, minus Muster's own
    settings (they may hold the token or a database password) and the GPU selection, with
    the pods' Python (:func:`pod_python` of ``python``) first on ``PATH``."""
    src = os.environ if environ is None else environ
    env = {k: v for k, v in src.items() if not k.startswith("MUSTER_") and k != "CUDA_VISIBLE_DEVICES"}
    chosen = pod_python(python)
    if chosen is not None:
        bin_dir, venv = chosen
        rest = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != str(bin_dir)]
        env["PATH"] = os.pathsep.join([str(bin_dir), *rest])
        if venv is not None:
            env["VIRTUAL_ENV"] = str(venv)
            env.pop("PYTHONHOME", None)  # a venv's interpreter finds its own prefix
    return env


def pod_python(configured: Path | None = None) -> tuple[Path, Path | None] | None:
    """Where a pod's ``python`` comes from: (the directory put first on ``PATH``, the virtual
    environment or None). ``configured`` (``muster up --python``, ``MUSTER_PYTHON``) wins; else
    the server's own virtual environment when it runs in one (``.venv/bin/muster up``), so the
    pods import what the server's environment has installed (torch, ray). None: the server's
    ``PATH`` decides, as for any other program."""
    if configured is not None:
        interpreter = resolve_python(configured)
        return interpreter.parent, _venv_of(interpreter.parent)
    if sys.prefix != sys.base_prefix:
        venv = Path(sys.prefix)
        return venv / ("Scripts" if os.name == "nt" else "bin"), venv
    return None


def resolve_python(path: Path) -> Path:
    """The interpreter ``path`` names: a Python executable, or a virtual environment's directory
    (its ``bin/python``). Not resolved through links: a venv's ``python`` is a link to the base
    interpreter, and only the link's location makes it the venv's. ValueError when it is neither."""
    candidate = Path(path).expanduser().absolute()
    if candidate.is_dir():
        for name in ("python", "python3"):
            if os.access(candidate / "bin" / name, os.X_OK):
                return candidate / "bin" / name
        raise ValueError(f"{path}: a directory without bin/python: give a Python executable or a venv")
    if not (candidate.is_file() and os.access(candidate, os.X_OK)):
        raise ValueError(f"{path}: no such executable: give a Python executable or a venv")
    return candidate


def _venv_of(bin_dir: Path) -> Path | None:
    # PEP 405: a virtual environment is marked by pyvenv.cfg next to (or above) its bin/.
    for root in (bin_dir, bin_dir.parent):
        if (root / "pyvenv.cfg").is_file():
            return root
    return None


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: known names are replaced, ``$$`` is a literal ``$``."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _VAR_REF.sub(sub, text)


def plan_launch(
    pod: PodLaunch,
    devices: DeviceBinding,
    *,
    home: Path,
    gpus: Sequence[GpuDevice],
    visible_devices: Callable[[Sequence[int]], str],
    base_env: Mapping[str, str],
    runtime: str = "local",
) -> LaunchPlan:
    """Check ``pod`` and ``devices`` and resolve every container. Raises :class:`LaunchError`.
    ``runtime`` names the runtime in messages (the Ray runtime plans its pods here too)."""
    _check_ref(pod)
    warnings = _check_devices(devices, gpus)
    if not pod.containers:
        raise LaunchError("spec.containers", "must list at least one container")
    names: set[str] = set()
    for i, c in enumerate(pod.containers):
        if not _NAME_RE.match(c.name) or len(c.name) > 63:
            raise LaunchError(f"spec.containers[{i}].name", f"must be a DNS-1123 label, got {c.name!r}")
        if c.name in names:
            raise LaunchError(f"spec.containers[{i}].name", f"duplicate container name {c.name!r}")
        names.add(c.name)
    volumes = plan_volumes(pod.ref, pod.volumes, pod.containers, home)
    warnings.extend(volumes.warnings)
    cuda = visible_devices(list(devices.gpus))
    plans = []
    for i, c in enumerate(pod.containers):
        plan, notes = _plan_container(pod, i, c, home, volumes, base_env, cuda, runtime)
        plans.append(plan)
        warnings.extend(notes)
    return LaunchPlan(plans, volumes, warnings)


def _plan_container(
    pod: PodLaunch,
    i: int,
    c: Container,
    home: Path,
    volumes: VolumePlan,
    base_env: Mapping[str, str],
    cuda: str,
    runtime: str,
) -> tuple[ContainerPlan, list[str]]:
    path = f"spec.containers[{i}]"
    warnings = []
    if not c.command:
        raise LaunchError(
            f"{path}.command",
            f"must be set: {entrypoint_clause(c.image)}, but the {runtime} runtime runs the command as a "
            "process and runs no image",
            NO_COMMAND_HINT,
        )
    if c.image:
        warnings.append(
            f"container {c.name!r}: image {c.image!r} is recorded but not used by the {runtime} runtime"
        )
    if c.working_dir:
        if not PurePosixPath(c.working_dir).is_absolute():
            raise LaunchError(f"{path}.workingDir", f"must be an absolute path, got {c.working_dir!r}")
        cwd = Path(c.working_dir)
    else:
        cwd = home / "volumes" / "workdir" / pod.ref.uid / c.name
    memory_limit = None
    for key, value in c.limits.items():
        if key == "memory":
            memory_limit = _memory(value, f"{path}.resources.limits.memory")
        elif key in _NOT_HONOURED_LIMITS:
            warnings.append(
                f"container {c.name!r}: {key} limit {value} is not enforced by the {runtime} runtime"
            )
    mounts = volumes.mounts(c, cwd)
    for m, vm in zip(mounts, c.volume_mounts, strict=True):
        if c.working_dir and PurePosixPath(vm.mount_path) == PurePosixPath(c.working_dir):
            cwd = m.directory  # the volume is the working directory
    env = dict(base_env)
    for key, value in c.env.items():
        env[key] = expand(value, env)
    for m in mounts:
        if m.env_name:
            env[m.env_name] = str(m.directory)
    env["CUDA_VISIBLE_DEVICES"] = cuda
    argv = [expand(a, env) for a in (*c.command, *c.args)]
    make_cwd = bool(c.working_dir or mounts)
    return ContainerPlan(c.name, argv, env, cwd, memory_limit, mounts, make_cwd), warnings


def spec_document(
    plan: ContainerPlan, *, log: Path, grace: float, memory: dict[str, Any] | None, cgroup_name: str
) -> dict[str, Any]:
    """The ``<container>.spec.json`` the shim reads."""
    return {
        "argv": plan.argv,
        "env": plan.env,
        "cwd": str(plan.cwd),
        "log": str(log),
        "grace_seconds": grace,
        "memory": memory,
        "cgroup_name": cgroup_name,
    }


def _memory(value: str, path: str) -> int:
    try:
        q = parse_quantity(value)
    except QuantityError as exc:
        raise LaunchError(path, str(exc)) from None
    if q.as_int() <= 0:
        raise LaunchError(path, f"must be positive, got {value!r}", "e.g. 4Gi")
    return q.as_int()


def _check_ref(pod: PodLaunch) -> None:
    for field, value in (
        ("metadata.namespace", pod.ref.namespace),
        ("metadata.name", pod.ref.name),
        ("metadata.uid", pod.ref.uid),
    ):
        if not value or "/" in value or value in (".", "..") or "\0" in value:
            raise LaunchError(field, f"must be a non-empty name without '/', got {value!r}")


def _check_devices(devices: DeviceBinding, gpus: Sequence[GpuDevice]) -> list[str]:
    by_index = {g.index: g for g in gpus}
    if len(set(devices.gpus)) != len(devices.gpus):
        raise LaunchError("devices.gpus", f"lists a GPU twice: {list(devices.gpus)}")
    if not 0 < devices.gpu_milli <= 1000:
        raise LaunchError("devices.gpuMilli", f"must be in 1..1000, got {devices.gpu_milli}")
    if devices.gpu_milli < 1000 and len(devices.gpus) != 1:
        raise LaunchError("devices.gpus", "a GPU share binds exactly one GPU", f"got {list(devices.gpus)}")
    warnings = []
    for index in devices.gpus:
        if index not in by_index:
            known = ", ".join(str(i) for i in sorted(by_index)) or "none"
            raise LaunchError("devices.gpus", f"GPU {index} does not exist on this node (GPUs: {known})")
        gpu = by_index[index]
        if gpu.health != "Healthy":
            warnings.append(f"GPU {index} is unhealthy ({gpu.health_reason or 'no reason given'})")
    return warnings
