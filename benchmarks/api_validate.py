"""How fast muster.api validates documents: a full PyTorchJob (converted), a TFJob and an
MPIJob (converted; the converter alone and with validation), its native TrainingJob, a
4-pod-set Workload, to_model of a stored TrainingJob, an Argo Workflow (converted) beside
the native Workflow it becomes, and the NVIDIA device plugin's time-slicing ConfigMap (three
configs, converted to a GPUSharing).

    .venv/bin/python benchmarks/api_validate.py
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from muster.api.compat.kubeflow import convert_mpijob, convert_tfjob
from muster.api.registry import to_model, validate

ROOT = Path(__file__).resolve().parents[1]


def _rate(label: str, fn, n: int = 500) -> None:
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    per = (time.perf_counter() - start) / n
    print(f"{label:<40} {per * 1e3:8.3f} ms/doc  {1 / per:8.0f} docs/s")


def main() -> None:
    pytorchjob = yaml.safe_load((ROOT / "tests/api/manifests/pytorchjob-ddp.yaml").read_text())
    native = validate(pytorchjob).obj
    workload = {
        "apiVersion": "muster.dev/v1",
        "kind": "Workload",
        "metadata": {"name": "w"},
        "spec": {
            "podSets": [
                {
                    "name": f"ps{i}",
                    "count": 8,
                    "requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"},
                }
                for i in range(4)
            ]
        },
    }
    _rate("validate PyTorchJob (convert)", lambda: validate(pytorchjob))
    tfjob = yaml.safe_load((ROOT / "tests/api/manifests/tfjob-ps.yaml").read_text())
    mpijob = yaml.safe_load((ROOT / "tests/api/manifests/mpijob.yaml").read_text())
    _rate("convert TFJob (converter only)", lambda: convert_tfjob(tfjob))
    _rate("validate TFJob (convert)", lambda: validate(tfjob))
    _rate("convert MPIJob (converter only)", lambda: convert_mpijob(mpijob))
    _rate("validate MPIJob (convert)", lambda: validate(mpijob))
    _rate("validate TrainingJob (native)", lambda: validate(native))
    _rate("validate Workload (4 pod sets)", lambda: validate(workload))
    _rate("to_model TrainingJob", lambda: to_model(native))
    argo = yaml.safe_load((ROOT / "tests/e2e/argo-workflow.yaml").read_text())
    argo_native = validate(argo).obj
    steps = len(argo_native["spec"]["tasks"])
    _rate(f"validate Argo Workflow ({steps} tasks)", lambda: validate(argo))
    _rate(f"validate Workflow ({steps} tasks, native)", lambda: validate(argo_native))
    config_map = yaml.safe_load((ROOT / "tests/api/manifests/device-plugin-time-slicing.yaml").read_text())
    _rate("validate time-slicing ConfigMap (convert)", lambda: validate(config_map))


if __name__ == "__main__":
    main()
