"""Kubeflow TFJob and MPIJob (kubeflow.org/v1) converted to TrainingJob."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from muster.api.compat import IGNORED_FIELDS_ANNOTATION
from muster.api.registry import to_model, validate
from muster.api.trainingjob import TrainingJob
from tests.api.helpers import errors_of

MANIFESTS = Path(__file__).parent.parent / "manifests"


def _load(name: str) -> dict:
    return yaml.safe_load((MANIFESTS / name).read_text())


class TestTFJob:
    def test_converts_every_replica_type_with_the_tfjob_defaults(self) -> None:
        result = validate(_load("tfjob-ps.yaml"))
        job = result.obj
        assert (job["apiVersion"], job["kind"]) == ("muster.dev/v1", "TrainingJob")
        spec = job["spec"]
        assert spec["framework"] == "TensorFlow"
        assert spec["queueName"] == "team-ranking"  # the Kueue label
        assert spec["successPolicy"] == "AllWorkers"
        replicas = spec["replicaSpecs"]
        assert sorted(replicas) == ["Chief", "Evaluator", "PS", "Worker"]  # "worker" named as TFJob does
        assert {t: (r["replicas"], r["restartPolicy"]) for t, r in replicas.items()} == {
            "Chief": (1, "Never"),  # unset: the TFJob default
            "Worker": (2, "OnFailure"),
            "PS": (1, "Never"),
            "Evaluator": (1, "Never"),
        }
        assert spec["runPolicy"]["cleanPodPolicy"] == "None" and spec["runPolicy"]["backoffLimit"] == 2
        kept = json.loads(job["metadata"]["annotations"][IGNORED_FIELDS_ANNOTATION])
        assert kept == {
            "spec.enableDynamicWorker": False,
            "spec.runPolicy.schedulingPolicy.minResources": {"cpu": "8"},
        }
        assert [w.split(":")[0] for w in result.warnings] == [
            "spec.enableDynamicWorker",
            "spec.runPolicy.schedulingPolicy.minResources",
        ]
        model = to_model(job)
        assert isinstance(model, TrainingJob) and model.spec.total_replicas() == 5

    def test_errors_name_the_paths_the_user_wrote(self) -> None:
        doc = _load("tfjob-ps.yaml")
        doc["spec"]["tfReplicaSpecs"]["Chief"]["replicas"] = 2
        doc["spec"]["tfReplicaSpecs"]["Launcher"] = copy.deepcopy(doc["spec"]["tfReplicaSpecs"]["PS"])
        assert errors_of(doc) == [
            "spec.tfReplicaSpecs.Launcher: is not a TensorFlow replica type (replica types are Chief (or "
            "Master; one pod), Worker, PS and Evaluator)",
            "spec.tfReplicaSpecs.Chief.replicas: must be 1, got 2",
        ]

    def test_chief_and_master_together_and_no_trainer_are_refused(self) -> None:
        doc = _load("tfjob-ps.yaml")
        doc["spec"]["tfReplicaSpecs"]["Master"] = copy.deepcopy(doc["spec"]["tfReplicaSpecs"]["Chief"])
        assert errors_of(doc) == [
            "spec.tfReplicaSpecs.Master: may not be set together with Chief (they are the same)"
        ]
        only_ps = _load("tfjob-ps.yaml")
        for rtype in ("Chief", "worker", "Evaluator"):
            del only_ps["spec"]["tfReplicaSpecs"][rtype]
        (error,) = errors_of(only_ps)
        assert error.startswith("spec.tfReplicaSpecs: must have a Chief or a Master or a Worker replica spec")

    def test_pytorch_fields_are_refused_in_a_tensorflow_job(self) -> None:
        doc = _load("tfjob-ps.yaml")
        doc["spec"]["nprocPerNode"] = "2"
        assert errors_of(doc) == ["spec.nprocPerNode: is for framework PyTorch only"]


class TestMPIJob:
    def test_converts_launcher_and_workers_with_a_warning_per_unhonoured_field(self) -> None:
        result = validate(_load("mpijob.yaml"))
        spec = result.obj["spec"]
        assert spec["framework"] == "MPI" and spec["slotsPerWorker"] == 2
        assert {t: (r["replicas"], r["restartPolicy"]) for t, r in spec["replicaSpecs"].items()} == {
            "Launcher": (1, "Never"),
            "Worker": (2, "Never"),
        }
        assert spec["runPolicy"] == {"backoffLimit": 1, "cleanPodPolicy": "Running", "suspend": False}
        assert "mainContainer" not in spec
        assert result.warnings == [
            "spec.mainContainer: not needed: every container of the Launcher gets the hostfile and MPI "
            "variables, got 'mpi'",
            "spec.cleanPodPolicy: deprecated: used as spec.runPolicy.cleanPodPolicy",
            "spec.slotsPerWorker: is more than the 1 GPU(s) each Worker asks for: the hostfile lists 2 slots "
            "per Worker, and the ranks beyond its GPUs share them (Muster binds GPUs to pods, not to ranks), "
            "got 2 (set slotsPerWorker to the GPUs per Worker (1) for one rank per GPU)",
        ]

    def test_slots_within_the_gpus_or_without_gpus_are_not_warned(self) -> None:
        doc = _load("mpijob.yaml")
        doc["spec"]["slotsPerWorker"] = 1
        assert not [w for w in validate(doc).warnings if "slotsPerWorker" in w]
        del doc["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]
        doc["spec"]["slotsPerWorker"] = 8  # CPU ranks
        assert not [w for w in validate(doc).warnings if "slotsPerWorker" in w]

    def test_a_launcher_is_required_and_is_one_pod(self) -> None:
        doc = _load("mpijob.yaml")
        doc["spec"]["mpiReplicaSpecs"]["Launcher"]["replicas"] = 2
        assert errors_of(doc) == ["spec.mpiReplicaSpecs.Launcher.replicas: must be 1, got 2"]
        del doc["spec"]["mpiReplicaSpecs"]["Launcher"]
        assert errors_of(doc) == [
            "spec.mpiReplicaSpecs: must have a Launcher replica spec (replica types are Launcher (one pod) "
            "and Worker)"
        ]

    @pytest.mark.parametrize("bad", [0, "two"])
    def test_bad_slots_name_the_field(self, bad: object) -> None:
        doc = _load("mpijob.yaml")
        doc["spec"]["slotsPerWorker"] = bad
        (error,) = errors_of(doc)
        assert error.startswith("spec.slotsPerWorker: ")
