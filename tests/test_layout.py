"""The package's shape (docs/control-plane.md, "Code map"): one subpackage per capability under
controllers/, no import cycles between modules, test helpers out of the serving path, and a CLI
that reaches the control plane only through the SDK client."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import muster

ROOT = Path(muster.__file__).parent
CAPABILITIES = ("scheduling", "trainingjob", "workflow", "pods", "nodes", "insight")
# The CLI verbs that run the control plane in their own process.
IN_PROCESS_CLI = {"muster.cli.up", "muster.cli.demo", "muster.cli.demo_preempt"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(path: Path) -> set[str]:
    """Every muster module ``path`` imports, at any depth (function-level imports count: they
    run too), except under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("muster"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                target = sub if sub in MODULES else _resolve(node.module or "")
                if target:
                    found.add(target)
        elif isinstance(node, ast.Import):
            found.update(t for a in node.names if a.name.startswith("muster") and (t := _resolve(a.name)))
    return found


GRAPH = {name: _imports(path) - {name} for name, path in MODULES.items()}


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in GRAPH:
        if root in index:
            continue
        work = [(root, iter(sorted(GRAPH[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(GRAPH[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        comp.append(member)
                        if member == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_module_imports_itself_through_others():
    assert _cycles() == []


def test_the_cycle_finder_finds_a_planted_cycle(monkeypatch):
    monkeypatch.setitem(GRAPH, "muster.api.labels", GRAPH["muster.api.labels"] | {"muster.cli.logs"})
    assert any("muster.api.labels" in c and "muster.cli.logs" in c for c in _cycles())


@pytest.mark.parametrize("capability", CAPABILITIES)
def test_each_capability_is_a_subpackage_that_says_what_it_owns(capability):
    package = ROOT / "controllers" / capability / "__init__.py"
    assert package.exists()
    doc = ast.get_docstring(ast.parse(package.read_text()))
    assert doc and len(doc) > 40


def test_controller_modules_carry_no_capability_prefix():
    top = {p.stem for p in (ROOT / "controllers").glob("*.py")}
    assert top <= {"__init__", "manager", "context", "cache"}
    for capability in CAPABILITIES:
        names = [p.stem for p in (ROOT / "controllers" / capability).glob("*.py")]
        assert not [n for n in names if n.startswith(capability + "_")]


def test_test_helpers_stay_out_of_the_serving_path():
    users = sorted(
        name
        for name, deps in GRAPH.items()
        if not name.startswith("muster.testing") and any(d.startswith("muster.testing") for d in deps)
    )
    assert users == []


def test_the_cli_reaches_the_control_plane_only_through_the_sdk():
    offenders = {
        name: sorted(d for d in deps if d.startswith(("muster.controllers", "muster.server")))
        for name, deps in GRAPH.items()
        if name.startswith("muster.cli") and name not in IN_PROCESS_CLI
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_sdk_does_not_reach_into_controllers():
    assert not [
        (name, d)
        for name, deps in GRAPH.items()
        if name.startswith("muster.sdk")
        for d in deps
        if d.startswith("muster.controllers")
    ]
