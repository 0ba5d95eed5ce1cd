"""A `muster` call loads what its verb needs only (docs/cli.md, "Start-up"): the table of verbs
matches what the modules register, and the light verbs import none of the heavy libraries."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer

import muster
from muster.cli.app import COMMANDS, app, load_all
from muster.testing import free_port
from muster.testing.up import muster_command

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


def _loaded(argv: list[str], env: dict[str, str], heavy: tuple[str, ...] = HEAVY) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv), json.dumps(heavy)],
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
        ["apply", "-f", "-"],  # sends the text: the server parses it
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
    loaded = _loaded(argv, env)
    assert loaded == [], f"`muster {' '.join(argv)}` imported {loaded}"


# What the hottest verbs leave out beyond HEAVY (docs/cli.md, "Start-up"): the Store contract and
# the label selector parser (the client's errors derive from muster.store.errors only; -l loads
# the parser), the quantity arithmetic (fractions, decimal) that only some columns and sort keys
# use, and `get --audit`'s printing.
HOT_SPARED = (
    "muster.store.base",
    "muster.store.selector",
    "muster.api.quantity",
    "fractions",
    "decimal",
    "muster.cli.audit",
)


@pytest.mark.parametrize(
    "argv",
    [["version"], ["get", "trainingjobs"], ["logs", "some-pod"], ["apply", "-f", "-"], ["delete", "tj", "x"]],
)
def test_hot_verbs_import_only_the_client(argv, tmp_path):
    env = {"MUSTER_SERVER": "http://127.0.0.1:9", "MUSTER_TOKEN": "t", "MUSTER_HOME": str(tmp_path)}
    loaded = _loaded(argv, env, HOT_SPARED)
    assert loaded == [], f"`muster {' '.join(argv)}` imported {loaded}"


def test_a_selector_loads_its_parser(tmp_path):
    """The check above can fail: `get -l` parses the selector (before any request)."""
    env = {"MUSTER_SERVER": "http://127.0.0.1:9", "MUSTER_TOKEN": "t", "MUSTER_HOME": str(tmp_path)}
    assert "muster.store.selector" in _loaded(["get", "tj", "-l", "a=b"], env, HOT_SPARED)


def test_the_probe_sees_a_heavy_import(tmp_path):
    """The check above can fail: `sched replay` needs the scheduler, and the probe says so."""
    loaded = _loaded(["sched", "replay", str(tmp_path / "none.yaml")], {"MUSTER_HOME": str(tmp_path)})
    assert "muster.scheduler" in loaded


def test_the_console_script_flushes_and_keeps_exit_statuses(tmp_path):
    """The script ends a finished call without the interpreter's teardown (muster.cli.main):
    what it printed still arrives whole, and each exit status is kept."""
    env = {"MUSTER_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}

    def call(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*muster_command(), *args], env=env, capture_output=True, text=True, timeout=60)

    assert (call("version").returncode, call("version").stdout) == (0, f"muster {muster.__version__}\n")
    bogus = call("bogus")
    assert bogus.returncode == 2 and "No such command" in bogus.stderr
    url = f"http://127.0.0.1:{free_port()}"
    down = call("get", "tj", "--server", url)
    assert down.returncode == 1 and f"no Muster server at {url}" in down.stderr
    env["MUSTER_POD_RECORDS"] = "bogus"  # a bad setting: named, with what it may be, no traceback
    bad = call("up", "--fake-gpus", "1", "--port", str(free_port()))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "muster: MUSTER_POD_RECORDS='bogus': Input should be 'auto', 'memory' or 'disk'" in bad.stderr
    del env["MUSTER_POD_RECORDS"]
    helped = call("get", "--help")  # long output, written by rich: all of it arrives
    assert helped.returncode == 0 and "--sort-by" in helped.stdout and helped.stdout.endswith("\n")
