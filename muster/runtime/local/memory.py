"""Memory limits for local containers: a cgroup where one is writable, else an RSS watch.

The runtime calls :func:`detect_cgroup` once and writes the outcome into each container's
spec; the shim turns that into a :class:`Limiter` around the process it starts.

* **cgroup v2** (preferred): a ``muster`` cgroup is made beside the runtime's own (or at the
  root of the unified hierarchy), the memory controller is enabled for its children, and each
  container gets a child with ``memory.max`` = limit, ``memory.swap.max`` = 0 and
  ``memory.oom.group`` = 1, so the kernel kills the whole container when it breaches.
* **cgroup v1**: the same under the ``memory`` hierarchy with ``memory.limit_in_bytes``
  (and ``memory.memsw.limit_in_bytes`` when swap accounting is on). v1 has no OOM group, so
  the shim kills the rest of the container when the OOM counter moves.
* **RSS watch** (no writable cgroup): the shim sums the resident memory of the process tree
  every ``interval`` seconds and kills the process group when it exceeds the limit. It can
  miss a spike shorter than the interval and counts shared pages once per process.

In every case a breach is reported as OOMKilled with exit code 137.
Standard library only at import time (the shim imports this); psutil is imported lazily.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import NamedTuple

from muster.runtime.local import procfs

__all__ = ["CgroupSupport", "Limiter", "detect_cgroup", "open_limiter"]

CGROUP_ROOT = Path("/sys/fs/cgroup")
DEFAULT_RSS_INTERVAL = 0.2


class CgroupSupport(NamedTuple):
    """A cgroup directory under which per-container memory cgroups can be made."""

    version: int  # 1 or 2
    base: Path


def detect_cgroup(root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> CgroupSupport | None:
    """Find a writable cgroup (v2 first, then v1's memory hierarchy) for container limits.

    ``proc_cgroup`` is the text of ``/proc/self/cgroup`` (read when None). Returns None when
    neither hierarchy lets this process create a child with a memory limit; the caller then
    falls back to the RSS watch. Probing leaves only the (empty) ``muster`` directory behind.
    """
    if proc_cgroup is None:
        try:
            proc_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            return None
    v2_path, v1_path = _own_cgroups(proc_cgroup)
    unified = next((d for d in (root, root / "unified") if (d / "cgroup.controllers").exists()), None)
    if unified is not None and v2_path is not None:
        for base in _v2_candidates(unified, v2_path):
            if _probe_v2(base):
                return CgroupSupport(2, base)
    memory_root = root / "memory"
    if v1_path is not None and (memory_root / "memory.limit_in_bytes").exists():
        base = memory_root / v1_path.lstrip("/") / "muster"
        if _probe(base, "memory.limit_in_bytes"):
            return CgroupSupport(1, base)
    return None


class Limiter:
    """No limit: the base every limiter extends. The shim calls, in order: ``prepare`` (may
    fall back to another limiter), ``join`` in the child before exec, ``breached`` every
    ``interval`` seconds while the process runs, ``finish`` once it has exited.
    """

    mode = "none"
    interval: float | None = None
    cgroup: Path | None = None  # the container's cgroup, when the kernel enforces the limit
    note = ""  # why a cgroup could not be used, when this limiter is the fallback

    def prepare(self) -> Limiter:
        return self

    def join(self) -> None:
        """Runs in the forked child before exec: must not allocate much or take locks."""

    def breached(self, pid: int) -> bool:
        return False

    def finish(self) -> bool:
        """Clean up after the process group ended; True if the kernel OOM-killed in it."""
        return False


def open_limiter(memory: dict | None, name: str) -> Limiter:
    """The limiter a container spec's ``memory`` section asks for (None: no limit)."""
    if not memory or not memory.get("limit"):
        return Limiter()
    limit = int(memory["limit"])
    interval = float(memory.get("interval") or DEFAULT_RSS_INTERVAL)
    rss = RssWatch(limit, interval)
    mode, base = memory.get("mode"), memory.get("cgroup")
    if mode in ("cgroup2", "cgroup1") and base:
        return CgroupLimiter(int(mode[-1]), Path(base) / name, limit, interval, fallback=rss)
    return rss


class RssWatch(Limiter):
    """Kill the process group when the resident memory of its process tree exceeds the limit."""

    mode = "rss"

    def __init__(self, limit: int, interval: float) -> None:
        self.limit = limit
        self.interval = interval

    def breached(self, pid: int) -> bool:
        return tree_rss(pid) > self.limit


class CgroupLimiter(Limiter):
    """A per-container cgroup with a kernel-enforced memory limit."""

    def __init__(self, version: int, path: Path, limit: int, interval: float, fallback: Limiter) -> None:
        self.version = version
        self.path = self.cgroup = path
        self.limit = limit
        # The OOM counter is read at this pace: v1 has no OOM group, so the shim finishes the job.
        self.interval = interval
        self.fallback = fallback
        self.mode = f"cgroup{version}"
        self._procs = str(path / "cgroup.procs")

    def prepare(self) -> Limiter:
        try:
            self.path.mkdir(exist_ok=True)
            if self.version == 2:
                _write(self.path / "memory.max", self.limit)
                _write_if_present(self.path / "memory.swap.max", 0)
                _write_if_present(self.path / "memory.oom.group", 1)
            else:
                _write(self.path / "memory.limit_in_bytes", self.limit)
                _write_if_present(self.path / "memory.memsw.limit_in_bytes", self.limit)
        except OSError as exc:
            self.fallback.note = f"cannot use cgroup {self.path}: {exc}; watching RSS instead"
            with contextlib.suppress(OSError):
                self.path.rmdir()
            return self.fallback
        return self

    def join(self) -> None:
        fd = os.open(self._procs, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)

    def breached(self, pid: int) -> bool:
        return self.oom_kills() > 0

    def oom_kills(self) -> int:
        name, key = ("memory.events", "oom_kill") if self.version == 2 else ("memory.oom_control", "oom_kill")
        try:
            text = (self.path / name).read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == key:
                return int(parts[1])
        return 0

    def finish(self) -> bool:
        oom = self.oom_kills() > 0
        kill_cgroup(self.path, self.version)
        return oom


def kill_cgroup(path: Path, version: int, timeout: float = 2.0) -> None:
    """SIGKILL whatever is left in a container cgroup, then remove it (best effort)."""
    if not path.exists():
        return
    if version == 2 and (path / "cgroup.kill").exists():
        with contextlib.suppress(OSError):
            _write(path / "cgroup.kill", 1)
    deadline = time.monotonic() + timeout
    while True:
        pids = _cgroup_pids(path)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        try:
            path.rmdir()
            return
        except OSError:
            # Killed processes leave the cgroup asynchronously; a short pause lets them go.
            if time.monotonic() >= deadline:
                return
            time.sleep(0.02)


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants (processes that vanish count as 0)."""
    if procfs.available():
        return procfs.tree_rss(pid)
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total


def _own_cgroups(text: str) -> tuple[str | None, str | None]:
    v2 = v1 = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hier, controllers, path = parts
        if hier == "0" and controllers == "":
            v2 = path
        elif "memory" in controllers.split(","):
            v1 = path
    return v2, v1


def _v2_candidates(unified: Path, own: str) -> list[Path]:
    # A process cannot enable controllers for children of its own non-root cgroup (the "no
    # internal processes" rule), so the muster cgroup goes beside ours, in our parent, which a
    # delegated (systemd user or container) subtree lets us write; the hierarchy root is last.
    rel = own.strip("/")
    parent = str(Path(rel).parent) if rel else ""
    out = [unified / parent / "muster" if parent not in ("", ".") else unified / "muster"]
    if out[0] != unified / "muster":
        out.append(unified / "muster")
    return out


def _probe_v2(base: Path) -> bool:
    try:
        base.mkdir(exist_ok=True)
        if "memory" not in (base / "cgroup.controllers").read_text().split():
            return False
        if "memory" not in (base / "cgroup.subtree_control").read_text().split():
            _write(base / "cgroup.subtree_control", "+memory")
    except OSError:
        return False
    return _probe(base, "memory.max")


def _probe(base: Path, limit_file: str) -> bool:
    # The kernel fills a new cgroup directory with its control files; a writable limit file in
    # a child we made is the proof that per-container cgroups will work.
    probe = base / f"probe-{os.getpid()}"
    try:
        base.mkdir(exist_ok=True)
        probe.mkdir(exist_ok=True)
        try:
            return os.access(probe / limit_file, os.W_OK)
        finally:
            probe.rmdir()
    except OSError:
        return False


def _cgroup_pids(path: Path) -> list[int]:
    try:
        return [int(x) for x in (path / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _write(path: Path, value: object) -> None:
    with open(path, "w") as f:
        f.write(str(value))


def _write_if_present(path: Path, value: object) -> None:
    if path.exists():
        _write(path, value)
