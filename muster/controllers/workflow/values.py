"""What ``{{...}}`` references resolve to when a task runs (DESIGN §8, Argo's variables).

A :class:`Scope` holds what one task run can see: the workflow (name, namespace, uid,
parameters; ``status`` and ``failures`` for the onExit task), the nodes of the tasks before it
(their recorded outputs), its own resolved input parameters and its fan-out ``item``.

Resolution has two stages, so the cache key does not depend on where a run's files are:
:meth:`Scope.resolve` leaves artifact references (``{{inputs.artifacts.x}}``,
``{{tasks.t.outputs.artifacts.a}}``) in place; the definition it returns is what the cache key
hashes. :meth:`Scope.resolve` with ``paths`` (at launch) then replaces them by the paths the
run sees. Outputs of a Skipped or Omitted task resolve to ``""``, as in Argo.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from muster.api.workflow_refs import REFERENCE
from muster.controllers.workflow.expr import ExpressionError, evaluate, render

__all__ = ["NO_ITEM", "ArtifactPaths", "Scope", "UnresolvedReference"]

Obj = dict[str, Any]
NO_ITEM: Any = object()


class UnresolvedReference(ValueError):
    """A reference with no value (or an expression that fails); the message names it."""


@dataclass
class Scope:
    """The values one task run sees. ``artifact_path`` maps a stored artifact digest to its
    path (used at launch only)."""

    workflow: Obj
    nodes: dict[str, Obj]
    inputs: dict[str, str] = field(default_factory=dict)
    item: Any = NO_ITEM
    status: str | None = None
    failures: str | None = None

    def resolve(self, value: Any, paths: ArtifactPaths | None = None) -> Any:
        """``value`` (a string, or lists and maps of them) with every reference replaced;
        artifact references stay unless ``paths`` is given."""
        if isinstance(value, str):
            return self._substitute(value, paths)
        if isinstance(value, list):
            return [self.resolve(v, paths) for v in value]
        if isinstance(value, dict):
            return {k: self.resolve(v, paths) for k, v in value.items()}
        return value

    def when(self, text: str) -> bool:
        """The value of a ``when`` expression (references substituted first)."""
        resolved = self._substitute(text, None)
        try:
            value = evaluate(resolved)
        except ExpressionError as exc:
            raise UnresolvedReference(f"when {text!r} (as {resolved!r}): {exc}") from None
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise UnresolvedReference(
                f"when {text!r} (as {resolved!r}) is {render(value)!r}, not true or false"
            )
        return value

    def parameter(self, task: str, name: str) -> str:
        """Output parameter ``name`` of ``task``: "" when the task was skipped or omitted."""
        node = self.nodes.get(task) or {}
        params = (node.get("outputs") or {}).get("parameters") or {}
        if name in params:
            return str(params[name])
        if node.get("phase") in ("Succeeded", "Cached"):
            raise UnresolvedReference(f"task {task!r} recorded no output parameter {name!r}")
        return ""

    def artifact(self, task: str, name: str) -> str | None:
        """The digest of output artifact ``name`` of ``task`` (None: skipped, omitted)."""
        node = self.nodes.get(task) or {}
        artifacts = (node.get("outputs") or {}).get("artifacts") or {}
        if name in artifacts:
            return str(artifacts[name])
        if node.get("phase") in ("Succeeded", "Cached"):
            raise UnresolvedReference(f"task {task!r} recorded no output artifact {name!r}")
        return None

    # -- internals ------------------------------------------------------------------------------

    def _substitute(self, text: str, paths: ArtifactPaths | None) -> str:
        def one(match: Any) -> str:
            ref = match.group(1)
            value = self._lookup(ref, paths)
            return match.group(0) if value is None else value

        return REFERENCE.sub(one, text)

    def _lookup(self, ref: str, paths: ArtifactPaths | None) -> str | None:
        if ref.startswith("="):
            try:
                return render(evaluate(ref[1:], self._variables()))
            except ExpressionError as exc:
                raise UnresolvedReference(f"{{{{{ref}}}}}: {exc}") from None
        parts = ref.split(".")
        head = parts[0]
        if head == "item":
            return self._item(ref, parts[1:])
        if head == "inputs" and len(parts) == 3:
            if parts[1] == "parameters":
                if parts[2] not in self.inputs:
                    raise UnresolvedReference(f"{{{{{ref}}}}}: no input parameter {parts[2]!r}")
                return self.inputs[parts[2]]
            if parts[1] == "artifacts":
                return None if paths is None else paths.input(parts[2])
        if head == "tasks" and len(parts) == 5:
            if parts[3] == "parameters":
                return self.parameter(parts[1], parts[4])
            if paths is None:
                return None
            digest = self.artifact(parts[1], parts[4])
            return "" if digest is None else paths.stored(digest)
        if head == "workflow":
            return self._workflow(ref, parts[1:])
        raise UnresolvedReference(f"unknown reference {{{{{ref}}}}}")

    def _item(self, ref: str, path: list[str]) -> str:
        if self.item is NO_ITEM:
            raise UnresolvedReference(f"{{{{{ref}}}}} is only defined in a task with withItems or withParam")
        value = self.item
        for key in path:
            if not isinstance(value, dict) or key not in value:
                raise UnresolvedReference(f"{{{{{ref}}}}}: the item {json.dumps(self.item)} has no {key!r}")
            value = value[key]
        return value if isinstance(value, str) else render(value)

    def _workflow(self, ref: str, path: list[str]) -> str:
        meta = self.workflow["metadata"]
        if path == ["name"]:
            return str(meta["name"])
        if path == ["namespace"]:
            return str(meta.get("namespace") or "default")
        if path == ["uid"]:
            return str(meta.get("uid") or "")
        if path in (["status"], ["failures"]):
            value = self.status if path == ["status"] else self.failures
            if value is None:
                raise UnresolvedReference(f"{{{{{ref}}}}} is only known to the onExit task")
            return value
        if len(path) == 2 and path[0] == "parameters":
            params = self._parameters()
            if path[1] in params:
                return params[path[1]]
        raise UnresolvedReference(f"unknown reference {{{{{ref}}}}}")

    def _parameters(self) -> dict[str, str]:
        args = (self.workflow["spec"].get("arguments") or {}).get("parameters") or []
        return {p["name"]: str(p.get("value") or "") for p in args}

    def _variables(self) -> dict[str, Any]:
        meta = self.workflow["metadata"]
        workflow: Obj = {
            "name": meta["name"],
            "namespace": meta.get("namespace") or "default",
            "uid": meta.get("uid") or "",
            "parameters": self._parameters(),
        }
        if self.status is not None:
            workflow.update(status=self.status, failures=self.failures)
        tasks = {
            name: {"outputs": {"parameters": dict((node.get("outputs") or {}).get("parameters") or {})}}
            for name, node in self.nodes.items()
        }
        out: Obj = {"workflow": workflow, "tasks": tasks, "inputs": {"parameters": dict(self.inputs)}}
        if self.item is not NO_ITEM:
            out["item"] = self.item
        return out


@dataclass(frozen=True)
class ArtifactPaths:
    """Where a run finds artifacts: its inputs directory and the stored artifacts."""

    inputs_dir: str
    stored: Callable[[str], str]

    def input(self, name: str) -> str:
        return f"{self.inputs_dir}/{name}"
