"""The habits kubectl users bring: completion, -o jsonpath, --sort-by, get all, api-resources,
aliases of converted kinds, errors on stderr, MUSTER_SERVER without a scheme, human units,
counts as numbers, aligned watch rows, and help text printed as written."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from muster.api import registry
from muster.cli.app import app, load_all
from muster.cli.output import Table
from muster.sdk.client import discover
from muster.store import Store
from muster.testing import cluster as c
from muster.testing.factories import training_job

runner = CliRunner()


def muster(*args: str):
    return runner.invoke(app, list(args))


def job(name: str, workers: int = 1, created: str | None = None) -> dict[str, Any]:
    obj = training_job(name, workers=workers)
    if created:
        obj["metadata"]["creationTimestamp"] = created
    return obj


class TestCompletion:
    def test_the_shell_completion_options_are_offered(self, monkeypatch: pytest.MonkeyPatch):
        # Typer finds the user's shell among the process's ancestors; a test run detached from
        # any shell has none, so name it as a user without shell detection would.
        monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
        help_text = muster("--help").stdout
        assert "--install-completion" in help_text and "--show-completion" in help_text
        script = muster("--show-completion", "bash")
        assert script.exit_code == 0 and "_MUSTER_COMPLETE" in script.stdout, (
            script.output,
            script.exception,
        )

    def test_kind_arguments_complete_to_kind_names(self):
        env = {"_MUSTER_COMPLETE": "complete_bash", "COMP_WORDS": "muster get py", "COMP_CWORD": "2"}
        result = runner.invoke(app, [], prog_name="muster", env=env)
        assert result.stdout.split() == ["pytorchjob", "pytorchjobs"]
        env["COMP_WORDS"] = "muster describe train"
        result = runner.invoke(app, [], prog_name="muster", env=env)
        assert result.stdout.split() == ["trainingjob", "trainingjobs"]


class TestJsonPath:
    def test_fields_lists_and_ranges(self, server, home_store: Store):
        home_store.create(job("b", workers=3))
        home_store.create(job("a", workers=1))
        names = muster("get", "tj", "-o", "jsonpath={.items[*].metadata.name}")
        assert names.exit_code == 0, names.output
        assert names.stdout == "a b"
        one = muster("get", "tj", "b", "-o", "jsonpath={.spec.replicaSpecs.Worker.replicas}")
        assert one.stdout == "3"
        ranged = muster(
            "get",
            "tj",
            "-o",
            'jsonpath={range .items[*]}{.metadata.name}{"\\t"}'
            '{.spec.replicaSpecs.Worker.replicas}{"\\n"}{end}',
        )
        assert ranged.stdout == "a\t1\nb\t3\n"
        quoted = muster("get", "tj", "a", "-o", "jsonpath='{.spec.replicaSpecs.Worker}'")
        assert quoted.exit_code == 0 and json.loads(quoted.stdout)["replicas"] == 1
        filtered = muster("get", "tj", "-o", 'jsonpath={.items[?(@.metadata.name=="b")].metadata.name}')
        assert filtered.stdout == "b"

    def test_bad_templates_and_formats_exit_2(self, server, home_store: Store):
        home_store.create(job("a"))
        unclosed = muster("get", "tj", "-o", "jsonpath={.items[*].metadata.name")
        assert unclosed.exit_code == 2 and "jsonpath" in unclosed.stderr and unclosed.stdout == ""
        unknown = muster("get", "tj", "-o", "jason")
        assert unknown.exit_code == 2
        assert "table, wide, yaml, json, name or jsonpath=TEMPLATE" in unknown.stderr


class TestSortBy:
    def test_sorts_by_a_field_numbers_as_numbers(self, server, home_store: Store):
        home_store.create(job("x", workers=10))
        home_store.create(job("y", workers=9))
        home_store.create(job("z", workers=2))
        by_workers = muster("get", "tj", "--sort-by", ".spec.replicaSpecs.Worker.replicas", "-o", "name")
        assert by_workers.exit_code == 0, by_workers.output
        assert by_workers.stdout.split() == ["trainingjob/z", "trainingjob/y", "trainingjob/x"]
        bad = muster("get", "tj", "--sort-by", "{.spec")
        assert bad.exit_code == 2 and "--sort-by" in bad.stderr

    def test_events_are_listed_oldest_first(self, server, home_store: Store):
        about = home_store.create(job("j"))
        for name, at in (
            ("a", "2025-01-01T00:03:00Z"),
            ("b", "2025-01-01T00:01:00Z"),
            ("c", "2025-01-01T00:02:00Z"),
        ):
            ev = c.event(about, f"Reason{name.upper()}", "m", at=at)
            ev["metadata"]["name"] = f"j.{name}"
            home_store.create(ev)
        rows = muster("get", "events").stdout.splitlines()[1:]
        assert [r.split()[2] for r in rows] == ["ReasonB", "ReasonC", "ReasonA"]


class TestKinds:
    def test_get_all_lists_every_kind_of_work(self, server, home_store: Store):
        home_store.create(job("mnist"))
        home_store.create(c.pod("mnist-worker-0", job="mnist"))
        result = muster("get", "all")
        assert result.exit_code == 0, result.output
        blocks = result.stdout.split("\n\n")
        assert blocks[0].splitlines()[1].split()[0] == "trainingjob/mnist"
        assert blocks[1].splitlines()[1].split()[0] == "pod/mnist-worker-0"
        names = muster("get", "all", "-o", "name").stdout.split()
        assert names == ["trainingjob/mnist", "pod/mnist-worker-0"]
        empty = muster("get", "all", "-n", "nobody")
        assert empty.exit_code == 0 and empty.stdout == "No resources found in nobody namespace.\n"

    def test_api_resources_come_from_the_registry(self):
        result = muster("api-resources")
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        assert lines[0].split() == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
        rows = {line.split()[0]: line.split() for line in lines[1:]}
        assert set(rows) == {info.plural for info in registry.kinds()}
        assert rows["trainingjobs"] == ["trainingjobs", "tj", "muster.dev/v1", "true", "TrainingJob"]
        assert rows["nodes"][1:] == ["no", "muster.dev/v1", "false", "Node"]
        wide = muster("api-resources", "-o", "wide").stdout.splitlines()
        assert wide[0].split()[-2:] == ["CATEGORIES", "CONVERTED-FROM"]
        tj = next(line for line in wide if line.startswith("trainingjobs"))
        assert "kubeflow.org/v1/PyTorchJob" in tj and "batch/v1/Job" in tj
        assert muster("api-resources", "--namespaced=false", "-o", "name").stdout.split()[:2] == [
            "namespaces",
            "nodes",
        ]

    def test_kinds_of_converted_manifests_are_aliases(self, server, home_store: Store):
        home_store.create(job("mnist"))
        for alias in ("pytorchjobs", "PyTorchJob", "jobs", "job", "tfjobs", "mpijob"):
            result = muster("get", alias, "-o", "name")
            assert result.exit_code == 0, (alias, result.output)
            assert result.stdout.split() == ["trainingjob/mnist"]
        assert registry.lookup("workloadpriorityclasses").kind == "PriorityClass"


@pytest.mark.parametrize(
    "args",
    [
        ("get", "tj", "nope"),
        ("describe", "tj", "nope"),
        ("delete", "tj", "nope"),
        ("logs", "nope"),
        ("why", "job/nope"),
        ("suspend", "job/nope"),
        ("resume", "job/nope"),
        ("retry", "workflow/nope"),
        ("get", "nokind"),
        ("top", "pods"),
    ],
)
def test_every_verb_writes_its_errors_to_stderr(server, args: tuple[str, ...]):
    result = muster(*args)
    assert result.exit_code in (1, 2)
    assert result.stdout == "", f"{args}: {result.stdout!r}"
    assert result.stderr.startswith("error:") or "Invalid value" in result.stderr


class TestServerAddress:
    def test_host_and_port_without_a_scheme_is_http(self, muster_home, monkeypatch):
        monkeypatch.setenv("MUSTER_SERVER", "127.0.0.1:7171")
        assert discover()[0] == "http://127.0.0.1:7171"
        assert discover(server="localhost:7272/")[0] == "http://localhost:7272"

    def test_a_server_answers_at_host_port(self, server, monkeypatch):
        monkeypatch.setenv("MUSTER_SERVER", server.url.removeprefix("http://"))
        assert muster("get", "nodes").exit_code == 0

    def test_another_scheme_is_named_as_the_problem(self, muster_home, monkeypatch):
        monkeypatch.setenv("MUSTER_SERVER", "ftp://127.0.0.1:7171")
        result = muster("get", "nodes")
        assert result.exit_code == 2
        assert "MUSTER_SERVER" in result.stderr and "http://" in result.stderr


class TestTables:
    def test_node_memory_in_binary_units_and_counts_as_numbers(self, server, home_store: Store):
        node = c.gpu_node("node-a", memory="25275297792")
        home_store.create(node)
        home_store.create(c.cluster_queue("team", {"default": {"nvidia.com/gpu": "2"}}))
        nodes = muster("get", "nodes").stdout.splitlines()
        assert nodes[1].split()[5] == "23.5Gi"
        cqs = muster("get", "cq").stdout.splitlines()
        assert cqs[1].split()[3:5] == ["0", "0"]  # PENDING, ADMITTED before the first status
        home_store.create(c.pod("p", job="j"))
        assert muster("get", "pods").stdout.splitlines()[1].split()[-2] == "0"  # RESTARTS

    def test_watch_rows_stay_under_their_header(self, capsys):
        table = Table("TrainingJob", wide=False, namespace_column=False, watch=True)
        table.print([], header=True)
        for name, state in (("a", "Queued"), ("a-much-longer-training-job-name-than-fits", "Succeeded")):
            obj = c.ddp_job(name, conditions=[c.condition(state)])
            table.print([obj], header=False)
        lines = capsys.readouterr().out.splitlines()
        header = None
        for line in lines:
            if line.startswith("NAME"):
                header = line
                continue
            assert header is not None
            starts = [m.start() for m in re.finditer(r"\S+", header)]
            cells = [m.start() for m in re.finditer(r"\S+", line)]
            assert cells[: len(starts)] == starts[: len(cells)], (header, line)


def _help_texts(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """Every help text of every command: (command path, text)."""
    out = [(path, command.help or "")]
    out += [(path, p.help or "") for p in command.params if getattr(p, "help", None)]
    for name, sub in (getattr(command, "commands", None) or {}).items():
        out += _help_texts(sub, (*path, name))
    return out


def test_help_prints_bracketed_text_as_written():
    """Rich markup must not eat ``[worker-1]`` (or any other bracketed example) in --help."""
    load_all()  # every verb's help, not only those some earlier test happened to load
    command = get_command(app)
    checked = 0
    for path, text in _help_texts(command):
        for bracket in re.findall(r"\[[^\]\s]+\]", text):
            shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "300"}, terminal_width=300)
            assert bracket.replace("\\[", "[") in shown.stdout, (path, bracket)
            checked += 1
    assert checked >= 3


def test_why_offers_only_the_formats_it_prints(server):
    for fmt in ("wide", "name"):
        result = muster("why", "job/x", "-o", fmt)
        assert result.exit_code == 2, fmt
