"""What the CLI prints for capacity: why's nodes coming up, cost's table and CSV, the help."""

from __future__ import annotations

from typer.testing import CliRunner

from muster.cli.app import app, console
from muster.cli.cost import render, to_csv
from muster.cli.why import render as render_why

ANSWER = {
    "start": "2025-01-01T00:00:00.000000Z",
    "end": "2025-01-08T00:00:00.000000Z",
    "by": "namespace",
    "totalCost": 100.0,
    "allocatedCost": 60.0,
    "idleCost": 40.0,
    "gpuHours": 12.0,
    "rows": [
        {
            "key": "ml",
            "gpuHours": 12.0,
            "cost": 60.0,
            "idleShare": 0.0,
            "lostGpuHours": 0.5,
            "pods": 3,
            "jobs": 2,
        }
    ],
    "pools": [
        {
            "pool": "spot",
            "nodeHours": 10.0,
            "gpuHours": 80.0,
            "cost": 100.0,
            "allocatedCost": 60.0,
            "idleCost": 40.0,
            "idlePct": 40.0,
        }
    ],
    "series": [],
}


def test_cost_table_and_csv():
    with console.capture() as out:
        render(ANSWER)
    text = out.get()
    assert "100.00 for the nodes, 60.00 allocated, 40.00 idle; 12.0 GPU-hours" in text
    assert "ml" in text and "spot" in text and "40" in text
    rows = to_csv(ANSWER).splitlines()
    assert rows[0].startswith("section,key,gpu_hours,cost")
    assert rows[1].startswith("group,ml,12.0,60.0") and rows[-1].startswith("pool-idle,spot,,40.0")


def test_why_shows_the_nodes_coming_up():
    ex = {
        "summary": "trainingjob/train is waiting for node spot-abcde of pool spot (ETA 40s)",
        "state": "Queued",
        "capacity": {
            "nodes": [
                {"claim": "spot-abcde", "pool": "spot", "phase": "Launched", "etaSeconds": 40.0, "error": ""}
            ],
            "message": "waiting for node spot-abcde of pool spot (ETA 40s)",
        },
    }
    with console.capture() as out:
        render_why(ex)
    text = out.get()
    assert "Nodes coming up for it" in text and "spot-abcde" in text and "40s" in text


def test_help_names_the_commands():
    runner = CliRunner()
    assert "idle cost per pool" in runner.invoke(app, ["cost", "--help"]).output
    assert "spot interruption notice" in runner.invoke(app, ["node", "interrupt", "--help"]).output
    assert "--pools" in runner.invoke(app, ["sim", "philly", "--help"]).output
