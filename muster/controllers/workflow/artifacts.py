"""Workflow artifacts on the local runtime: content-addressed files and directories under
``$MUSTER_HOME/artifacts`` (DESIGN §8, §11).

``sha256/<hex>``
    one artifact (a file or a directory tree), named by its content digest
    (:func:`digest_of`) and made read-only once stored. Equal outputs are stored once; a
    digest is cheap to put in a cache key and a cached output is reused safely because it
    cannot change under its name.
``runs/<namespace>/<workflow uid>/<attempt>/{inputs,outputs}``
    one task attempt: ``MUSTER_OUTPUTS_DIR`` is ``outputs`` (empty at start),
    ``MUSTER_INPUTS_DIR`` is ``inputs``, where ``inputs/<name>`` is a link to the stored
    artifact. Removed when the workflow is deleted.

Collecting an output moves it into the store (a rename, no copy, on one file system) and
leaves a link in its place, so collecting the same outputs again (a controller that crashed
between collecting and recording) finds the same digests.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import shutil
import stat
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ArtifactStore", "RunDirs", "digest_of"]

log = logging.getLogger(__name__)

_PREFIX = "sha256:"
_CHUNK = 1 << 20


def digest_of(path: Path) -> str:
    """``sha256:<hex>`` of a file's content, or of a directory tree: the relative paths, kinds,
    executable bits and contents of everything under it, in sorted order (timestamps and
    ownership do not count, so equal outputs of two runs have equal digests)."""
    h = hashlib.sha256()
    target = path.resolve()
    if target.is_file():
        h.update(b"file\0" + _file_digest(target).encode())
    elif target.is_dir():
        h.update(b"dir\0")
        for rel, kind, detail in _tree(target):
            h.update(f"{kind} {rel}\0{detail}\n".encode())
    else:
        raise FileNotFoundError(f"{path} is neither a file nor a directory")
    return _PREFIX + h.hexdigest()


@dataclass(frozen=True)
class RunDirs:
    """The directories of one task attempt."""

    root: Path

    @property
    def inputs(self) -> Path:
        return self.root / "inputs"

    @property
    def outputs(self) -> Path:
        return self.root / "outputs"


class ArtifactStore:
    """The artifacts of one ``$MUSTER_HOME``."""

    def __init__(self, home: Path) -> None:
        self.root = home / "artifacts"

    # -- stored artifacts ---------------------------------------------------------------------

    def path(self, digest: str) -> Path:
        """Where the artifact with ``digest`` is (or would be) stored."""
        if not digest.startswith(_PREFIX) or len(digest) != len(_PREFIX) + 64:
            raise ValueError(f"{digest!r} is not an artifact digest (sha256:<64 hex digits>)")
        return self.root / "sha256" / digest[len(_PREFIX) :]

    def exists(self, digest: str) -> bool:
        try:
            return self.path(digest).exists()
        except ValueError:
            return False

    def ingest(self, path: Path) -> str:
        """Store the file or directory at ``path`` and return its digest; ``path`` becomes a
        link to the stored copy. Idempotent: a path that already links into the store is
        its digest."""
        stored = self._stored_digest(path)
        if stored is not None:
            return stored
        digest = digest_of(path)
        dest = self.path(digest)
        if not dest.exists():
            self._store(path, dest)
        if path.exists() or path.is_symlink():
            _remove(path)
        path.symlink_to(dest)
        return digest

    # -- runs -------------------------------------------------------------------------------

    def run_dirs(self, namespace: str, workflow_uid: str, attempt: str) -> RunDirs:
        return RunDirs(self.root / "runs" / namespace / workflow_uid / attempt)

    def prepare(self, run: RunDirs, inputs: dict[str, str]) -> None:
        """Create the run's directories and link each input artifact (name -> digest)."""
        run.outputs.mkdir(parents=True, exist_ok=True)
        run.inputs.mkdir(parents=True, exist_ok=True)
        for name, digest in inputs.items():
            link = run.inputs / name
            if link.is_symlink() or link.exists():
                _remove(link)
            link.symlink_to(self.path(digest))

    def remove_runs(self, keep: set[tuple[str, str]]) -> int:
        """Remove the run directories of workflows not in ``keep`` ((namespace, uid) pairs);
        returns how many workflows' directories went."""
        runs = self.root / "runs"
        removed = 0
        if not runs.is_dir():
            return 0
        for ns_dir in runs.iterdir():
            for wf_dir in ns_dir.iterdir() if ns_dir.is_dir() else ():
                if (ns_dir.name, wf_dir.name) not in keep:
                    shutil.rmtree(wf_dir, ignore_errors=True)
                    removed += 1
        return removed

    # -- internals ---------------------------------------------------------------------------

    def _stored_digest(self, path: Path) -> str | None:
        if not path.is_symlink():
            return None
        target = Path(os.readlink(path))
        if target.parent == self.root / "sha256" and target.exists():
            return _PREFIX + target.name
        return None

    def _store(self, path: Path, dest: Path) -> None:
        tmp = self.root / "tmp" / f"{dest.name}.{uuid.uuid4().hex}"
        tmp.parent.mkdir(parents=True, exist_ok=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        source = path.resolve()
        try:
            os.rename(source, tmp)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            if source.is_dir():
                shutil.copytree(source, tmp, symlinks=True)
            else:
                shutil.copy2(source, tmp)
        _read_only(tmp)
        try:
            os.rename(tmp, dest)
        except OSError:
            if not dest.exists():
                raise
            _remove(tmp)  # stored meanwhile by an equal output


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _tree(root: Path) -> list[tuple[str, str, str]]:
    entries: list[tuple[str, str, str]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in sorted(dirnames + filenames):
            p = base / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                entries.append((rel, "link", os.readlink(p)))
            elif p.is_dir():
                entries.append((rel, "dir", ""))
            else:
                executable = "x" if p.stat().st_mode & 0o111 else "-"
                entries.append((rel, "file", f"{executable}{_file_digest(p)}"))
        dirnames.sort()
    entries.sort()
    return entries


def _read_only(path: Path) -> None:
    """Drop write permission everywhere under ``path`` (inputs are linked, not copied)."""
    paths = [path]
    if path.is_dir() and not path.is_symlink():
        for dirpath, dirnames, filenames in os.walk(path):
            paths.extend(Path(dirpath) / n for n in dirnames + filenames)
    for p in reversed(paths):
        if p.is_symlink():
            continue
        mode = p.stat().st_mode
        p.chmod(stat.S_IMODE(mode) & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, onerror=_writable_then_retry)
    else:
        path.unlink()


def _writable_then_retry(func: Callable[[str], object], target: str, _exc: object) -> None:
    # A read-only directory (a stored artifact) refuses removal of its entries: allow it.
    parent = os.path.dirname(target)
    os.chmod(parent, stat.S_IRWXU)
    func(target)
