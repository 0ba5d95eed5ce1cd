"""A NodeProvider for your cloud, in one file (docs/capacity.md, "Your own provider").

Point a NodePool at it::

    spec:
      provider: python
      providerConfig:
        class: cloud_provider:CloudProvider      # module:Class, importable by muster up
        region: us-east-1                        # anything else is yours to read
        launchTemplate: gpu-a100

The contract (:class:`muster.providers.base.NodeProvider`) is four calls. This example speaks to
an EC2-like API through a small ``cloud`` client (inject yours; the test injects a fake): the
NodeClaim's name is the idempotency token of ``run_instances`` and a tag on the machine, so a
create repeated after a server restart returns the machine already made, and ``list`` finds
every machine Muster made (the controller gives back those whose claim is gone). A spot
interruption notice the cloud publishes is reported on the instance: Muster drains the node
and moves its jobs before the deadline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from muster.api.conditions import epoch
from muster.providers.base import Instance, Interruption, NodeRequest, ProviderError

TAG = "muster.dev/nodeclaim"


class Cloud(Protocol):
    """The few calls of a cloud SDK this provider needs (boto3's EC2 client has them all)."""

    def run_instances(self, **kwargs: Any) -> dict[str, Any]: ...

    def describe_instances(self, **kwargs: Any) -> dict[str, Any]: ...

    def terminate_instances(self, **kwargs: Any) -> dict[str, Any]: ...


class CloudProvider:
    name = "python"

    def __init__(self, config: Mapping[str, str], cloud: Cloud | None = None) -> None:
        self.config = dict(config)
        self.cloud = cloud if cloud is not None else _connect(self.config)

    def create(self, request: NodeRequest) -> Instance:
        try:
            answer = self.cloud.run_instances(
                ClientToken=request.claim,  # idempotent: the same claim never makes two machines
                LaunchTemplate={"LaunchTemplateName": self.config.get("launchTemplate", "gpu")},
                InstanceMarketOptions={"MarketType": "spot"} if request.capacity_type == "spot" else {},
                MinCount=1,
                MaxCount=1,
                TagSpecifications=[
                    {
                        "ResourceType": "instance",
                        "Tags": [{"Key": TAG, "Value": request.claim}]
                        + [{"Key": k, "Value": v} for k, v in request.labels.items()],
                    }
                ],
            )
        except Exception as exc:  # the SDK's errors: quota, capacity, permissions
            raise ProviderError(f"run_instances for {request.claim}: {exc}") from None
        return _instance(answer["Instances"][0], request.claim)

    def get(self, claim: str) -> Instance | None:
        found = self._describe([{"Name": f"tag:{TAG}", "Values": [claim]}])
        live = [i for i in found if i["State"]["Name"] not in ("terminated",)]
        return _instance(live[0], claim) if live else None

    def list(self) -> list[Instance]:
        found = self._describe([{"Name": "tag-key", "Values": [TAG]}])
        return [_instance(i, _tag(i)) for i in found if i["State"]["Name"] != "terminated"]

    def delete(self, claim: str) -> None:
        ids = [i["InstanceId"] for i in self._describe([{"Name": f"tag:{TAG}", "Values": [claim]}])]
        if ids:
            try:
                self.cloud.terminate_instances(InstanceIds=ids)
            except Exception as exc:
                raise ProviderError(f"terminate_instances {ids}: {exc}") from None

    def _describe(self, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        try:
            answer = self.cloud.describe_instances(Filters=filters)
        except Exception as exc:
            raise ProviderError(f"describe_instances: {exc}") from None
        return [i for r in answer.get("Reservations", []) for i in r.get("Instances", [])]


def _instance(raw: dict[str, Any], claim: str) -> Instance:
    state = {"pending": "pending", "running": "running", "shutting-down": "terminated"}.get(
        raw["State"]["Name"], "terminated"
    )
    notice = raw.get("SpotInterruption")  # what your interruption watcher records (EventBridge, IMDS)
    interruption = None
    if notice and epoch(notice.get("time")) is not None:
        interruption = Interruption(epoch(notice["time"]) or 0.0, notice.get("action", "terminate"))
    return Instance(
        claim=claim,
        provider_id=f"aws:///{raw.get('Placement', {}).get('AvailabilityZone', '')}/{raw['InstanceId']}",
        state=state,  # type: ignore[arg-type]
        node_name=raw.get("PrivateDnsName", ""),
        message=raw["State"]["Name"],
        interruption=interruption,
    )


def _tag(raw: dict[str, Any]) -> str:
    return next((t["Value"] for t in raw.get("Tags", []) if t["Key"] == TAG), "")


def _connect(config: Mapping[str, str]) -> Cloud:
    try:
        import boto3  # type: ignore[import-not-found]
    except ImportError:
        raise ProviderError("this provider needs boto3 (pip install boto3) or a cloud client") from None
    return boto3.client("ec2", region_name=config.get("region"))
