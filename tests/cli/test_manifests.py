from __future__ import annotations

import io
from pathlib import Path

import pytest

from muster.cli.common import BadInput
from muster.cli.manifests import load_documents


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_multi_document_yaml_keeps_indices(tmp_path: Path):
    f = write(tmp_path / "a.yaml", "kind: A\n---\n---\nkind: B\n---\n")
    docs = load_documents([f])
    assert [(d.body["kind"], d.index) for d in docs] == [("A", 0), ("B", 2)]
    assert docs[1].where == f"{f}[2]"


def test_json_object_list_and_kind_list(tmp_path: Path):
    one = write(tmp_path / "one.json", '{"kind": "A"}')
    many = write(tmp_path / "many.json", '[{"kind": "A"}, {"kind": "B"}]')
    wrapped = write(tmp_path / "list.yaml", "kind: List\nitems:\n- kind: C\n- kind: D\n")
    kinds = [d.body["kind"] for d in load_documents([one, many, wrapped])]
    assert kinds == ["A", "A", "B", "C", "D"]


def test_directory_in_name_order_and_stdin(tmp_path: Path):
    write(tmp_path / "b.yml", "kind: B\n")
    write(tmp_path / "a.yaml", "kind: A\n")
    write(tmp_path / "notes.txt", "ignored")
    docs = load_documents([str(tmp_path), "-"], stdin=io.StringIO("kind: S\n"))
    assert [(Path(d.source).name, d.body["kind"]) for d in docs] == [
        ("a.yaml", "A"),
        ("b.yml", "B"),
        ("-", "S"),
    ]


def test_yaml_syntax_error_names_file_document_line(tmp_path: Path):
    f = write(tmp_path / "job.yaml", "kind: A\n---\nkind: B\nmetadata:\n  name: x\n   bad: indent\n")
    with pytest.raises(BadInput) as info:
        load_documents([f])
    [line] = info.value.lines
    assert line.startswith(f"{f}[1]: YAML syntax error at line 6, column")


def test_json_syntax_error(tmp_path: Path):
    f = write(tmp_path / "x.json", '{"kind": }')
    with pytest.raises(BadInput, match=r"x.json\[0\]: JSON syntax error at line 1, column 10"):
        load_documents([f])


def test_missing_file_and_empty_input(tmp_path: Path):
    with pytest.raises(BadInput, match="no such file or directory"):
        load_documents([str(tmp_path / "nope.yaml")])
    empty = write(tmp_path / "empty.yaml", "---\n")
    with pytest.raises(BadInput, match="no documents"):
        load_documents([empty])


def test_where(tmp_path: Path):
    docs = load_documents([write(tmp_path / "a.yaml", "kind: A\n---\nkind: B\n")])
    assert docs[1].where.endswith("a.yaml[1]")


def test_a_duplicate_key_is_an_error_naming_its_path_and_lines(tmp_path: Path):
    """kubectl rejects a mapping that names a key twice; keeping the last value silently would
    run something other than what the file seems to say."""
    text = (
        "kind: A\n"
        "---\n"
        "kind: TrainingJob\n"
        "metadata:\n"
        "  name: x\n"
        "spec:\n"
        "  replicaSpecs:\n"
        "    Worker:\n"
        "      replicas: 2\n"
        "      template:\n"
        "        spec:\n"
        "          containers:\n"
        "          - name: a\n"
        "            resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpu: 4}}\n"
        "      replicas: 8\n"
        "metadata: {}\n"
    )
    f = write(tmp_path / "job.yaml", text)
    with pytest.raises(BadInput) as info:
        load_documents([f])
    assert info.value.lines == [  # in the order they are read
        f"{f}[1] spec.replicaSpecs.Worker.template.spec.containers[0].resources.limits[nvidia.com/gpu]: "
        "duplicate key (lines 14 and 14); a mapping may name each key once",
        f"{f}[1] spec.replicaSpecs.Worker.replicas: duplicate key (lines 9 and 15); "
        "a mapping may name each key once",
        f"{f}[1] metadata: duplicate key (lines 4 and 16); a mapping may name each key once",
    ]


def test_a_duplicate_key_in_json_is_an_error_too(tmp_path: Path):
    f = write(tmp_path / "x.json", '[{"kind": "A"}, {"kind": "B", "spec": {"a": 1, "a": 2}}]')
    with pytest.raises(BadInput) as info:
        load_documents([f])
    assert info.value.lines == [f"{f}[1] spec.a: duplicate key; a mapping may name each key once"]
