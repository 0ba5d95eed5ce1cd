"""Where the local runtime keeps its records of the pods it runs.

The records (``<ns>/<pod>/<uid>/``: the launch, each container's spec, the shim's state and
status; see docs/runtime-local.md) must outlive the server's process, since a server killed
with SIGKILL re-adopts its pods from them, but not the machine: after a reboot the processes
they describe are gone as well. So, as runc keeps its state under ``/run``, they are best
kept in memory. On the development VM's disk, creating a file or directory took 0.2 to 1 ms
of the control plane's thread (under 10 us on tmpfs), and a launch creates about a dozen:
with the records in memory the end-to-end throughput of one-pod jobs rose by a sixth.

``$MUSTER_HOME/run/local/pods`` is then a link to a directory of this home under
``/dev/shm/muster-<uid>/pods/``, whose top is private to the user (made mode 0700, and used
only when it is a real directory of this user that no one else can write: the runtime runs
the commands its specs name). systemd-logind removes a regular user's files in ``/dev/shm``
when their last session ends (``RemoveIPC``), which would take a running server's records
with them: ``auto`` keeps the records in memory for root and system users only, on disk
(``pods`` a real directory) for the others. A home whose records are still in use keeps them
where they are, whatever the setting; an empty one is placed afresh at each start.

Each directory in memory names its home (``.home``); a runtime placing its records removes
those of homes that are gone (or lead elsewhere now), so a deleted home leaves nothing behind
in memory, as its files on disk went with it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import stat
import time
from pathlib import Path

__all__ = ["SHM", "place_records", "private_dir", "release_records", "shm_root"]

log = logging.getLogger(__name__)

SHM = Path("/dev/shm")
# The highest uid of a system user (SYS_UID_MAX): logind's RemoveIPC spares these.
_SYSTEM_UID_MAX = 999
_HOME = ".home"  # in a directory of records in memory: the home it belongs to
_PLACING_SECONDS = 3600.0  # a directory naming no home yet is left alone this long


def shm_root() -> Path:
    """This user's directory under /dev/shm (made and checked by :func:`private_dir`)."""
    return SHM / f"muster-{os.getuid()}"


def private_dir(path: Path) -> Path | None:
    """``path``, made if missing (mode 0700), when it is a real directory of this user that no
    one else can write and this process can (not on a read-only mount); None otherwise (or
    when it cannot be made)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        return None
    return path if os.access(path, os.W_OK | os.X_OK) else None


def place_records(link: Path, home: Path, mode: str) -> Path:
    """Make ``link`` (``$MUSTER_HOME/run/local/pods``) lead to the directory of the home's
    records, in memory or on disk as ``mode`` ("auto", "memory", "disk") says; returns that
    directory. The caller holds the home's lock."""
    memory = mode == "memory" or (mode == "auto" and os.getuid() <= _SYSTEM_UID_MAX)
    if link.is_symlink():
        target = Path(os.readlink(link))
        if _holds_records(target):
            return target  # pods recorded there may still run: they stay
        link.unlink()  # empty, or gone with a reboot: placed afresh
        _remove(target)
    elif link.is_dir():
        if not memory or _holds_records(link):
            return link
        link.rmdir()
    if memory:
        target = _memory_dir(home)
        if target is not None:
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(target, target_is_directory=True)
            # Named last: a directory that names no home yet is being placed (see below).
            with contextlib.suppress(OSError):
                (target / _HOME).write_text(str(home.resolve()))
            _collect_orphans(target.parent, keep=target)
            return target
        log.warning(
            "the pods' records are kept on disk: %s is not a private directory of this user "
            "(set MUSTER_POD_RECORDS=disk to say so and silence this)",
            shm_root(),
        )
    link.mkdir(parents=True, exist_ok=True)
    return link


def release_records(link: Path) -> None:
    """At the runtime's close: records in memory that hold no pod go, with their link (a new
    runtime places them again), so that nothing is left in /dev/shm."""
    if not link.is_symlink():
        return
    target = Path(os.readlink(link))
    if _holds_records(target):
        return
    link.unlink()
    _remove(target)


def _memory_dir(home: Path) -> Path | None:
    root = private_dir(shm_root())
    if root is None:
        return None
    digest = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:16]
    target = root / "pods" / digest
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return target


def _collect_orphans(parent: Path, keep: Path) -> None:
    """Remove the directories under ``parent`` of homes that are gone or lead elsewhere."""
    with contextlib.suppress(OSError), os.scandir(parent) as entries:
        for entry in entries:
            directory = Path(entry.path)
            if directory == keep or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                home = Path((directory / _HOME).read_text())
            except FileNotFoundError:
                # Being placed by another runtime now, or left by one that died doing it.
                with contextlib.suppress(OSError):
                    if time.time() - directory.stat().st_mtime > _PLACING_SECONDS:
                        shutil.rmtree(directory, ignore_errors=True)
                continue
            except OSError:
                continue
            try:
                leads_here = Path(os.readlink(home / "run" / "local" / "pods")) == directory
            except OSError:
                leads_here = False
            if not leads_here:
                shutil.rmtree(directory, ignore_errors=True)


def _holds_records(directory: Path) -> bool:
    """Whether ``directory`` holds any pod's records (namespaces; not its own ``.home``)."""
    try:
        with os.scandir(directory) as entries:
            return any(not e.name.startswith(".") for e in entries)
    except OSError:  # gone (a reboot emptied /dev/shm), or not a directory
        return False


def _remove(target: Path) -> None:
    with contextlib.suppress(OSError):
        (target / _HOME).unlink()
    with contextlib.suppress(OSError):
        target.rmdir()
