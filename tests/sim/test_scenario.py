"""Scenario loading: snapshot contents, defaults, and errors that name the field."""

from __future__ import annotations

import pytest
import yaml

from muster.api.errors import InvalidObject
from muster.scheduler import GPU, ResourceQuota
from muster.sim.scenario import parse_scenario

DOC = """
name: s
flavors:
  - {name: od, nodeLabels: {pool: od}}
  - {name: spot}
cohorts:
  - {name: root}
  - {name: child, parent: root, quota: {od: {cpu: 2}}}
clusterQueues:
  - name: a
    cohort: child
    quota:
      od: {cpu: {nominal: 4, borrowingLimit: 2, lendingLimit: 1}, nvidia.com/gpu: 8}
      spot: {cpu: 10}
nodes:
  - name: n1
    capacity: {cpu: 16, memory: 64Gi, nvidia.com/gpu: 4}
    gpuModel: A100
    gpuMemory: 80Gi
    labels: {pool: od}
admitted:
  - name: r
    queue: a
    priority: 3
    podSets:
      - {count: 2, requests: {cpu: 2, nvidia.com/gpu: 1}, gpuMilli: 250, placement: [{node: n1, pods: 2}]}
pending:
  - name: p
    queue: a
    podSets:
      - name: w
        count: 3
        minCount: 1
        requests: {cpu: 500m, memory: 1Gi, nvidia.com/gpu: 2}
        gpuModels: [A100]
        nodeSelector: {pool: od}
        tolerations: [{key: k, operator: Exists}]
        topology: {required: rack}
"""


def parse(text: str):
    return parse_scenario(yaml.safe_load(text))


def errors(text: str) -> list[str]:
    with pytest.raises(InvalidObject) as exc:
        parse(text)
    return [str(e) for e in exc.value.errors]


def test_snapshot_is_built_from_the_file() -> None:
    sc = parse(DOC)
    snap = sc.snapshot
    (cq,) = snap.cluster_queues
    # resources defined by the same flavors form one group: cpu (od, spot) and GPU (od)
    groups = {g.covered_resources: [f.name for f in g.flavors] for g in cq.resource_groups}
    assert groups == {("cpu",): ["od", "spot"], (GPU,): ["od"]}
    od_cpu = cq.resource_groups[0].flavors[0].resources["cpu"]
    assert od_cpu == ResourceQuota(4000, 2000, 1000)
    assert [c.name for c in snap.cohorts] == ["root", "child"] and snap.cohorts[1].parent == "root"
    (node,) = snap.nodes
    assert node.gpus == 4 and node.allocatable == {"cpu": 16000, "memory": 64 * 2**30}
    # the admitted pods are charged to the node: both 250-milli shares on the lowest device
    assert node.gpu_free == (500, 1000, 1000, 1000)
    assert node.used == {"cpu": 4000}
    (adm,) = snap.admitted
    assert adm.priority == 3 and adm.creation_time == 0.0 and adm.admission_time == 0.0
    assert adm.pod_sets[0].flavors == {"cpu": "od", GPU: "od"}  # defaults to the first flavor
    (pend,) = snap.pending
    ps = pend.pod_sets[0]
    assert pend.creation_time == 1.0  # position in the file: admitted first, then pending
    assert (ps.name, ps.count, ps.min_count, ps.gpus, ps.gpu_milli) == ("w", 3, 1, 2, 1000)
    assert ps.requests == {"cpu": 500, "memory": 2**30}
    assert ps.topology_required == "rack" and ps.gpu_models == ("A100",)


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("spot: {cpu: 10}", "cheap: {cpu: 10}", "clusterQueues[0].quota.cheap: names an unknown flavor"),
        (
            "lendingLimit: 1",
            "lendingLimit: 9",
            "clusterQueues[0].quota.od.cpu.lendingLimit: must not exceed nominal",
        ),
        (
            "placement: [{node: n1, pods: 2}]",
            "placement: [{node: n1, pods: 1}]",
            "places 1 pods but the pod set has count 2",
        ),
        (
            "placement: [{node: n1, pods: 2}]",
            "placement: [{node: n9, pods: 2}]",
            "placement[0].node: names an unknown node",
        ),
        ("gpuMilli: 250, placement", "gpuMilli: 0, placement", "gpuMilli: must be between 1 and 1000"),
        ("minCount: 1", "minCount: 4", "pending[0].podSets[0].minCount: must be <= count (3)"),
        ("{required: rack}", "{required: rack, preferred: rack}", "set either required or preferred"),
        ("  - name: p\n", "  - name: r\n", "workload names must be unique"),
        ("nvidia.com/gpu: 2}", "nvidia.com/gpu: 1500m}", "must be whole GPUs or a share below 1"),
        ("operator: Exists", "operator: Maybe", "tolerations[0].operator: must be one of Equal, Exists"),
        ("{cpu: 16, memory", "{cpu: 1, memory", "overcommits node n1 on cpu"),
        ("gpuMilli: 250,", "gpuMilli: 250, bogus: 1,", "admitted[0].podSets[0].bogus: unknown field"),
    ],
)
def test_bad_field_is_named(old: str, new: str, needle: str) -> None:
    assert old in DOC
    found = errors(DOC.replace(old, new, 1))
    assert any(needle in e for e in found), found


def test_device_index_out_of_range() -> None:
    text = DOC.replace(
        "placement: [{node: n1, pods: 2}]", "placement: [{node: n1, pods: 2, gpus: [[9], [0]]}]"
    )
    assert any("node n1 has no GPU 9" in e for e in errors(text))


def test_without_nodes_placements_are_rejected_and_not_required() -> None:
    text = DOC.split("nodes:")[0] + "admitted:" + DOC.split("admitted:")[1]
    assert any("needs nodes" in e for e in errors(text))
    ok = text.replace(", placement: [{node: n1, pods: 2}]", "")
    assert parse(ok).snapshot.nodes is None
