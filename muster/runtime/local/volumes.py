"""Pod volumes as directories of this machine (processes are not containerised).

Each volume is a directory (see docs/runtime-local.md):

* ``persistentVolumeClaim``: ``$MUSTER_HOME/volumes/pvc/<namespace>/<claimName>/``, shared by
  every pod of the namespace naming the claim and kept until an operator deletes it (this
  is where checkpoints survive restarts and preemptions);
* ``emptyDir``: ``$MUSTER_HOME/volumes/emptydir/<pod uid>/<volume>/``, made at start and
  removed when the pod is released; ``medium: Memory`` puts it on ``/dev/shm`` (tmpfs,
  ``/dev/shm/muster-<user id>/<pod uid>/<volume>``, linked from the emptydir path) when that
  is writable, else on disk with a warning;
* ``hostPath``: ``$MUSTER_HOME/volumes/hostpath/<path without its leading />/``: the host
  path is a name inside Muster's volume area, never the machine's own path, so a manifest
  cannot write into system directories.

A container reaches each mounted volume through ``MUSTER_VOLUME_<NAME>`` (the volume name
upper-cased, other characters as ``_``) set to the directory (joined with ``subPath``).
When the ``mountPath`` lies inside the container's working directory (or is relative), a
symlink there points to the directory too; a ``mountPath`` equal to the working directory
makes the volume the working directory. Nothing is ever created at other absolute paths
(``/data``, ``/dev/shm``). ``readOnly`` and ``sizeLimit`` cannot be enforced and are reported
as warnings.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from muster.runtime.base import Container, LaunchError, PodRef, Volume
from muster.runtime.local.records import SHM, private_dir, shm_root

__all__ = [
    "MountedVolume",
    "VolumePlan",
    "make_links",
    "plan_volumes",
    "pod_volume_dirs",
    "remove_pod_volumes",
    "volume_env_name",
]

_HOSTPATH_DIR_TYPES = ("", "Directory", "DirectoryOrCreate")


@dataclass(frozen=True)
class MountedVolume:
    """One volume mount of one container, resolved to a directory."""

    env_name: str | None  # None for a second mount of the same volume in one container
    directory: Path
    link: Path | None  # the symlink to make in the working directory, if any


@dataclass(frozen=True)
class VolumePlan:
    """Every volume of a pod resolved, not yet created."""

    directories: dict[str, Path]  # volume name -> directory
    shm_dirs: dict[str, Path]  # emptyDir medium Memory: volume name -> tmpfs directory
    warnings: tuple[str, ...]

    def create(self) -> None:
        for name, directory in self.directories.items():
            shm = self.shm_dirs.get(name)
            if shm is not None:
                shm.mkdir(parents=True, exist_ok=True)
                directory.parent.mkdir(parents=True, exist_ok=True)
                if not directory.is_symlink():
                    directory.symlink_to(shm, target_is_directory=True)
            else:
                directory.mkdir(parents=True, exist_ok=True)

    def mounts(self, container: Container, working_dir: Path) -> list[MountedVolume]:
        """Resolve a container's ``volumeMounts`` against this plan (validated by plan_volumes)."""
        out, seen = [], set()
        for mount in container.volume_mounts:
            base = self.directories[mount.name]
            if mount.name in self.shm_dirs:
                base = self.shm_dirs[mount.name]
            directory = base / mount.sub_path if mount.sub_path else base
            env_name = None if mount.name in seen else volume_env_name(mount.name)
            seen.add(mount.name)
            out.append(MountedVolume(env_name, directory, _link_for(mount.mount_path, working_dir)))
        return out


def volume_env_name(volume: str) -> str:
    return "MUSTER_VOLUME_" + re.sub(r"[^A-Za-z0-9]", "_", volume).upper()


def plan_volumes(
    ref: PodRef, volumes: Sequence[Volume], containers: Sequence[Container], home: Path
) -> VolumePlan:
    """Check the pod's volumes and mounts and decide their directories. Raises LaunchError."""
    root = home / "volumes"
    directories: dict[str, Path] = {}
    shm_dirs: dict[str, Path] = {}
    warnings: list[str] = []
    env_names: dict[str, str] = {}
    for j, v in enumerate(volumes):
        path = f"spec.volumes[{j}]"
        if v.name in directories:
            raise LaunchError(
                f"{path}.name", f"duplicate volume name {v.name!r}", "give each volume its own name"
            )
        _check_segment(v.name, f"{path}.name")
        env = volume_env_name(v.name)
        if env in env_names:
            raise LaunchError(
                f"{path}.name", f"volume names {env_names[env]!r} and {v.name!r} map to the same {env}"
            )
        env_names[env] = v.name
        if v.type == "persistentVolumeClaim":
            _check_segment(v.claim_name, f"{path}.persistentVolumeClaim.claimName")
            directories[v.name] = root / "pvc" / ref.namespace / v.claim_name
        elif v.type == "emptyDir":
            directories[v.name] = root / "emptydir" / ref.uid / v.name
            if v.medium == "Memory":
                # Private to this user: a directory another user made there could be read or
                # filled by them.
                shm = private_dir(shm_root())
                if shm is not None:
                    shm_dirs[v.name] = shm / ref.uid / v.name
                else:
                    warnings.append(
                        f"volume {v.name!r}: {SHM} is not writable here (or {shm_root()} is not a "
                        "private directory of this user), so the Memory medium is on disk"
                    )
            elif v.medium:
                raise LaunchError(f"{path}.emptyDir.medium", f"must be '' or 'Memory', got {v.medium!r}")
            if v.size_limit:
                warnings.append(
                    f"volume {v.name!r}: sizeLimit {v.size_limit} is not enforced by the local runtime"
                )
        elif v.type == "hostPath":
            directories[v.name] = root / "hostpath" / _host_rel(v.path, f"{path}.hostPath.path")
            if v.host_path_type not in _HOSTPATH_DIR_TYPES:
                raise LaunchError(
                    f"{path}.hostPath.type",
                    f"the local runtime maps hostPath volumes to directories, not {v.host_path_type!r}",
                    "use type Directory or DirectoryOrCreate, or leave it empty",
                )
        else:
            raise LaunchError(
                f"{path}",
                f"volume source {v.type!r} is not supported by the local runtime",
                "use persistentVolumeClaim, emptyDir or hostPath",
            )
    for i, c in enumerate(containers):
        for k, m in enumerate(c.volume_mounts):
            mpath = f"spec.containers[{i}].volumeMounts[{k}]"
            if m.name not in directories:
                known = ", ".join(sorted(directories)) or "none"
                raise LaunchError(f"{mpath}.name", f"no volume named {m.name!r} (volumes: {known})")
            if m.sub_path:
                _relative(m.sub_path, f"{mpath}.subPath")
            if not m.mount_path:
                raise LaunchError(f"{mpath}.mountPath", "must be set")
            if m.read_only:
                warnings.append(f"container {c.name!r}: readOnly mount of {m.name!r} is not enforced locally")
    return VolumePlan(directories, shm_dirs, tuple(warnings))


def make_links(mounts: Sequence[MountedVolume]) -> list[str]:
    """Create each mount's symlink in the working directory; return warnings for those that
    cannot be made because something that is not our link is in the way."""
    warnings = []
    for m in mounts:
        m.directory.mkdir(parents=True, exist_ok=True)
        if m.link is None:
            continue
        if m.link.exists() and not m.link.is_symlink():
            warnings.append(
                f"{m.link} exists and is not a link, so the volume at {m.directory} is reachable through "
                f"${m.env_name or 'MUSTER_VOLUME_*'} only"
            )
            continue
        m.link.parent.mkdir(parents=True, exist_ok=True)
        tmp = m.link.with_name(f".{m.link.name}.{os.getpid()}.link")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        tmp.symlink_to(m.directory, target_is_directory=True)
        os.replace(tmp, m.link)  # atomic: a concurrent pod never sees the link missing
    return warnings


def pod_volume_dirs(home: Path, uid: str) -> tuple[Path, ...]:
    """The per-pod directories (that may exist): emptyDirs (disk and tmpfs) and default
    working directories."""
    return (home / "volumes" / "emptydir" / uid, home / "volumes" / "workdir" / uid, shm_root() / uid)


def remove_pod_volumes(home: Path, uid: str) -> None:
    """Remove the per-pod directories (:func:`pod_volume_dirs`)."""
    for directory in pod_volume_dirs(home, uid):
        shutil.rmtree(directory, ignore_errors=True)


def _link_for(mount_path: str, working_dir: Path) -> Path | None:
    p = PurePosixPath(mount_path)
    if not p.is_absolute():
        return working_dir / p
    try:
        rel = p.relative_to(PurePosixPath(working_dir))
    except ValueError:
        return None
    return working_dir / rel if str(rel) != "." else None


def _check_segment(value: str, path: str) -> None:
    if not value or "/" in value or value in (".", "..") or "\0" in value:
        raise LaunchError(path, f"must be a plain name (no '/', not '.' or '..'), got {value!r}")


def _relative(value: str, path: str) -> PurePosixPath:
    p = PurePosixPath(value)
    if p.is_absolute() or ".." in p.parts:
        raise LaunchError(path, f"must be a relative path without '..', got {value!r}")
    return p


def _host_rel(value: str, path: str) -> PurePosixPath:
    p = PurePosixPath(value)
    if not p.is_absolute() or ".." in p.parts or p == PurePosixPath("/"):
        raise LaunchError(path, f"must be an absolute path below / without '..', got {value!r}")
    return p.relative_to("/")
