"""``muster why KIND/NAME``: why a job (Workload, pod) is where it is, and what would change it.

The server does the thinking (``GET /api/v1/why/{kind}/{namespace}/{name}``: the object and
what surrounds it, explained by :mod:`muster.controllers.insight.explain`); this module only
asks and renders.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from muster.cli.app import app, console
from muster.cli.columns import age
from muster.cli.common import NamespaceOpt, ServerOpt, TokenOpt, connect, handle_errors, resolve_target
from muster.cli.output import Output, print_rows, print_value

__all__ = ["render", "why"]

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
            explanation = client.view(f"why/{kind}/{namespace}/{name}", tail=tail)
        if output in (Output.json, Output.yaml):
            print_value(explanation, output)
        else:
            render(explanation)


def render(ex: dict[str, Any], now: datetime | None = None) -> None:
    """The explanation (the JSON of ``GET /api/v1/why/...``) as text for people."""
    now = now or datetime.now(UTC)
    console.print(ex["summary"], style=f"bold {_STYLES.get(ex['state'], 'yellow')}", markup=False)
    console.print()
    cause = ex.get("rootCause")
    if cause:
        # The fact behind the scheduler's reason comes first: it is what to act on.
        _field("Cause", f"{cause['message']} [{cause['object']}]")
        for more in cause.get("also") or []:
            _field("", f"and {more['message']} [{more['object']}]")
    _field("State", ex["state"])
    if ex.get("reason"):
        _field("Reason", ex["reason"])
    if ex.get("message"):
        _field("Message", ex["message"])
    q = ex.get("queue")
    if q and q.get("clusterQueue"):
        text = f"LocalQueue {q['localQueue']} -> ClusterQueue {q['clusterQueue']}"
        if q.get("strategy"):
            text += f" ({q['strategy']})"
        if q.get("position") is not None:
            text += f", position {q['position']} of {q['pending']} pending"
            if q.get("ahead"):
                more = q["position"] - 1 - len(q["ahead"])
                text += "; ahead: " + ", ".join(q["ahead"]) + (f" and {more} more" if more > 0 else "")
        else:
            text += f", {q['pending']} pending"
        _field("Queue", text)
    if ex.get("requests"):
        _field("Requests", ", ".join(f"{r} {v}" for r, v in ex["requests"].items()))
    if ex.get("quota"):
        _heading(f"Quota of ClusterQueue {q['clusterQueue'] if q else ''}")
        print_rows(
            ["FLAVOR", "RESOURCE", "USED", "NOMINAL", "BORROWED", "BORROWING-LIMIT"],
            [
                [
                    r["flavor"],
                    r["resource"],
                    r["used"],
                    r["nominal"],
                    r["borrowed"],
                    "-" if r["borrowingLimit"] is None else r["borrowingLimit"],
                ]
                for r in ex["quota"]
            ],
            indent="  ",
        )
    nodes = ex.get("nodes") or []
    if nodes:
        shown = nodes[:_NODES_SHOWN]
        fitting = sum(1 for v in nodes if v["fits"])
        _heading(f"Nodes ({fitting} of {len(nodes)} can host a pod now)")
        print_rows(
            ["NODE", "VERDICT", "WHY"],
            [[v["node"], "fits" if v["fits"] else v["reason"], v["message"]] for v in shown],
            indent="  ",
        )
        if len(nodes) > len(shown):
            _item(f"and {len(nodes) - len(shown)} more nodes (-o json lists them all)")
    if ex.get("fragmentation") is not None:
        _heading("Free GPUs")
        _item(ex["fragmentation"]["message"])
    if ex.get("pods"):
        _heading("Pods")
        print_rows(
            ["REPLICA", "POD", "PHASE", "REASON", "NODE", "GPUS", "EXIT"],
            [
                [
                    p["replica"],
                    p["name"],
                    p["phase"],
                    p.get("reason") or "",
                    p.get("node") or "",
                    ",".join(str(g) for g in p["gpus"])
                    + (f" ({p['gpuMilli']}m)" if p.get("gpuMilli") else ""),
                    "" if p.get("exitCode") is None else str(p["exitCode"]),
                ]
                for p in ex["pods"]
            ],
            indent="  ",
        )
    if ex.get("failure") is not None:
        _failure(ex["failure"])
    if ex.get("preemptions"):
        _heading("Preemptions")
        for pre in ex["preemptions"]:
            when = f"{age(pre['time'], now)} ago" if pre.get("time") else "at an unknown time"
            by = f" by {pre['preemptor']}" if pre.get("preemptor") else ""
            detail = f" ({pre['reason']})" if pre.get("reason") else ""
            _item(f"{when}{by}{detail}" + (f": {pre['message']}" if pre.get("message") else ""))
            if pre.get("resumedAt") is None:
                console.print("      not resumed yet", markup=False)
            elif pre.get("checkpointFound"):
                resumed = f"{age(pre['resumedAt'], now)} ago"
                console.print(f"      resumed {resumed}: checkpoint {pre['checkpoint']} found", markup=False)
            else:
                resumed = f"{age(pre['resumedAt'], now)} ago"
                console.print(f"      resumed {resumed} with no checkpoint: it started over", markup=False)
    if ex.get("unblock"):
        _heading("What would unblock it" if ex["state"] not in ("Failed", "Restarting") else "What to do")
        for hint in ex["unblock"]:
            _item(hint)
    if ex.get("events"):
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
                for e in ex["events"]
            ],
            indent="  ",
        )


def _failure(failure: dict[str, Any]) -> None:
    _heading("Failure")
    _item(f"{failure['reason']}" + (f": {failure['message']}" if failure.get("message") else ""))
    pod = failure.get("pod")
    if pod is not None:
        code = f", exit code {pod['exitCode']}" if pod.get("exitCode") is not None else ""
        _item(
            f"{pod['replica']} ({pod['name']}): {pod.get('reason') or pod['phase']}{code}"
            + (f": {pod['message']}" if pod.get("message") else "")
        )
        if failure.get("logTail"):
            _heading(f"Log tail of {pod['replica']} (muster logs {pod['name']})")
            for line in failure["logTail"]:
                console.print("  | " + line.rstrip("\n"), markup=False, highlight=False)


def _field(label: str, value: str) -> None:
    console.print(f"{label + ':' if label else '':<10}{value}", markup=False, highlight=False)


def _heading(title: str) -> None:
    console.print()
    console.print(f"{title}:", style="bold", markup=False)


def _item(text: str) -> None:
    console.print(f"  - {text}", markup=False, highlight=False)
