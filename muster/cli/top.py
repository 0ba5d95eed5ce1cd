"""``muster top nodes|gpus|queues``: allocation per node and per GPU, quota usage per queue.

The server computes the numbers (``GET /api/v1/nodes/usage``, ``gpus/usage``, ``queues/usage``):
a node's allocation is the requests of the pods bound to it that have not ended; a GPU's
holders are the pods bound to it (a share shows its thousandths); a ClusterQueue's usage is
what its admitted Workloads are charged, against nominal quota and borrowing limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import StrEnum
from fractions import Fraction
from typing import Annotated, Any

import typer

from muster.api.labels import GPU
from muster.api.quantity import amount_of, fmt_amount
from muster.cli.app import app, console
from muster.cli.common import ServerOpt, TokenOpt, connect, handle_errors
from muster.cli.output import print_rows

__all__ = ["top"]


_QUEUE_HEADERS = [
    "CLUSTERQUEUE",
    "COHORT",
    "FLAVOR",
    "RESOURCE",
    "USED/NOMINAL",
    "BORROWED",
    "BORROW-LIMIT",
    "PENDING",
    "ADMITTED",
]


class What(StrEnum):
    nodes = "nodes"
    gpus = "gpus"
    queues = "queues"


class TopOutput(StrEnum):
    table = "table"
    json = "json"


@app.command()
def top(
    what: Annotated[What, typer.Argument(help="nodes, gpus or queues.")],
    output: Annotated[TopOutput, typer.Option("--output", "-o", help="table or json.")] = TopOutput.table,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Show what is allocated: per node, per GPU, or per queue against its quota."""
    with handle_errors(), connect(server, token) as client:
        if what == What.queues:
            queues = client.view("queues/usage")["clusterQueues"]
            _emit(output, queues, lambda: _queues(queues))
        elif what == What.nodes:
            nodes = client.view("nodes/usage")["nodes"]
            _emit(output, nodes, lambda: _nodes(nodes))
        else:
            gpus = client.view("gpus/usage")["gpus"]
            _emit(output, gpus, lambda: _gpus(gpus))


def _emit(output: TopOutput, rows: list[dict], table: Callable[[], None]) -> None:
    if output == TopOutput.json:
        console.print(json.dumps(rows, indent=2), markup=False, soft_wrap=True)
    elif not rows:
        console.print("No resources found.", markup=False)
    else:
        table()


def _nodes(usage: list[dict[str, Any]]) -> None:
    print_rows(
        ["NAME", "READY", "PODS", "CPU", "MEMORY", "GPU"],
        [
            [
                n["name"] + (" (cordoned)" if n["unschedulable"] else ""),
                n["ready"],
                str(n["pods"]),
                _share(n["resources"].get("cpu")),
                _share(n["resources"].get("memory")),
                _share(n["resources"].get(GPU)),
            ]
            for n in usage
        ],
    )


def _gpus(usage: list[dict[str, Any]]) -> None:
    print_rows(
        ["NODE", "GPU", "MODEL", "MEMORY", "HEALTH", "USED", "PODS"],
        [
            [
                g["node"],
                str(g["index"]),
                g["model"],
                g["memory"],
                g["health"],
                fmt_amount(GPU, Fraction(g["usedMilli"], 1000)),
                ", ".join(
                    h["pod"] + ("" if h["milli"] == 1000 else f" ({h['milli']}m)") for h in g["holders"]
                )
                or "-",
            ]
            for g in usage
        ],
    )


def _queues(usage: list[dict[str, Any]]) -> None:
    rows = []
    for q in usage:
        for r in q["quota"]:
            rows.append(
                [
                    q["name"],
                    q["cohort"] or "-",
                    r["flavor"],
                    r["resource"],
                    _share(
                        {
                            "used": r["used"],
                            "total": r["nominal"],
                            "percent": _percent(r["used"], r["nominal"]),
                        }
                    ),
                    r["borrowed"],
                    "-" if r["borrowingLimit"] is None else r["borrowingLimit"],
                    str(q["pending"]),
                    str(q["admitted"]),
                ]
            )
        if not q["quota"]:
            rows.append(
                [
                    q["name"],
                    q["cohort"] or "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    str(q["pending"]),
                    str(q["admitted"]),
                ]
            )
    print_rows(_QUEUE_HEADERS, rows)


def _share(usage: dict[str, Any] | None) -> str:
    """``2.5/4 (62%)``; ``-`` where the node has none of the resource."""
    if usage is None:
        return "-"
    total = "?" if usage["total"] is None else usage["total"]
    pct = "" if usage["percent"] is None else f" ({usage['percent']}%)"
    return f"{usage['used']}/{total}{pct}"


def _percent(used: str, total: str) -> int | None:
    """The share of ``total`` that ``used`` is (amounts as the server formats them)."""
    whole = amount_of(total)
    return round(100 * amount_of(used) / whole) if whole else None
