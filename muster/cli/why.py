"""``muster why KIND/NAME``: why a job (Workload, pod) is where it is, and what would change it.

The command fetches the object and what surrounds it (its job, Workload and pods, the
queues, every Workload, the namespace's events, the failing replica's log tail) and hands
them to :func:`muster.controllers.explain.explain`, which does the thinking; this module
only gathers and renders.
"""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.text import Text

from muster.cli.app import app, console
from muster.cli.columns import age
from muster.cli.common import NamespaceOpt, ServerOpt, TokenOpt, connect, handle_errors, resolve_target
from muster.cli.output import Output, print_rows, print_value
from muster.controllers.explain import Explanation, WhyContext, explain
from muster.controllers.explain.gather import gather as gather_from
from muster.controllers.usage import fmt_amount
from muster.sdk.client import Client
from muster.sdk.errors import ApiError, ApiNotFound

__all__ = ["ClientSource", "gather", "render", "why"]

_NODES_SHOWN = 12
_STYLES = {
    "Running": "green",
    "Admitted": "green",
    "Succeeded": "green",
    "Finished": "green",
    "Failed": "red",
    "Restarting": "red",
    "Evicting": "magenta",
    "Preempted": "magenta",
    "Suspended": "magenta",
}


@app.command()
def why(
    target: Annotated[str, typer.Argument(help="job/NAME, trainingjob/NAME, workload/NAME or pod/NAME.")],
    namespace: NamespaceOpt = "default",
    output: Annotated[
        Output, typer.Option("--output", "-o", help="table (text), json or yaml.")
    ] = Output.table,
    tail: Annotated[int, typer.Option("--tail", min=0, help="Log lines of a failed replica to show.")] = 20,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Explain why a job waits, failed, was preempted, or where it runs."""
    with handle_errors():
        kind, name = resolve_target(target, ("TrainingJob", "Workload", "Pod"))
        with connect(server, token) as client:
            obj = client.get(kind, name, namespace)
            explanation = explain(obj, gather(client, obj, tail))
        if output in (Output.json, Output.yaml):
            print_value(explanation.to_dict(), output)
        else:
            render(explanation)


class ClientSource:
    """:class:`muster.controllers.explain.gather.Source` over the REST client."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def get(self, kind: str, name: str, namespace: str | None) -> dict[str, Any] | None:
        try:
            return self.client.get(kind, name, namespace)
        except ApiNotFound:
            return None

    def list(
        self, kind: str, namespace: str | None = None, selector: str | None = None
    ) -> list[dict[str, Any]]:
        return self.client.list(kind, namespace, selector)["items"]

    def log_tail(self, pod: str, namespace: str, lines: int) -> list[str]:
        with contextlib.suppress(ApiError):  # no log (never started, several containers): no tail
            return list(self.client.logs(pod, namespace, tail_lines=lines))
        return []


def gather(client: Client, obj: dict[str, Any], tail: int = 20) -> WhyContext:
    """Everything :func:`explain` looks at, around ``obj``, fetched from the server."""
    return gather_from(ClientSource(client), obj, tail, now=time.time())


def render(ex: Explanation, now: datetime | None = None) -> None:
    """The explanation as text for people."""
    now = now or datetime.now(UTC)
    console.print(Text(ex.summary, style=f"bold {_STYLES.get(ex.state, 'yellow')}"))
    console.print()
    _field("State", ex.state)
    if ex.reason:
        _field("Reason", ex.reason)
    if ex.message:
        _field("Message", ex.message)
    if ex.queue is not None and ex.queue.cluster_queue:
        q = ex.queue
        text = f"LocalQueue {q.local_queue} -> ClusterQueue {q.cluster_queue}"
        if q.strategy:
            text += f" ({q.strategy})"
        if q.position is not None:
            text += f", position {q.position} of {q.pending} pending"
            if q.ahead:
                more = q.position - 1 - len(q.ahead)
                text += "; ahead: " + ", ".join(q.ahead) + (f" and {more} more" if more > 0 else "")
        else:
            text += f", {q.pending} pending"
        _field("Queue", text)
    if ex.requests:
        _field("Requests", ", ".join(f"{r} {v}" for r, v in ex.requests.items()))
    if ex.quota:
        _heading(f"Quota of ClusterQueue {ex.queue.cluster_queue if ex.queue else ''}")
        print_rows(
            ["FLAVOR", "RESOURCE", "USED", "NOMINAL", "BORROWED", "BORROWING-LIMIT"],
            [
                [
                    r.flavor,
                    r.resource,
                    fmt_amount(r.resource, r.used),
                    fmt_amount(r.resource, r.nominal),
                    fmt_amount(r.resource, r.borrowed),
                    "-" if r.borrowing_limit is None else fmt_amount(r.resource, r.borrowing_limit),
                ]
                for r in ex.quota
            ],
            indent="  ",
        )
    if ex.nodes:
        shown = ex.nodes[:_NODES_SHOWN]
        fitting = sum(1 for v in ex.nodes if v.fits)
        _heading(f"Nodes ({fitting} of {len(ex.nodes)} can host a pod now)")
        print_rows(
            ["NODE", "VERDICT", "WHY"],
            [[v.node, "fits" if v.fits else v.reason, v.message] for v in shown],
            indent="  ",
        )
        if len(ex.nodes) > len(shown):
            _item(f"and {len(ex.nodes) - len(shown)} more nodes (-o json lists them all)")
    if ex.fragmentation is not None:
        _heading("Free GPUs")
        _item(ex.fragmentation.message)
    if ex.pods:
        _heading("Pods")
        print_rows(
            ["REPLICA", "POD", "PHASE", "REASON", "NODE", "GPUS", "EXIT"],
            [
                [
                    p.replica,
                    p.name,
                    p.phase,
                    p.reason or "",
                    p.node or "",
                    ",".join(str(g) for g in p.gpus) + (f" ({p.gpu_milli}m)" if p.gpu_milli else ""),
                    "" if p.exit_code is None else str(p.exit_code),
                ]
                for p in ex.pods
            ],
            indent="  ",
        )
    if ex.failure is not None:
        _failure(ex)
    if ex.preemptions:
        _heading("Preemptions")
        for pre in ex.preemptions:
            when = f"{age(pre.time, now)} ago" if pre.time else "at an unknown time"
            by = f" by {pre.preemptor}" if pre.preemptor else ""
            detail = f" ({pre.reason})" if pre.reason else ""
            _item(f"{when}{by}{detail}" + (f": {pre.message}" if pre.message else ""))
            if pre.resumed_at is None:
                console.print("      not resumed yet", markup=False)
            elif pre.checkpoint_found:
                resumed = f"{age(pre.resumed_at, now)} ago"
                console.print(f"      resumed {resumed}: checkpoint {pre.checkpoint} found", markup=False)
            else:
                resumed = f"{age(pre.resumed_at, now)} ago"
                console.print(f"      resumed {resumed} with no checkpoint: it started over", markup=False)
    if ex.unblock:
        _heading("What would unblock it" if ex.state not in ("Failed", "Restarting") else "What to do")
        for hint in ex.unblock:
            _item(hint)
    if ex.events:
        _heading("Recent events")
        print_rows(
            ["LAST-SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
            [
                [
                    age(e.get("lastTimestamp"), now),
                    e["type"] or "",
                    e["reason"] or "",
                    e["object"],
                    e["message"],
                ]
                for e in ex.events
            ],
            indent="  ",
        )


def _failure(ex: Explanation) -> None:
    failure = ex.failure
    assert failure is not None
    _heading("Failure")
    _item(f"{failure.reason}" + (f": {failure.message}" if failure.message else ""))
    pod = failure.pod
    if pod is not None:
        code = f", exit code {pod.exit_code}" if pod.exit_code is not None else ""
        _item(
            f"{pod.replica} ({pod.name}): {pod.reason or pod.phase}{code}"
            + (f": {pod.message}" if pod.message else "")
        )
        if failure.log_tail:
            _heading(f"Log tail of {pod.replica} (muster logs {pod.name})")
            for line in failure.log_tail:
                console.print("  | " + line.rstrip("\n"), markup=False, highlight=False)


def _field(label: str, value: str) -> None:
    console.print(f"{label + ':':<10}{value}", markup=False, highlight=False)


def _heading(title: str) -> None:
    console.print()
    console.print(Text(f"{title}:", style="bold"))


def _item(text: str) -> None:
    console.print(f"  - {text}", markup=False, highlight=False)
