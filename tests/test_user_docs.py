"""What users read cites what users have: the docs pages, the README, the examples, the CLI's
help and output, and the API schema point to docs/ pages, never to DESIGN.md or the design
reference notes (files beside the repository that a user of Muster does not get)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from typer.main import get_command

from muster.cli.app import app

REPO = Path(__file__).resolve().parents[1]
# "DESIGN §7", "DESIGN.md", "reference/perf.md §2.1".
FORBIDDEN = re.compile(r"\bDESIGN\b|\breference/\w+\.md")


def _offences(text: str) -> list[str]:
    return [m.group(0) for m in FORBIDDEN.finditer(text)]


def test_docs_readme_and_examples_cite_only_what_users_have() -> None:
    files = [REPO / "README.md", REPO / "traces" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    files += sorted(p for p in (REPO / "examples").rglob("*") if p.suffix in (".py", ".yaml", ".md"))
    found = {str(f.relative_to(REPO)): _offences(f.read_text()) for f in files}
    assert {f: o for f, o in found.items() if o} == {}


def test_cli_help_and_demo_cite_only_what_users_have() -> None:
    def texts(command: Any) -> list[str]:
        out = [command.help or ""] + [getattr(p, "help", "") or "" for p in command.params]
        for sub in (getattr(command, "commands", None) or {}).values():
            out += texts(sub)
        return out

    assert [t for t in texts(get_command(app)) if _offences(t)] == []
    # What the demo prints is in its source's strings.
    for name in ("demo.py", "demo_preempt.py"):
        assert _offences((REPO / "muster" / "cli" / name).read_text()) == [], name


def test_the_api_schema_cites_only_what_users_have(tmp_path: Path) -> None:
    from muster.server import create_app
    from muster.store import open_store

    store = open_store(f"sqlite:///{tmp_path / 'muster.db'}")
    try:
        schema = str(create_app(store, ["t"]).openapi())
    finally:
        store.close()
    assert _offences(schema) == []
