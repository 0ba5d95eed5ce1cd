"""A `muster` call loads what its verb needs only (docs/cli.md, "Start-up"): the table of verbs
matches what the modules register, and the light verbs import none of the heavy libraries."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer

from muster.cli.app import COMMANDS, app, load_all

HEAVY = (
    "pydantic",
    "pydantic_settings",
    "numpy",
    "sqlalchemy",
    "fastapi",
    "httpx",
    "rich",
    "yaml",
    "muster.scheduler",
    "muster.controllers",
    "muster.server",
    "muster.store.sql",
    "muster.api.registry",
)

_PROBE = """
import json, sys
from muster.cli.main import run
argv, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sys.argv = ["muster", *argv]
run()
loaded = sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy))
print("\\nLOADED=" + json.dumps(loaded))
"""


def _loaded(argv: list[str], env: dict[str, str]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv), json.dumps(HEAVY)],
        input="",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert "LOADED=" in out.stdout, out.stderr
    return json.loads(out.stdout.rsplit("LOADED=", 1)[1])


def test_the_table_names_every_verb_the_modules_register():
    load_all()
    registered = set(getattr(typer.main.get_command(app), "commands", {}))
    assert registered == set(COMMANDS)


@pytest.mark.parametrize(
    "argv",
    [
        ["version"],
        ["get", "trainingjobs"],
        ["logs", "some-pod"],
        ["apply", "-f", "-"],  # reads YAML, of course
        ["delete", "tj", "x"],
        ["top", "nodes"],
        ["why", "job/x"],
        ["cost", "--since", "1d"],
        ["whoami"],
        ["auth", "can-i", "delete", "trainingjobs", "-n", "team-a"],
        ["token", "list"],
        ["audit"],
        ["patch", "tj", "x", "-p", "{}"],
        ["config", "get-contexts"],
    ],
)
def test_light_verbs_import_no_heavy_library(argv, tmp_path):
    env = {"MUSTER_SERVER": "http://127.0.0.1:9", "MUSTER_TOKEN": "t", "MUSTER_HOME": str(tmp_path)}
    loaded = [m for m in _loaded(argv, env) if not (argv[0] == "apply" and m.startswith("yaml"))]
    assert loaded == [], f"`muster {' '.join(argv)}` imported {loaded}"


def test_the_probe_sees_a_heavy_import(tmp_path):
    """The check above can fail: `sched replay` needs the scheduler, and the probe says so."""
    loaded = _loaded(["sched", "replay", str(tmp_path / "none.yaml")], {"MUSTER_HOME": str(tmp_path)})
    assert "muster.scheduler" in loaded
