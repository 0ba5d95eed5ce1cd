"""One Argo ``container`` or ``script`` template call as one native Workflow task.

What a leaf task becomes (the steps/dag expansion around it is :mod:`muster.api.compat.argo`):

* ``container`` -> the task's pod template, one container named ``main`` (Argo's name for it);
  the template's pod fields (``nodeSelector``, ``tolerations``, ``affinity``, ``volumes``,
  ``metadata``, ``priorityClassName``) go to the pod; ``activeDeadlineSeconds`` or ``timeout``
  to the task's ``timeout``; ``retryStrategy`` to the task's; ``memoize`` to ``cache``.
* ``script`` -> the same container running ``command + [a file holding source] + args``, as
  Argo's executor does: a small ``sh`` launcher writes ``source`` to a temporary file first.
* ``inputs.parameters`` -> the task's input parameters, valued by the caller's arguments (else
  the template's ``value`` or ``default``); the template keeps ``{{inputs.parameters.x}}``.
* ``outputs.parameters[].valueFrom.path`` and ``outputs.artifacts[].path`` are absolute paths
  in Argo's container; Muster reads outputs from ``$MUSTER_OUTPUTS_DIR``, so each path is given
  a name there and every place the command, args or script names the path is rewritten to it
  (a warning says so). Input artifacts' ``path`` become ``{{inputs.artifacts.<name>}}``.
* ``outputs.result`` (stdout), when something reads it: the command's standard output is also
  written to an output parameter ``result``.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from muster.api.compat.base import Conversion
from muster.api.errors import FieldError, InvalidObject, child_path

__all__ = ["RESULT", "Leaf", "capture_result", "leaf_task"]

Obj = dict[str, Any]
RESULT = "result"
_RESULT_FILE = "argo-result"
# POSIX sh only (the local runtime expands $(VAR) in command and args, so no $( here).
# command, then the file holding source, then args (Argo's order): $2 is how many words of
# command come before the file.
_SCRIPT = (
    'src=$1; n=$2; shift 2; f=`mktemp`; printf "%s" "$src" > "$f"; i=0; '
    'for a; do [ "$i" = "$n" ] && set -- "$@" "$f"; set -- "$@" "$a"; shift; i=`expr $i + 1`; done; '
    '[ "$i" = "$n" ] && set -- "$@" "$f"; "$@"; rc=$?; rm -f "$f"; exit $rc'
)
# Standard output goes to the log as it comes and to the result file; the exit status is the command's.
_CAPTURE = (
    'out="$MUSTER_OUTPUTS_DIR/$1"; shift; { "$@"; echo $? > "$out.rc"; } | tee "$out"; '
    'rc=`cat "$out.rc"`; rm -f "$out.rc"; exit $rc'
)
_POD_FIELDS = ("nodeSelector", "tolerations", "affinity", "volumes", "priorityClassName")
# Template fields the expansion or this module handles; the rest are kept and warned.
HANDLED = frozenset(
    {
        "name",
        "container",
        "script",
        "steps",
        "dag",
        "inputs",
        "outputs",
        "retryStrategy",
        "activeDeadlineSeconds",
        "timeout",
        "metadata",
        "memoize",
        *_POD_FIELDS,
    }
)
_RETRY_POLICIES = {"Always": "Always", "OnFailure": "OnFailure", "OnError": "OnError"}


@dataclass
class Leaf:
    """The call of a container/script template: where it is and what it passes."""

    name: str  # the native task name
    call: Obj  # the step or DAG task (translated references)
    call_path: str  # its path in the user's document
    template: Obj
    template_path: str
    dependencies: list[str] = field(default_factory=list)
    when: str | None = None


def leaf_task(leaf: Leaf, conversion: Conversion, defaults: Obj) -> tuple[Obj, list[tuple[str, str]]]:
    """The native task for ``leaf`` and its (native suffix, foreign path) mappings, the native
    suffix relative to the task (``template.spec.containers[0]``)."""
    t, tpath = leaf.template, leaf.template_path
    kind = "container" if "container" in t else "script"
    container = copy.deepcopy(t[kind])
    if not isinstance(container, dict):
        raise InvalidObject([FieldError(child_path(tpath, kind), "must be a mapping (a container)")])
    container.setdefault("name", "main")
    if kind == "script":
        _script(container, child_path(tpath, "script"))
    pod: Obj = {"containers": [container]}
    for key in _POD_FIELDS:
        value = t.get(key, defaults.get(key))
        if value is not None:
            pod[key] = copy.deepcopy(value)
    if "volumes" not in pod and defaults.get("volumes") and container.get("volumeMounts"):
        pod["volumes"] = copy.deepcopy(defaults["volumes"])
    template: Obj = {"spec": pod}
    metadata = t.get("metadata", defaults.get("podMetadata"))
    if isinstance(metadata, dict):
        template["metadata"] = copy.deepcopy(metadata)
    task: Obj = {"name": leaf.name, "template": template}
    if leaf.dependencies:
        task["dependencies"] = list(leaf.dependencies)
    if leaf.when:
        task["when"] = leaf.when
    for key in ("withItems", "withParam"):
        if key in leaf.call:
            task[key] = leaf.call[key]
    for key, value in (
        ("inputs", _inputs(leaf, container, conversion)),
        ("outputs", _outputs(t, tpath, container, conversion)),
    ):
        if any(value.values()):
            task[key] = {group: items for group, items in value.items() if items}
    retry = t.get("retryStrategy", defaults.get("retryStrategy"))
    if retry is not None:
        task["retryStrategy"] = _retry(retry, child_path(tpath, "retryStrategy"), conversion)
    timeout = t.get("timeout", t.get("activeDeadlineSeconds"))
    if timeout is not None:
        task["timeout"] = timeout
    if isinstance(t.get("memoize"), dict):
        task["cache"] = _cache(t["memoize"], child_path(tpath, "memoize"), conversion)
    paths = [
        ("template.spec.containers[0]", child_path(tpath, kind)),
        ("template.spec", tpath),
        ("template.metadata", child_path(tpath, "metadata")),
        ("inputs", child_path(tpath, "inputs")),
        ("outputs", child_path(tpath, "outputs")),
        ("retryStrategy", child_path(tpath, "retryStrategy")),
        ("cache", child_path(tpath, "memoize")),
        ("timeout", child_path(tpath, "timeout" if "timeout" in t else "activeDeadlineSeconds")),
        ("withItems", child_path(leaf.call_path, "withItems")),
        ("withParam", child_path(leaf.call_path, "withParam")),
        ("when", child_path(leaf.call_path, "when")),
        ("name", child_path(leaf.call_path, "name")),
    ]
    return task, paths


def capture_result(task: Obj, call_path: str) -> None:
    """Make ``task`` record its command's standard output as the output parameter ``result``."""
    outputs = task.setdefault("outputs", {}).setdefault("parameters", [])
    if any(p.get("name") == RESULT for p in outputs):
        raise InvalidObject(
            [
                FieldError(
                    call_path,
                    f"outputs.result is read, but the template also declares an output parameter {RESULT!r}",
                    hint="rename that output parameter",
                )
            ]
        )
    container = task["template"]["spec"]["containers"][0]
    argv = [*(container.get("command") or []), *(container.get("args") or [])]
    if argv:  # no command: the native validation says so
        container["command"] = ["sh", "-c", _CAPTURE, "argo-result", _RESULT_FILE, *argv]
        container.pop("args", None)
    outputs.append({"name": RESULT, "valueFrom": {"path": _RESULT_FILE}})


def _script(container: Obj, path: str) -> None:
    source = container.pop("source", None)
    if not isinstance(source, str):
        raise InvalidObject([FieldError(child_path(path, "source"), "required field is missing")])
    command = container.get("command") or []
    if not command:
        raise InvalidObject(
            [
                FieldError(
                    child_path(path, "command"),
                    "required: the interpreter that runs source",
                    hint="e.g. command: [python] or command: [sh]",
                )
            ]
        )
    # Argo runs source from a file, where no $(VAR) is expanded: escape it ($$ is a literal $).
    escaped = source.replace("$", "$$")
    args = container.pop("args", [])
    container["command"] = ["sh", "-c", _SCRIPT, "argo-script", escaped, str(len(command)), *command, *args]


def _inputs(leaf: Leaf, container: Obj, conversion: Conversion) -> Obj:
    declared = (leaf.template.get("inputs") or {}) if isinstance(leaf.template.get("inputs"), dict) else {}
    args = leaf.call.get("arguments") or {}
    given = {p.get("name"): p for p in args.get("parameters") or [] if isinstance(p, dict)}
    ipath = child_path(leaf.template_path, "inputs")
    parameters = []
    for i, p in enumerate(declared.get("parameters") or []):
        name = p.get("name")
        if name in given:
            value = _argument_value(given[name], child_path(leaf.call_path, "arguments", "parameters"))
        elif "value" in p or "default" in p:
            value = p.get("value", p.get("default"))
        else:
            raise InvalidObject(
                [
                    FieldError(
                        child_path(leaf.call_path, "arguments", "parameters"),
                        f"no value for input parameter {name!r} of template {leaf.template.get('name')!r}",
                        hint=f"add it, or a default at {child_path(ipath, 'parameters', i)}",
                    )
                ]
            )
        parameters.append({"name": name, "value": _text(value)})
        for key in sorted(set(p) - {"name", "value", "default"}):
            conversion.keep(child_path(ipath, "parameters", i, key), p[key])
    sources = {a.get("name"): a for a in args.get("artifacts") or [] if isinstance(a, dict)}
    artifacts = []
    for i, a in enumerate(declared.get("artifacts") or []):
        name, where = a.get("name"), child_path(ipath, "artifacts", i)
        source = sources.get(name, a)
        if "from" not in source:
            raise InvalidObject(
                [
                    FieldError(
                        where,
                        f"input artifact {name!r} needs from: {{{{steps.<step>.outputs.artifacts.<name>}}}}",
                        hint="Muster passes artifacts between tasks only; s3, http, git and raw sources "
                        "are not fetched",
                    )
                ]
            )
        artifacts.append({"name": name, "from": source["from"]})
        if a.get("path"):
            new = f"{{{{inputs.artifacts.{name}}}}}"
            _substitute(container, a["path"], new, child_path(where, "path"), conversion, "MUSTER_INPUTS_DIR")
    return {"parameters": parameters, "artifacts": artifacts}


def _argument_value(arg: Obj, path: str) -> Any:
    if "value" in arg:
        return arg["value"]
    raise InvalidObject(
        [FieldError(path, f"argument {arg.get('name')!r}: only value is supported (no valueFrom)")]
    )


def _outputs(t: Obj, tpath: str, container: Obj, conversion: Conversion) -> Obj:
    declared = t.get("outputs") if isinstance(t.get("outputs"), dict) else {}
    opath = child_path(tpath, "outputs")
    used: set[str] = set()
    parameters = []
    for i, p in enumerate(declared.get("parameters") or []):
        where = child_path(opath, "parameters", i)
        source = p.get("valueFrom") or {}
        if not source.get("path"):
            raise InvalidObject(
                [
                    FieldError(
                        child_path(where, "valueFrom", "path"),
                        "required: Muster reads output parameters from files",
                        hint="write the value to a file and name it in valueFrom.path",
                    )
                ]
            )
        rel = _output_name(source["path"], used)
        parameters.append({"name": p.get("name"), "valueFrom": {"path": rel}})
        _rewrite_container(container, source["path"], rel, child_path(where, "valueFrom", "path"), conversion)
        for key in sorted(set(p) - {"name", "valueFrom"}):
            conversion.keep(child_path(where, key), p[key])
        for key in sorted(set(source) - {"path"}):
            conversion.keep(child_path(where, "valueFrom", key), source[key])
    artifacts = []
    for i, a in enumerate(declared.get("artifacts") or []):
        where = child_path(opath, "artifacts", i)
        if not a.get("path"):
            raise InvalidObject([FieldError(child_path(where, "path"), "required field is missing")])
        rel = _output_name(a["path"], used)
        artifacts.append({"name": a.get("name"), "path": rel})
        _rewrite_container(container, a["path"], rel, child_path(where, "path"), conversion)
        for key in sorted(set(a) - {"name", "path"}):
            conversion.keep(child_path(where, key), a[key])
    for key in sorted(set(declared) - {"parameters", "artifacts"}):
        conversion.keep(child_path(opath, key), declared[key])
    return {"parameters": parameters, "artifacts": artifacts}


def _output_name(path: str, used: set[str]) -> str:
    """A file name under MUSTER_OUTPUTS_DIR for an absolute Argo path, unique in the task."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", path.strip("/")) or "output"
    name, n = base, 1
    while name in used:
        n += 1
        name = f"{base}-{n}"
    used.add(name)
    return name


def _rewrite_container(container: Obj, path: str, rel: str, where: str, conversion: Conversion) -> None:
    _substitute(container, path, f"$(MUSTER_OUTPUTS_DIR)/{rel}", where, conversion, "MUSTER_OUTPUTS_DIR")


def _substitute(container: Obj, path: str, new: str, where: str, conversion: Conversion, env: str) -> None:
    """Replace ``path`` (a whole path, not a prefix of a longer name) in the command and args
    (a script's source is in its command by now); warn either way."""
    pattern = re.compile(re.escape(path.rstrip("/")) + r"(?![A-Za-z0-9._-])")
    found = False
    for key in ("command", "args", "source"):
        values = container.get(key)
        if isinstance(values, str):
            values = [values]
        if not isinstance(values, list):
            continue
        out = []
        for value in values:
            if isinstance(value, str) and pattern.search(value):
                found = True
                value = pattern.sub(lambda _m: new, value)
            out.append(value)
        container[key] = out if key != "source" else out[0]
    if found:
        rule = f"{path} is under ${env} on Muster: the command names it as {new}"
    else:
        rule = (
            f"{path} is not named in the command, args or source: the program must use {new} "
            f"(${env} is set in its environment)"
        )
    conversion.warnings.append(FieldError(where, rule))


def _retry(retry: Any, path: str, conversion: Conversion) -> Obj:
    if not isinstance(retry, dict):
        raise InvalidObject([FieldError(path, "must be a mapping")])
    out: Obj = {}
    if retry.get("limit") is not None:
        out["limit"] = _int_or_string(retry["limit"])
    policy = retry.get("retryPolicy")
    if policy is not None:
        if policy == "OnTransientError":
            conversion.warnings.append(
                FieldError(
                    child_path(path, "retryPolicy"),
                    "OnTransientError is honoured as OnError: Muster retries every system error",
                )
            )
        out["retryPolicy"] = _RETRY_POLICIES.get(
            policy, "OnError" if policy == "OnTransientError" else policy
        )
    backoff = retry.get("backoff")
    if isinstance(backoff, dict):
        b: Obj = {}
        for key in ("duration", "maxDuration"):
            if backoff.get(key) is not None:
                b[key] = backoff[key]
        if backoff.get("factor") is not None:
            b["factor"] = _int_or_string(backoff["factor"])
        for key in sorted(set(backoff) - {"duration", "maxDuration", "factor"}):
            conversion.keep(child_path(path, "backoff", key), backoff[key])
        out["backoff"] = b
    for key in sorted(set(retry) - {"limit", "retryPolicy", "backoff"}):
        conversion.keep(child_path(path, key), retry[key])
    return out


def _cache(memoize: Obj, path: str, conversion: Conversion) -> Obj:
    conversion.warnings.append(
        FieldError(
            child_path(path, "key"),
            "not used: Muster keys its cache by the task's definition and inputs",
            hint="docs/workflows.md, Caching",
        )
    )
    out: Obj = {"enabled": True}
    if memoize.get("maxAge"):
        out["maxAge"] = memoize["maxAge"]
    if memoize.get("cache") is not None:
        conversion.keep(child_path(path, "cache"), memoize["cache"])
    return out


def _int_or_string(value: Any) -> Any:
    # Argo's IntOrString: "3" is 3.
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)
