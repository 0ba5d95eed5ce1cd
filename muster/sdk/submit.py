"""Submitting an SDK workflow and waiting for it: :func:`submit` (``pipeline.run()``).

The workflow goes to the server the CLI would use (``server=``, ``MUSTER_SERVER``, the
``muster up`` of ``$MUSTER_HOME``); when none answers, an embedded control plane is started
for the run (:func:`muster.server.embedded.embedded_control_plane`: the API server, the
controllers, the scheduler and the local runtime, the same code as ``muster up``, on
``$MUSTER_HOME``) and stopped once the workflow has finished. Either way the workflow is
created through the REST API, so a laptop and a cluster run the same code path.

While it waits it shows the tasks (phase, duration, cache hit or miss) as a live table on a
terminal, or a line per change otherwise.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from muster.config import settings
from muster.sdk.client import Client, discover
from muster.sdk.names import RESULT_ANNOTATION, RETURN
from muster.sdk.status import HEADERS, task_rows

if TYPE_CHECKING:
    from muster.sdk.dsl import WorkflowDef

__all__ = ["RunResult", "WorkflowFailed", "submit"]

Obj = dict[str, Any]
_FINISHED = ("Succeeded", "Failed", "Error")


class WorkflowFailed(RuntimeError):
    """The workflow ended Failed or Error; ``result`` holds what it did."""

    def __init__(self, result: RunResult) -> None:
        super().__init__(f"workflow {result.name} {result.phase.lower()}: {result.message}")
        self.result = result


@dataclass
class RunResult:
    """A finished workflow: its phase and each task's recorded outputs."""

    workflow: Obj
    home: Path

    @property
    def name(self) -> str:
        return str(self.workflow["metadata"]["name"])

    @property
    def phase(self) -> str:
        return str((self.workflow.get("status") or {}).get("phase") or "Pending")

    @property
    def message(self) -> str:
        return str((self.workflow.get("status") or {}).get("message") or "")

    @property
    def nodes(self) -> dict[str, Obj]:
        return dict((self.workflow.get("status") or {}).get("nodes") or {})

    def output(self, task: str) -> Any:
        """The return value of ``task``: decoded JSON, or the Path of a returned file or
        directory (in the server's artifact store, on this machine for a local server)."""
        outputs = self.nodes.get(task, {}).get("outputs") or {}
        if RETURN in (outputs.get("parameters") or {}):
            return json.loads(outputs["parameters"][RETURN])
        digest = (outputs.get("artifacts") or {}).get(RETURN)
        if digest:
            return self.home / "artifacts" / "sha256" / digest.removeprefix("sha256:")
        return None

    @property
    def value(self) -> Any:
        """The return value of the task the workflow function returned (None if it returned none)."""
        task = (self.workflow["metadata"].get("annotations") or {}).get(RESULT_ANNOTATION)
        return self.output(task) if task else None


def submit(
    wf: WorkflowDef,
    *,
    name: str | None = None,
    namespace: str = "default",
    server: str | None = None,
    token: str | None = None,
    fake_gpus: str | None = None,
    timeout: float | None = None,
    progress: bool = True,
    check: bool = True,
    **params: Any,
) -> RunResult:
    """Compile ``wf`` with ``params``, create it, wait until it finishes.

    ``name`` defaults to the workflow's name plus a random suffix; ``fake_gpus`` (``"2"``,
    ``"4:A100"``) declares GPUs for an embedded control plane; ``check`` raises
    :class:`WorkflowFailed` when the workflow does not succeed.
    """
    obj = wf.compile(name=name or f"{wf.name}-{secrets.token_hex(3)}", namespace=namespace, **params)
    with _connection(server, token, fake_gpus) as (client, home):
        client.create(obj)
        final = _wait(client, obj["metadata"]["name"], namespace, timeout, progress)
    result = RunResult(final, home)
    if check and result.phase != "Succeeded":
        raise WorkflowFailed(result)
    return result


@contextlib.contextmanager
def _connection(
    server: str | None, token: str | None, fake_gpus: str | None
) -> Iterator[tuple[Client, Path]]:
    url, tok = discover(server, token)
    client = Client(url, tok)
    home = settings().home
    if server or client.health():
        try:
            yield client, home
        finally:
            client.close()
        return
    client.close()
    from muster.server.embedded import embedded_control_plane

    with embedded_control_plane(home, fake_gpus=fake_gpus) as (url, tok), Client(url, tok) as embedded:
        yield embedded, home


def _wait(client: Client, name: str, namespace: str, timeout: float | None, progress: bool) -> Obj:
    deadline = None if timeout is None else time.monotonic() + timeout
    display = _Display(progress)
    try:
        while True:
            wf = client.get("Workflow", name, namespace)
            display.show(wf)
            if (wf.get("status") or {}).get("phase") in _FINISHED:
                return wf
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"workflow {name} did not finish within {timeout}s")
            _next_change(client, name, namespace, wf["metadata"]["resourceVersion"], deadline)
    finally:
        display.close()


def _next_change(client: Client, name: str, namespace: str, version: str, deadline: float | None) -> None:
    """Block until the workflow changes after ``version`` (or a few quiet seconds pass)."""
    quiet = 5.0 if deadline is None else max(0.1, min(5.0, deadline - time.monotonic()))
    with client.watch("Workflow", namespace, resource_version=version, timeout=quiet) as stream:
        for event in stream:
            if event["object"]["metadata"]["name"] == name:
                return


class _Display:
    """A live table of the tasks on a terminal; otherwise a line each time a task changes."""

    def __init__(self, enabled: bool) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False)
        self.enabled = enabled
        self.live: Any = None
        self.seen: dict[str, str] = {}

    def show(self, wf: Obj) -> None:
        if not self.enabled:
            return
        status = wf.get("status") or {}
        if self.console.is_terminal:
            from rich.live import Live

            if self.live is None:
                self.live = Live(console=self.console, refresh_per_second=4)
                self.live.start()
            self.live.update(self._table(wf))
            return
        for row in task_rows(wf):
            line = f"{row.phase} {row.cache}"
            if self.seen.get(row.task) != line and row.phase != "Pending":
                self.seen[row.task] = line
                cache = f" (cache {row.cache})" if row.cache != "-" else ""
                self.console.print(
                    f"{wf['metadata']['name']}: {row.task.strip()} {row.phase}{cache}", markup=False
                )
        phase = status.get("phase")
        if phase in _FINISHED and self.seen.get("") != phase:
            self.seen[""] = phase
            self.console.print(
                f"{wf['metadata']['name']}: {phase} {status.get('progress', '')}", markup=False
            )

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()

    def _table(self, wf: Obj) -> Any:
        from rich.table import Table

        status = wf.get("status") or {}
        phase, done = status.get("phase", "Pending"), status.get("progress", "")
        table = Table(title=f"workflow {wf['metadata']['name']}: {phase} {done}")
        for header in HEADERS:
            table.add_column(header)
        for row in task_rows(wf):
            table.add_row(*row.cells())
        return table
