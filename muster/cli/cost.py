"""``muster cost``: GPU-hours and what they cost per namespace, queue, job, pool or label,
with each pool's idle cost, over a time window (docs/cost.md).

The server computes the report from the cost ledger (``GET /api/v1/cost``); this command
chooses the window and prints it as a table, CSV or JSON.
"""

from __future__ import annotations

import csv
import io
import json
import re
import time
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

import typer

from muster.cli.app import app, console
from muster.cli.common import BadInput, ServerOpt, TokenOpt, connect, handle_errors
from muster.cli.output import print_rows

__all__ = ["cost", "parse_window"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SPAN = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")


class CostOutput(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


@app.command()
def cost(
    by: Annotated[
        str,
        typer.Option(
            "--by", help="namespace, queue, job, pool, capacity-type or label:KEY (e.g. label:team)."
        ),
    ] = "namespace",
    since: Annotated[
        str | None,
        typer.Option("--since", help="The window ends now and starts this long ago: 30m, 24h, 7d [7d]."),
    ] = None,
    start: Annotated[
        str | None, typer.Option("--from", help="Window start: RFC 3339 or YYYY-MM-DD (UTC).")
    ] = None,
    end: Annotated[
        str | None, typer.Option("--to", help="Window end: RFC 3339 or YYYY-MM-DD (UTC) \\[now].")
    ] = None,
    spread_idle: Annotated[
        bool,
        typer.Option(
            "--spread-idle", help="Chargeback: spread the pools' idle cost onto the groups pro rata."
        ),
    ] = False,
    output: Annotated[
        CostOutput, typer.Option("--output", "-o", help="table, csv or json.")
    ] = CostOutput.table,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """What the GPUs cost: GPU-hours and cost per group, idle cost per pool (showback)."""
    with handle_errors():
        t0, t1 = parse_window(since, start, end, time.time())
        with connect(server, token) as client:
            answer = client.view(
                "cost", start=_iso(t0), end=_iso(t1), by=by, spreadIdle="true" if spread_idle else None
            )
    if output is CostOutput.json:
        console.print(json.dumps(answer, indent=2), markup=False, soft_wrap=True)
    elif output is CostOutput.csv:
        console.print(to_csv(answer), markup=False, soft_wrap=True, end="")
    else:
        render(answer)


def parse_window(since: str | None, start: str | None, end: str | None, now: float) -> tuple[float, float]:
    """The window in epoch seconds from ``--since`` or ``--from``/``--to``; BadInput naming the
    option otherwise."""
    if since is not None and start is not None:
        raise BadInput(["error: give --since or --from, not both"])
    t1 = _time(end, "--to") if end else now
    if start is not None:
        t0 = _time(start, "--from")
    else:
        m = _SPAN.match((since or "7d").strip())
        if m is None:
            raise BadInput([f"error: --since {since!r} is not a span; write it like 30m, 24h or 7d"])
        t0 = t1 - float(m.group(1)) * _UNITS[m.group(2)]
    if t1 <= t0:
        raise BadInput(["error: the window must end after it starts (--from before --to)"])
    return t0, t1


def to_csv(answer: dict[str, Any]) -> str:
    """One row per group (and per pool under ``section=pool``), for a spreadsheet."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        [
            "section",
            "key",
            "gpu_hours",
            "cost",
            "idle_share",
            "lost_gpu_hours",
            "jobs",
            "pods",
            "start",
            "end",
        ]
    )
    for r in answer["rows"]:
        w.writerow(
            [
                "group",
                r["key"],
                r["gpuHours"],
                r["cost"],
                r["idleShare"],
                r["lostGpuHours"],
                r["jobs"],
                r["pods"],
                answer["start"],
                answer["end"],
            ]
        )
    for p in answer["pools"]:
        w.writerow(
            ["pool", p["pool"], p["gpuHours"], p["cost"], "", "", "", "", answer["start"], answer["end"]]
        )
        w.writerow(
            ["pool-idle", p["pool"], "", p["idleCost"], "", "", "", "", answer["start"], answer["end"]]
        )
    return buf.getvalue()


def render(answer: dict[str, Any]) -> None:
    from rich.text import Text  # only for a table: csv and json output need no rich

    console.print(
        Text(
            f"Cost from {answer['start'][:19]}Z to {answer['end'][:19]}Z by {answer['by']}: "
            f"{answer['totalCost']:.2f} for the nodes, {answer['allocatedCost']:.2f} allocated, "
            f"{answer['idleCost']:.2f} idle; {answer['gpuHours']:.1f} GPU-hours",
            style="bold",
        )
    )
    if not answer["rows"] and not answer["pools"]:
        console.print("No usage in this window.", markup=False)
        return
    spread = any(r["idleShare"] for r in answer["rows"])
    console.print()
    headers = [
        answer["by"].upper(),
        "GPU-HOURS",
        "COST",
        *(["IDLE-SHARE", "CHARGE"] if spread else []),
        "LOST-GPU-H",
        "JOBS",
        "PODS",
    ]
    rows = [
        [
            r["key"],
            f"{r['gpuHours']:.2f}",
            f"{r['cost']:.2f}",
            *([f"{r['idleShare']:.2f}", f"{r['cost'] + r['idleShare']:.2f}"] if spread else []),
            f"{r['lostGpuHours']:.2f}",
            str(r["jobs"]),
            str(r["pods"]),
        ]
        for r in answer["rows"]
    ]
    print_rows(headers, rows)
    if answer["pools"]:
        console.print()
        print_rows(
            ["POOL", "NODE-HOURS", "COST", "ALLOCATED", "IDLE", "IDLE%"],
            [
                [
                    p["pool"],
                    f"{p['nodeHours']:.2f}",
                    f"{p['cost']:.2f}",
                    f"{p['allocatedCost']:.2f}",
                    f"{p['idleCost']:.2f}",
                    f"{p['idlePct']:.0f}",
                ]
                for p in answer["pools"]
            ],
        )


def _time(text: str, option: str) -> float:
    value = text.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        value += "T00:00:00Z"
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(
            [f"error: {option} {text!r} is not a time; write 2025-01-31 or 2025-01-31T12:00:00Z"]
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
