"""LocalRuntime: pods as process groups on this machine, one shim per container.

The runtime writes every decision to ``$MUSTER_HOME/run/local/`` before acting on it and
learns outcomes from the files the shims write, so a server that dies (even by SIGKILL)
and starts again re-adopts its pods: see :mod:`muster.runtime.local.files` for the layout,
:mod:`muster.runtime.local.shim` for what a shim does and docs/runtime-local.md for the
whole story.

Threading: one thread (the controller's) calls every method but :meth:`LocalRuntime.logs`,
which only reads files and may be called from any thread (a log stream of the server).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Literal

from muster.config import settings
from muster.runtime.base import (
    DeviceBinding,
    GpuDevice,
    GpuFault,
    GpuSample,
    LaunchError,
    NodeInfo,
    PodExists,
    PodLaunch,
    PodNotFound,
    PodPhase,
    PodRef,
    PodRuntimeError,
    PodStatusChange,
    PodStillRunning,
    StopReason,
    SupportsFaultInjection,
    SupportsGpuMetrics,
    SupportsLogs,
    SupportsNodeWatch,
    SupportsReadoption,
    SupportsVirtualNodes,
    SupportsWakeup,
    VirtualNodeSpec,
)
from muster.runtime.local import logs as logfiles
from muster.runtime.local.adoption import adopt_pods, never_spawned
from muster.runtime.local.fake import FakeGpu, FakeGpus
from muster.runtime.local.files import ContainerFiles, runtime_dir, write_json
from muster.runtime.local.gpus import GpuSource, open_gpu_source
from muster.runtime.local.launch import base_environment, plan_launch, spec_document
from muster.runtime.local.memory import DEFAULT_RSS_INTERVAL, CgroupSupport, detect_cgroup, kill_cgroup
from muster.runtime.local.node import apply_health, local_node, node_name
from muster.runtime.local.records import place_records, release_records
from muster.runtime.local.removal import Remover
from muster.runtime.local.spawn import ShimStarter, Spawned
from muster.runtime.local.spawner import ShimProcess, Spawner
from muster.runtime.local.tracking import (
    ContainerRecord,
    CState,
    PodRecord,
    mark_lost,
    observe,
    pod_status,
    process_alive,
    take_change,
    update_phase,
)
from muster.runtime.local.virtual import VirtualNodes
from muster.runtime.local.volumes import make_links, pod_volume_dirs, remove_pod_volumes

__all__ = ["HomeInUse", "LocalRuntime", "check_home_free"]

MemoryMode = Literal["auto", "cgroup", "rss"]
# The longest poll() sleeps without looking at files when some container cannot be watched
# through a file descriptor (an adopted shim that has not started its process yet).
_UNWATCHED_POLL = 0.5


# What else the selector watches besides containers: the spawner's and wake()'s pipes.
_SPAWNED = "spawned"
_WOKEN = "woken"

# Shims this process started that outlived the record holding them (a closed runtime, a
# released pod whose shim is still exiting). They are kept here, and reaped by the next poll
# of any runtime, rather than garbage-collected while running: no zombies, no warnings.
_DETACHED: list[subprocess.Popen[bytes] | ShimProcess] = []


class HomeInUse(PodRuntimeError):
    """Another live runtime holds this MUSTER_HOME; two would fight over the same processes."""


def check_home_free(home: Path) -> None:
    """Raise :class:`HomeInUse` when a live local runtime holds ``home``. ``muster up`` asks
    before it starts anything, so a second server on the same home stops with one line; the
    runtime still takes the lock itself when it starts (this check leaves it free)."""
    path = runtime_dir(home) / "lock"
    if path.exists():
        os.close(_lock(path, claim=False))


class LocalRuntime(
    SupportsLogs,
    SupportsReadoption,
    SupportsGpuMetrics,
    SupportsFaultInjection,
    SupportsVirtualNodes,
    SupportsNodeWatch,
    SupportsWakeup,
):
    """Runs pods as local processes. Construction takes the home's lock and re-adopts the pods a
    previous runtime left (:meth:`readopt`); :meth:`close` detaches without stopping them.

    Besides this machine it hosts the virtual nodes a capacity provider adds
    (:mod:`muster.runtime.local.virtual`): their pods are local processes too, bound to that
    node's fake GPUs. It watches them (:class:`SupportsNodeWatch`): a virtual node that finished
    booting or was removed is news, so its Node appears or goes at once."""

    name = "local"

    def __init__(
        self,
        home: Path | None = None,
        *,
        fake_gpus: Sequence[FakeGpu] | None = None,
        gpu_source: GpuSource | None = None,
        node: str | None = None,
        reserved: Mapping[str, str] | None = None,
        memory: MemoryMode = "auto",
        rss_interval: float = DEFAULT_RSS_INTERVAL,
        environ: Mapping[str, str] | None = None,
        zygote: bool | None = None,
        python: Path | None = None,
        pod_records: str | None = None,
    ) -> None:
        self.home = Path(home) if home is not None else settings().home
        self._log_files = logfiles.LogFiles(self.home)
        self.dir = runtime_dir(self.home)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _lock(self.dir / "lock")
        # In memory where it is safe (records.py): files made there cost the control plane's
        # thread microseconds rather than a disk's milliseconds.
        place_records(self.dir / "pods", self.home, pod_records or settings().pod_records)
        self.gpus: GpuSource = gpu_source or open_gpu_source(fake_gpus)
        self.node_name = node or node_name()
        self._reserved = dict(reserved or {})
        self._health: dict[int, tuple[bool, str]] = {}
        self._devices = {d.index: d for d in self.gpus.devices()}
        self._cgroup: CgroupSupport | None = detect_cgroup() if memory != "rss" else None
        if memory == "cgroup" and self._cgroup is None:
            raise PodRuntimeError("memory='cgroup' but no writable cgroup with a memory controller was found")
        self._rss_interval = rss_interval
        self._base_env = base_environment(environ, python)
        self._pods: dict[str, PodRecord] = {}  # by uid, in start/adoption order
        self._selector = selectors.DefaultSelector()
        self._spawner = Spawner(enabled=settings().shim_zygote if zygote is None else zygote)
        self._starter = ShimStarter(self._spawner)
        self._remover = Remover()
        self._selector.register(self._starter.wake_fd, selectors.EVENT_READ, _SPAWNED)
        self._answer_socket: tuple[int, int] | None = None  # the zygote's, in the selector
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, _WOKEN)
        self._woken = False  # a byte is in the wake pipe (or a poll is returning for one)
        # Creating a pod's directories and removing a released one's parents (on the remover's
        # thread) must not interleave: removal takes the emptied parents away.
        self._dirs = threading.Lock()
        self._closed = False
        self._virtual = VirtualNodes(self.dir / "nodes")
        self._offered: list[str] | None = None  # the virtual nodes the last nodes() offered
        self.readopt()

    # -- nodes and GPUs ----------------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        host = local_node(self.gpus, name=self.node_name, reserved=self._reserved, health=self._health)
        self._offered = self._virtual.ready(time.time())
        return [host, *(self._virtual.info(n) for n in self._offered)]

    def nodes_changed(self) -> bool:
        return self._offered is not None and self._offered != self._virtual.ready(time.time())

    @property
    def fake_gpus(self) -> list[FakeGpu] | None:
        """The fake GPUs, for tests and fault injection to set readings on; None for real ones."""
        return self.gpus.gpus if isinstance(self.gpus, FakeGpus) else None

    def gpu_samples(self) -> list[GpuSample]:
        virtual = [s for n in self._virtual.ready(time.time()) for s in self._virtual.gpus(n).samples()]
        return [*self.gpus.samples(), *virtual]

    def set_gpu_health(self, index: int, healthy: bool, reason: str = "") -> None:
        """Override what the driver says of GPU ``index`` (real or fake) until set again."""
        if index not in self._devices:
            raise KeyError(f"no GPU {index} on this node (GPUs: {sorted(self._devices)})")
        self._health[index] = (healthy, reason or ("" if healthy else "marked unhealthy"))

    def inject_gpu_fault(self, node: str, fault: GpuFault) -> GpuDevice:
        if node in self._virtual:
            self._virtual.gpus(node).gpu(fault.gpu).apply(fault)
            return next(d for d in self._virtual.devices(node) if d.index == fault.gpu)
        if node != self.node_name:
            known = ", ".join([self.node_name, *(s.name for s in self._virtual.specs())])
            raise KeyError(f"no node {node} in this runtime (nodes: {known})")
        if not isinstance(self.gpus, FakeGpus):
            raise PodRuntimeError(
                f"node {node} has real GPUs: fault injection is for fake GPUs only (muster up --fake-gpus)"
            )
        self.gpus.gpu(fault.gpu).apply(fault)
        if fault.clear:
            self._health.pop(fault.gpu, None)
        return next(d for d in self._current_devices() if d.index == fault.gpu)

    # -- pods ----------------------------------------------------------------------------------

    def start(self, pod: PodLaunch, devices: DeviceBinding) -> list[str]:
        self._check_open()
        ref = pod.ref
        if ref.uid in self._pods:
            raise PodExists(f"pod {ref} (uid {ref.uid}) is already started on this node")
        for other in self._pods.values():
            if (other.ref.namespace, other.ref.name) == (ref.namespace, ref.name) and not _final(other):
                raise PodExists(f"pod {ref} is still running here as uid {other.ref.uid}; stop it first")
        virtual = pod.node in self._virtual
        plan = plan_launch(
            pod,
            devices,
            home=self.home,
            gpus=self._virtual.devices(pod.node) if virtual else self._current_devices(),
            visible_devices=self._virtual.gpus(pod.node).visible_devices
            if virtual
            else self.gpus.visible_devices,
            base_env=self._base_env,
        )
        pod_dir = self.dir / "pods" / ref.namespace / ref.name / ref.uid
        if pod_dir.exists():  # a new uid has nothing there: one look
            if (pod_dir / "pod.json").exists():
                raise PodExists(f"pod {ref} (uid {ref.uid}) has records at {pod_dir} already")
            # A start that crashed before writing its record: nothing of it ever ran (adoption
            # skips it), so it starts afresh rather than being refused forever.
            with self._dirs:
                shutil.rmtree(pod_dir, ignore_errors=True)
        warnings = list(plan.warnings)
        try:
            plan.volumes.create()
            for c in plan.containers:
                # The pod's own working directory is its shim's to make: a directory fewer on
                # the control plane's thread, where each system call hands the GIL over.
                if c.make_cwd:
                    c.cwd.mkdir(parents=True, exist_ok=True)
                    warnings.extend(make_links(c.mounts))
        except OSError as exc:
            remove_pod_volumes(self.home, ref.uid)
            where = f": {exc.filename}" if exc.filename else ""
            raise LaunchError(
                "spec", f"cannot create the pod's directories ({exc.strerror or exc}{where})"
            ) from None
        with self._dirs:
            pod_dir.mkdir(parents=True)
        record = PodRecord(
            ref, pod_dir, pod.termination_grace_seconds, [], labels=dict(pod.labels), node=pod.node
        )
        for c in plan.containers:
            files = ContainerFiles(pod_dir, c.name)
            log = logfiles.container_log(self.home, ref.namespace, ref.name, c.name)
            logfiles.begin_log(log, pod.log_owner())
            write_json(
                files.spec,
                spec_document(
                    c,
                    log=log,
                    grace=pod.termination_grace_seconds,
                    memory=self._memory_spec(c.memory_limit),
                    cgroup_name=f"{ref.uid}.{c.name}",  # unique, and short enough for a file name
                ),
            )
            record.containers.append(ContainerRecord(c.name, files, time.time(), limit=c.memory_limit))
        # The launch is on disk before any process exists: a crash from here on is re-adoptable.
        # Its record goes last: a directory without one never ran anything (adoption skips it).
        write_json(
            pod_dir / "pod.json",
            {
                "namespace": ref.namespace,
                "name": ref.name,
                "uid": ref.uid,
                "containers": [c.name for c in plan.containers],
                "grace_seconds": pod.termination_grace_seconds,
                "gpus": list(devices.gpus),
                "gpu_milli": devices.gpu_milli,
                "labels": dict(pod.labels),
                "node": pod.node,
                "memory_limits": {c.name: c.memory_limit for c in plan.containers if c.memory_limit},
                "created_at": time.time(),
            },
        )
        self._pods[ref.uid] = record
        for c in record.containers:
            c.spawning = True
            self._starter.spawn(ref.uid, c.files)  # asked for; started meanwhile (spawn.py)
        return warnings

    def stop(self, pod: PodRef, grace_seconds: float | None, reason: StopReason) -> None:
        self._check_open()
        self._take_spawned(self._starter.collect())
        record = self._record(pod)
        if _final(record):
            return
        grace = max(0.0, float(record.grace if grace_seconds is None else grace_seconds))
        first = record.stop or {"reason": StopReason(reason).value, "requested_at": time.time()}
        if record.stop is not None and record.stop.get("grace_seconds", grace) < grace:
            grace = float(record.stop["grace_seconds"])  # a later stop may only shorten the grace
        record.stop = {**first, "grace_seconds": grace}
        # Written before any signal: a shim reads its grace from it, and a shim that has not
        # started its process yet sees it and does not start it.
        write_json(record.dir / "stop.json", record.stop)
        for c in record.containers:
            if c.state is CState.TERMINATED:
                continue
            if c.orphan:
                _stop_orphan(c, grace)
            elif c.popen is not None and c.popen.poll() is None:
                c.popen.send_signal(signal.SIGTERM)
            elif process_alive(c.shim_pid, c.shim_ctime):
                os.kill(c.shim_pid, signal.SIGTERM)  # type: ignore[arg-type]

    def poll(self, timeout: float = 0.0) -> list[PodStatusChange]:
        self._check_open()
        _DETACHED[:] = [p for p in _DETACHED if p.poll() is None]
        woken = self._drain(0)
        changes = self._sweep()
        if changes or timeout <= 0 or woken:  # a wake that came just before: no wait
            return changes
        self._drain(self._wait_time(timeout))
        return self._sweep()

    def pods(self) -> list[PodStatusChange]:
        self._check_open()
        self._take_spawned(self._starter.collect())
        for record in self._pods.values():
            self._refresh(record)  # what changed is still reported by the next poll
        return [pod_status(r) for r in self._pods.values()]

    def release(self, pod: PodRef) -> None:
        self._check_open()
        record = self._pods.get(pod.uid)
        if record is None:
            return
        if not _final(record):
            raise PodStillRunning(f"pod {pod} is {record.phase}; stop it and wait for its final status first")
        for c in record.containers:
            self._unwatch(c)
            _detach(c)
        del self._pods[pod.uid]
        # The files go by the remover's thread: the pod is forgotten already, and a runtime
        # restarted before they are gone re-adopts it as final, to be released again.
        # A cgroup is left behind only when the shim died before cleaning up.
        cgroups = [(Path(c.cgroup), c.cgroup_version) for c in record.containers if c.cgroup]

        def kill_cgroups() -> None:
            for path, version in cgroups:
                kill_cgroup(path, version)

        self._remover.remove(
            [*pod_volume_dirs(self.home, record.ref.uid), record.dir],
            before=kill_cgroups if cgroups else None,
            after=lambda: self._remove_parents(record.dir),
        )

    def _remove_parents(self, pod_dir: Path) -> None:
        with self._dirs:
            for parent in (pod_dir.parent, pod_dir.parent.parent):
                with contextlib.suppress(OSError):
                    parent.rmdir()  # only when empty

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._take_spawned(self._starter.close())
        self._remover.close()
        for record in self._pods.values():
            for c in record.containers:
                self._unwatch(c)
                _detach(c)
        self._selector.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        self._spawner.close()
        self.gpus.close()
        release_records(self.dir / "pods")
        os.close(self._lock_fd)

    # -- capabilities --------------------------------------------------------------------------

    def add_virtual_node(self, spec: VirtualNodeSpec) -> VirtualNodeSpec:
        self._check_open()
        if spec.name == self.node_name:
            raise PodRuntimeError(f"node {spec.name} is this machine; a virtual node needs another name")
        return self._virtual.add(spec)

    def remove_virtual_node(self, name: str) -> None:
        self._check_open()
        if name not in self._virtual:
            return
        # The machine is switched off: its processes die with it (the stop reason, when a drain
        # asked one, else NodeLost), and the node is no longer offered.
        for record in self._pods.values():
            if record.node != name or _final(record):
                continue
            for c in record.containers:
                if c.state is CState.TERMINATED:
                    continue
                self._unwatch(c)
                _killpg(c.pid, signal.SIGKILL)
                if process_alive(c.shim_pid, c.shim_ctime):
                    _killpg(c.shim_pid, signal.SIGKILL)
                _detach(c)
                mark_lost(c, record, f"node {name} was terminated with the pod's processes on it")
            update_phase(record)
        self._virtual.remove(name)

    def virtual_nodes(self) -> list[VirtualNodeSpec]:
        return self._virtual.specs()

    def wake(self) -> None:
        # Once per poll: the manager's cache calls this for every object a pass writes, and
        # each write to the pipe is a system call on the control plane's thread.
        if self._woken:
            return
        self._woken = True
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"w")

    def readopt(self) -> list[PodRef]:
        self._check_open()
        self._remover.settle()  # a released pod's files still being removed are not to adopt
        adopted = adopt_pods(self.dir / "pods", known=set(self._pods))
        for record in adopted:
            self._pods[record.ref.uid] = record
            for c in record.containers:
                if never_spawned(c):
                    # Launched, but the runtime died before its shim started: start it now.
                    c.spawning = True
                    self._starter.spawn(record.ref.uid, c.files)
                    continue
                if c.orphan:
                    self._watch_pid(c, c.pid)
                    if record.stop is not None:  # a stop its dead shim can no longer finish
                        _stop_orphan(c, _grace_left(record.stop))
                elif not c.watch_fired:  # adoption verified the shim alive
                    self._watch_pid(c, c.shim_pid)
        return [r.ref for r in adopted]

    def logs(
        self,
        pod: PodRef,
        container: str | None = None,
        *,
        follow: bool = False,
        previous: bool = False,
        cancel: threading.Event | None = None,
    ) -> Iterator[str]:
        return self._log_files.logs(pod, container, follow=follow, previous=previous, cancel=cancel)

    def log_owner(
        self, pod: PodRef, container: str | None = None, *, previous: bool = False
    ) -> dict[str, str] | None:
        return self._log_files.log_owner(pod, container, previous=previous)

    # -- internals -----------------------------------------------------------------------------

    def _current_devices(self) -> list[GpuDevice]:
        # Fake GPUs change health at run time; real ones are read once (health from overrides).
        devices = self.gpus.devices() if isinstance(self.gpus, FakeGpus) else list(self._devices.values())
        return apply_health(sorted(devices, key=lambda d: d.index), self._health)

    def _take_spawned(self, spawned: list[Spawned]) -> None:
        """Adopt the shims the spawner started: watch their notify pipes."""
        for result in spawned:
            record = self._pods.get(result.uid)
            c = next((c for c in record.containers if c.name == result.container), None) if record else None
            if c is None or record is None:  # cannot happen: a pod is released only once final
                if result.notify_fd is not None:
                    os.close(result.notify_fd)
                if result.popen is not None:
                    _DETACHED.append(result.popen)
                continue
            c.spawning = False
            if result.popen is None or result.notify_fd is None:
                mark_lost(c, record, result.error)
                continue
            c.popen, c.shim_pid, c.shim_ctime = result.popen, result.popen.pid, result.shim_ctime
            if self._closed:
                _detach(c)
                os.close(result.notify_fd)
                continue
            c.watch_fd, c.watch_pipe = result.notify_fd, True
            self._selector.register(result.notify_fd, selectors.EVENT_READ, c)
            if record.stop is not None and c.state is not CState.TERMINATED:
                # A stop that came while the shim was being started: it may have started the
                # process before stop.json existed, so it must hear the signal too.
                c.popen.send_signal(signal.SIGTERM)

    def _watch_pid(self, c: ContainerRecord, pid: int | None) -> None:
        if pid is None or c.state is CState.TERMINATED:
            return
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            c.watch_fired = True  # no pidfd: liveness is checked on every poll
            return
        c.watch_fd, c.watch_pipe, c.watch_fired = fd, False, False
        self._selector.register(fd, selectors.EVENT_READ, c)

    def _unwatch(self, c: ContainerRecord) -> None:
        if c.watch_fd is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(c.watch_fd)
            os.close(c.watch_fd)
            c.watch_fd = None

    def _drain(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` for a watched descriptor, then note every one that fired;
        whether :meth:`wake` was called."""
        self._watch_answers()
        woken = False
        for key, _ in self._selector.select(timeout):
            if key.data is _SPAWNED:  # the spawner finished starting shims
                self._take_spawned(self._starter.collect())
                continue
            if key.data is _WOKEN:
                with contextlib.suppress(BlockingIOError):
                    while os.read(self._wake_r, 4096):
                        pass
                # Cleared after the read: a wake() in between wrote no byte, and this poll
                # returns for it anyway.
                self._woken, woken = False, True
                continue
            c: ContainerRecord = key.data
            c.watch_fired = True
            if c.watch_pipe:
                try:
                    data = os.read(key.fd, 64)
                except BlockingIOError:
                    continue
                if data:
                    continue  # "started": the pipe stays open until the shim exits
            self._unwatch(c)  # the shim (or orphaned process) is gone: nothing more will come
        return woken

    def _watch_answers(self) -> None:
        """Keep the zygote's socket in the selector (a zygote that died is replaced by another,
        on another socket)."""
        now = self._starter.answer_socket
        if now == self._answer_socket:
            return
        if self._answer_socket is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(self._answer_socket[1])
        if now is not None:
            self._selector.register(now[1], selectors.EVENT_READ, _SPAWNED)
        self._answer_socket = now

    def _wait_time(self, timeout: float) -> float:
        wait = timeout
        now = time.monotonic()
        for record in self._pods.values():
            for c in record.containers:
                if c.orphan_kill_at is not None:
                    wait = min(wait, max(0.0, c.orphan_kill_at - now))
                elif (c.state is CState.WAITING and c.popen is None) or (
                    c.state is CState.RUNNING and c.watch_fd is None
                ):
                    # Nothing will wake us when this one changes: look again soon.
                    wait = min(wait, _UNWATCHED_POLL)
        return wait

    def _sweep(self) -> list[PodStatusChange]:
        changes = []
        for record in self._pods.values():
            self._refresh(record)
            change = take_change(record)
            if change is not None:
                changes.append(change)
        return changes

    def _refresh(self, record: PodRecord) -> None:
        """Learn what happened to the pod's containers and move its phase accordingly."""
        for c in record.containers:
            if c.orphan_kill_at is not None and time.monotonic() >= c.orphan_kill_at:
                c.orphan_kill_at = None
                _killpg(c.pid, signal.SIGKILL)
            was_orphan = c.orphan
            observe(c, record)
            if c.orphan and not was_orphan:
                # The shim died under a live process: watch the process itself from now on,
                # and carry out a stop the shim can no longer finish.
                self._unwatch(c)
                self._watch_pid(c, c.pid)
                if record.stop is not None:
                    _stop_orphan(c, _grace_left(record.stop))
            if c.state is CState.TERMINATED:
                self._unwatch(c)
        update_phase(record)

    def _memory_spec(self, limit: int | None) -> dict[str, object] | None:
        if limit is None:
            return None
        if self._cgroup is not None:
            mode = f"cgroup{self._cgroup.version}"
            return {
                "limit": limit,
                "mode": mode,
                "cgroup": str(self._cgroup.base),
                "interval": self._rss_interval,
            }
        return {"limit": limit, "mode": "rss", "interval": self._rss_interval}

    def _record(self, pod: PodRef) -> PodRecord:
        record = self._pods.get(pod.uid)
        if record is None:
            raise PodNotFound(f"pod {pod} (uid {pod.uid}) is not known to this runtime")
        return record

    def _check_open(self) -> None:
        if self._closed:
            raise PodRuntimeError("this LocalRuntime is closed")


def _final(record: PodRecord) -> bool:
    return record.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)


def _detach(c: ContainerRecord) -> None:
    if c.popen is not None and c.popen.poll() is None:
        _DETACHED.append(c.popen)
    c.popen = None


def _stop_orphan(c: ContainerRecord, grace: float) -> None:
    """SIGTERM an orphan's group now; the SIGKILL follows from poll() once the grace is over."""
    _killpg(c.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    c.orphan_kill_at = min(c.orphan_kill_at or deadline, deadline)


def _grace_left(stop: dict[str, float]) -> float:
    """What remains of a recorded stop's grace period (wall clock: it may span a restart)."""
    return max(0.0, float(stop["requested_at"]) + float(stop["grace_seconds"]) - time.time())


def _killpg(pgid: int | None, sig: int) -> None:
    if pgid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _lock(path: Path, claim: bool = True) -> int:
    """The locked file's descriptor; ``claim`` writes this process's id into it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise HomeInUse(
            f"{path.parent.parent.parent} is in use by another Muster runtime (pid {holder}); "
            "stop that server or use another MUSTER_HOME"
        ) from None
    if claim:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd
