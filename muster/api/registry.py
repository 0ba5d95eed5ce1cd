"""The single entry point for kinds and validation.

``lookup`` resolves what a user types (``TrainingJob``, ``trainingjobs``, ``tj``) to a
:class:`KindInfo`; ``validate`` turns any accepted document (native ``muster.dev/v1`` or a
foreign one such as a Kubeflow PyTorchJob) into the canonical wire dict, or raises
:class:`~muster.api.errors.InvalidObject` naming every broken field; ``to_model`` gives the
typed view of a stored dict.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from muster.api import kinds as names
from muster.api.base import API_VERSION, Object
from muster.api.cacheentry import CacheEntry
from muster.api.capacity import NodeClaim, NodePool, UsageRecord
from muster.api.checks import check
from muster.api.compat import IGNORED_FIELDS_ANNOTATION, Conversion, converter_for, foreign_kinds
from muster.api.errors import FieldError, InvalidObject, errors_from_pydantic, format_path
from muster.api.event import Event
from muster.api.experiment import Experiment
from muster.api.gpusharing import GPUSharing
from muster.api.kinds import Kind, UnknownKind
from muster.api.limits import document_errors, shown
from muster.api.namespace import Namespace, ResourceQuota
from muster.api.node import Node
from muster.api.pod import Pod
from muster.api.priorityclass import PriorityClass
from muster.api.queues import ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Topology
from muster.api.ray import RayCluster, RayJob
from muster.api.rbac import ClusterRole, ClusterRoleBinding, Role, RoleBinding, ServiceAccount
from muster.api.serving import InferenceService
from muster.api.trainingjob import TrainingJob
from muster.api.trial import Trial, TrialMetrics
from muster.api.workflow import Workflow
from muster.api.workload import Workload

__all__ = ["KindInfo", "UnknownKind", "Validated", "kinds", "lookup", "to_model", "validate"]


@dataclass(frozen=True)
class KindInfo(Kind):
    """A kind's names (:class:`muster.api.kinds.Kind`) and its model."""

    # Keyword-only: the names' fields before it have defaults.
    model: type[Object] = field(kw_only=True)


@dataclass
class Validated:
    """A validated document: the canonical wire dict (None for documents that create nothing,
    such as a v1 Namespace), its kind, and warnings for fields Muster accepts but ignores."""

    obj: dict[str, Any] | None
    info: KindInfo | None
    warnings: list[str] = field(default_factory=list)


_MODELS: dict[str, type[Object]] = {
    model.KIND: model
    for model in (
        Namespace,
        Node,
        ResourceFlavor,
        Topology,
        GPUSharing,
        ClusterQueue,
        Cohort,
        LocalQueue,
        PriorityClass,
        TrainingJob,
        Workflow,
        CacheEntry,
        Experiment,
        Trial,
        TrialMetrics,
        InferenceService,
        RayCluster,
        RayJob,
        Workload,
        Pod,
        Event,
        ResourceQuota,
        Role,
        RoleBinding,
        ServiceAccount,
        ClusterRole,
        ClusterRoleBinding,
        NodePool,
        NodeClaim,
        UsageRecord,
    )
}
_KINDS: tuple[KindInfo, ...] = tuple(KindInfo(**vars(k), model=_MODELS[k.kind]) for k in names.kinds())
_BY_KIND = {info.kind: info for info in _KINDS}


def kinds() -> list[KindInfo]:
    """Every native kind, in a stable order."""
    return list(_KINDS)


def lookup(name: str) -> KindInfo:
    """The kind a user means by ``name``: a Kind, plural, singular or short name, any case."""
    return _BY_KIND[names.lookup(name).kind]


def validate(doc: Mapping[str, Any], *, keep_status: bool = False) -> Validated:
    """Validate (and, for a foreign kind, convert) one document.

    Returns the canonical wire dict with defaults applied: namespace ``default`` for namespaced
    kinds, none for cluster kinds. ``status`` is server-owned and dropped unless ``keep_status``
    (the status subresource and controllers pass it). Raises InvalidObject listing every broken
    field by its path in ``doc``.
    """
    if not isinstance(doc, Mapping):
        raise InvalidObject(
            [FieldError("", "a document must be a mapping with apiVersion and kind", type(doc).__name__)]
        )
    problems = document_errors(dict(doc))
    if problems:
        raise InvalidObject(problems, shown(str(doc.get("kind", ""))), shown(_name_of(doc)))
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    missing = [
        FieldError(key, "required field is missing", hint=_supported_hint())
        for key, value in (("apiVersion", api_version), ("kind", kind))
        if not value
    ]
    if missing:
        raise InvalidObject(missing)
    if not isinstance(api_version, str) or not isinstance(kind, str):
        raise InvalidObject([FieldError("kind", "apiVersion and kind must be strings", kind)])
    if api_version == API_VERSION:
        info = _BY_KIND.get(kind)
        if info is None:
            raise InvalidObject(
                [FieldError("kind", f"unknown kind {kind!r} in {API_VERSION}", hint=_supported_hint())]
            )
        return _validate_native(dict(doc), info, keep_status, Conversion(doc=None))
    convert = converter_for(api_version, kind)
    if convert is None:
        raise InvalidObject(
            [
                FieldError(
                    "apiVersion", f"{api_version} {kind} is not supported", api_version, _supported_hint()
                )
            ]
        )
    conversion = convert(doc)
    if conversion.doc is None:
        return Validated(None, None, [str(w) for w in conversion.warnings])
    return _validate_native(conversion.doc, _BY_KIND[conversion.doc["kind"]], False, conversion)


def to_model(obj: Mapping[str, Any]) -> Object:
    """The typed model of a stored (already validated) wire dict."""
    info = lookup(str(obj.get("kind", "")))
    try:
        return info.model.model_validate(obj)
    except ValidationError as exc:
        raise InvalidObject(errors_from_pydantic(exc), info.kind, _name_of(obj)) from None


def _validate_native(
    doc: dict[str, Any], info: KindInfo, keep_status: bool, conversion: Conversion
) -> Validated:
    # A native document is checked strictly; a converted one (conversion.doc set) leniently.
    lenient = conversion.doc is not None
    data = copy.deepcopy(doc)
    # A native status is validated, then dropped below: the server ignores it, but an object
    # that breaks its kind's schema is refused whole (the OpenAPI document declares status too).
    drop_status = not keep_status and info.has_status and not lenient
    if not keep_status and not drop_status:
        data.pop("status", None)
    _default_namespace(data, info)
    name = _name_of(data)
    model = _model_validate(info, data, conversion, lenient, name)
    if drop_status:
        model.status = None  # type: ignore[attr-defined]
    errors, warnings = check(model)
    if errors:
        raise InvalidObject(_foreign(errors, conversion), info.kind, name)
    if conversion.kept:
        model.metadata.annotations[IGNORED_FIELDS_ANNOTATION] = json.dumps(
            conversion.kept, sort_keys=True, default=str
        )
    notes = [*conversion.warnings, *_foreign(warnings, conversion)]
    notes += [
        FieldError(
            path,
            f"not supported by Muster; ignored (kept in metadata.annotations[{IGNORED_FIELDS_ANNOTATION}])",
        )
        for path in sorted(conversion.kept)
    ]
    return Validated(model.to_dict(), info, [str(n) for n in notes])


def _model_validate(
    info: KindInfo, data: dict[str, Any], conversion: Conversion, lenient: bool, name: str
) -> Object:
    # A native document is validated strictly, as kube-apiserver reads JSON: "2" is not an
    # integer and 1 is not a string (quantities, durations and nprocPerNode declare both forms).
    # Converted documents are validated leniently: an unknown field is moved out of the
    # document into ``conversion.kept`` and validation repeats (a field can only be found
    # unknown once its parent is known, hence the loop); a value converted to the field's type
    # is a warning.
    for _ in range(16):
        try:
            model = info.model.model_validate(data, strict=not lenient)
        except ValidationError as exc:
            unknown = [e["loc"] for e in exc.errors() if e["type"] == "extra_forbidden"]
            if not lenient or not unknown:
                raise InvalidObject(
                    _foreign(errors_from_pydantic(exc), conversion), info.kind, name
                ) from None
            for loc in unknown:
                conversion.keep(conversion.foreign_path(format_path(loc)), _pop(data, loc))
            continue
        if lenient:
            conversion.warnings += _coercions(info, data, conversion)
        return model
    raise InvalidObject([FieldError("", "too many unknown fields")], info.kind, name)


def _coercions(info: KindInfo, data: dict[str, Any], conversion: Conversion) -> list[FieldError]:
    """A warning per value the lenient validation converted (every error strict validation
    finds in a document the lenient one accepted is one)."""
    try:
        info.model.model_validate(data, strict=True)
    except ValidationError as exc:
        return [
            FieldError(
                conversion.foreign_path(e.path),
                f"converted to {_kind_of(e.rule)}: write it as {_kind_of(e.rule)} "
                f"({API_VERSION} kinds refuse the conversion)",
                e.got,
            )
            for e in errors_from_pydantic(exc)
        ]
    return []


def _kind_of(rule: str) -> str:
    # "must be an integer" -> "an integer"; "must be true or false" -> "true or false"
    return rule.removeprefix("must be ")


def _pop(data: Any, loc: tuple[str | int, ...]) -> Any:
    for part in loc[:-1]:
        data = data[part]
    return data.pop(loc[-1])


def _default_namespace(data: dict[str, Any], info: KindInfo) -> None:
    meta = data.get("metadata")
    if not isinstance(meta, dict):
        return  # the model reports a missing or malformed metadata
    if info.namespaced:
        meta["namespace"] = meta.get("namespace") or "default"
    else:
        meta.pop("namespace", None)


def _foreign(errors: list[FieldError], conversion: Conversion) -> list[FieldError]:
    if not conversion.paths:
        return errors
    return [
        FieldError(
            conversion.foreign_path(e.path),
            conversion.foreign_text(e.rule),
            e.got,
            conversion.foreign_text(e.hint),
        )
        for e in errors
    ]


def _name_of(data: Mapping[str, Any]) -> str:
    meta = data.get("metadata")
    return str(meta.get("name", "")) if isinstance(meta, Mapping) else ""


def _supported_hint() -> str:
    groups: dict[str, tuple[set[str], set[str]]] = {}
    for api_version, kind in foreign_kinds():
        group, _, version = api_version.rpartition("/")
        versions, names = groups.setdefault(group or "core", (set(), set()))
        versions.add(version)
        names.add(kind)
    foreign = "; ".join(
        f"{group} {'|'.join(sorted(versions))}: {', '.join(sorted(names))}"
        for group, (versions, names) in sorted(groups.items())
    )
    return f"{API_VERSION}: {', '.join(info.kind for info in _KINDS)}; converted: {foreign}"
