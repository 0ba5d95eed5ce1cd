"""``muster top nodes|gpus|queues``: allocation per node and per GPU, quota usage per queue.

The numbers come from :mod:`muster.controllers.usage` (pure functions over the objects):
a node's allocation is the requests of the pods bound to it that have not ended; a GPU's
holders are the pods bound to it (a share shows its thousandths); a ClusterQueue's usage is
what its admitted Workloads are charged, against nominal quota and borrowing limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import StrEnum
from fractions import Fraction
from typing import Annotated

import typer

from muster.api.common import GPU
from muster.cli.app import app, console
from muster.cli.common import ServerOpt, TokenOpt, connect, handle_errors
from muster.cli.output import print_rows
from muster.controllers.usage import (
    GpuUsage,
    NodeUsage,
    QueueUsage,
    Usage,
    fmt_amount,
    gpu_usage,
    node_usage,
    queue_usage,
)

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
            queues = queue_usage(
                client.list("ClusterQueue")["items"],
                client.list("LocalQueue")["items"],
                client.list("Workload")["items"],
            )
            _emit(output, [q.to_dict() for q in queues], lambda: _queues(queues))
            return
        nodes, pods = client.list("Node")["items"], client.list("Pod")["items"]
        if what == What.nodes:
            usage = node_usage(nodes, pods)
            _emit(output, [n.to_dict() for n in usage], lambda: _nodes(usage))
        else:
            gpus = gpu_usage(nodes, pods)
            _emit(output, [g.to_dict() for g in gpus], lambda: _gpus(gpus))


def _emit(output: TopOutput, rows: list[dict], table: Callable[[], None]) -> None:
    if output == TopOutput.json:
        console.print(json.dumps(rows, indent=2), markup=False, soft_wrap=True)
    elif not rows:
        console.print("No resources found.", markup=False)
    else:
        table()


def _nodes(usage: list[NodeUsage]) -> None:
    print_rows(
        ["NAME", "READY", "PODS", "CPU", "MEMORY", "GPU"],
        [
            [
                n.name + (" (cordoned)" if n.unschedulable else ""),
                n.ready,
                str(n.pods),
                _share("cpu", n.resources.get("cpu")),
                _share("memory", n.resources.get("memory")),
                _share(GPU, n.resources.get(GPU)),
            ]
            for n in usage
        ],
    )


def _gpus(usage: list[GpuUsage]) -> None:
    print_rows(
        ["NODE", "GPU", "MODEL", "MEMORY", "HEALTH", "USED", "PODS"],
        [
            [
                g.node,
                str(g.index),
                g.model,
                g.memory,
                g.health,
                fmt_amount(GPU, Fraction(g.used_milli, 1000)),
                ", ".join(h.pod + ("" if h.milli == 1000 else f" ({h.milli}m)") for h in g.holders) or "-",
            ]
            for g in usage
        ],
    )


def _queues(usage: list[QueueUsage]) -> None:
    rows = []
    for q in usage:
        for r in q.rows or []:
            rows.append(
                [
                    q.name,
                    q.cohort or "-",
                    r.flavor,
                    r.resource,
                    _share(r.resource, Usage(r.used, r.nominal)),
                    fmt_amount(r.resource, r.borrowed),
                    "-" if r.borrowing_limit is None else fmt_amount(r.resource, r.borrowing_limit),
                    str(q.pending),
                    str(q.admitted),
                ]
            )
        if not q.rows:
            rows.append([q.name, q.cohort or "-", "-", "-", "-", "-", "-", str(q.pending), str(q.admitted)])
    print_rows(_QUEUE_HEADERS, rows)


def _share(resource: str, usage: Usage | None) -> str:
    """``2.5/4 (62%)``; ``-`` where the node has none of the resource."""
    if usage is None:
        return "-"
    total = "?" if usage.total is None else fmt_amount(resource, usage.total)
    pct = "" if usage.percent is None else f" ({usage.percent}%)"
    return f"{fmt_amount(resource, usage.used)}/{total}{pct}"
