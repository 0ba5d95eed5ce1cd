from __future__ import annotations

import json
from pathlib import Path

import yaml

from muster.api.compat import IGNORED_FIELDS_ANNOTATION
from muster.api.registry import validate
from tests.api.helpers import errors_of

MANIFESTS = Path(__file__).parent.parent / "manifests"


def _convert(name):
    results = [validate(d) for d in yaml.safe_load_all((MANIFESTS / name).read_text())]
    return {(r.obj["kind"], r.obj["metadata"]["name"]): r for r in results}


def test_v1beta1_set_up():
    objs = _convert("kueue-v1beta1.yaml")
    spot = objs[("ResourceFlavor", "spot")].obj["spec"]
    assert spot["nodeTaints"] == [{"key": "cloud.example.com/spot", "value": "true", "effect": "NoSchedule"}]
    team_a = objs[("ClusterQueue", "team-a")]
    spec = team_a.obj["spec"]
    assert spec["cohort"] == "research"
    # v1beta1's Borrow / Preempt are v1beta2's MayStopSearch.
    assert spec["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}
    assert spec["preemption"] == {
        "withinClusterQueue": "LowerPriority",
        "reclaimWithinCohort": "Any",
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
    }
    gpu = spec["resourceGroups"][0]["flavors"][0]["resources"][2]
    assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "8", "lendingLimit": "4"}
    assert json.loads(team_a.obj["metadata"]["annotations"][IGNORED_FIELDS_ANNOTATION]) == {
        "spec.admissionChecks": ["prov-req"]
    }
    assert team_a.warnings == [
        "spec.admissionChecks: not supported by Muster; ignored (kept in "
        "metadata.annotations[muster.dev/ignored-fields])"
    ]
    assert objs[("ClusterQueue", "team-b")].obj["spec"]["namespaceSelector"] == {"matchLabels": {"team": "b"}}
    assert objs[("LocalQueue", "team-a")].obj["metadata"]["namespace"] == "team-a"
    cohort = objs[("Cohort", "research")].obj["spec"]
    assert cohort["parentName"] == "company"  # v1alpha1 parent
    assert cohort["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] == "2"
    wpc = objs[("PriorityClass", "prod-high")].obj
    assert (wpc["value"], wpc["description"]) == (10000, "Production training")


def test_v1beta2_set_up():
    objs = _convert("kueue-v1beta2.yaml")
    assert objs[("Topology", "datacenter")].obj["spec"]["levels"][2] == {
        "nodeLabel": "kubernetes.io/hostname"
    }
    h100 = objs[("ResourceFlavor", "h100")]
    assert h100.obj["spec"]["topologyName"] == "datacenter"
    assert json.loads(h100.obj["metadata"]["annotations"][IGNORED_FIELDS_ANNOTATION]) == {
        "spec.resourceWeights": {"nvidia.com/gpu": 4}
    }
    assert objs[("Cohort", "research")].obj["spec"] == {
        "parentName": "company",
        "fairSharing": {"weight": "2"},
    }
    llm = objs[("ClusterQueue", "llm")]
    spec = llm.obj["spec"]
    assert spec["cohort"] == "research" and "cohortName" not in spec
    assert (spec["queueingStrategy"], spec["stopPolicy"], spec["fairSharing"]) == (
        "StrictFIFO",
        "Hold",
        {"weight": "1500m"},
    )
    assert spec["flavorFungibility"]["preference"] == "PreemptionOverBorrowing"
    assert spec["namespaceSelector"]["matchExpressions"][0]["values"] == ["llm-pretrain", "llm-finetune"]
    assert [w.split(":")[0] for w in llm.warnings] == ["spec.admissionChecksStrategy", "spec.admissionScope"]
    pretrain = objs[("LocalQueue", "pretrain")]
    assert pretrain.obj["spec"] == {"clusterQueue": "llm", "stopPolicy": "None"}
    assert [w.split(":")[0] for w in pretrain.warnings] == ["spec.fairSharing", "spec.wallTimePolicy"]


def _cq(api_version, **spec):
    return {"apiVersion": api_version, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec}


def test_errors_name_the_kueue_field():
    group = {
        "coveredResources": ["cpu"],
        "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1, "borrowingLimit": 1}]}],
    }
    assert errors_of(_cq("kueue.x-k8s.io/v1beta2", namespaceSelector={}, resourceGroups=[group])) == [
        "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: may only be set when spec.cohort is "
        "set"
    ]
    assert errors_of(_cq("kueue.x-k8s.io/v1beta2", cohortName="Bad_Name", namespaceSelector={})) == [
        "spec.cohortName: must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', starting "
        "and ending "
        "with a letter or digit, at most 253 characters, got 'Bad_Name'"
    ]
    cohort = {
        "apiVersion": "kueue.x-k8s.io/v1alpha1",
        "kind": "Cohort",
        "metadata": {"name": "c"},
        "spec": {"parent": "Bad_Name"},
    }
    assert errors_of(cohort)[0].startswith("spec.parent: must be a DNS-1123 subdomain")


def test_missing_namespace_selector_warns_about_the_different_default():
    result = validate(_cq("kueue.x-k8s.io/v1beta2"))
    assert result.warnings == [
        "spec.namespaceSelector: absent: Kueue admits no namespace then, Muster admits every "
        "namespace (set namespaceSelector to restrict which namespaces may submit)"
    ]
