"""Scheduler scenario files (``../shared/scenarios/README.md``): load, validate, build.

:func:`load_scenario` reads a YAML (or JSON) file with the C loader and validates it by
hand, cheaply, so files with thousands of nodes and tens of thousands of workloads load
fast; every error names the field path and the rule and nothing is built from a bad file
(:class:`~muster.api.errors.InvalidObject`). :func:`build_snapshot` turns a valid scenario
into a :class:`~muster.scheduler.Snapshot`: flavors, cohorts, queues (resource groups are
formed by resources sharing the same flavors), nodes with the usage and GPU devices taken
by admitted workloads, admitted and pending workloads.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from muster.api.errors import FieldError, InvalidObject
from muster.api.quantity import QuantityError
from muster.scheduler import (
    GPU,
    GPU_MILLI,
    PLACEMENT_POLICIES,
    ClusterQueue,
    Cohort,
    Flavor,
    FlavorQuotas,
    Node,
    Policy,
    PreemptionConfig,
    ResourceGroup,
    ResourceQuota,
    Snapshot,
    Taint,
    Toleration,
    to_units,
)
from muster.sim.scenario_workloads import check_expect_block, parse_workloads

__all__ = ["Scenario", "build_snapshot", "load_scenario", "parse_scenario"]

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_TOP = (
    "name",
    "description",
    "policy",
    "flavors",
    "cohorts",
    "clusterQueues",
    "nodes",
    "admitted",
    "pending",
    "expect",
)


@dataclass(slots=True)
class Scenario:
    """A validated scenario: its policy, its snapshot (built in ``snapshot_seconds``) and
    the ``expect`` block (None when absent)."""

    name: str
    description: str
    policy: Policy
    snapshot: Snapshot
    snapshot_seconds: float = 0.0
    expect: dict[str, Any] | None = None
    source: str = ""


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file (YAML; JSON, faster for big files, when it ends in
    ``.json`` or starts with ``{``); raises InvalidObject with field paths, or OSError."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    try:
        doc = _parse(text, p.suffix == ".json")
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise InvalidObject([FieldError("", f"not valid YAML or JSON: {exc}")]) from exc
    return parse_scenario(doc, str(p))


def _parse(text: str, is_json: bool) -> Any:
    # JSON is YAML too and parses ~30x faster, which matters for files with tens of
    # thousands of workloads; a YAML file that is really JSON takes the fast path
    if is_json:
        return json.loads(text)
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
    return yaml.load(text, Loader=yaml.CSafeLoader)


def parse_scenario(doc: Any, source: str = "") -> Scenario:
    """Validate a parsed scenario document and build its snapshot."""
    if not isinstance(doc, dict):
        raise InvalidObject([FieldError("", "a scenario must be a mapping", type(doc).__name__)])
    v = Validator()
    v.keys(doc, "", _TOP)
    name = v.string(doc.get("name"), "name", required=True)
    description = v.string(doc.get("description", ""), "description")
    policy = v.policy(doc.get("policy"))
    expect = doc.get("expect")
    if expect is not None:
        check_expect_block(v, expect)
    if v.errors:
        raise InvalidObject(v.errors)
    started = time.perf_counter()
    snapshot = build_snapshot(doc)
    elapsed = time.perf_counter() - started
    return Scenario(name or "", description or "", policy, snapshot, elapsed, expect, source)


def build_snapshot(doc: dict[str, Any]) -> Snapshot:
    """The scheduler snapshot of a scenario document; InvalidObject on any bad field."""
    v = Validator()
    flavors = v.flavors(doc.get("flavors"))
    flavor_names = [f.name for f in flavors]
    cohorts = [
        v.cohort(c, f"cohorts[{i}]", flavor_names) for i, c in enumerate(v.seq(doc.get("cohorts"), "cohorts"))
    ]
    queues_raw = v.seq(doc.get("clusterQueues"), "clusterQueues", required=True)
    queues = [v.queue(q, f"clusterQueues[{i}]", flavor_names) for i, q in enumerate(queues_raw)]
    v.unique([q.name for q in queues if q], "clusterQueues", "cluster queue")
    queue_map = {q.name: q for q in queues if q}
    nodes = None
    if doc.get("nodes") is not None:
        nodes = [v.node(n, f"nodes[{i}]") for i, n in enumerate(v.seq(doc["nodes"], "nodes"))]
        v.unique([n.name for n in nodes if n], "nodes", "node")
    node_map = {n.name: n for n in nodes or [] if n}
    admitted, pending = parse_workloads(v, doc, queue_map, node_map if nodes is not None else None)
    v.unique([w.name for w in admitted + pending if w], "admitted/pending", "workload")
    if v.errors:
        raise InvalidObject(v.errors)
    return Snapshot(
        cluster_queues=queues,  # type: ignore[arg-type]
        pending=pending,  # type: ignore[arg-type]
        admitted=admitted,  # type: ignore[arg-type]
        cohorts=[c for c in cohorts if c],
        flavors=flavors,
        nodes=nodes,  # type: ignore[arg-type]
    )


@lru_cache(maxsize=65536)
def _units(resource: str, text: str | int | float) -> int:
    return to_units(resource, text)


class Validator:
    """Collects FieldErrors while converting; returns None for a broken piece."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def err(self, path: str, rule: str, got: Any = None, hint: str = "") -> None:
        self.errors.append(
            FieldError(path, rule, got, hint) if got is not None else FieldError(path, rule, hint=hint)
        )

    # -- primitives -----------------------------------------------------------------------

    def keys(self, d: dict, path: str, allowed: tuple[str, ...]) -> None:
        for k in d:
            if k not in allowed:
                where = f"{path}.{k}" if path else str(k)
                self.err(where, "unknown field", hint=f"allowed: {', '.join(allowed)}")

    def mapping(self, d: Any, path: str, required: bool = False) -> dict:
        if d is None:
            if required:
                self.err(path, "required field is missing")
            return {}
        if not isinstance(d, dict):
            self.err(path, "must be a mapping", type(d).__name__)
            return {}
        return d

    def seq(self, d: Any, path: str, required: bool = False) -> list:
        if d is None:
            if required:
                self.err(path, "required field is missing")
            return []
        if not isinstance(d, list):
            self.err(path, "must be a list", type(d).__name__)
            return []
        return d

    def string(self, s: Any, path: str, required: bool = False) -> str | None:
        if s is None:
            if required:
                self.err(path, "required field is missing")
            return None
        if not isinstance(s, str) or (required and not s):
            self.err(path, "must be a non-empty string", s)
            return None
        return s

    def integer(
        self, n: Any, path: str, default: int | None = None, minimum: int | None = None
    ) -> int | None:
        if n is None:
            return default
        if isinstance(n, bool) or not isinstance(n, int):
            self.err(path, "must be an integer", n)
            return default
        if minimum is not None and n < minimum:
            self.err(path, f"must be >= {minimum}", n)
        return n

    def number(self, n: Any, path: str, default: float) -> float:
        if n is None:
            return default
        if isinstance(n, bool) or not isinstance(n, (int, float)):
            self.err(path, "must be a number", n)
            return default
        return float(n)

    def boolean(self, b: Any, path: str, default: bool) -> bool:
        if b is None:
            return default
        if not isinstance(b, bool):
            self.err(path, "must be true or false", b)
            return default
        return b

    def choice(self, s: Any, path: str, options: tuple[str, ...], default: str) -> str:
        if s is None:
            return default
        if s not in options:
            self.err(path, f"must be one of {', '.join(options)}", s)
            return default
        return s

    def quantity(self, resource: str, q: Any, path: str) -> int | None:
        if isinstance(q, bool) or not isinstance(q, (str, int, float)):
            self.err(path, "must be a quantity such as 2, 500m or 16Gi", q)
            return None
        try:
            value = _units(resource, q)
        except QuantityError as exc:
            self.err(path, str(exc))
            return None
        if value < 0:
            self.err(path, "must not be negative", q)
            return None
        return value

    def labels(self, d: Any, path: str) -> dict[str, str]:
        out = {}
        for k, val in self.mapping(d, path).items():
            if not isinstance(val, (str, int, float)) or isinstance(val, bool):
                self.err(f"{path}.{k}", "must be a string", val)
                continue
            out[str(k)] = str(val)
        return out

    def unique(self, names: list[str], path: str, what: str) -> None:
        seen: set[str] = set()
        for n in names:
            if n in seen:
                self.err(path, f"{what} names must be unique", n)
            seen.add(n)

    # -- pieces ---------------------------------------------------------------------------

    def policy(self, d: Any) -> Policy:
        d = self.mapping(d, "policy")
        self.keys(d, "policy", ("placement", "fairSharing", "seed"))
        placement = self.choice(d.get("placement"), "policy.placement", PLACEMENT_POLICIES, "binpack")
        fair = self.boolean(d.get("fairSharing"), "policy.fairSharing", False)
        seed = self.integer(d.get("seed"), "policy.seed", 0)
        return Policy(placement=placement, fair_sharing=fair, seed=seed or 0)

    def flavors(self, d: Any) -> list[Flavor]:
        if d is None:
            return [Flavor("default")]
        out = []
        for i, f in enumerate(self.seq(d, "flavors")):
            path = f"flavors[{i}]"
            f = self.mapping(f, path)
            self.keys(f, path, ("name", "nodeLabels", "nodeTaints", "tolerations", "topology"))
            name = self.string(f.get("name"), f"{path}.name", required=True)
            topo = self.seq(f.get("topology"), f"{path}.topology")
            for j, t in enumerate(topo):
                self.string(t, f"{path}.topology[{j}]", required=True)
            out.append(
                Flavor(
                    name=name or "",
                    node_labels=self.labels(f.get("nodeLabels"), f"{path}.nodeLabels"),
                    node_taints=self.taints(f.get("nodeTaints"), f"{path}.nodeTaints"),
                    tolerations=self.tolerations(f.get("tolerations"), f"{path}.tolerations"),
                    topology_levels=tuple(str(t) for t in topo),
                )
            )
        self.unique([f.name for f in out], "flavors", "flavor")
        return out

    def taints(self, d: Any, path: str) -> tuple[Taint, ...]:
        out = []
        for i, t in enumerate(self.seq(d, path)):
            p = f"{path}[{i}]"
            t = self.mapping(t, p)
            self.keys(t, p, ("key", "value", "effect"))
            key = self.string(t.get("key"), f"{p}.key", required=True) or ""
            value = str(t.get("value", ""))
            effect = self.choice(t.get("effect"), f"{p}.effect", _EFFECTS, "NoSchedule")
            out.append(Taint(key, value, effect))
        return tuple(out)

    def tolerations(self, d: Any, path: str) -> tuple[Toleration, ...]:
        out = []
        for i, t in enumerate(self.seq(d, path)):
            p = f"{path}[{i}]"
            t = self.mapping(t, p)
            self.keys(t, p, ("key", "operator", "value", "effect"))
            op = self.choice(t.get("operator"), f"{p}.operator", ("Equal", "Exists"), "Equal")
            effect = (
                "" if t.get("effect") is None else self.choice(t.get("effect"), f"{p}.effect", _EFFECTS, "")
            )
            out.append(Toleration(str(t.get("key", "")), op, str(t.get("value", "")), effect))
        return tuple(out)

    def quota(self, d: Any, path: str, flavor_names: list[str], limits: bool) -> list[ResourceGroup]:
        """flavor -> resource -> quantity | {nominal, borrowingLimit, lendingLimit}; resources
        defined by the same flavors form one resource group."""
        per_flavor: dict[str, dict[str, ResourceQuota]] = {}
        for fname, resources in self.mapping(d, path).items():
            fpath = f"{path}.{fname}"
            if fname not in flavor_names:
                self.err(fpath, "names an unknown flavor", fname, hint=f"flavors: {', '.join(flavor_names)}")
                continue
            out: dict[str, ResourceQuota] = {}
            for res, q in self.mapping(resources, fpath).items():
                rpath = f"{fpath}.{res}"
                if isinstance(q, dict):
                    self.keys(q, rpath, ("nominal", "borrowingLimit", "lendingLimit"))
                    if "nominal" not in q:
                        self.err(f"{rpath}.nominal", "required field is missing")
                        continue
                    nominal = self.quantity(res, q["nominal"], f"{rpath}.nominal")
                    bl = (
                        None
                        if q.get("borrowingLimit") is None
                        else self.quantity(res, q["borrowingLimit"], f"{rpath}.borrowingLimit")
                    )
                    ll = (
                        None
                        if q.get("lendingLimit") is None
                        else self.quantity(res, q["lendingLimit"], f"{rpath}.lendingLimit")
                    )
                    if not limits and (bl is not None or ll is not None):
                        self.err(
                            rpath,
                            "borrowingLimit and lendingLimit need a cohort",
                            hint="set cohort or drop the limits",
                        )
                    if nominal is not None and ll is not None and ll > nominal:
                        self.err(f"{rpath}.lendingLimit", "must not exceed nominal", q.get("lendingLimit"))
                    if nominal is not None:
                        out[str(res)] = ResourceQuota(nominal, bl, ll)
                else:
                    nominal = self.quantity(res, q, rpath)
                    if nominal is not None:
                        out[str(res)] = ResourceQuota(nominal)
            per_flavor[str(fname)] = out
        by_resource: dict[str, list[str]] = {}
        for fname, res_map in per_flavor.items():
            for res in res_map:
                by_resource.setdefault(res, []).append(fname)
        groups: dict[tuple[str, ...], list[str]] = {}
        for res, fls in by_resource.items():
            groups.setdefault(tuple(fls), []).append(res)
        return [
            ResourceGroup(
                covered_resources=tuple(resources),
                flavors=[FlavorQuotas(f, {r: per_flavor[f][r] for r in resources}) for f in fls],
            )
            for fls, resources in groups.items()
        ]

    def cohort(self, c: Any, path: str, flavor_names: list[str]) -> Cohort | None:
        c = self.mapping(c, path)
        self.keys(c, path, ("name", "parent", "quota"))
        name = self.string(c.get("name"), f"{path}.name", required=True)
        parent = self.string(c.get("parent"), f"{path}.parent")
        groups = self.quota(c.get("quota"), f"{path}.quota", flavor_names, limits=parent is not None)
        return Cohort(name or "", parent, groups) if name else None

    def queue(self, q: Any, path: str, flavor_names: list[str]) -> ClusterQueue | None:
        q = self.mapping(q, path)
        self.keys(q, path, ("name", "cohort", "queueingStrategy", "quota", "preemption", "fairSharing"))
        name = self.string(q.get("name"), f"{path}.name", required=True)
        cohort = self.string(q.get("cohort"), f"{path}.cohort")
        strategy = self.choice(
            q.get("queueingStrategy"),
            f"{path}.queueingStrategy",
            ("BestEffortFIFO", "StrictFIFO"),
            "BestEffortFIFO",
        )
        groups = self.quota(q.get("quota"), f"{path}.quota", flavor_names, limits=cohort is not None)
        p = self.mapping(q.get("preemption"), f"{path}.preemption")
        pp = f"{path}.preemption"
        self.keys(p, pp, ("withinClusterQueue", "reclaimWithinCohort", "borrowWithinCohort"))
        within = self.choice(
            p.get("withinClusterQueue"),
            f"{pp}.withinClusterQueue",
            ("Never", "LowerPriority", "LowerOrNewerEqualPriority"),
            "Never",
        )
        reclaim = self.choice(
            p.get("reclaimWithinCohort"),
            f"{pp}.reclaimWithinCohort",
            ("Never", "LowerPriority", "Any"),
            "Never",
        )
        bwc = self.mapping(p.get("borrowWithinCohort"), f"{pp}.borrowWithinCohort")
        self.keys(bwc, f"{pp}.borrowWithinCohort", ("policy", "maxPriorityThreshold"))
        bpolicy = self.choice(
            bwc.get("policy"), f"{pp}.borrowWithinCohort.policy", ("Never", "LowerPriority"), "Never"
        )
        threshold = self.integer(
            bwc.get("maxPriorityThreshold"), f"{pp}.borrowWithinCohort.maxPriorityThreshold"
        )
        if bpolicy != "Never" and reclaim == "Never":
            self.err(f"{pp}.borrowWithinCohort.policy", "needs reclaimWithinCohort other than Never", bpolicy)
        fs = self.mapping(q.get("fairSharing"), f"{path}.fairSharing")
        self.keys(fs, f"{path}.fairSharing", ("weight",))
        weight = self.number(fs.get("weight"), f"{path}.fairSharing.weight", 1.0)
        if weight < 0:
            self.err(f"{path}.fairSharing.weight", "must be >= 0", weight)
        if not name:
            return None
        return ClusterQueue(
            name=name,
            resource_groups=groups,
            cohort=cohort,
            queueing_strategy=strategy,
            preemption=PreemptionConfig(within, reclaim, bpolicy, threshold),
            fair_weight=weight,
        )

    def node(self, n: Any, path: str) -> Node | None:
        n = self.mapping(n, path)
        self.keys(n, path, ("name", "capacity", "gpuModel", "gpuMemory", "labels", "taints"))
        name = self.string(n.get("name"), f"{path}.name", required=True)
        alloc: dict[str, int] = {}
        gpus = 0
        for res, q in self.mapping(n.get("capacity"), f"{path}.capacity", required=True).items():
            value = self.quantity(str(res), q, f"{path}.capacity.{res}")
            if value is None:
                continue
            if res == GPU:
                if value % GPU_MILLI:
                    self.err(f"{path}.capacity.{res}", "must be a whole number of GPUs", q)
                gpus = value // GPU_MILLI
            else:
                alloc[str(res)] = value
        memory = (
            0
            if n.get("gpuMemory") is None
            else self.quantity("memory", n.get("gpuMemory"), f"{path}.gpuMemory")
        )
        model = n.get("gpuModel")
        if model is not None and not isinstance(model, str):
            self.err(f"{path}.gpuModel", "must be a string", model)
            model = None
        if not name:
            return None
        return Node(
            name=name,
            allocatable=alloc,
            labels=self.labels(n.get("labels"), f"{path}.labels"),
            taints=self.taints(n.get("taints"), f"{path}.taints"),
            gpus=gpus,
            gpu_model=model or "",
            gpu_memory=memory or 0,
            gpu_free=(GPU_MILLI,) * gpus,
        )

    def requests(self, d: Any, path: str, gpu_milli: Any) -> tuple[dict[str, int], int, int]:
        """Per-pod requests without GPUs, GPUs per pod, milli per GPU."""
        out: dict[str, int] = {}
        gpus, milli = 0, GPU_MILLI
        for res, q in self.mapping(d, path).items():
            value = self.quantity(str(res), q, f"{path}.{res}")
            if value is None:
                continue
            if res == GPU:
                if value and value < GPU_MILLI:
                    gpus, milli = 1, value  # nvidia.com/gpu: 500m is a share of one GPU
                elif value % GPU_MILLI:
                    self.err(f"{path}.{res}", "must be whole GPUs or a share below 1", q)
                else:
                    gpus = value // GPU_MILLI
            elif value:
                out[str(res)] = value
        gpath = path.rsplit(".", 1)[0] + ".gpuMilli"
        if gpu_milli is not None:
            m = self.integer(gpu_milli, gpath)
            if m is not None:
                if not 1 <= m <= GPU_MILLI:
                    self.err(gpath, "must be between 1 and 1000", m)
                elif not gpus:
                    self.err(gpath, "applies to requested GPUs", m, hint="add nvidia.com/gpu: 1 to requests")
                elif m < GPU_MILLI and gpus != 1:
                    self.err(gpath, "a share (< 1000) is of one GPU", m, hint="set nvidia.com/gpu: 1")
                else:
                    milli = m
        return out, gpus, milli
