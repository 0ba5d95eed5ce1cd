from __future__ import annotations

import pytest

from muster.api.errors import InvalidObject
from muster.api.registry import UnknownKind, kinds, lookup, to_model, validate
from tests.api.helpers import errors_of, obj


@pytest.mark.parametrize("name", ["ClusterQueue", "clusterqueues", "clusterqueue", "cq", "CQ", " Cq "])
def test_lookup_accepts_kind_plural_singular_short_any_case(name):
    assert lookup(name).kind == "ClusterQueue"


def test_lookup_unknown_lists_close_matches():
    with pytest.raises(UnknownKind, match="did you mean clusterqueue"):
        lookup("clustrqueue")
    with pytest.raises(UnknownKind, match="unknown kind 'zzz'"):
        lookup("zzz")


def test_every_kind_is_unique_and_complete():
    names: dict[str, str] = {}
    for info in kinds():
        assert info.kind == info.model.KIND
        assert info.singular == info.kind.lower()
        assert info.has_status == ("status" in info.model.model_fields)
        for n in (info.kind.lower(), info.plural, info.singular, *info.short_names):
            assert names.setdefault(n, info.kind) == info.kind, f"{n} names two kinds"


def test_namespace_defaults_for_namespaced_and_dropped_for_cluster_kinds():
    lq = validate(obj("LocalQueue", spec={"clusterQueue": "cq"})).obj
    assert lq["metadata"]["namespace"] == "default"
    doc = obj("ResourceFlavor")
    doc["metadata"]["namespace"] = "team"
    assert "namespace" not in validate(doc).obj["metadata"]


def test_status_is_dropped_unless_kept():
    doc = obj("LocalQueue", spec={"clusterQueue": "cq"}, status={"pendingWorkloads": 3})
    assert "status" not in validate(doc).obj
    assert validate(doc, keep_status=True).obj["status"]["pendingWorkloads"] == 3


def test_unknown_kind_and_api_version_list_supported_kinds():
    (err,) = errors_of({"apiVersion": "muster.dev/v1", "kind": "Gadget", "metadata": {"name": "x"}})
    assert "kind: unknown kind 'Gadget'" in err and "ClusterQueue" in err
    (err,) = errors_of({"apiVersion": "example.com/v9", "kind": "Gadget"})
    assert err.startswith("apiVersion: example.com/v9 Gadget is not supported")
    assert "kubeflow.org" in err or "kueue.x-k8s.io" in err
    assert [e.split(":")[0] for e in errors_of({"metadata": {}})] == ["apiVersion", "kind"]


def test_not_a_mapping():
    with pytest.raises(InvalidObject, match="must be a mapping"):
        validate(["a"])  # type: ignore[arg-type]


def test_unknown_top_level_and_metadata_fields_are_errors():
    doc = obj("ResourceFlavor", spce={})
    doc["metadata"]["labelz"] = {}
    assert sorted(errors_of(doc)) == [
        "metadata.labelz: unknown field (remove it, or check its spelling and indentation)",
        "spce: unknown field (remove it, or check its spelling and indentation)",
    ]


def test_to_model_round_trip():
    wire = validate(obj("PriorityClass", value=10)).obj
    model = to_model(wire)
    assert model.to_dict() == wire


def test_aliases_name_exactly_the_converted_kinds():
    from muster.api.compat import foreign_kinds
    from muster.api.kinds import CONVERTED as _CONVERTED

    assert set(_CONVERTED) == set(foreign_kinds())
    for (api_version, kind), target in _CONVERTED.items():
        assert f"{api_version}/{kind}" in lookup(target).converted_from
        # A v1 Pod converts into a TrainingJob, but `pods` names the native Pod.
        assert lookup(kind).kind == (kind if kind in {k.kind for k in kinds()} else target)
