"""Property tests: validation is idempotent and the wire form is stable through the model.

For any valid document ``x``: ``to_model(validate(x).obj).to_dict() == validate(x).obj`` and
``validate(validate(x).obj).obj == validate(x).obj``.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from muster.api.quantity import parse_quantity
from muster.api.registry import to_model, validate

_names = st.from_regex(r"[a-z]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_suffix = st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "e3"])
# Within the scheduler's bound for every resource (8000Gi of cpu is below 2**53 milli-CPU).
_quantity = st.one_of(
    st.integers(0, 10**6),
    st.builds(lambda n, s: f"{n}{s}", st.integers(0, 8000), _suffix),
    st.decimals(0, 1000, places=3, allow_nan=False, allow_infinity=False).map(str),
)
_gpus = st.one_of(st.integers(0, 8), st.integers(1, 999).map(lambda m: f"{m}m"))
_resources = st.fixed_dictionaries(
    {},
    optional={
        "cpu": _quantity,
        "memory": _quantity,
        "nvidia.com/gpu": _gpus,
        "example.com/fpga": st.integers(0, 4),
    },
)


def _unique(items, key="name"):
    return st.lists(items, max_size=3, unique_by=lambda d: d[key])


_container = st.fixed_dictionaries(
    {"name": _names, "command": st.lists(_text, min_size=1, max_size=3)},
    optional={
        "args": st.lists(_text, max_size=2),
        "image": _text,
        "env": st.lists(st.fixed_dictionaries({"name": _names, "value": _text}), max_size=2),
        "resources": st.one_of(
            st.fixed_dictionaries({"limits": _resources}), st.fixed_dictionaries({"requests": _resources})
        ),
        "workingDir": _text,
    },
)
_toleration = st.fixed_dictionaries(
    {"key": _names, "operator": st.just("Exists")},
    optional={"effect": st.sampled_from(["", "NoSchedule", "NoExecute"])},
)
_pod_spec = st.fixed_dictionaries(
    {"containers": st.lists(_container, min_size=1, max_size=1)},
    optional={
        "nodeSelector": st.dictionaries(_names, _names, max_size=2),
        "tolerations": st.lists(_toleration, max_size=2),
        "terminationGracePeriodSeconds": st.integers(0, 600),
        "volumes": _unique(st.fixed_dictionaries({"name": _names}, optional={"emptyDir": st.just({})})),
    },
)
_template = st.fixed_dictionaries(
    {"spec": _pod_spec},
    optional={"metadata": st.fixed_dictionaries({"labels": st.dictionaries(_names, _names)})},
)


def _replica(replicas):
    return st.fixed_dictionaries(
        {"template": _template},
        optional={"replicas": replicas, "restartPolicy": st.sampled_from(["OnFailure", "Never", "ExitCode"])},
    )


_training_spec = st.one_of(
    st.fixed_dictionaries({"Master": _replica(st.just(1))}, optional={"Worker": _replica(st.integers(1, 8))}),
    st.fixed_dictionaries({"Worker": _replica(st.integers(1, 8))}),
).flatmap(
    lambda replicas: st.fixed_dictionaries(
        {"replicaSpecs": st.just(replicas)},
        optional={
            "nprocPerNode": st.one_of(st.integers(1, 8), st.sampled_from(["auto", "gpu", "cpu"])),
            "queueName": _names,
            "runPolicy": st.fixed_dictionaries(
                {},
                optional={
                    "backoffLimit": st.integers(0, 10),
                    "suspend": st.booleans(),
                    "cleanPodPolicy": st.sampled_from(["All", "Running", "None"]),
                },
            ),
        },
    )
)


def _doc(kind, spec):
    return st.builds(
        lambda name, ns, spec: {
            "apiVersion": "muster.dev/v1",
            "kind": kind,
            "metadata": {"name": name, **({"namespace": ns} if ns else {})},
            "spec": spec,
        },
        _names,
        st.none() | _names,
        spec,
    )


@st.composite
def _cluster_queue_spec(draw):
    resources = draw(
        st.lists(st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods"]), min_size=1, unique=True)
    )
    cohort = draw(st.none() | _names)
    flavors = draw(st.lists(_names, min_size=1, max_size=3, unique=True))
    limit = st.none() | _quantity if cohort else st.none()

    def quota(name):
        q = {"name": name, "nominalQuota": draw(_quantity)}
        if (b := draw(limit)) is not None:
            q["borrowingLimit"] = b
        return q

    spec = {
        "resourceGroups": [
            {
                "coveredResources": resources,
                "flavors": [{"name": f, "resources": [quota(r) for r in resources]} for f in flavors],
            }
        ]
    }
    if cohort:
        spec["cohort"] = cohort
    spec["queueingStrategy"] = draw(st.sampled_from(["BestEffortFIFO", "StrictFIFO"]))
    return spec


@st.composite
def _workflow_spec(draw):
    names = draw(st.lists(_names, min_size=1, max_size=5, unique=True))
    tasks = []
    for i, name in enumerate(names):
        deps = draw(st.lists(st.sampled_from(names[:i]), unique=True, max_size=2)) if i else []
        tasks.append(
            {
                "name": name,
                "dependencies": deps,
                "template": draw(_template),
                "retryStrategy": {"limit": draw(st.integers(0, 3))},
            }
        )
    return {"tasks": tasks, "parallelism": draw(st.integers(1, 4))}


_workload_spec = st.fixed_dictionaries(
    {
        "podSets": st.lists(
            st.fixed_dictionaries({"name": _names, "count": st.integers(1, 16), "requests": _resources}),
            min_size=1,
            max_size=3,
            unique_by=lambda p: p["name"],
        ),
        "priority": st.integers(-100, 100),
    }
)

_documents = st.one_of(
    _doc("TrainingJob", _training_spec),
    _doc("ClusterQueue", _cluster_queue_spec()),
    _doc("Workflow", _workflow_spec()),
    _doc("Workload", _workload_spec),
    _doc("Pod", _pod_spec),
)


@settings(max_examples=150, deadline=None)
@given(_documents)
def test_wire_form_is_stable(doc):
    wire = validate(doc).obj
    assert to_model(wire).to_dict() == wire
    assert validate(wire).obj == wire


@settings(max_examples=100, deadline=None)
@given(_resources)
def test_quantities_are_canonical_whatever_their_spelling(resources):
    doc = {
        "apiVersion": "muster.dev/v1",
        "kind": "Workload",
        "metadata": {"name": "w"},
        "spec": {"podSets": [{"count": 1, "requests": resources}]},
    }
    stored = validate(doc).obj["spec"]["podSets"][0]["requests"]
    for name, value in resources.items():
        assert parse_quantity(stored[name]) == parse_quantity(value)
        assert stored[name] == str(parse_quantity(stored[name]))
