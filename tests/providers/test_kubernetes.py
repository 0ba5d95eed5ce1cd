"""The kubernetes provider: a ProvisioningRequest (and its PodTemplate) per claim, read back as
the machine's state from its conditions, deleted with it. The cluster autoscaler is played by
the test, which sets the request's Provisioned condition as the autoscaler does."""

from __future__ import annotations

from pathlib import Path

import pytest

from muster.providers.base import NodeRequest
from muster.providers.kubernetes import PLURAL, KubernetesProvider
from muster.runtime.base import NodeTaint
from muster.runtime.kubernetes.config import KubernetesConfig
from tests.providers.fake_kube import fake_kube

pytest.importorskip("kubernetes")

REQUEST = NodeRequest(
    "a100-abcde",
    "a100",
    "on-demand",
    32.0,
    gpus=8,
    gpu_model="A100",
    gpu_memory_bytes=80 << 30,
    cpu="96",
    memory="1Ti",
    labels={"muster.dev/nodepool": "a100", "cloud.example.com/node-group": "a100"},
    taints=(NodeTaint("nvidia.com/gpu", "present"),),
)


def test_a_claim_is_a_provisioning_request_until_the_autoscaler_provisions_it(tmp_path: Path):
    with fake_kube(tmp_path) as (kube, config):
        provider = KubernetesProvider(
            {"namespace": "ml"}, KubernetesConfig(kubeconfig=config, leader_election=False)
        )
        made = provider.create(REQUEST)
        assert (made.claim, made.state) == ("a100-abcde", "pending")
        assert provider.create(REQUEST).claim == made.claim, "a repeated create finds the same request"
        obj = kube.objects[(PLURAL, "ml", "a100-abcde")]
        assert obj["spec"]["provisioningClassName"] == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
        assert obj["spec"]["podSets"] == [{"podTemplateRef": {"name": "muster-a100-abcde"}, "count": 1}]
        template = kube.objects[("podtemplates", "ml", "muster-a100-abcde")]["template"]["spec"]
        assert template["nodeSelector"] == {"cloud.example.com/node-group": "a100"}
        assert template["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "8"
        assert template["tolerations"][0]["key"] == "nvidia.com/gpu"
        obj["status"] = {"conditions": [{"type": "Provisioned", "status": "True", "reason": "Provisioned"}]}
        assert provider.get("a100-abcde").state == "running"
        obj["status"] = {
            "conditions": [{"type": "Failed", "status": "True", "reason": "OutOfStock", "message": "no A100"}]
        }
        failed = provider.get("a100-abcde")
        assert failed.state == "failed" and failed.message == "OutOfStock: no A100"
        assert [i.claim for i in provider.list()] == ["a100-abcde"]
        provider.delete("a100-abcde")
        provider.delete("a100-abcde")
        assert provider.get("a100-abcde") is None and provider.list() == [] and kube.objects == {}
        provider.close()
