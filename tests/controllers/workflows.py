"""Builders and puppetry for Workflow controller tests: workflows as dicts, and a task's pod
finished with the outputs a real task would write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from muster.api.labels import WORKFLOW_LABEL
from muster.api.labels import WORKFLOW_NODE_ANNOTATION as NODE_ANNOTATION
from tests.controllers.conftest import Harness

Obj = dict[str, Any]


def pod(*command: str, gpus: int = 0) -> Obj:
    container: Obj = {"name": "main", "command": list(command) or ["true"]}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {"spec": {"containers": [container]}}


def task(name: str, *deps: str, **fields: Any) -> Obj:
    fields.setdefault("template", pod("run", name))
    if fields["template"] is None:
        del fields["template"]
    return {"name": name, "dependencies": list(deps), **fields}


def workflow(name: str, *tasks: Obj, **spec: Any) -> Obj:
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "Workflow",
        "metadata": {"name": name},
        "spec": {"tasks": list(tasks), **spec},
    }


def outputs(params: dict[str, str] | None = None, artifacts: dict[str, str] | None = None) -> Obj:
    """Declared outputs: parameters read from ``<name>.txt``, artifacts at ``<name>``."""
    return {
        "parameters": [{"name": p, "valueFrom": {"path": f"{p}.txt"}} for p in params or {}],
        "artifacts": [{"name": a, "path": a} for a in artifacts or {}],
    }


class Flow:
    """A workflow driven through a harness: which task pods started, finishing them."""

    def __init__(self, h: Harness, name: str) -> None:
        self.h = h
        self.name = name
        self._nodes_of_pods: dict[str, str] = {}  # "namespace/pod" -> task node, once seen

    @property
    def status(self) -> Obj:
        wf = self.h.get("Workflow", self.name)
        assert wf is not None
        return wf.get("status") or {}

    def node(self, name: str) -> Obj:
        return self.status.get("nodes", {}).get(name) or {}

    def phase(self, name: str | None = None) -> str:
        return (self.node(name) if name else self.status).get("phase", "Pending")

    def phases(self) -> dict[str, str]:
        return {n: v["phase"] for n, v in sorted(self.status.get("nodes", {}).items())}

    def started(self, node: str) -> list[str]:
        """Pods started for task node ``node`` (every attempt), in start order."""
        return [key for key in self.h.rt.started if self._node_of(key) == node]

    def pod_of(self, node: str) -> str:
        """The newest pod of ``node`` (namespace/name), once it started."""
        self.h.settle(lambda: self.started(node))
        return self.started(node)[-1]

    def finish(
        self,
        node: str,
        code: int = 0,
        params: dict[str, str] | None = None,
        files: dict[str, str] | None = None,
        **exit_kw: Any,
    ) -> None:
        """End ``node``'s pod with ``code`` after writing output parameter files
        (``<name>.txt``) and artifact files (``path -> content``) into its outputs dir."""
        key = self.pod_of(node)
        out = Path(self.h.rt.find(key).env["MUSTER_OUTPUTS_DIR"])
        for name, value in (params or {}).items():
            (out / f"{name}.txt").write_text(value + "\n")
        for rel, content in (files or {}).items():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_text(content)
        self.h.rt.run(key)
        self.h.rt.exit(key, code, **exit_kw)

    def env(self, node: str) -> dict[str, str]:
        return self.h.rt.find(self.pod_of(node)).env

    def command(self, node: str) -> list[str]:
        fake = self.h.rt.find(self.pod_of(node))
        return list(fake.launch.containers[0].command)

    def settle(self, phase: str = "Succeeded") -> None:
        self.h.settle(lambda: self.phase() == phase)

    def _node_of(self, key: str) -> str | None:
        if key not in self._nodes_of_pods:
            for fake in self.h.rt.pods_by_uid.values():
                node = fake.env.get("MUSTER_WORKFLOW_TASK")
                if node and fake.env.get("MUSTER_WORKFLOW_NAME") == self.name:
                    self._nodes_of_pods[str(fake.ref)] = node
            for name, p in self.h.pods().items():
                node = (p["metadata"].get("annotations") or {}).get(NODE_ANNOTATION)
                if node and (p["metadata"].get("labels") or {}).get(WORKFLOW_LABEL) == self.name:
                    self._nodes_of_pods[f"default/{name}"] = node
        return self._nodes_of_pods.get(key)
