"""Every document under examples/ validates (so the examples apply as shipped), except the
ones under a `broken/` directory, which exist to show the errors and must fail, and the
Kubernetes manifests that deploy an engine Muster runs on (`ray/`: a KubeRay RayCluster,
checked by tests/examples/test_raycluster_manifest.py), which are applied with kubectl, not muster."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from muster.api.errors import InvalidObject
from muster.api.registry import validate

ROOT = Path(__file__).resolve().parents[2] / "examples"
ENGINE_MANIFESTS = {"ray"}
EXAMPLES = sorted(
    p for p in ROOT.rglob("*.yaml") if not {"broken", *ENGINE_MANIFESTS} & set(p.relative_to(ROOT).parts)
)
BROKEN = sorted(p for p in ROOT.rglob("*.yaml") if "broken" in p.relative_to(ROOT).parts)


def _docs(path: Path) -> list[dict]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert docs, f"{path} holds no documents"
    return docs


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_example_validates(path):
    for doc in _docs(path):
        validate(doc)


@pytest.mark.parametrize("path", BROKEN, ids=lambda p: str(p.relative_to(ROOT)))
def test_broken_examples_fail(path):
    with pytest.raises(InvalidObject):
        for doc in _docs(path):
            validate(doc)


def test_the_examples_are_there():
    names = {str(p.relative_to(ROOT)) for p in EXAMPLES}
    assert {
        "kubeflow-pytorchjob.yaml",
        "argo-workflow.yaml",
        "kueue-queues.yaml",
        "trainingjob.yaml",
        "pytorchjob.yaml",
        "urgent.yaml",
        "queues.yaml",
    } <= names


def test_the_ddp_pytorchjob_is_the_ddp_trainingjob():
    """The Kubeflow manifest converts to the same job as the native one (container name and
    the clean-up policy, which PyTorchJob users set, aside)."""
    [native] = _docs(ROOT / "trainingjob.yaml")
    [kubeflow] = _docs(ROOT / "pytorchjob.yaml")
    a = validate(native).obj
    b = validate(kubeflow).obj
    assert a is not None and b is not None
    for obj in (a, b):
        for replica in obj["spec"]["replicaSpecs"].values():
            replica["template"]["spec"]["containers"][0]["name"] = "c"
        obj["spec"]["runPolicy"].pop("cleanPodPolicy", None)
        obj["spec"]["runPolicy"].pop("schedulingPolicy", None)
    assert b["spec"] == a["spec"]
