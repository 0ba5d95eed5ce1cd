"""The content-addressed artifact store."""

from __future__ import annotations

from pathlib import Path

import pytest

from muster.controllers.workflow.artifacts import ArtifactStore, digest_of


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(content)
    return root


def test_digests_depend_on_content_and_layout_only(tmp_path: Path):
    a = _tree(tmp_path / "a", {"x/1.txt": "one", "2.txt": "two"})
    b = _tree(tmp_path / "b", {"2.txt": "two", "x/1.txt": "one"})
    assert digest_of(a) == digest_of(b)
    c = _tree(tmp_path / "c", {"x/1.txt": "one", "3.txt": "two"})
    assert digest_of(c) != digest_of(a)
    f = tmp_path / "f"
    f.write_text("two")
    assert digest_of(f) != digest_of(_tree(tmp_path / "d", {"f": "two"}))  # a file is not a dir of it
    assert digest_of(f).startswith("sha256:") and len(digest_of(f)) == 71


def test_ingest_moves_dedupes_and_is_idempotent(tmp_path: Path):
    store = ArtifactStore(tmp_path / "home")
    out = _tree(tmp_path / "run1" / "data", {"part": "rows"})
    digest = store.ingest(out)
    assert out.is_symlink() and (out / "part").read_text() == "rows"
    stored = store.path(digest)
    assert stored.is_dir() and not (stored.stat().st_mode & 0o222)  # read-only once stored
    assert store.ingest(out) == digest  # collecting again finds the same digest
    again = _tree(tmp_path / "run2" / "data", {"part": "rows"})
    assert store.ingest(again) == digest and again.is_symlink()
    assert store.exists(digest) and not store.exists("sha256:" + "0" * 64) and not store.exists("junk")
    with pytest.raises(FileNotFoundError):
        store.ingest(tmp_path / "missing")


def test_inputs_are_links_and_runs_are_removed_with_their_workflow(tmp_path: Path):
    store = ArtifactStore(tmp_path / "home")
    f = tmp_path / "model.pt"
    f.write_text("weights")
    digest = store.ingest(f)
    run = store.run_dirs("ns", "uid-1", "wf-train-1")
    store.prepare(run, {"model": digest})
    store.prepare(run, {"model": digest})  # a re-created pod prepares again
    assert (run.inputs / "model").read_text() == "weights" and run.outputs.is_dir()
    other = store.run_dirs("ns", "uid-2", "wf2-a-1")
    store.prepare(other, {})
    assert store.remove_runs({("ns", "uid-2")}) == 1
    assert not run.root.exists() and other.root.exists() and store.exists(digest)
