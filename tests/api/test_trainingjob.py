from __future__ import annotations

import copy

import pytest

from muster.api.registry import to_model, validate
from muster.api.trainingjob import TrainingJob
from tests.api.helpers import errors_of, obj

_TEMPLATE = {
    "spec": {
        "containers": [
            {
                "name": "pytorch",
                "command": ["torchrun", "train.py"],
                "resources": {"limits": {"nvidia.com/gpu": 1}},
            }
        ]
    }
}


def _job(master=1, worker=2, **spec):
    replicas = {}
    if master is not None:
        replicas["Master"] = {"replicas": master, "template": copy.deepcopy(_TEMPLATE)}
    if worker is not None:
        replicas["Worker"] = {"replicas": worker, "template": copy.deepcopy(_TEMPLATE)}
    return obj("TrainingJob", spec={"replicaSpecs": replicas, **spec})


def test_defaults_are_applied():
    wire = validate(_job()).obj
    assert wire["metadata"]["namespace"] == "default"
    spec = wire["spec"]
    assert spec["nprocPerNode"] == "auto"
    assert spec["replicaSpecs"]["Worker"]["restartPolicy"] == "OnFailure"
    assert spec["runPolicy"] == {"cleanPodPolicy": "Running", "suspend": False}
    job = to_model(wire)
    assert isinstance(job, TrainingJob) and job.spec.total_replicas() == 3


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (_job(worker=0), "spec.replicaSpecs.Worker.replicas: must be >= 1, got 0"),
        (_job(master=2), "spec.replicaSpecs.Master.replicas: must be 1, got 2"),
        (
            _job(master=None, worker=None),
            "spec.replicaSpecs: must have a Master or a Worker replica spec (replica types are Master (rank "
            "0, "
            "one pod) and Worker)",
        ),
        (
            _job(nprocPerNode="many"),
            "spec.nprocPerNode: must be auto, cpu, gpu or a positive integer, got 'many'",
        ),
        (
            _job(elasticPolicy={"minReplicas": 3, "maxReplicas": 2}),
            "spec.elasticPolicy.minReplicas: must be <= maxReplicas (2), got 3",
        ),
        (
            _job(worker=None, elasticPolicy={"minReplicas": 1}),
            "spec.replicaSpecs.Worker: is required with elasticPolicy",
        ),
        (
            _job(runPolicy={"cleanPodPolicy": "Some"}),
            "spec.runPolicy.cleanPodPolicy: must be one of 'All', 'Running' or 'None', got 'Some'",
        ),
        (
            _job(runPolicy={"schedulingPolicy": {"minAvailable": 4}}),
            "spec.runPolicy.schedulingPolicy.minAvailable: must be <= the total number of replicas (3), got "
            "4",
        ),
        (
            _job(queueName="a", runPolicy={"schedulingPolicy": {"queue": "b"}}),
            "spec.runPolicy.schedulingPolicy.queue: conflicts with spec.queueName ('a'), got 'b'",
        ),
        (
            _job(replicaSpecs_typo=1),
            "spec.replicaSpecs_typo: unknown field (remove it, or check its spelling and indentation)",
        ),
    ],
)
def test_rules(doc, expected):
    assert errors_of(doc) == [expected]


def test_unknown_replica_type_is_an_error():
    doc = _job()
    doc["spec"]["replicaSpecs"]["Scheduler"] = doc["spec"]["replicaSpecs"]["Worker"]
    (err,) = errors_of(doc)
    assert err.startswith("spec.replicaSpecs.Scheduler: unknown field")


def test_another_frameworks_replica_type_is_an_error():
    doc = _job(worker=1)
    doc["spec"]["replicaSpecs"]["Launcher"] = doc["spec"]["replicaSpecs"]["Worker"]
    assert errors_of(doc) == [
        "spec.replicaSpecs.Launcher: is not a PyTorch replica type (replica types are Master (rank 0, one "
        "pod) and Worker)"
    ]


def test_nproc_per_node_accepts_a_number_and_scheduling_policy_fills_names():
    wire = validate(
        _job(nprocPerNode=4, runPolicy={"schedulingPolicy": {"queue": "q", "priorityClass": "high"}})
    ).obj
    assert wire["spec"]["nprocPerNode"] == "4"
    assert wire["spec"]["queueName"] == "q" and wire["spec"]["priorityClassName"] == "high"


def test_template_fields_the_controller_overrides_warn():
    doc = _job(worker=None)
    doc["spec"]["replicaSpecs"]["Master"]["template"]["spec"].update(restartPolicy="Never", nodeName="n1")
    assert validate(doc).warnings == [
        "spec.replicaSpecs.Master.template.spec.restartPolicy: ignored: the replica's restartPolicy decides "
        "restarts",
        "spec.replicaSpecs.Master.template.spec.nodeName: ignored: the scheduler chooses the node (use "
        "nodeSelector kubernetes.io/hostname)",
    ]


def test_status_round_trips_when_kept():
    doc = _job()
    doc["status"] = {
        "conditions": [{"type": "Running", "status": "True", "reason": "PodsRunning"}],
        "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 2}},
        "restartCount": 1,
        "workload": "x-tj",
        "preemptions": [{"time": "2025-01-01T00:00:00Z", "preemptor": "default/big"}],
    }
    wire = validate(doc, keep_status=True).obj
    assert wire["status"]["replicaStatuses"]["Worker"] == {"active": 2, "succeeded": 0, "failed": 0}
    assert to_model(wire).to_dict() == wire
    bad = copy.deepcopy(doc)
    bad["status"]["replicaStatuses"]["Scheduler"] = {}
    with pytest.raises(Exception, match=r"status.replicaStatuses.Scheduler"):
        validate(bad, keep_status=True)
