"""Work applied into a namespace nobody made (docs/access-control.md, "Namespaces").

Kubeflow and Argo manifests name namespaces of their own (``kubeflow``, ``ml-team``) that do
not exist here. A job there would find no LocalQueue and wait as Inadmissible forever, so an
apply never leaves it so: a namespace that queued work names and that has neither a Namespace
object nor any LocalQueue (stored, or in the same apply) is created in the same all-or-nothing
apply, with a warning, when the applier may ``create namespaces`` (an admin, or anyone on a
``muster up`` without authentication); the Namespace controller then gives it its ``default``
LocalQueue. Otherwise (or when new namespaces get no default LocalQueue: the server's
``MUSTER_NAMESPACE_DEFAULT_QUEUE`` is empty) the apply is refused with an error naming the
namespace and how to get it.
"""

from __future__ import annotations

from collections.abc import Iterable

from muster.api import registry
from muster.api.base import API_VERSION
from muster.api.errors import FieldError
from muster.store import NotFound, Store
from muster.store.base import Obj

__all__ = ["QUEUED_KINDS", "created_warning", "namespace_object", "refused_error", "unknown_namespaces"]

# The kinds whose objects wait in a LocalQueue of their namespace.
QUEUED_KINDS = frozenset(
    {"TrainingJob", "Workflow", "Experiment", "RayCluster", "RayJob", "InferenceService", "Workload"}
)


def unknown_namespaces(store: Store, objects: Iterable[tuple[int, Obj]]) -> dict[str, int]:
    """The namespaces queued work in ``objects`` is applied into that have neither a Namespace
    nor a LocalQueue (stored or among ``objects``), each with the first document naming it."""
    objects = list(objects)
    known = {obj["metadata"]["name"] for _, obj in objects if obj["kind"] == "Namespace"}
    known |= {
        obj["metadata"].get("namespace") or "default" for _, obj in objects if obj["kind"] == "LocalQueue"
    }
    out: dict[str, int] = {}
    for index, obj in objects:
        ns = obj["metadata"].get("namespace") or "default"
        if obj["kind"] not in QUEUED_KINDS or ns in known or ns in out:
            continue
        if _exists(store, ns):
            known.add(ns)
        else:
            out[ns] = index
    return out


def namespace_object(name: str) -> Obj:
    """A new Namespace ``name`` as a validated wire dict."""
    obj = registry.validate({"apiVersion": API_VERSION, "kind": "Namespace", "metadata": {"name": name}}).obj
    assert obj is not None  # a native kind always gives an object
    return obj


def created_warning(namespace: str) -> str:
    return str(
        FieldError(
            "metadata.namespace",
            f"namespace {namespace!r} did not exist: created it, and it gets its default LocalQueue",
        )
    )


def refused_error(namespace: str, why: str) -> FieldError:
    return FieldError(
        "metadata.namespace",
        f"namespace {namespace!r} does not exist (no Namespace, no LocalQueue), so this would wait "
        f"for a queue forever, and it is not created ({why})",
        namespace,
        f"ask an admin to apply a v1 Namespace named {namespace} (it gets a default LocalQueue), or "
        "apply into a namespace that has a LocalQueue (muster get localqueues -A)",
    )


def _exists(store: Store, namespace: str) -> bool:
    try:
        store.get("Namespace", namespace)
        return True
    except NotFound:
        return bool(store.list("LocalQueue", namespace).items)
