from __future__ import annotations

import pytest

from muster.api.podspec import PodSpec
from muster.api.quantity import parse_quantity
from muster.api.registry import validate
from muster.api.resources import GPUDemand, gpu_demand, pod_requests
from tests.api.helpers import errors_of, obj


def _pod(*containers, **spec):
    return obj("Pod", spec={"containers": list(containers), **spec})


def _c(name="main", **fields):
    return {"name": name, "command": ["python", "train.py"], **fields}


def test_limits_without_requests_are_copied_to_requests():
    wire = validate(
        _pod(_c(resources={"limits": {"nvidia.com/gpu": 1, "memory": "16Gi"}, "requests": {"cpu": "500m"}}))
    ).obj
    res = wire["spec"]["containers"][0]["resources"]
    assert res["requests"] == {"cpu": "500m", "nvidia.com/gpu": "1", "memory": "16Gi"}


def test_quantities_are_stored_canonically():
    wire = validate(
        _pod(_c(resources={"requests": {"cpu": 1.5, "memory": "1024Mi", "nvidia.com/gpu": "0.25"}}))
    ).obj
    assert wire["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "1500m",
        "memory": "1Gi",
        "nvidia.com/gpu": "250m",
    }


def test_bad_quantity_names_the_full_path():
    doc = obj(
        "TrainingJob",
        spec={
            "replicaSpecs": {
                "Worker": {
                    "template": {"spec": {"containers": [_c(resources={"limits": {"memory": "16GG"}})]}}
                }
            }
        },
    )
    (err,) = errors_of(doc)
    assert err.startswith(
        "spec.replicaSpecs.Worker.template.spec.containers[0].resources.limits.memory: '16GG' is not a "
        "quantity"
    )


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        (
            {"limits": {"nvidia.com/gpu": "1500m"}},
            "spec.containers[0].resources.limits[nvidia.com/gpu]: must be a whole number of GPUs or a share "
            "of one "
            "GPU below 1 (e.g. 500m = half a GPU), got '1500m'",
        ),
        (
            {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
            "spec.containers[0].resources.requests.cpu: must be <= limits[cpu] (1), got '2'",
        ),
        (
            {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}},
            "spec.containers[0].resources.requests[nvidia.com/gpu]: must equal limits[nvidia.com/gpu] (2) "
            "for an "
            "extended resource, got '1'",
        ),
        (
            {"requests": {"cpu": "-1"}},
            "spec.containers[0].resources.requests.cpu: must not be negative, got '-1'",
        ),
        (
            {"requests": {"gpu": "1"}},
            "spec.containers[0].resources.requests.gpu: unknown resource 'gpu': extended resources need a "
            "domain "
            "prefix (e.g. nvidia.com/gpu); did you mean nvidia.com/gpu?",
        ),
    ],
)
def test_resource_rules(resources, expected):
    assert errors_of(_pod(_c(resources=resources))) == [expected]


def test_gpu_and_gpu_memory_are_exclusive_and_shares_sum_per_pod():
    (err,) = errors_of(
        _pod(_c(resources={"requests": {"nvidia.com/gpu": "1", "muster.dev/gpu-memory": "20Gi"}}))
    )
    assert err.startswith(
        "spec.containers[0].resources.requests[muster.dev/gpu-memory]: may not be requested "
        "together with nvidia.com/gpu"
    )
    three_halves = [_c(f"c{i}", resources={"requests": {"nvidia.com/gpu": "500m"}}) for i in range(3)]
    assert errors_of(_pod(*three_halves)) == [
        "spec.containers: the pod's total nvidia.com/gpu must be a whole number of GPUs or a share of one "
        "GPU "
        "below 1 (e.g. 500m = half a GPU), got '1500m'"
    ]
    validate(_pod(*three_halves[:2]))  # two halves make one whole GPU


def test_a_container_without_command_is_accepted_with_a_warning():
    validated = validate(_pod({"name": "main", "image": "pytorch", "args": ["train.py"]}))
    assert validated.obj is not None
    assert validated.obj["spec"]["containers"][0]["args"] == ["train.py"]
    assert validated.warnings == [
        "spec.containers[0].command: not set: on Kubernetes the entrypoint of image 'pytorch' runs; the "
        "local and Ray runtimes run no images and fail a pod without a command (set command to what the "
        "image's entrypoint runs, e.g. command: [python, train.py] (docker inspect --format "
        "'{{.Config.Entrypoint}} {{.Config.Cmd}}' IMAGE prints it))"
    ]


def test_the_failure_of_a_container_without_command_is_recognised_with_its_image():
    from muster.api.podspec import entrypoint_clause, missing_command

    for image in ("pytorch/pytorch:2.3.0-cuda12.1", "it's", None):
        message = f"cannot start: spec.containers[1].command: must be set: {entrypoint_clause(image)}, but"
        assert missing_command(message) == ("spec.containers[1]", image)
    assert missing_command("cannot start: spec.containers[0].workingDir: must be an absolute path") is None


def test_names_mounts_and_volume_sources():
    doc = _pod(
        _c("a", volumeMounts=[{"name": "data", "mountPath": "/data"}, {"name": "nope", "mountPath": "/x"}]),
        _c("a"),
        volumes=[{"name": "data", "emptyDir": {}, "hostPath": {"path": "/d"}}, {"name": "data"}],
    )
    assert errors_of(doc) == [
        "spec.containers[1].name: duplicate name, got 'a'",
        "spec.volumes[1].name: duplicate name, got 'data'",
        "spec.containers[0].volumeMounts[1].name: no volume named 'nope' in spec.volumes",
        "spec.volumes[0]: must have exactly one volume source, got emptyDir, hostPath",
    ]


def test_a_volume_without_source_is_an_empty_dir():
    wire = validate(_pod(_c(), volumes=[{"name": "scratch"}])).obj
    assert wire["spec"]["volumes"] == [{"name": "scratch", "emptyDir": {}}]


def test_unknown_field_is_an_error_and_unhonoured_fields_warn():
    (err,) = errors_of(_pod(_c(commnd=["x"])))
    assert err.startswith("spec.containers[0].commnd: unknown field")
    warnings = validate(
        _pod(
            _c(
                livenessProbe={"exec": {"command": ["true"]}},
                env=[{"name": "K", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            ),
            imagePullSecrets=[{"name": "r"}],
            volumes=[{"name": "cfg", "configMap": {"name": "c"}}],
        )
    ).warnings
    assert [w.split(":")[0] for w in warnings] == [
        "spec.imagePullSecrets",
        "spec.containers[0].livenessProbe",
        "spec.containers[0].env[0].valueFrom.secretKeyRef",
        "spec.volumes[0].configMap",
    ]
    assert all("accepted but not honoured on every runtime" in w for w in warnings)


def test_env_value_and_value_from_are_exclusive():
    (err,) = errors_of(
        _pod(_c(env=[{"name": "A", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]))
    )
    assert err == "spec.containers[0].env[0].valueFrom: may not be set together with value"


def _spec(containers, init=()):
    return PodSpec.model_validate(
        {
            "containers": [_c(f"c{i}", resources={"requests": r}) for i, r in enumerate(containers)],
            "initContainers": [
                _c(f"i{i}", resources={"requests": r}, **({"restartPolicy": "Always"} if side else {}))
                for i, (r, side) in enumerate(init)
            ],
        }
    )


def test_pod_requests_sum_containers_and_take_the_init_peak():
    spec = _spec([{"cpu": "1", "memory": "1Gi"}, {"cpu": "500m"}], init=[({"cpu": "4"}, False)])
    assert pod_requests(spec) == {"cpu": parse_quantity("4"), "memory": parse_quantity("1Gi")}
    small_init = _spec([{"cpu": "1"}], init=[({"cpu": "500m", "memory": "2Gi"}, False)])
    assert pod_requests(small_init) == {"cpu": parse_quantity("1"), "memory": parse_quantity("2Gi")}


def test_pod_requests_count_sidecars_for_the_whole_life():
    # A sidecar (init container with restartPolicy Always) runs beside the containers and
    # beside every init container started after it.
    spec = _spec([{"cpu": "1"}], init=[({"cpu": "1"}, True), ({"cpu": "2"}, False)])
    assert pod_requests(spec)["cpu"] == parse_quantity("3")
    spec = _spec([{"cpu": "3"}], init=[({"cpu": "1"}, True), ({"cpu": "2"}, False)])
    assert pod_requests(spec)["cpu"] == parse_quantity("4")


@pytest.mark.parametrize(
    ("requests", "demand"),
    [
        ({}, GPUDemand(0, 0, 0)),
        ({"nvidia.com/gpu": "2"}, GPUDemand(2, 1000, 0)),
        ({"nvidia.com/gpu": "250m"}, GPUDemand(1, 250, 0)),
        ({"muster.dev/gpu-memory": "20Gi"}, GPUDemand(1, 1000, 20 * 2**30)),
    ],
)
def test_gpu_demand(requests, demand):
    assert gpu_demand({k: parse_quantity(v) for k, v in requests.items()}) == demand
    assert gpu_demand(requests) == demand
