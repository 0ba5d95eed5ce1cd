"""PodTemplateSpec, PodSpec and Container: the common Kubernetes fields, checked as Kubernetes
checks them.

Fields Kubernetes defines that Muster cannot honour on every runtime (image pull secrets,
probes, security contexts, ConfigMap and Secret volumes, ...) are accepted and each one a
document sets produces a warning naming its path (see ``muster.api.common.unhonoured``).
Any other unknown field is an error.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Literal

from pydantic import Field, model_validator

from muster.api.base import MusterModel
from muster.api.common import (
    GPU,
    GPU_MEMORY,
    Affinity,
    DNSLabel,
    Labels,
    NonNegativeQuantity,
    ResourceList,
    Toleration,
    amount_errors,
    unhonoured,
)
from muster.api.errors import FieldError, child_path
from muster.api.quantity import Quantity
from muster.api.resources import check_gpu_quantity, pod_requests

__all__ = [
    "NO_COMMAND_HINT",
    "Container",
    "ContainerPort",
    "EmptyDirVolumeSource",
    "EnvFromSource",
    "EnvVar",
    "EnvVarSource",
    "HostPathVolumeSource",
    "PersistentVolumeClaimVolumeSource",
    "PodSpec",
    "PodTemplateSpec",
    "ResourceRequirements",
    "TemplateMetadata",
    "Volume",
    "VolumeMount",
    "entrypoint_clause",
    "missing_command",
]

_NO_CONFIG_OBJECTS = "Muster has no ConfigMap or Secret objects"
_NO_IMAGES = "the local runtime runs commands on the host and pulls no images"
# How to give a container without a command one (the apply warning, the runtime's LaunchError
# and `muster why` all say it).
NO_COMMAND_HINT = (
    "set command to what the image's entrypoint runs, e.g. command: [python, train.py] "
    "(docker inspect --format '{{.Config.Entrypoint}} {{.Config.Cmd}}' IMAGE prints it)"
)


def entrypoint_clause(image: str | None) -> str:
    """What would have run instead of a missing command: the image's entrypoint, by name."""
    if not image:
        return _NO_IMAGE_CLAUSE
    return f"on Kubernetes the entrypoint of image {image!r} runs"


def missing_command(message: str) -> tuple[str, str | None] | None:
    """(container path, image or None) when ``message`` (a pod's failure) says a runtime could
    not start a container for want of a command (the LaunchError of :func:`entrypoint_clause`)."""
    found = _MISSING_COMMAND.search(message)
    if found is None:
        return None
    image = found.group("image")
    return found.group("path"), ast.literal_eval(image) if image else None


_NO_IMAGE_CLAUSE = "no image is set either, so there is no entrypoint to run"
_MISSING_COMMAND = re.compile(
    r"(?P<path>spec\.(?:init)?[cC]ontainers\[\d+\])\.command: must be set: "
    r"(?:on Kubernetes the entrypoint of image (?P<image>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\") runs"
    + "|"
    + re.escape(_NO_IMAGE_CLAUSE)
    + ")"
)

_NO_PROBES = "the local runtime does not run probes"


# -- containers ----------------------------------------------------------------------------


class ObjectFieldSelector(MusterModel):
    api_version: str | None = Field(default=None, description="Version of the schema fieldPath is in.")
    field_path: str = Field(description="Field of the pod to read, e.g. metadata.name.")


class ResourceFieldSelector(MusterModel):
    container_name: str | None = Field(default=None, description="Container whose resources to read.")
    resource: str = Field(description="Resource to read, e.g. limits.cpu.")
    divisor: NonNegativeQuantity | None = Field(default=None, description="Unit of the value.")


class EnvVarSource(MusterModel):
    field_ref: ObjectFieldSelector | None = Field(default=None, description="A field of the pod.")
    resource_field_ref: ResourceFieldSelector | None = Field(
        default=None, description="A resource request or limit of a container."
    )
    config_map_key_ref: dict[str, Any] | None = unhonoured("A key of a ConfigMap.", _NO_CONFIG_OBJECTS)
    secret_key_ref: dict[str, Any] | None = unhonoured("A key of a Secret.", _NO_CONFIG_OBJECTS)


class EnvVar(MusterModel):
    name: str = Field(min_length=1, description="Variable name.")
    value: str | None = Field(default=None, description="Literal value; $(VAR) refers to earlier variables.")
    value_from: EnvVarSource | None = Field(default=None, description="Where the value comes from instead.")

    def field_rules(self, path: str) -> list[FieldError]:
        if self.value is not None and self.value_from is not None:
            return [FieldError(child_path(path, "valueFrom"), "may not be set together with value")]
        return []


class EnvFromSource(MusterModel):
    prefix: str | None = Field(default=None, description="Prefix added to every variable name.")
    config_map_ref: dict[str, Any] | None = unhonoured("All keys of a ConfigMap.", _NO_CONFIG_OBJECTS)
    secret_ref: dict[str, Any] | None = unhonoured("All keys of a Secret.", _NO_CONFIG_OBJECTS)


class ContainerPort(MusterModel):
    name: str | None = Field(default=None, description="Port name, e.g. pytorchjob-port.")
    container_port: int = Field(ge=1, le=65535, description="Port number the process listens on.")
    host_port: int | None = Field(default=None, ge=1, le=65535, description="Port on the host.")
    host_ip: str | None = Field(default=None, description="Host IP to bind the host port to.")
    protocol: Literal["TCP", "UDP", "SCTP"] = Field(default="TCP", description="TCP, UDP or SCTP.")


class ResourceRequirements(MusterModel):
    """Requests and limits; limits without requests are copied to requests, as in Kubernetes."""

    requests: ResourceList = Field(
        default_factory=dict, description="What the container is guaranteed (and quota is charged)."
    )
    limits: ResourceList = Field(default_factory=dict, description="The most the container may use.")
    claims: list[dict[str, Any]] | None = unhonoured(
        "Dynamic resource claims.", "Muster does not implement dynamic resource allocation"
    )

    @model_validator(mode="after")
    def _requests_default_to_limits(self) -> ResourceRequirements:
        for name, value in self.limits.items():
            self.requests.setdefault(name, value)
        return self

    def field_rules(self, path: str) -> list[FieldError]:
        # A request copied from its limit is reported once, at the limit.
        own = {k: v for k, v in self.requests.items() if self.limits.get(k) != v}
        errors = amount_errors(self.limits, child_path(path, "limits"))
        errors += amount_errors(own, child_path(path, "requests"))
        for kind in ("limits", "requests"):
            amounts: dict[str, str] = getattr(self, kind)
            # A request copied from its limit is reported once, at the limit.
            copied = kind == "requests" and amounts.get(GPU) == self.limits.get(GPU)
            if GPU in amounts and not copied:
                why = check_gpu_quantity(Quantity.parse(amounts[GPU]))
                if why:
                    errors.append(FieldError(child_path(path, kind, GPU), why))
            if GPU in amounts and GPU_MEMORY in amounts:
                errors.append(
                    FieldError(
                        child_path(path, kind, GPU_MEMORY),
                        f"may not be requested together with {GPU}",
                        hint=f"ask for whole GPUs or a share with {GPU}, or a memory-sized share with "
                        f"{GPU_MEMORY}",
                    )
                )
        for name, request in self.requests.items():
            limit = self.limits.get(name)
            if limit is None:
                continue
            where = child_path(path, "requests", name)
            if "/" in name and Quantity.parse(request) != Quantity.parse(limit):
                errors.append(
                    FieldError(
                        where, f"must equal limits[{name}] ({limit}) for an extended resource", request
                    )
                )
            elif Quantity.parse(request) > Quantity.parse(limit):
                errors.append(FieldError(where, f"must be <= limits[{name}] ({limit})", request))
        return errors


class VolumeMount(MusterModel):
    name: str = Field(description="Name of a volume in spec.volumes.")
    mount_path: str = Field(min_length=1, description="Where the volume appears in the container.")
    read_only: bool | None = Field(default=None, description="Mount read-only.")
    sub_path: str | None = Field(default=None, description="Sub-path of the volume to mount.")
    sub_path_expr: str | None = unhonoured("Sub-path with $(VAR) expansion.", "only subPath is supported")
    mount_propagation: str | None = unhonoured("Mount propagation mode.", "the local runtime uses no mounts")
    recursive_read_only: str | None = unhonoured(
        "Recursive read-only mode.", "the local runtime uses no mounts"
    )


class Container(MusterModel):
    """One process of a pod, as in Kubernetes."""

    name: DNSLabel = Field(description="Container name, unique in the pod (DNS-1123 label).")
    image: str | None = Field(
        default=None, description="Container image; recorded, and ignored by the local runtime."
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = Field(
        default=None, description="When to pull the image (Kubernetes runtime only)."
    )
    command: list[str] = Field(
        default_factory=list,
        description="The program and its arguments; without it the image's entrypoint runs "
        "(Kubernetes only: the local and Ray runtimes need a command).",
    )
    args: list[str] = Field(default_factory=list, description="Arguments appended to command.")
    working_dir: str | None = Field(default=None, description="Working directory of the process.")
    env: list[EnvVar] = Field(default_factory=list, description="Environment variables.")
    env_from: list[EnvFromSource] = Field(default_factory=list, description="Variables from other objects.")
    resources: ResourceRequirements = Field(
        default_factory=ResourceRequirements, description="Requests and limits (cpu, memory, GPUs)."
    )
    ports: list[ContainerPort] = Field(default_factory=list, description="Ports the process listens on.")
    volume_mounts: list[VolumeMount] = Field(default_factory=list, description="Volumes to mount.")
    restart_policy: Literal["Always"] | None = unhonoured(
        "Always on an init container makes it a sidecar.", "the local runtime has no sidecar containers"
    )
    volume_devices: list[dict[str, Any]] | None = unhonoured("Block devices.", "no block volumes")
    liveness_probe: dict[str, Any] | None = unhonoured("Liveness probe.", _NO_PROBES)
    readiness_probe: dict[str, Any] | None = unhonoured("Readiness probe.", _NO_PROBES)
    startup_probe: dict[str, Any] | None = unhonoured("Startup probe.", _NO_PROBES)
    lifecycle: dict[str, Any] | None = unhonoured(
        "postStart and preStop hooks.", "the local runtime runs no hooks (it sends SIGTERM, then SIGKILL)"
    )
    security_context: dict[str, Any] | None = unhonoured(
        "Container security context.", "the local runtime runs processes as the server's user"
    )
    resize_policy: list[dict[str, Any]] | None = unhonoured("In-place resize policy.", "no in-place resize")
    termination_message_path: str | None = unhonoured("Termination message file.", "not collected")
    termination_message_policy: str | None = unhonoured("Termination message policy.", "not collected")
    stdin: bool | None = unhonoured("Keep stdin open.", "processes get no stdin")
    stdin_once: bool | None = unhonoured("Close stdin after one attach.", "processes get no stdin")
    tty: bool | None = unhonoured("Allocate a TTY.", "processes get no TTY")


# -- volumes -------------------------------------------------------------------------------


class EmptyDirVolumeSource(MusterModel):
    medium: Literal["", "Memory", "HugePages"] | None = unhonoured(
        "Storage medium; Memory means tmpfs (e.g. for /dev/shm).",
        "the local runtime backs every emptyDir with a directory and shares the host's /dev/shm",
    )
    size_limit: NonNegativeQuantity | None = Field(default=None, description="Largest size allowed.")


class PersistentVolumeClaimVolumeSource(MusterModel):
    claim_name: str = Field(min_length=1, description="Claim name; locally a directory that persists.")
    read_only: bool | None = Field(default=None, description="Mount read-only.")


class HostPathVolumeSource(MusterModel):
    path: str = Field(min_length=1, description="Path on the host.")
    type: str | None = Field(default=None, description="Kubernetes hostPath type check, e.g. Directory.")


_VOLUME_SOURCES = (
    "empty_dir",
    "persistent_volume_claim",
    "host_path",
    "config_map",
    "secret",
    "projected",
    "downward_api",
    "csi",
    "nfs",
    "ephemeral",
)


class Volume(MusterModel):
    """A named volume; exactly one source (none means emptyDir, as in Kubernetes)."""

    name: DNSLabel = Field(description="Volume name, referenced by volumeMounts.")
    empty_dir: EmptyDirVolumeSource | None = Field(
        default=None, description="Scratch space that lives as long as the pod."
    )
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = Field(
        default=None, description="Storage that outlives the pod (checkpoints)."
    )
    host_path: HostPathVolumeSource | None = Field(default=None, description="A directory of the host.")
    config_map: dict[str, Any] | None = unhonoured("Files from a ConfigMap.", _NO_CONFIG_OBJECTS)
    secret: dict[str, Any] | None = unhonoured("Files from a Secret.", _NO_CONFIG_OBJECTS)
    projected: dict[str, Any] | None = unhonoured("Projected sources.", _NO_CONFIG_OBJECTS)
    downward_api: dict[str, Any] | None = unhonoured("Pod fields as files.", "not implemented")
    csi: dict[str, Any] | None = unhonoured("A CSI driver volume.", "no CSI drivers")
    nfs: dict[str, Any] | None = unhonoured("An NFS export.", "the local runtime mounts nothing")
    ephemeral: dict[str, Any] | None = unhonoured("A generic ephemeral volume.", "no volume provisioner")

    @model_validator(mode="after")
    def _default_empty_dir(self) -> Volume:
        if all(getattr(self, source) is None for source in _VOLUME_SOURCES):
            self.empty_dir = EmptyDirVolumeSource()
            self.model_fields_set.add("empty_dir")
        return self

    def field_rules(self, path: str) -> list[FieldError]:
        fields = type(self).model_fields
        chosen = [fields[s].alias or s for s in _VOLUME_SOURCES if getattr(self, s) is not None]
        if len(chosen) > 1:
            return [FieldError(path, f"must have exactly one volume source, got {', '.join(chosen)}")]
        return []


# -- pod -----------------------------------------------------------------------------------


class TemplateMetadata(MusterModel):
    name: str | None = Field(default=None, description="Ignored: pod names come from the controller.")
    labels: Labels = Field(default_factory=dict, description="Labels for the pods.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Annotations for the pods.")


class PodSpec(MusterModel):
    """The common Kubernetes PodSpec fields."""

    containers: list[Container] = Field(min_length=1, description="The pod's processes.")
    init_containers: list[Container] = Field(
        default_factory=list, description="Run one by one to completion before the containers start."
    )
    volumes: list[Volume] = Field(default_factory=list, description="Volumes containers may mount.")
    restart_policy: Literal["Always", "OnFailure", "Never"] | None = Field(
        default=None, description="Restart containers in place; jobs set this from their own policy."
    )
    termination_grace_period_seconds: int | None = Field(
        default=None, ge=0, description="Seconds between SIGTERM and SIGKILL (default 30)."
    )
    node_selector: Labels = Field(default_factory=dict, description="Node labels the pod needs.")
    affinity: Affinity | None = Field(default=None, description="Node affinity (pod affinity is ignored).")
    tolerations: list[Toleration] = Field(default_factory=list, description="Taints the pod tolerates.")
    node_name: str | None = Field(default=None, description="The node the pod is bound to (set by Muster).")
    priority_class_name: str | None = Field(default=None, description="PriorityClass of the pod.")
    priority: int | None = Field(default=None, description="Priority value, resolved from the class.")
    service_account_name: str | None = Field(default=None, description="ServiceAccount the pod runs as.")
    service_account: str | None = Field(default=None, description="Deprecated alias of serviceAccountName.")
    host_network: bool | None = Field(default=None, description="Use the host's network namespace.")
    host_ipc: bool | None = Field(default=None, alias="hostIPC", description="Use the host's IPC namespace.")
    host_pid: bool | None = Field(default=None, alias="hostPID", description="Use the host's PID namespace.")
    scheduler_name: str | None = unhonoured("Which scheduler places the pod.", "Muster places every pod")
    image_pull_secrets: list[dict[str, Any]] | None = unhonoured("Registry credentials.", _NO_IMAGES)
    security_context: dict[str, Any] | None = unhonoured(
        "Pod security context.", "the local runtime runs processes as the server's user"
    )
    active_deadline_seconds: int | None = unhonoured(
        "Pod deadline.", "use the job's runPolicy.activeDeadlineSeconds"
    )
    dns_policy: str | None = unhonoured("DNS policy.", "the local runtime uses the host's DNS")
    dns_config: dict[str, Any] | None = unhonoured("DNS settings.", "the local runtime uses the host's DNS")
    hostname: str | None = unhonoured("Pod hostname.", "processes see the host's name")
    subdomain: str | None = unhonoured("Pod subdomain.", "processes see the host's name")
    set_hostname_as_fqdn: bool | None = unhonoured(
        "Hostname as FQDN.", "processes see the host's name", alias="setHostnameAsFQDN"
    )
    host_aliases: list[dict[str, Any]] | None = unhonoured("Extra /etc/hosts entries.", "not implemented")
    host_users: bool | None = unhonoured("User namespaces.", "not implemented")
    share_process_namespace: bool | None = unhonoured("Shared PID namespace.", "not implemented")
    automount_service_account_token: bool | None = unhonoured("Mount a token.", "not implemented")
    enable_service_links: bool | None = unhonoured("Service environment variables.", "Muster has no Services")
    runtime_class_name: str | None = unhonoured("Container runtime class.", "no container runtime")
    preemption_policy: str | None = unhonoured("Pod preemption policy.", "set it on the PriorityClass")
    topology_spread_constraints: list[dict[str, Any]] | None = unhonoured(
        "Spread constraints.", "use the Workload topology request"
    )
    overhead: dict[str, Any] | None = unhonoured("Runtime overhead.", "not counted")
    readiness_gates: list[dict[str, Any]] | None = unhonoured("Readiness gates.", "not evaluated")
    scheduling_gates: list[dict[str, Any]] | None = unhonoured("Scheduling gates.", "admission gates pods")
    resource_claims: list[dict[str, Any]] | None = unhonoured("Resource claims.", "no dynamic allocation")
    ephemeral_containers: list[dict[str, Any]] | None = unhonoured("Debug containers.", "not implemented")
    os: dict[str, Any] | None = unhonoured("Target OS.", "pods run on the host's OS")

    def field_rules(self, path: str) -> list[FieldError]:
        errors = self._name_rules(path)
        volumes = {v.name for v in self.volumes}
        for group in ("initContainers", "containers"):
            for i, container in enumerate(
                self.init_containers if group == "initContainers" else self.containers
            ):
                cpath = child_path(path, group, i)
                for m, mount in enumerate(container.volume_mounts):
                    if mount.name not in volumes:
                        errors.append(
                            FieldError(
                                child_path(cpath, "volumeMounts", m, "name"),
                                f"no volume named {mount.name!r} in {child_path(path, 'volumes')}",
                            )
                        )
        errors.extend(self._gpu_rules(path))
        return errors

    def field_warnings(self, path: str) -> list[FieldError]:
        # An image's entrypoint is legitimate on Kubernetes; only the process runtimes need a
        # command, and they fail the pod with a LaunchError naming this same path and image.
        notes = []
        for group in ("initContainers", "containers"):
            for i, container in enumerate(
                self.init_containers if group == "initContainers" else self.containers
            ):
                if not container.command:
                    notes.append(
                        FieldError(
                            child_path(path, group, i, "command"),
                            f"not set: {entrypoint_clause(container.image)}; the local and Ray runtimes "
                            "run no images and fail a pod without a command",
                            hint=NO_COMMAND_HINT,
                        )
                    )
        return notes

    def _name_rules(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        seen: set[str] = set()
        named = [("initContainers", i, c.name) for i, c in enumerate(self.init_containers)]
        named += [("containers", i, c.name) for i, c in enumerate(self.containers)]
        named += [("volumes", i, v.name) for i, v in enumerate(self.volumes)]
        for group, i, name in named:
            key = f"{'v' if group == 'volumes' else 'c'}:{name}"
            if key in seen:
                errors.append(FieldError(child_path(path, group, i, "name"), "duplicate name", name))
            seen.add(key)
        return errors

    def _gpu_rules(self, path: str) -> list[FieldError]:
        # Each container's own amounts are checked where they are written; this is about the sum.
        for c in (*self.containers, *self.init_containers):
            requests = c.resources.requests
            both = GPU_MEMORY in requests and GPU in requests
            if both or check_gpu_quantity(Quantity.parse(requests.get(GPU, 0))):
                return []
        total = pod_requests(self)
        where = child_path(path, "containers")
        if GPU in total and GPU_MEMORY in total:
            return [
                FieldError(where, f"the pod asks for both {GPU} and {GPU_MEMORY}; use one kind of GPU demand")
            ]
        why = check_gpu_quantity(total[GPU]) if GPU in total else None
        return [FieldError(where, f"the pod's total {GPU} {why}")] if why else []


class PodTemplateSpec(MusterModel):
    """A pod template, as in Kubernetes."""

    metadata: TemplateMetadata = Field(
        default_factory=TemplateMetadata, description="Labels and annotations."
    )
    spec: PodSpec = Field(description="The pods' specification.")
