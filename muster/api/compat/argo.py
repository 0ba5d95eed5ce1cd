"""Argo Workflows' ``argoproj.io/v1alpha1 Workflow`` as a Muster Workflow.

Muster's Workflow is one flat DAG of pod tasks; an Argo Workflow is a tree of templates. The
entrypoint is expanded into tasks:

* a ``steps`` template: every step of a group depends on every step of the group before it
  (outer list sequential, inner lists parallel, as in Argo);
* a ``dag`` template: ``dependencies``, or ``depends`` when it is a conjunction of task names
  (``a && b.Succeeded``);
* a step or task that calls another ``steps``/``dag`` template is inlined: its tasks are named
  ``<call>-<inner>``, its first tasks inherit the call's dependencies, what depends on the call
  depends on its last tasks, its ``{{inputs.parameters.x}}`` are replaced by the call's
  arguments, and the call's ``when`` is added to each of its tasks;
* a call of a ``container`` or ``script`` template is one task
  (:mod:`muster.api.compat.argo_templates`).

References are translated: ``{{steps.X.outputs.parameters.p}}`` and ``{{tasks.X...}}`` to
``{{tasks.<task>.outputs.parameters.p}}``, ``{{steps.X.outputs.result}}`` to the output
parameter ``result`` of a task that records its standard output. ``spec.arguments``,
``spec.parallelism`` and ``spec.onExit`` (a container/script template, or a steps/dag template
of one step) map directly; ``spec.retryStrategy``, ``nodeSelector``, ``tolerations``,
``affinity``, ``volumes`` and ``podMetadata`` are the defaults of every task's. What
cannot be honoured is kept in the ignored-fields annotation and warned per field (the user's
path); a template that cannot run at all (``resource``, ``suspend``, ``http``, ...) is an error
naming it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from muster.api.base import API_VERSION
from muster.api.compat.argo_templates import HANDLED, RESULT, Leaf, capture_result, leaf_task
from muster.api.compat.base import Conversion, Converter
from muster.api.compat.jobs import PRIORITY_LABEL, QUEUE_LABEL
from muster.api.errors import FieldError, InvalidObject, child_path

__all__ = ["CONVERTERS", "convert_argo_workflow"]

Obj = dict[str, Any]
# Workflow spec fields used as every task's default (the rest of what is not mapped is kept).
_DEFAULTS = ("retryStrategy", "nodeSelector", "tolerations", "affinity", "volumes", "podMetadata")
_MAPPED = frozenset({"entrypoint", "templates", "arguments", "onExit", "parallelism", *_DEFAULTS})
_CALL_FIELDS = frozenset(
    {
        "name",
        "template",
        "arguments",
        "when",
        "withItems",
        "withParam",
        "withSequence",
        "dependencies",
        "depends",
    }
)
_RUNNABLE = ("container", "script", "steps", "dag")
_OUTPUT_REF = re.compile(
    r"\{\{\s*(steps|tasks)\.([^.{}\s]+)\.outputs\.(result|parameters\.[^.{}\s]+|artifacts\.[^.{}\s]+)\s*\}\}"
)
_INPUT_REF = re.compile(r"\{\{\s*inputs\.parameters\.([^.{}\s]+)\s*\}\}")
_DEPENDS_TERM = re.compile(r"^\(?\s*([A-Za-z0-9][-A-Za-z0-9]*)(?:\.(Succeeded))?\s*\)?$")


def convert_argo_workflow(doc: Mapping[str, Any]) -> Conversion:
    """An Argo Workflow as a Muster Workflow (see the module docstring)."""
    source = copy.deepcopy(dict(doc))
    spec = source.get("spec")
    if not isinstance(spec, dict):
        raise InvalidObject([FieldError("spec", "required field is missing")])
    conversion = Conversion(doc=None)
    metadata = _metadata(source, conversion)
    if spec.get("workflowTemplateRef") is not None:
        raise InvalidObject(
            [
                FieldError(
                    "spec.workflowTemplateRef",
                    "not supported: Muster has no WorkflowTemplate kind",
                    hint="copy the template's templates and entrypoint into this Workflow",
                )
            ]
        )
    entry = spec.get("entrypoint")
    if not entry:
        raise InvalidObject([FieldError("spec.entrypoint", "required field is missing")])
    expander = _Expander(_templates(spec), conversion, {k: spec[k] for k in _DEFAULTS if k in spec})
    # The entrypoint's inputs are the workflow's arguments, by name (as in Argo).
    given = (
        (spec.get("arguments") or {}).get("parameters") if isinstance(spec.get("arguments"), dict) else None
    )
    names = [p["name"] for p in given or [] if isinstance(p, dict) and isinstance(p.get("name"), str)]
    arguments = [{"name": n, "value": f"{{{{workflow.parameters.{n}}}}}"} for n in names]
    entry_call = {"name": entry, "arguments": {"parameters": arguments}}
    expander.call(entry, entry_call, "spec.entrypoint", "", [], None, {}, top=True)
    native_spec: Obj = {"tasks": expander.tasks}
    if spec.get("onExit"):
        native_spec["onExit"] = expander.exit_handler(spec["onExit"])
    if isinstance(spec.get("arguments"), dict):
        native_spec["arguments"] = _arguments(spec["arguments"], conversion)
    if spec.get("parallelism") is not None:
        native_spec["parallelism"] = spec["parallelism"]
    labels = metadata.get("labels") or {}
    for label, key in ((QUEUE_LABEL, "queueName"), (PRIORITY_LABEL, "priorityClassName")):
        if labels.get(label):
            native_spec[key] = labels[label]
            expander.paths.append((f"spec.{key}", f"metadata.labels[{label}]"))
    for key in sorted(set(spec) - _MAPPED - {"workflowTemplateRef"}):
        conversion.keep(child_path("spec", key), spec[key])
    expander.finish()
    # A template called from several places warns once.
    conversion.warnings = list({str(w): w for w in conversion.warnings}.values())
    conversion.doc = {
        "apiVersion": API_VERSION,
        "kind": "Workflow",
        "metadata": metadata,
        "spec": native_spec,
    }
    conversion.paths = tuple(expander.paths)
    return conversion


def _metadata(source: Obj, conversion: Conversion) -> Obj:
    meta = source.get("metadata")
    if not isinstance(meta, dict):
        raise InvalidObject([FieldError("metadata", "required field is missing")])
    meta = {k: v for k, v in meta.items() if k != "generateName" or not meta.get("name")}
    prefix = meta.pop("generateName", None)
    if not meta.get("name") and isinstance(prefix, str) and prefix:
        # A name from the document itself: applying it again updates the same workflow.
        digest = hashlib.sha256(json.dumps(source, sort_keys=True, default=str).encode()).hexdigest()
        meta["name"] = f"{prefix}{digest[:5]}"
        conversion.warnings.append(
            FieldError(
                "metadata.generateName",
                f"named {meta['name']!r}: the suffix is a digest of the manifest, so applying it again "
                "updates that workflow instead of creating another",
                hint="set metadata.name to choose the name",
            )
        )
    return meta


def _templates(spec: Obj) -> dict[str, tuple[str, Obj]]:
    templates = spec.get("templates")
    if not isinstance(templates, list) or not templates:
        raise InvalidObject([FieldError("spec.templates", "required: a list of templates")])
    found: dict[str, tuple[str, Obj]] = {}
    for i, t in enumerate(templates):
        path = child_path("spec.templates", i)
        if not isinstance(t, dict) or not t.get("name"):
            raise InvalidObject([FieldError(child_path(path, "name"), "required field is missing")])
        if t["name"] in found:
            raise InvalidObject(
                [
                    FieldError(
                        child_path(path, "name"), f"duplicate template name, also at {found[t['name']][0]}"
                    )
                ]
            )
        found[t["name"]] = (path, t)
    return found


def _arguments(arguments: Obj, conversion: Conversion) -> Obj:
    parameters = []
    for i, p in enumerate(arguments.get("parameters") or []):
        where = child_path("spec.arguments.parameters", i)
        if not isinstance(p, dict):
            raise InvalidObject([FieldError(where, "must be a mapping with name and value")])
        value = p.get("value", p.get("default"))
        parameters.append({"name": p.get("name"), **({} if value is None else {"value": str(value)})})
        for key in sorted(set(p) - {"name", "value", "default"}):
            conversion.keep(child_path(where, key), p[key])
    for key in sorted(set(arguments) - {"parameters"}):
        conversion.keep(child_path("spec.arguments", key), arguments[key])
    return {"parameters": parameters}


@dataclass
class _Scope:
    """The names visible in one steps/dag template being expanded."""

    kind: str  # steps or tasks
    prefix: str  # prepended to native names ("" at the top)
    inputs: dict[str, str]  # {{inputs.parameters.x}} of an inlined template -> its value
    names: dict[str, list[str]] = field(default_factory=dict)  # call name -> its native tasks' leaves
    leaves: set[str] = field(default_factory=set)  # calls that are one native task each


class _Expander:
    def __init__(self, templates: dict[str, tuple[str, Obj]], conversion: Conversion, defaults: Obj) -> None:
        self.templates = templates
        self.conversion = conversion
        self.defaults = defaults
        self.tasks: list[Obj] = []
        self.paths: list[tuple[str, str]] = []
        self.results: dict[str, str] = {}  # native task whose stdout is read -> where it is read
        self.stack: list[str] = []
        self.kept_templates: set[str] = set()
        self.names: set[str] = set()  # native task names given out

    def call(
        self,
        template_name: Any,
        call: Obj,
        call_path: str,
        name: str,
        dependencies: list[str],
        when: str | None,
        group_inputs: dict[str, str],
        top: bool = False,
    ) -> list[str]:
        """Expand a call of ``template_name``; return the native tasks that finish it."""
        found = self.templates.get(template_name) if isinstance(template_name, str) else None
        if found is None:
            where = call_path if top else child_path(call_path, "template")
            raise InvalidObject(
                [
                    FieldError(
                        where,
                        f"no template named {template_name!r}",
                        hint=f"templates: {', '.join(self.templates)}",
                    )
                ]
            )
        tpath, template = found
        self._keep_template(tpath, template)
        kind = next((k for k in _RUNNABLE if k in template), None)
        if kind is None:
            other = next((k for k in template if k not in HANDLED), "its type")
            raise InvalidObject(
                [
                    FieldError(
                        child_path(tpath, other),
                        f"template {template_name!r} cannot run on Muster: only container, script, steps "
                        "and dag templates can",
                        hint="resource, suspend, http, data, plugin and containerSet templates are not "
                        "supported",
                    )
                ]
            )
        if kind in ("container", "script"):
            return [self._leaf(name, call, call_path, template, tpath, dependencies, when)]
        if template_name in self.stack:
            raise InvalidObject(
                [
                    FieldError(
                        call_path, f"template {template_name!r} calls itself: recursion is not supported"
                    )
                ]
            )
        for key in ("withItems", "withParam", "withSequence"):
            if key in call:
                raise InvalidObject(
                    [
                        FieldError(
                            child_path(call_path, key),
                            f"a loop over a {kind} template is not supported: Muster fans out single tasks",
                            hint="loop inside that template instead (on its container steps)",
                        )
                    ]
                )
        inputs = self._group_inputs(call, call_path, template, tpath, group_inputs)
        scope = _Scope("steps" if kind == "steps" else "tasks", f"{name}-" if name else "", inputs)
        self.stack.append(template_name)
        try:
            if kind == "steps":
                return self._steps(template["steps"], child_path(tpath, "steps"), scope, dependencies, when)
            return self._dag(template["dag"], child_path(tpath, "dag"), scope, dependencies, when)
        finally:
            self.stack.pop()

    def exit_handler(self, template_name: Any) -> str:
        """The native name of the onExit task (one container/script task)."""
        before = len(self.tasks)
        name = self._native_name("onexit", "spec.onExit")
        self.call(template_name, {"name": name}, "spec.onExit", name, [], None, {}, top=True)
        added = self.tasks[before:]
        if len(added) != 1:
            raise InvalidObject(
                [
                    FieldError(
                        "spec.onExit",
                        f"the exit handler {template_name!r} runs {len(added)} tasks; Muster runs one",
                        hint="make it one container or script template; use {{workflow.status}} in it "
                        "to branch",
                    )
                ]
            )
        task = added[0]
        task.pop("dependencies", None)
        return task["name"]

    def finish(self) -> None:
        """Record standard output where a task's ``outputs.result`` is read."""
        by_name = {t["name"]: t for t in self.tasks}
        for name, where in self.results.items():
            capture_result(by_name[name], where)

    def _leaf(
        self,
        name: str,
        call: Obj,
        call_path: str,
        template: Obj,
        tpath: str,
        deps: list[str],
        when: str | None,
    ) -> str:
        native = name or self._native_name(str(call.get("name")), call_path)
        if "withSequence" in call:
            call = {
                **call,
                "withItems": _sequence(call["withSequence"], child_path(call_path, "withSequence")),
            }
        leaf = Leaf(native, call, call_path, template, tpath, deps, when)
        task, paths = leaf_task(leaf, self.conversion, self.defaults)
        index = len(self.tasks)
        self.tasks.append(task)
        self.paths += [(f"spec.tasks[{index}].{suffix}", foreign) for suffix, foreign in paths]
        self.paths.append((f"spec.tasks[{index}].dependencies", child_path(call_path, "dependencies")))
        self.paths.append((f"spec.tasks[{index}]", call_path))
        return native

    def _steps(self, groups: Any, path: str, scope: _Scope, deps: list[str], when: str | None) -> list[str]:
        if not isinstance(groups, list):
            raise InvalidObject([FieldError(path, "must be a list of lists of steps")])
        previous = list(deps)
        for g, group in enumerate(groups):
            steps = [group] if isinstance(group, dict) else group
            if not isinstance(steps, list):
                raise InvalidObject([FieldError(child_path(path, g), "must be a list of steps")])
            ends: list[str] = []
            for s, step in enumerate(steps):
                where = child_path(path, g, s) if not isinstance(group, dict) else child_path(path, g)
                ends += self._call_in_scope(step, where, scope, previous, when)
            previous = ends or previous
        return previous

    def _dag(self, dag: Any, path: str, scope: _Scope, deps: list[str], when: str | None) -> list[str]:
        if not isinstance(dag, dict) or not isinstance(dag.get("tasks"), list):
            raise InvalidObject([FieldError(child_path(path, "tasks"), "required: a list of tasks")])
        for key in sorted(set(dag) - {"tasks"}):
            self._note_dag_field(dag, key, child_path(path, key))
        tasks = dag["tasks"]
        tpath = child_path(path, "tasks")
        needs = {t.get("name"): self._needs(t, child_path(tpath, i)) for i, t in enumerate(tasks)}
        order = _topological(tasks, needs, tpath)
        depended = {d for n in needs.values() for d in n}
        ends: list[str] = []
        for i in order:
            task = tasks[i]
            mine = [leaf for d in needs[task.get("name")] for leaf in scope.names.get(d, [])]
            finished = self._call_in_scope(task, child_path(tpath, i), scope, mine or list(deps), when)
            if task.get("name") not in depended:
                ends += finished
        return ends

    def _call_in_scope(
        self, call: Any, path: str, scope: _Scope, deps: list[str], when: str | None
    ) -> list[str]:
        if not isinstance(call, dict) or not call.get("name"):
            raise InvalidObject([FieldError(child_path(path, "name"), "required field is missing")])
        if "inline" in call or "templateRef" in call:
            key = "inline" if "inline" in call else "templateRef"
            raise InvalidObject(
                [
                    FieldError(
                        child_path(path, key), "not supported: name a template of this Workflow in template"
                    )
                ]
            )
        for key in sorted(set(call) - _CALL_FIELDS):
            self._note_call_field(call, key, child_path(path, key))
        translated = self._translate(
            {k: v for k, v in call.items() if k not in ("name", "template", "dependencies", "depends")},
            scope,
            path,
        )
        translated["name"] = call["name"]
        own_when = translated.get("when")
        both = own_when if when is None else (when if own_when is None else f"({when}) && ({own_when})")
        native = self._native_name(f"{scope.prefix}{call['name']}", child_path(path, "name"), call["name"])
        ends = self.call(call.get("template"), translated, path, native, deps, both, scope.inputs)
        scope.names[call["name"]] = ends
        if len(ends) == 1 and ends[0] == native:
            scope.leaves.add(call["name"])
        return ends

    def _native_name(self, wanted: str, path: str, written: str | None = None) -> str:
        """``wanted`` as a DNS-1123 label, unique among the tasks (Argo allows A, B_1, ...);
        ``written`` is the name in the user's document (``wanted`` less an inlining prefix)."""
        base = re.sub(r"[^a-z0-9-]+", "-", wanted.lower()).strip("-")[:55] or "task"
        name, n = base, 1
        while name in self.names:
            n += 1
            name = f"{base}-{n}"
        self.names.add(name)
        if name != wanted:
            self.conversion.warnings.append(
                FieldError(
                    path,
                    f"the task is named {name!r} on Muster (task names are DNS-1123 labels)",
                    wanted if written is None else written,
                )
            )
        return name

    def _needs(self, task: Any, path: str) -> list[str]:
        if not isinstance(task, dict):
            raise InvalidObject([FieldError(path, "must be a mapping (a DAG task)")])
        if task.get("depends") is not None and task.get("dependencies"):
            raise InvalidObject(
                [FieldError(child_path(path, "depends"), "may not be set together with dependencies")]
            )
        if task.get("depends") is None:
            return list(task.get("dependencies") or [])
        needs = []
        for term in str(task["depends"]).split("&&"):
            m = _DEPENDS_TERM.match(term.strip())
            if m is None:
                raise InvalidObject(
                    [
                        FieldError(
                            child_path(path, "depends"),
                            f"only a conjunction of tasks (a && b.Succeeded) is supported, "
                            f"not {term.strip()!r}",
                            task["depends"],
                            "Muster runs a task once its dependencies succeeded or were skipped; "
                            "use dependencies",
                        )
                    ]
                )
            needs.append(m.group(1))
        return needs

    def _translate(self, value: Any, scope: _Scope, path: str) -> Any:
        if isinstance(value, str):
            return self._translate_text(value, scope, path)
        if isinstance(value, list):
            return [self._translate(v, scope, path) for v in value]
        if isinstance(value, dict):
            return {k: self._translate(v, scope, path) for k, v in value.items()}
        return value

    def _translate_text(self, text: str, scope: _Scope, path: str) -> str:
        def output(m: re.Match[str]) -> str:
            kind, name, what = m.groups()
            if kind != scope.kind or name not in scope.names:
                return m.group(0)  # the native validation names what is wrong with it
            if name not in scope.leaves:
                raise InvalidObject(
                    [
                        FieldError(
                            path,
                            f"{m.group(0)}: outputs of a steps or dag template are not supported",
                            hint="read the output of the container step inside it",
                        )
                    ]
                )
            native = scope.names[name][0]
            if what == RESULT:
                self.results.setdefault(native, path)
                what = f"parameters.{RESULT}"
            return f"{{{{tasks.{native}.outputs.{what}}}}}"

        text = _OUTPUT_REF.sub(output, text)
        if scope.inputs:
            text = _INPUT_REF.sub(lambda m: scope.inputs.get(m.group(1), m.group(0)), text)
        return text

    def _group_inputs(
        self, call: Obj, call_path: str, template: Obj, tpath: str, outer: dict[str, str]
    ) -> dict[str, str]:
        declared = (template.get("inputs") or {}).get("parameters") or []
        given = {p.get("name"): p for p in (call.get("arguments") or {}).get("parameters") or []}
        values: dict[str, str] = {}
        for i, p in enumerate(declared):
            name = p.get("name")
            value = given.get(name, {}).get("value", p.get("value", p.get("default")))
            if value is None:
                raise InvalidObject(
                    [
                        FieldError(
                            child_path(call_path, "arguments", "parameters"),
                            f"no value for input parameter {name!r} of template {template.get('name')!r}",
                            hint=f"add it, or a default at {child_path(tpath, 'inputs', 'parameters', i)}",
                        )
                    ]
                )
            values[name] = str(value)
        if (template.get("inputs") or {}).get("artifacts"):
            raise InvalidObject(
                [
                    FieldError(
                        child_path(tpath, "inputs", "artifacts"),
                        "input artifacts of a steps or dag template are not supported",
                        hint="pass the artifact to the container steps inside it",
                    )
                ]
            )
        return values

    def _keep_template(self, tpath: str, template: Obj) -> None:
        if tpath in self.kept_templates:
            return
        self.kept_templates.add(tpath)
        for key in sorted(set(template) - HANDLED):
            if key in ("resource", "suspend", "http", "data", "plugin", "containerSet"):
                continue  # the template cannot run: call() says so
            if key in ("parallelism", "failFast"):
                self._note_dag_field(template, key, child_path(tpath, key))
                continue
            self.conversion.keep(child_path(tpath, key), template[key])

    def _note_dag_field(self, owner: Obj, key: str, path: str) -> None:
        if key == "failFast" and owner[key] is not False:
            return  # Muster's DAGs always fail fast, Argo's default
        self.conversion.keep(path, owner[key])

    def _note_call_field(self, call: Obj, key: str, path: str) -> None:
        self.conversion.keep(path, call[key])


def _topological(tasks: list[Any], needs: dict[Any, list[str]], path: str) -> list[int]:
    """Task indices, each after the tasks it needs (spec order among equals)."""
    index = {t.get("name"): i for i, t in enumerate(tasks)}
    for i, t in enumerate(tasks):
        for dep in needs[t.get("name")]:
            if dep not in index:
                raise InvalidObject(
                    [
                        FieldError(
                            child_path(path, i, "dependencies" if t.get("dependencies") else "depends"),
                            f"no task named {dep!r}",
                            hint=f"tasks: {', '.join(str(n) for n in index)}",
                        )
                    ]
                )
    done: list[int] = []
    placed: set[Any] = set()
    while len(done) < len(tasks):
        ready = [
            i for i, t in enumerate(tasks) if i not in done and all(d in placed for d in needs[t.get("name")])
        ]
        if not ready:
            cycle = [str(tasks[i].get("name")) for i in range(len(tasks)) if i not in done]
            raise InvalidObject([FieldError(path, f"dependency cycle among {', '.join(cycle)}")])
        done.append(ready[0])
        placed.add(tasks[ready[0]].get("name"))
    return done


def _sequence(seq: Any, path: str) -> list[str]:
    """``withSequence`` (literal count, or start and end) as withItems."""
    if not isinstance(seq, dict):
        raise InvalidObject([FieldError(path, "must be a mapping with count, or start and end")])
    try:
        start = int(seq.get("start", 0))
        end = int(seq["end"]) if "end" in seq else start + int(seq["count"]) - 1
    except (KeyError, TypeError, ValueError):
        raise InvalidObject(
            [
                FieldError(
                    path,
                    "must give count, or start and end, as numbers",
                    seq,
                    "references are not supported here",
                )
            ]
        ) from None
    if "format" in seq:
        raise InvalidObject(
            [FieldError(child_path(path, "format"), "not supported: items are plain numbers")]
        )
    step = 1 if end >= start else -1
    return [str(n) for n in range(start, end + step, step)]


CONVERTERS: dict[tuple[str, str], Converter] = {
    ("argoproj.io/v1alpha1", "Workflow"): convert_argo_workflow,
}
