"""``muster sched replay FILE``: run one scheduling cycle on a scenario file."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path

import typer

from muster.api.errors import InvalidObject
from muster.cli.app import app, console, err_console

__all__ = ["sched_app"]

sched_app = typer.Typer(name="sched", help="Drive the scheduler core directly.", no_args_is_help=True)
app.add_typer(sched_app)


class Output(StrEnum):
    table = "table"
    json = "json"


@sched_app.command()
def replay(
    file: Path = typer.Argument(..., help="Scenario file (YAML, or JSON when it ends in .json)."),
    output: Output = typer.Option(Output.table, "-o", "--output", help="table (default) or json."),
    check_: bool = typer.Option(
        False, "--check", help="Compare with the file's expect block; exit 1 on a mismatch."
    ),
) -> None:
    """Load a scenario, run exactly one scheduling cycle and print the decisions.

    Exit status: 0 done (and, with --check, everything matched), 1 a decision differs from
    expect, 2 the file is missing or invalid (each error names the field path).
    """
    from muster.sim.replay import check, render_json, render_table, run
    from muster.sim.scenario import load_scenario

    try:
        scenario = load_scenario(file)
    except OSError as exc:
        err_console.print(f"{file}: cannot read: {exc.strerror or exc}")
        raise typer.Exit(2) from exc
    except InvalidObject as exc:
        for e in exc.errors:
            err_console.print(f"{file}: {e}")
        raise typer.Exit(2) from exc
    result = run(scenario)
    if output is Output.json:
        console.print_json(json.dumps(render_json(result)))
    else:
        console.print(render_table(result))
    if not check_:
        return
    report = err_console if output is Output.json else console
    if scenario.expect is None:
        report.print(f"{file}: no expect block, nothing to check")
        return
    diffs = check(result)
    if diffs:
        report.print(f"{file}: {len(diffs)} mismatch{'es' if len(diffs) != 1 else ''}:")
        for line in diffs:
            report.print(f"  - {line}")
        raise typer.Exit(1)
    report.print(f"{file}: decisions match expect")
