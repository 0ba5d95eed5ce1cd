"""``muster doctor``: what looks wrong in the cluster, most severe first, with evidence and a fix.

The server computes the findings (``GET /api/v1/doctor``): only it holds the GPU readings
the idle check needs. The checks are :mod:`muster.controllers.insight.checks`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.text import Text

from muster.cli.app import app, console
from muster.cli.common import ServerOpt, TokenOpt, connect, handle_errors

__all__ = ["doctor", "markdown"]

_STYLES = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


class DoctorOutput(StrEnum):
    table = "table"
    json = "json"
    markdown = "markdown"


@app.command()
def doctor(
    output: Annotated[
        DoctorOutput, typer.Option("--output", "-o", help="table (text), json or markdown.")
    ] = DoctorOutput.table,
    idle_threshold: Annotated[
        float | None,
        typer.Option(
            "--idle-threshold", min=0, max=100, help="Percent utilisation under which a GPU is idle [5]."
        ),
    ] = None,
    idle_minutes: Annotated[
        float | None,
        typer.Option("--idle-minutes", min=0.01, help="Minutes an allocated GPU must stay idle [10]."),
    ] = None,
    pending_minutes: Annotated[
        float | None,
        typer.Option("--pending-minutes", min=0, help="Minutes a job may wait before it is reported [30]."),
    ] = None,
    restarts: Annotated[
        int | None, typer.Option("--restarts", min=1, help="Gang restarts that make a restart loop [3].")
    ] = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Scan the cluster: broken nodes and GPUs, failed and stuck jobs, idle GPUs, OOM and restart loops."""
    with handle_errors(), connect(server, token) as client:
        answer = client.view(
            "doctor",
            idleThreshold=idle_threshold,
            idleMinutes=idle_minutes,
            pendingMinutes=pending_minutes,
            restarts=restarts,
        )
    if output is DoctorOutput.json:
        console.print(json.dumps(answer, indent=2), markup=False, soft_wrap=True)
    elif output is DoctorOutput.markdown:
        console.print(markdown(answer), markup=False, soft_wrap=True, end="")
    else:
        render(answer)


def render(answer: dict[str, Any]) -> None:
    """The findings as text for people."""
    counts = answer["counts"]
    if not answer["findings"]:
        console.print(Text("No problems found.", style="bold green"))
    else:
        console.print(
            Text(
                f"{counts['critical']} critical, {counts['warning']} warning(s), {counts['info']} note(s)",
                style="bold",
            )
        )
    if not answer["gpuSamples"]:
        console.print("(no GPU readings on this server: idle GPUs were not checked)", markup=False)
    for f in answer["findings"]:
        console.print()
        line = Text(f"{f['severity'].upper():<9}", style=_STYLES.get(f["severity"], ""))
        line.append(f"{f['code']}: {f['title']}", style="bold")
        console.print(line)
        for e in f["evidence"]:
            console.print(f"  - {e}", markup=False, highlight=False)
        if f["fix"]:
            console.print(f"  fix: {f['fix']}", markup=False, highlight=False)


def markdown(answer: Mapping[str, Any]) -> str:
    """A report (as :func:`report` gives it) as Markdown, for a ticket or a chat."""
    counts = answer["counts"]
    lines = [
        "# muster doctor",
        "",
        f"Checked at {answer['checkedAt']}: {counts['critical']} critical, {counts['warning']} "
        f"warning(s), {counts['info']} note(s).",
    ]
    if not answer["gpuSamples"]:
        lines += ["", "_No GPU readings: allocated-but-idle GPUs were not checked._"]
    if not answer["findings"]:
        lines += ["", "Nothing found: the cluster looks healthy."]
    for f in answer["findings"]:
        lines += ["", f"## {f['severity'].upper()} {f['code']}: {f['title']}", ""]
        if f["objects"]:
            lines.append("Objects: " + ", ".join(f"`{o}`" for o in f["objects"]))
            lines.append("")
        lines += [f"- {e}" for e in f["evidence"]]
        if f["fix"]:
            lines += ["", f"**Fix:** {f['fix']}"]
    return "\n".join(lines) + "\n"
