"""Task outputs and step caching (DESIGN §8).

**Outputs.** After a task's attempt succeeds, each declared output parameter is read from
``MUSTER_OUTPUTS_DIR/<valueFrom.path>`` (surrounding whitespace stripped, as Argo does) and
each declared output artifact is moved into the content-addressed store
(:mod:`muster.controllers.workflow.artifacts`). A declared output that is missing is an error of the
run.

**Cache key**: SHA-256 over the canonical JSON of

* the task definition: per container ``image``, ``command``, ``args``, ``env`` and
  ``workingDir`` (for a TrainingJob task per replica type, with the replica count and
  ``nprocPerNode``), with every parameter reference already substituted; an SDK task carries
  the hash of its function's source in its environment, so it enters here too. Scheduling
  fields (resources, queues, node selectors) do not change what a task computes and are left
  out;
* the declared outputs (names and paths);
* the input parameter values and the content digests of the input artifacts;
* ``cache.version``.

The task's name is not part of the key: two tasks that compute the same thing share results.

**Entries** are ``CacheEntry`` objects named by the key in the workflow's namespace (they
survive restarts with the store; deleting one invalidates it). Only runs that succeeded are
recorded. A lookup is a miss when there is no entry, when it is older than ``cache.maxAge``,
or when one of its artifacts is no longer stored.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from muster.api.base import API_VERSION
from muster.api.conditions import epoch, iso
from muster.controllers.workflow.artifacts import ArtifactStore
from muster.store.base import AlreadyExists, NotFound, Writer

__all__ = [
    "KEY_SCHEMA",
    "MAX_PARAMETER_BYTES",
    "MissingOutput",
    "cache_key",
    "canonical_definition",
    "collect_outputs",
    "lookup",
    "save",
]

Obj = dict[str, Any]
KEY_SCHEMA = "muster.dev/task-cache/v1"  # bump when what the key covers changes
MAX_PARAMETER_BYTES = 256 * 1024
_CONTAINER_FIELDS = ("name", "image", "command", "args", "env", "workingDir")


class MissingOutput(Exception):
    """A declared output the task did not write (or wrote wrong); the message names it."""


def canonical_definition(task: Obj, resolved: Obj) -> Obj:
    """What a task computes, from its resolved ``template`` or ``trainingJob`` spec."""
    if "trainingJob" in resolved:
        spec = resolved["trainingJob"]
        replicas = {
            rtype: {
                "replicas": int(r.get("replicas", 1)),
                "containers": _containers(r.get("template") or {}),
            }
            for rtype, r in sorted((spec.get("replicaSpecs") or {}).items())
        }
        body: Obj = {"trainingJob": {"replicas": replicas, "nprocPerNode": spec.get("nprocPerNode")}}
    else:
        body = {"template": {"containers": _containers(resolved.get("template") or {})}}
    outputs = task.get("outputs") or {}
    body["outputs"] = {
        "parameters": sorted((p["name"], p["valueFrom"]["path"]) for p in outputs.get("parameters") or []),
        "artifacts": sorted((a["name"], a["path"]) for a in outputs.get("artifacts") or []),
    }
    return body


def cache_key(definition: Obj, inputs: dict[str, str], artifacts: dict[str, str], version: str) -> str:
    """The hex SHA-256 cache key (module docstring)."""
    payload = {
        "schema": KEY_SCHEMA,
        "definition": definition,
        "inputs": inputs,
        "artifacts": artifacts,
        "version": version,
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def lookup(
    store: Writer, namespace: str, key: str, max_age: float | None, now: float, artifacts: ArtifactStore
) -> tuple[Obj | None, str]:
    """``(outputs, "")`` on a hit, ``(None, why)`` on a miss."""
    try:
        entry = store.get("CacheEntry", key, namespace)
    except NotFound:
        return None, "no earlier run with this key"
    spec = entry.get("spec") or {}
    saved = epoch(spec.get("savedAt"))
    if max_age is not None and (saved is None or now - saved > max_age):
        return None, f"the recorded run ({spec.get('savedAt')}) is older than cache.maxAge"
    outputs = spec.get("outputs") or {}
    for name, digest in sorted((outputs.get("artifacts") or {}).items()):
        if not artifacts.exists(digest):
            return None, f"artifact {name} of the recorded run is no longer stored"
    return {
        "parameters": dict(outputs.get("parameters") or {}),
        "artifacts": dict(outputs.get("artifacts") or {}),
    }, ""


def save(store: Writer, namespace: str, key: str, task: str, version: str, outputs: Obj, now: float) -> Obj:
    """Record ``outputs`` under ``key`` (a newer run of the same key replaces the entry)."""
    entry: Obj = {
        "apiVersion": API_VERSION,
        "kind": "CacheEntry",
        "metadata": {"name": key, "namespace": namespace},
        "spec": {"task": task, "version": version, "savedAt": iso(now), "outputs": outputs},
    }
    try:
        return store.create(entry)
    except AlreadyExists:
        return store.update(entry)  # no resourceVersion: the newest recording wins


def collect_outputs(task: Obj, outputs_dir: Path, artifacts: ArtifactStore) -> Obj:
    """The declared outputs of a run that succeeded (artifacts moved into the store)."""
    declared = task.get("outputs") or {}
    params: dict[str, str] = {}
    for p in declared.get("parameters") or []:
        path = _inside(outputs_dir, p["valueFrom"]["path"], f"output parameter {p['name']}")
        if not path.is_file():
            raise MissingOutput(
                f"output parameter {p['name']}: the task wrote no file {p['valueFrom']['path']}"
            )
        data = path.read_bytes()
        if len(data) > MAX_PARAMETER_BYTES:
            raise MissingOutput(
                f"output parameter {p['name']} is {len(data)} bytes, over {MAX_PARAMETER_BYTES}: "
                "pass it as an artifact instead"
            )
        params[p["name"]] = data.decode("utf-8", errors="replace").strip()
    stored: dict[str, str] = {}
    for a in declared.get("artifacts") or []:
        path = _inside(outputs_dir, a["path"], f"output artifact {a['name']}")
        if not (path.exists() or path.is_symlink()):
            raise MissingOutput(f"output artifact {a['name']}: the task wrote nothing at {a['path']}")
        try:
            stored[a["name"]] = artifacts.ingest(path)
        except FileNotFoundError as exc:
            raise MissingOutput(f"output artifact {a['name']}: {exc}") from None
    return {"parameters": params, "artifacts": stored}


def _inside(root: Path, relative: str, what: str) -> Path:
    path = root / relative.strip("/")
    if ".." in Path(relative).parts:
        raise MissingOutput(f"{what}: {relative!r} leaves MUSTER_OUTPUTS_DIR")
    return path


def _containers(template: Obj) -> list[Obj]:
    spec = template.get("spec") or {}
    return [{k: c[k] for k in _CONTAINER_FIELDS if k in c} for c in spec.get("containers") or []]
