"""Re-adoption: rebuild the records of pods a previous runtime on the same MUSTER_HOME left.

The previous server may have died at any point (SIGKILL included). Its pods' directories
hold everything needed: ``pod.json`` (written after the containers' specs, before anything
started: without it, nothing of the pod ever ran), each container's ``launch.json`` (the
shim's pid and start time, written by the shim under the container's lock), ``state.json``
(the process's) and, once it ended, ``status.json``. This module only reads them and checks
which processes are still the ones recorded; :func:`muster.runtime.local.tracking.observe`
then does the rest, exactly as for pods this runtime started:

* a status file: the container ended (maybe while no server ran) and its outcome is known;
* a live shim: the container is watched again through a pidfd on the shim;
* a dead shim but a live process: the process is watched directly ("orphan"); its exit
  status cannot be learnt (it is not our child), so its end is reported as NodeLost;
* nothing alive and no status: NodeLost, with what is known (or the caller's stop reason,
  when a stop had been requested);
* a launch whose shim has no record at all (the runtime starts shims on worker threads, and
  it died in between): when no shim holds the container's lock, none ever ran its process,
  and :func:`never_spawned` names the container so the runtime starts its shim now (the
  process runs once); a shim that holds the lock but has not yet recorded its pid is found by
  :func:`~muster.runtime.local.tracking.observe` once it has.
"""

from __future__ import annotations

from pathlib import Path

from muster.runtime.base import PodRef
from muster.runtime.local.files import ContainerFiles, claimed, read_json
from muster.runtime.local.tracking import ContainerRecord, CState, PodRecord, load_state, process_alive

__all__ = ["adopt_pods", "never_spawned"]


def adopt_pods(root: Path, known: set[str]) -> list[PodRecord]:
    """Records for every pod under ``root`` (``<ns>/<name>/<uid>/pod.json``) not in ``known``
    (uids), oldest launch first. Directories without ``pod.json`` (a start that crashed before
    writing it, so nothing of it ever ran) are skipped."""
    docs = []
    for pod_json in root.glob("*/*/*/pod.json"):
        doc = read_json(pod_json)
        if doc is not None and doc["uid"] not in known:
            docs.append((doc, pod_json.parent))
    docs.sort(key=lambda d: d[0]["created_at"])
    return [_adopt(doc, pod_dir) for doc, pod_dir in docs]


def _adopt(doc: dict, pod_dir: Path) -> PodRecord:
    ref = PodRef(doc["namespace"], doc["name"], doc["uid"])
    record = PodRecord(
        ref,
        pod_dir,
        float(doc["grace_seconds"]),
        [],
        reported=None,  # the caller learns every adopted pod's status once
        stop=read_json(pod_dir / "stop.json"),
        labels=dict(doc.get("labels") or {}),
        node=str(doc.get("node") or ""),
    )
    limits = doc.get("memory_limits") or {}
    for name in doc["containers"]:
        c = ContainerRecord(
            name, ContainerFiles(pod_dir, name), float(doc["created_at"]), limit=limits.get(name)
        )
        launch = read_json(c.files.launch)
        if launch is not None:
            c.shim_pid, c.shim_ctime = launch["shim_pid"], launch["shim_create_time"]
        state = read_json(c.files.state)
        if state is not None:
            load_state(c, state)
        if process_alive(c.shim_pid, c.shim_ctime):
            c.watch_fired = False  # the runtime watches the shim; no need to look until it exits
        elif c.state is CState.RUNNING and process_alive(c.pid, c.ctime) and not c.files.status.exists():
            c.orphan = True
        record.containers.append(c)
    return record


def never_spawned(c: ContainerRecord) -> bool:
    """Whether ``c`` (just adopted) was launched but its shim never started: no record of a
    shim, none alive, no process state, no status, and its spec is complete."""
    return (
        c.shim_pid is None
        and c.state is CState.WAITING
        and not c.files.status.exists()
        and not c.files.state.exists()
        and not claimed(c.files)  # a shim that has not recorded itself yet (a moment's window)
        and c.files.spec.exists()
    )
