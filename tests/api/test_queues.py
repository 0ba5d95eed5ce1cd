from __future__ import annotations

import pytest

from muster.api.registry import validate
from tests.api.helpers import errors_of, obj


def _quota(name, nominal, **limits):
    return {"name": name, "nominalQuota": nominal, **limits}


def _cq(groups, **spec):
    return obj("ClusterQueue", spec={"resourceGroups": groups, **spec})


_GROUP = {
    "coveredResources": ["cpu", "nvidia.com/gpu"],
    "flavors": [{"name": "a100", "resources": [_quota("cpu", 64), _quota("nvidia.com/gpu", 8)]}],
}


def test_cluster_queue_defaults_mirror_kueue():
    spec = validate(_cq([_GROUP])).obj["spec"]
    assert spec["queueingStrategy"] == "BestEffortFIFO"
    assert spec["preemption"] == {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}
    assert spec["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    assert spec["stopPolicy"] == "None"
    assert spec["resourceGroups"][0]["flavors"][0]["resources"][1] == {
        "name": "nvidia.com/gpu",
        "nominalQuota": "8",
    }


@pytest.mark.parametrize(
    ("groups", "spec", "expected"),
    [
        (
            [
                _GROUP,
                {"coveredResources": ["cpu"], "flavors": [{"name": "spot", "resources": [_quota("cpu", 1)]}]},
            ],
            {},
            [
                "spec.resourceGroups[1].coveredResources[0]: resource 'cpu' is already in "
                "resourceGroups[0]; a resource "
                "belongs to one group only"
            ],
        ),
        (
            [
                _GROUP,
                {
                    "coveredResources": ["memory"],
                    "flavors": [{"name": "a100", "resources": [_quota("memory", 1)]}],
                },
            ],
            {},
            [
                "spec.resourceGroups[1].flavors[0].name: flavor 'a100' is already in resourceGroups[0]; a "
                "flavor "
                "belongs to one group only"
            ],
        ),
        (
            [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [{"name": "f", "resources": [_quota("cpu", 1)]}],
                }
            ],
            {},
            [
                "spec.resourceGroups[0].flavors[0].resources: must list exactly the group's "
                "coveredResources ['cpu', "
                "'memory'] in that order, got ['cpu']"
            ],
        ),
        (
            [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [{"name": "f", "resources": [_quota("memory", 1), _quota("cpu", 1)]}],
                }
            ],
            {},
            [
                "spec.resourceGroups[0].flavors[0].resources[0].name: must be 'cpu', the group's "
                "coveredResources[0], got "
                "'memory'",
                "spec.resourceGroups[0].flavors[0].resources[1].name: must be 'memory', the group's "
                "coveredResources[1], "
                "got 'cpu'",
            ],
        ),
        (
            [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "f", "resources": [_quota("cpu", 1, borrowingLimit=1)]}],
                }
            ],
            {},
            [
                "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: may only be set when "
                "spec.cohort is "
                "set"
            ],
        ),
        (
            [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "f", "resources": [_quota("cpu", 4, lendingLimit=5)]}],
                }
            ],
            {"cohort": "c"},
            [
                "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: must be <= nominalQuota "
                "(4), got '5'"
            ],
        ),
        (
            [_GROUP],
            {"preemption": {"borrowWithinCohort": {"policy": "LowerPriority"}}},
            [
                "spec.preemption.borrowWithinCohort.policy: must be Never when reclaimWithinCohort is "
                "Never, got "
                "'LowerPriority' (set reclaimWithinCohort to LowerPriority or Any)"
            ],
        ),
        (
            [_GROUP],
            {"flavorFungibility": {"preference": "BorrowingOverPreemption"}},
            [
                "spec.flavorFungibility.preference: may only be set when whenCanBorrow and whenCanPreempt "
                "are both "
                "TryNextFlavor"
            ],
        ),
        (
            [_GROUP],
            {"queueingStrategy": "LIFO"},
            ["spec.queueingStrategy: must be one of 'BestEffortFIFO' or 'StrictFIFO', got 'LIFO'"],
        ),
        (
            [{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [_quota("cpu", "lots")]}]}],
            {},
            [
                "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: 'lots' is not a quantity: "
                "expected a "
                "Kubernetes quantity such as 500m, 2, 1.5, 16Gi, 512Mi, 1k or 1e3"
            ],
        ),
        (
            [{"coveredResources": [], "flavors": []}],
            {},
            [
                "spec.resourceGroups[0].coveredResources: must not be empty",
                "spec.resourceGroups[0].flavors: must not be empty",
            ],
        ),
        (
            [_GROUP],
            {"cohort": "Not_A_Name"},
            [
                "spec.cohort: must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', "
                "starting and ending "
                "with a letter or digit, at most 253 characters, got 'Not_A_Name'"
            ],
        ),
    ],
)
def test_cluster_queue_rules(groups, spec, expected):
    assert errors_of(_cq(groups, **spec)) == expected


def test_cohort_limits_need_a_parent_and_may_lend_above_nominal():
    group = {
        "coveredResources": ["cpu"],
        "flavors": [{"name": "f", "resources": [_quota("cpu", 1, lendingLimit=5)]}],
    }
    assert errors_of(obj("Cohort", spec={"resourceGroups": [group]})) == [
        "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: may only be set when spec.parentName "
        "is set"
    ]
    assert validate(obj("Cohort", spec={"parentName": "root", "resourceGroups": [group]})).obj["spec"][
        "parentName"
    ]


def test_local_queue_needs_a_cluster_queue():
    assert errors_of(obj("LocalQueue", spec={})) == ["spec.clusterQueue: required field is missing"]
    assert validate(obj("LocalQueue", spec={"clusterQueue": "cq"})).obj["spec"] == {
        "clusterQueue": "cq",
        "stopPolicy": "None",
    }


def test_resource_flavor_and_topology_rules():
    assert errors_of(obj("ResourceFlavor", spec={"topologyName": "dc"})) == [
        "spec.nodeLabels: must not be empty when topologyName is set"
    ]
    assert errors_of(obj("ResourceFlavor", spec={"nodeLabels": {str(i): "x" for i in range(9)}})) == [
        "spec.nodeLabels: must have at most 8 items, got 9"
    ]
    levels = [{"nodeLabel": "rack"}, {"nodeLabel": "rack"}]
    assert errors_of(obj("Topology", spec={"levels": levels})) == [
        "spec.levels[1].nodeLabel: duplicate node label, got 'rack'"
    ]
    assert errors_of(obj("Topology", spec={"levels": []})) == ["spec.levels: must not be empty"]
