"""Serving kinds to InferenceService: KServe ``serving.kserve.io/v1beta1 InferenceService`` and
KubeAI ``kubeai.org/v1 Model`` (reference/serving.md, reference/workloads.md §6).

KServe, field for field:

======================================================  =========================================
KServe                                                  InferenceService (muster.dev/v1)
======================================================  =========================================
spec.predictor (its PodSpec fields)                     spec.predictor
spec.predictor.containers[0].ports[0].containerPort     spec.predictor.port
spec.predictor.containers[0].readinessProbe.httpGet     spec.predictor.readinessPath (and port)
spec.predictor.model {modelFormat, storageUri, args}    a container running the format's server
spec.predictor.{min,max}Replicas, scaleTarget,          spec.{min,max}Replicas, scaleTarget,
scaleMetric, containerConcurrency,                      scaleMetric, containerConcurrency,
canaryTrafficPercent, timeout                           canaryTrafficPercent, timeoutSeconds
spec.predictor.priorityClassName                        spec.priorityClassName
metadata.annotations autoscaling.knative.dev/...        the autoscaler settings of the same name
label kueue.x-k8s.io/queue-name                         spec.queueName
anything else (transformer, explainer, logger,          kept in the ignored-fields annotation,
batcher, cpu/memory scaleMetric, ...)                   one warning each
======================================================  =========================================

``maxReplicas: 0`` (KServe: unlimited) becomes no bound given (Muster's default, minReplicas or
1), with a warning: a service should not grow without limit on GPUs.

KubeAI ``Model``: ``engine`` and ``url`` become the container's command (vLLM's OpenAI server,
Ollama, Infinity), ``resourceProfile: <profile>:<count>`` its resources (GPUs for a GPU
profile), ``targetRequests`` the concurrency target at 100% utilisation (KubeAI's formula),
``minReplicas`` (default 0), ``maxReplicas``, ``scaleDownDelaySeconds`` (default 30),
``loadBalancing`` and ``priorityClassName`` as they are; ``args``, ``env`` and ``image`` go to
the container. ``cacheProfile``, ``adapters``, ``files``, ``features`` and ``owner`` are kept
and warned about.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from muster.api.compat.base import Conversion, Converter, mapping_at, native_copy
from muster.api.compat.jobs import PRIORITY_LABEL, QUEUE_LABEL
from muster.api.errors import FieldError, InvalidObject, child_path

__all__ = ["CONVERTERS", "convert_kserve", "convert_kubeai_model"]

KNATIVE = "autoscaling.knative.dev/"
# KServe component fields that are spec fields of an InferenceService.
_KSERVE_SCALING = {
    "minReplicas": "minReplicas",
    "maxReplicas": "maxReplicas",
    "scaleTarget": "scaleTarget",
    "scaleMetric": "scaleMetric",
    "containerConcurrency": "containerConcurrency",
    "canaryTrafficPercent": "canaryTrafficPercent",
    "timeout": "timeoutSeconds",
}
# Knative annotations Muster's autoscaler honours, and how their values read.
_KNATIVE_KEYS = {
    "min-scale": ("minReplicas", int),
    "max-scale": ("maxReplicas", int),
    "target": ("scaleTarget", float),
    "metric": ("scaleMetric", str),
    "target-utilization-percentage": ("targetUtilizationPercentage", float),
    "window": ("stableWindowSeconds", "duration"),
    "panic-window-percentage": ("panicWindowPercentage", float),
    "panic-threshold-percentage": ("panicThresholdPercentage", float),
    "scale-down-delay": ("scaleDownDelaySeconds", "duration"),
}
# KServe model formats -> the module of KServe's own Python server for it (pip install kserve's
# servers); huggingface runs vLLM's OpenAI server, as KServe's Hugging Face runtime does.
_KSERVE_SERVERS = {
    "sklearn": "sklearnserver",
    "xgboost": "xgbserver",
    "lightgbm": "lgbserver",
    "pmml": "pmmlserver",
    "paddle": "paddleserver",
    "pytorch": "torchserve",
}


def convert_kserve(doc: Mapping[str, Any]) -> Conversion:
    """A KServe InferenceService as Muster's (see the table in the module docstring)."""
    native = native_copy(doc, "InferenceService")
    spec = mapping_at(native, "spec", "spec")
    predictor = copy.deepcopy(mapping_at(spec, "predictor", "spec.predictor"))
    conversion = Conversion(doc=native)
    paths: list[tuple[str, str]] = [("spec.predictor", "spec.predictor")]
    out: dict[str, Any] = {}
    for kserve, ours in _KSERVE_SCALING.items():
        if kserve in predictor:
            out[ours] = predictor.pop(kserve)
            paths.append((f"spec.{ours}", f"spec.predictor.{kserve}"))
    if out.get("maxReplicas") == 0:
        del out["maxReplicas"]
        conversion.warnings.append(
            FieldError(
                "spec.predictor.maxReplicas",
                "0 (unlimited) is not honoured: the service grows to at most minReplicas (or 1); "
                "set maxReplicas to allow more",
            )
        )
    if out.get("scaleMetric") in ("cpu", "memory"):
        conversion.keep("spec.predictor.scaleMetric", out.pop("scaleMetric"))
    if "priorityClassName" in predictor:
        out["priorityClassName"] = predictor.pop("priorityClassName")
        paths.append(("spec.priorityClassName", "spec.predictor.priorityClassName"))
    _knative_annotations(native, out, paths)
    if "model" in predictor:
        predictor.setdefault("containers", [])
        model = predictor.pop("model")
        if predictor["containers"]:
            conversion.keep("spec.predictor.model", model)
        else:
            predictor["containers"] = [_kserve_model_container(model, native["metadata"].get("name", ""))]
    containers = predictor.get("containers")
    if isinstance(containers, list) and containers and isinstance(containers[0], dict):
        _serving_port(predictor, containers[0], conversion, "spec.predictor.containers[0]")
    for key in sorted(k for k in spec if k != "predictor"):
        conversion.keep(child_path("spec", key), spec[key])
    out["predictor"] = predictor
    native["spec"] = out
    _queue_label(native, paths)
    conversion.paths = tuple(paths)
    return conversion


def convert_kubeai_model(doc: Mapping[str, Any]) -> Conversion:
    """A KubeAI Model as an InferenceService (see the module docstring)."""
    native = native_copy(doc, "InferenceService")
    spec = copy.deepcopy(mapping_at(native, "spec", "spec"))
    conversion = Conversion(doc=native)
    name = str((native.get("metadata") or {}).get("name") or "")
    for key in ("url", "engine"):
        if not spec.get(key):
            raise InvalidObject([FieldError(f"spec.{key}", "required field is missing")])
    container, readiness, volumes = _engine_container(spec, name)
    predictor: dict[str, Any] = {"containers": [container], "readinessPath": readiness}
    if volumes:
        predictor["volumes"] = volumes
    out: dict[str, Any] = {
        "predictor": predictor,
        "minReplicas": spec.pop("minReplicas", 0),
        "scaleMetric": "concurrency",
        "scaleTarget": spec.pop("targetRequests", 100),
        # KubeAI's desired = ceil(average in-flight / targetRequests): no utilisation factor
        "targetUtilizationPercentage": 100,
        "scaleDownDelaySeconds": spec.pop("scaleDownDelaySeconds", 30),
    }
    paths = [
        ("spec.minReplicas", "spec.minReplicas"),
        ("spec.scaleTarget", "spec.targetRequests"),
        ("spec.scaleDownDelaySeconds", "spec.scaleDownDelaySeconds"),
        ("spec.predictor.containers[0].resources", "spec.resourceProfile"),
        ("spec.predictor.containers[0].env", "spec.env"),
        ("spec.predictor.containers[0].args", "spec.args"),
    ]
    if "maxReplicas" in spec:
        out["maxReplicas"] = spec.pop("maxReplicas")
        paths.append(("spec.maxReplicas", "spec.maxReplicas"))
    else:
        conversion.warnings.append(
            FieldError(
                "spec.maxReplicas",
                "unset: KubeAI scales without limit, Muster to at most minReplicas (or 1); "
                "set it to allow more",
            )
        )
    replicas = spec.pop("replicas", None)
    if spec.pop("autoscalingDisabled", False):
        fixed = replicas if replicas is not None else max(1, out["minReplicas"])
        out["minReplicas"] = out["maxReplicas"] = fixed
    elif replicas is not None:
        conversion.warnings.append(
            FieldError("spec.replicas", "ignored: the autoscaler sets the replica count")
        )
    for key in ("loadBalancing", "priorityClassName"):
        if key in spec:
            out[key] = spec.pop(key)
            paths.append((f"spec.{key}", f"spec.{key}"))
    for key in sorted(spec):
        conversion.keep(child_path("spec", key), spec[key])
    native["spec"] = out
    _queue_label(native, paths)
    conversion.paths = tuple(paths)
    return conversion


# -- KServe pieces -----------------------------------------------------------------------------


def _knative_annotations(native: dict[str, Any], out: dict[str, Any], paths: list[tuple[str, str]]) -> None:
    """Knative autoscaling annotations into the settings they name (the component's own fields win)."""
    annotations = (native.get("metadata") or {}).get("annotations") or {}
    for suffix, (ours, read) in _KNATIVE_KEYS.items():
        key = KNATIVE + suffix
        if key not in annotations or ours in out:
            continue
        where = f"metadata.annotations[{key}]"
        raw = str(annotations[key])
        try:
            value: Any = _seconds(raw) if read == "duration" else read(raw)  # type: ignore[operator]
        except ValueError:
            raise InvalidObject(
                [
                    FieldError(
                        where,
                        "must be a number" + (" or a duration like 60s" if read == "duration" else ""),
                        raw,
                    )
                ]
            ) from None
        if isinstance(value, float) and value.is_integer() and ours != "scaleTarget":
            value = int(value)
        out[ours] = value
        paths.append((f"spec.{ours}", where))


def _seconds(text: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)?", text.strip())
    if not m:
        raise ValueError(text)
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]
    return max(0, round(float(m.group(1)) * scale))


def _kserve_model_container(model: Any, name: str) -> dict[str, Any]:
    model = model if isinstance(model, dict) else {}
    fmt = str((model.get("modelFormat") or {}).get("name") or "").lower()
    uri = str(model.get("storageUri") or "")
    container: dict[str, Any] = {"name": "kserve-container"}
    if fmt in ("huggingface", "vllm"):
        target = uri.removeprefix("hf://") if uri.startswith("hf://") else uri
        container["command"] = ["python", "-m", "vllm.entrypoints.openai.api_server"]
        container["args"] = [f"--model={target}", f"--served-model-name={name}", "--port=$(PORT)"]
    else:
        server = _KSERVE_SERVERS.get(fmt, f"{fmt}server" if fmt else "kserve")
        container["command"] = ["python", "-m", server]
        container["args"] = [f"--model_name={name}", f"--model_dir={uri}", "--http_port=$(PORT)"]
    container["args"] += [str(a) for a in model.get("args") or []]
    for key in ("env", "resources", "image", "volumeMounts"):
        if key in model:
            container[key] = model[key]
    return container


def _serving_port(
    predictor: dict[str, Any], first: dict[str, Any], conversion: Conversion, path: str
) -> None:
    """The port and readiness path from the server container's ports and readinessProbe."""
    ports = first.get("ports")
    if isinstance(ports, list) and ports and isinstance(ports[0], dict) and ports[0].get("containerPort"):
        predictor.setdefault("port", ports[0]["containerPort"])
    probe = first.get("readinessProbe")
    get = probe.get("httpGet") if isinstance(probe, dict) else None
    if isinstance(get, dict) and get.get("path"):
        predictor.setdefault("readinessPath", get["path"])
        probe_port = get.get("port")
        if isinstance(probe_port, int):
            predictor.setdefault("port", probe_port)
        del first["readinessProbe"]  # honoured: the gateway probes that path
        rest = {k: v for k, v in probe.items() if k != "httpGet"}
        if rest:
            conversion.keep(f"{path}.readinessProbe", rest)


# -- KubeAI pieces -----------------------------------------------------------------------------


def _engine_container(spec: dict[str, Any], name: str) -> tuple[dict[str, Any], str, list[dict[str, Any]]]:
    """The container running ``spec.engine`` on ``spec.url``, its readiness path and volumes."""
    engine = str(spec.pop("engine"))
    url = str(spec.pop("url"))
    scheme, _, rest = url.partition("://")
    container: dict[str, Any] = {"name": "server"}
    mounts: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    if scheme == "pvc":
        claim, _, sub = rest.partition("/")
        target = "/model" + (f"/{sub}" if sub else "")
        mounts.append({"name": "model", "mountPath": "/model"})
        volumes.append({"name": "model", "persistentVolumeClaim": {"claimName": claim}})
    elif scheme in ("hf", "ollama"):
        target = rest
    else:
        target = url  # s3://, gs://, oss://: the engine reads it itself
    readiness = "/health"
    if engine == "VLLM":
        container["command"] = ["python", "-m", "vllm.entrypoints.openai.api_server"]
        container["args"] = [f"--model={target}", f"--served-model-name={name}", "--port=$(PORT)"]
    elif engine == "OLlama":
        container["command"] = ["sh", "-c", f"ollama serve & sleep 1; ollama pull {target} && wait"]
        container["args"] = []
        container["env"] = [{"name": "OLLAMA_HOST", "value": "0.0.0.0:$(PORT)"}]
        readiness = "/"
    elif engine == "Infinity":
        container["command"] = ["infinity_emb", "v2"]
        container["args"] = [f"--model-id={target}", f"--served-model-name={name}", "--port=$(PORT)"]
    elif engine == "FasterWhisper":
        container["command"] = ["uvicorn", "--factory", "faster_whisper_server.main:create_app"]
        container["args"] = ["--host=0.0.0.0", "--port=$(PORT)"]
        container["env"] = [{"name": "WHISPER__MODEL", "value": target}]
    else:
        raise InvalidObject(
            [FieldError("spec.engine", "must be one of OLlama, VLLM, FasterWhisper or Infinity", engine)]
        )
    container["args"] += [str(a) for a in spec.pop("args", None) or []]
    env = spec.pop("env", None)
    if isinstance(env, dict):
        container.setdefault("env", []).extend({"name": k, "value": str(v)} for k, v in env.items())
    if "image" in spec:
        container["image"] = spec.pop("image")
    profile = spec.pop("resourceProfile", None)
    if profile is not None:
        container["resources"] = _profile_resources(str(profile))
    if mounts:
        container["volumeMounts"] = mounts
    return container, readiness, volumes


def _profile_resources(profile: str) -> dict[str, Any]:
    """``nvidia-gpu-l4:1`` -> one whole GPU; ``cpu:2`` -> 2 CPUs. The profile's own image and node
    selectors live in KubeAI's system config, which Muster does not have: any GPU model may be used."""
    name, _, count = profile.partition(":")
    amount = count or "1"
    if not re.fullmatch(r"\d+", amount):
        raise InvalidObject(
            [FieldError("spec.resourceProfile", "must be <profile>:<count>", profile, "e.g. nvidia-gpu-l4:1")]
        )
    if "gpu" in name.lower():
        return {"limits": {"nvidia.com/gpu": amount}}
    return {"requests": {"cpu": amount}}


# -- shared --------------------------------------------------------------------------------------


def _queue_label(native: dict[str, Any], paths: list[tuple[str, str]]) -> None:
    labels = (native.get("metadata") or {}).get("labels") or {}
    spec = native["spec"]
    if labels.get(QUEUE_LABEL) and "queueName" not in spec:
        spec["queueName"] = labels[QUEUE_LABEL]
        paths.append(("spec.queueName", f"metadata.labels[{QUEUE_LABEL}]"))
    if labels.get(PRIORITY_LABEL) and "priorityClassName" not in spec:
        spec["priorityClassName"] = labels[PRIORITY_LABEL]
        paths.append(("spec.priorityClassName", f"metadata.labels[{PRIORITY_LABEL}]"))


CONVERTERS: dict[tuple[str, str], Converter] = {
    ("serving.kserve.io/v1beta1", "InferenceService"): convert_kserve,
    ("kubeai.org/v1", "Model"): convert_kubeai_model,
}
