"""``muster why KIND/NAME``: why a job (Workload, pod) is where it is, and what would change it.

The server does the thinking (``GET /api/v1/why/{kind}/{namespace}/{name}``: the object and
what surrounds it, explained by :mod:`muster.controllers.insight.explain`); this module only
asks and renders.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

import typer

from muster.cli.app import app, console
from muster.cli.columns import age
from muster.cli.common import NamespaceOpt, ServerOpt, TokenOpt, connect, handle_errors, resolve_target
from muster.cli.output import (
    Output,
    print_events,
    print_field,
    print_heading,
    print_rows,
    print_value,
)
from muster.cli.why_experiment import render_experiment

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
    "Ready": "green",
    "ScaledToZero": "green",
    "NotReady": "yellow",
}


class WhyOutput(StrEnum):
    """What ``why`` prints: an explanation has no rows to widen or names to list."""

    table = "table"
    json = "json"
    yaml = "yaml"


@app.command()
def why(
    target: Annotated[
        str,
        typer.Argument(
            help="job/NAME, trainingjob/NAME, workflow/NAME, workload/NAME, pod/NAME, experiment/NAME or "
            "inferenceservice/NAME (isvc/NAME)."
        ),
    ],
    namespace: NamespaceOpt = "default",
    output: Annotated[
        WhyOutput, typer.Option("--output", "-o", help="table (text), json or yaml.")
    ] = WhyOutput.table,
    tail: Annotated[int, typer.Option("--tail", min=0, help="Log lines of a failed replica to show.")] = 20,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Explain why a job (or a workflow) waits, failed, was preempted, or where it runs; for an
    experiment, how many trials run, wait (and why) or were stopped, and the best one; or why a
    served model has the replicas it has."""
    with handle_errors():
        kind, name = resolve_target(
            target, ("TrainingJob", "Workflow", "Workload", "Pod", "Experiment", "InferenceService")
        )
        with connect(server, token) as client:
            explanation = client.view(f"why/{kind}/{namespace}/{name}", tail=tail)
        if output is not WhyOutput.table:
            print_value(explanation, Output(output.value))
        elif explanation.get("kind") == "Experiment":
            render_experiment(explanation)
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
        print_field("Cause", f"{cause['message']} [{cause['object']}]")
        for more in cause.get("also") or []:
            print_field("", f"and {more['message']} [{more['object']}]")
    print_field("State", ex["state"])
    if ex.get("reason"):
        print_field("Reason", ex["reason"])
    if ex.get("message"):
        print_field("Message", ex["message"])
    if ex.get("serving"):
        _serving(ex["serving"])
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
        print_field("Queue", text)
    if ex.get("elastic"):
        _elastic(ex["elastic"], now)
    if ex.get("requests"):
        print_field("Requests", ", ".join(f"{r} {v}" for r, v in ex["requests"].items()))
    if ex.get("quota"):
        print_heading(f"Quota of ClusterQueue {q['clusterQueue'] if q else ''}")
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
        print_heading(f"Nodes ({fitting} of {len(nodes)} can host a pod now)")
        print_rows(
            ["NODE", "VERDICT", "WHY"],
            [[v["node"], "fits" if v["fits"] else v["reason"], v["message"]] for v in shown],
            indent="  ",
        )
        if len(nodes) > len(shown):
            _item(f"and {len(nodes) - len(shown)} more nodes (-o json lists them all)")
    waiting = (ex.get("capacity") or {}).get("nodes") or []
    if waiting:
        print_heading("Nodes coming up for it")
        print_rows(
            ["NODECLAIM", "POOL", "PHASE", "ETA", "PROVIDER ERROR"],
            [
                [
                    w["claim"],
                    w["pool"],
                    w["phase"],
                    "-" if w.get("etaSeconds") is None else f"{w['etaSeconds']:.0f}s",
                    w.get("error") or "",
                ]
                for w in waiting
            ],
            indent="  ",
        )
    if ex.get("fragmentation") is not None:
        print_heading("Free GPUs")
        _item(ex["fragmentation"]["message"])
    if ex.get("tasks"):
        print_heading("Tasks")
        print_rows(
            ["TASK", "PHASE", "REASON", "ATTEMPTS", "DETAIL"],
            [
                [
                    t["name"],
                    t["phase"],
                    t.get("reason") or "",
                    str(t.get("attempts") or "-"),
                    t.get("detail") or "",
                ]
                for t in ex["tasks"]
            ],
            indent="  ",
        )
    if ex.get("pods"):
        print_heading("Pods")
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
        print_heading("Preemptions")
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
        print_heading(
            "What would unblock it" if ex["state"] not in ("Failed", "Restarting") else "What to do"
        )
        for hint in ex["unblock"]:
            _item(hint)
    if ex.get("events"):
        print_heading("Recent events")
        print_events(ex["events"], now)


def _elastic(facts: dict[str, Any], now: datetime) -> None:
    """An elastic job's size, its bounds, why it is not larger, and its last resizes."""
    print_field(
        "Size", f"{facts['workers']} workers (min {facts['minReplicas']}, max {facts['maxReplicas']})"
    )
    if facts.get("heldReason"):
        print_field("Not larger", f"{facts['heldReason']}: {facts['heldMessage']}")
    for r in facts.get("resizes") or []:
        when = f"{age(r['time'], now)} ago" if r.get("time") else ""
        resumed = f"; resumed from {r['checkpoint']}" if r.get("checkpoint") else ""
        print_field("Resized", f"{when}: {r.get('message') or ''}{resumed}")


def _serving(serving: dict[str, Any]) -> None:
    if serving.get("url"):
        print_field("URL", f"{serving['url']}/v1 (models: {', '.join(serving.get('models') or [])})")
    print_heading("Revisions (what the autoscaler saw and decided)")
    print_rows(
        ["REVISION", "TRAFFIC", "DESIRED", "READY", "MODE", "STABLE", "PANIC", "WHY"],
        [
            [
                r["name"],
                f"{r['trafficPercent']}%",
                str(r["desiredReplicas"]),
                str(r["readyReplicas"]),
                ("panic" if r["autoscaler"].get("panicking") else "stable") if r["autoscaler"] else "",
                str(r["autoscaler"].get("stable", "")),
                str(r["autoscaler"].get("panic", "")),
                r["autoscaler"].get("reason", ""),
            ]
            for r in serving.get("revisions") or []
        ],
        indent="  ",
    )
    if serving.get("replicas"):
        print_heading("Replicas")
        print_rows(
            ["REPLICA", "REVISION", "STATE", "NODE", "GPUS", "ADDRESS", "RESTARTS", "MESSAGE"],
            [
                [
                    r["name"],
                    r["revision"],
                    r["state"],
                    r.get("node") or "",
                    ",".join(str(g) for g in r.get("gpus") or []),
                    r.get("address") or "",
                    str(r.get("restarts") or 0),
                    r.get("message") or "",
                ]
                for r in serving["replicas"]
            ],
            indent="  ",
        )


def _failure(failure: dict[str, Any]) -> None:
    print_heading("Failure")
    _item(f"{failure['reason']}" + (f": {failure['message']}" if failure.get("message") else ""))
    pod = failure.get("pod")
    if pod is not None:
        code = f", exit code {pod['exitCode']}" if pod.get("exitCode") is not None else ""
        _item(
            f"{pod['replica']} ({pod['name']}): {pod.get('reason') or pod['phase']}{code}"
            + (f": {pod['message']}" if pod.get("message") else "")
        )
        if failure.get("logTail"):
            print_heading(f"Log tail of {pod['replica']} (muster logs {pod['name']})")
            for line in failure["logTail"]:
                console.print("  | " + line.rstrip("\n"), markup=False, highlight=False)


def _item(text: str) -> None:
    console.print(f"  - {text}", markup=False, highlight=False)
