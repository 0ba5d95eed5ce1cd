"""Every document in examples/*.yaml validates (so the examples apply as shipped)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from muster.api.registry import validate

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_validates(path):
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert docs, f"{path} holds no documents"
    for doc in docs:
        validate(doc)


def test_the_api_examples_are_there():
    names = {p.name for p in EXAMPLES}
    assert {"kubeflow-pytorchjob.yaml", "kueue-queues.yaml"} <= names
