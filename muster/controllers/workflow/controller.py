"""The Workflow controller: a DAG of tasks, each run through the same queues and scheduler as
every job (DESIGN §8; docs/workflows.md).

One reconcile of a workflow, level-triggered (everything is derived from the Workflow's
status, its objects and the clock, so a pass interrupted anywhere is completed by the next):

1. a ``muster retry`` request (the ``muster.dev/retry`` annotation above ``status.retries``)
   of a failed workflow resets its failed, skipped and omitted tasks and their dependents
   (:mod:`muster.controllers.workflow.retry`);
2. every running attempt is observed (:mod:`muster.controllers.workflow.launch`): queued,
   running, succeeded (outputs collected, the cache entry saved), failed (retried after a
   backoff, or final), past its timeout (stopped);
3. the DAG is walked (:mod:`muster.controllers.workflow.dag`): tasks whose dependencies are
   done are evaluated (``when``, fan-out), the ready ones either reuse a cached run or are
   launched, at most ``parallelism`` at a time; once the main tasks are done the onExit task
   runs; once it is done the workflow is;
4. the status is written, and only then are objects created or stopped (the decision is in
   the store first; object names are derived from it, so a crash before the actions is
   repaired by the next pass).

Node phases change only through :func:`muster.controllers.workflow.lifecycle.move_node`, each
change an Event on the Workflow.
"""

from __future__ import annotations

import copy
import logging
import re
from typing import Any

from muster.api.conditions import epoch, iso
from muster.api.labels import RETRY_ANNOTATION
from muster.api.lifecycle import EventSpec
from muster.api.workflow import order, parse_duration
from muster.api.workflow_refs import REFERENCE
from muster.controllers.context import Context
from muster.controllers.pods.stop import StopReasons
from muster.controllers.scheduling.priority import PriorityClassMissing, priority_of
from muster.controllers.scheduling.snapshot import DEFAULT_QUEUE
from muster.controllers.workflow.artifacts import ArtifactStore
from muster.controllers.workflow.cache import (
    MissingOutput,
    cache_key,
    canonical_definition,
    collect_outputs,
    lookup,
    save,
)
from muster.controllers.workflow.dag import (
    base_task,
    child_name,
    dependency_state,
    failures,
    fan_out_items,
    fans_out,
    group_result,
    main_outcome,
    phase_counts,
    progress,
)
from muster.controllers.workflow.launch import (
    Launch,
    Outcome,
    attempt_name,
    create_attempt,
    finish_attempt,
    observe,
    stop_attempt,
)
from muster.controllers.workflow.lifecycle import (
    FINAL,
    TaskPhase,
    WorkflowPhase,
    move_node,
    move_workflow,
    node_phase,
)
from muster.controllers.workflow.retry import next_retry, reset_for_retry
from muster.controllers.workflow.values import NO_ITEM, ArtifactPaths, Scope, UnresolvedReference

__all__ = ["WorkflowController"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
_ARTIFACT_SOURCE = "tasks.{task}.outputs.artifacts.{name}"


class WorkflowController:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.artifacts = ArtifactStore(ctx.home)

    def reconcile(self, wf: Obj) -> None:
        _Pass(self, wf).run()

    def collect_run_dirs(self) -> int:
        """Remove the attempt directories of workflows that no longer exist."""
        keep = {
            (w["metadata"].get("namespace") or "default", w["metadata"].get("uid") or "")
            for w in self.ctx.cache.list("Workflow")
        }
        return self.artifacts.remove_runs(keep)


class _Pass:
    """One reconcile of one workflow: edits a copy, writes its status once, then acts."""

    def __init__(self, ctl: WorkflowController, wf: Obj) -> None:
        self.ctx = ctl.ctx
        self.artifacts = ctl.artifacts
        self.original = wf
        self.wf = copy.deepcopy(wf)
        self.status: Obj = self.wf.setdefault("status", {})
        self.nodes: dict[str, Obj] = self.status.setdefault("nodes", {})
        spec = self.wf["spec"]
        self.tasks: dict[str, Obj] = {t["name"]: t for t in spec["tasks"]}
        self.exit_task: str | None = spec.get("onExit")
        self.main = [n for n in order(spec["tasks"]) if n != self.exit_task]
        self.ns = self.wf["metadata"].get("namespace") or "default"
        self.now = self.ctx.now()
        self.events: list[EventSpec] = []
        self.actions: list[Any] = []
        self.ready: list[str] = []
        self.changed = False

    # -- the pass ------------------------------------------------------------------------------

    def run(self) -> None:
        if self.wf["metadata"].get("deletionTimestamp"):
            return
        self._retry_request()
        if self.status.get("phase", "Pending") == WorkflowPhase.PENDING:
            self.events.append(move_workflow(self.wf, WorkflowPhase.RUNNING, "", self.now))
        if self.status["phase"] == WorkflowPhase.RUNNING:
            for name in [n for n in self.nodes if base_task(n) not in self.tasks]:
                del self.nodes[name]  # its task left the spec
            self._observe_running()
            for _ in range(len(self.tasks) * 2 + 2):  # cache hits can finish many tasks at once
                self.changed = False
                self._round()
                if not self.changed:
                    break
            self._conclude()
        every = [*self.main, *([self.exit_task] if self.exit_task else [])]
        self.status["progress"] = progress(self.nodes, every)
        self.status["taskPhases"] = phase_counts(self.nodes, every)
        self._write()

    def _round(self) -> None:
        self.ready = []
        for name in self.main:
            self._step(name, failing=self._failing())
        if self.exit_task is not None and all(
            node_phase(self.nodes.get(n) or {}) in FINAL for n in self.main
        ):
            self._step(self.exit_task, failing=False)
        self._launch_ready()
        for name in [*self.main, *([self.exit_task] if self.exit_task else [])]:
            node = self.nodes.get(name) or {}
            if node.get("children") and node_phase(node) is TaskPhase.RUNNING:
                self._aggregate(name)

    def _conclude(self) -> None:
        names = [*self.main, *([self.exit_task] if self.exit_task else [])]
        if not all(node_phase(self.nodes.get(n) or {}) in FINAL for n in names):
            return
        outcome, message = main_outcome(self.nodes, self.main)
        if self.exit_task is not None:
            exit_phase = node_phase(self.nodes[self.exit_task])
            if exit_phase in (TaskPhase.FAILED, TaskPhase.ERROR) and outcome == "Succeeded":
                outcome = "Failed"
                message = f"onExit task {self.exit_task} {exit_phase.value.lower()}: " + str(
                    self.nodes[self.exit_task].get("message", "")
                )
        self.events.append(move_workflow(self.wf, WorkflowPhase(outcome), message, self.now))

    # -- muster retry --------------------------------------------------------------------------

    def _retry_request(self) -> None:
        annotations = self.wf["metadata"].get("annotations") or {}
        try:
            wanted = int(annotations.get(RETRY_ANNOTATION) or 0)
        except ValueError:
            wanted = 0
        done = int(self.status.get("retries") or 0)
        if wanted <= done:
            return
        self.status["retries"] = wanted
        current = self.status.get("phase") or "Pending"
        if current not in (WorkflowPhase.FAILED, WorkflowPhase.ERROR):
            message = f"retry ignored: the workflow is {current}; only a failed workflow is retried"
            self.events.append(EventSpec("Warning", "RetryIgnored", message))
            return
        reset, events = reset_for_retry(self.wf["spec"], self.nodes, self.now)
        self.events.extend(events)
        message = f"retried: {', '.join(reset)} run again" if reset else "retried"
        self.events.append(move_workflow(self.wf, WorkflowPhase.RUNNING, message, self.now))

    # -- walking the DAG -------------------------------------------------------------------------

    def _failing(self) -> bool:
        return any(
            node_phase(n) in (TaskPhase.FAILED, TaskPhase.ERROR)
            for name, n in self.nodes.items()
            if base_task(name) != self.exit_task
        )

    def _step(self, name: str, failing: bool) -> None:
        node = self.nodes.setdefault(name, {"phase": "Pending", "attempts": 0})
        phase = node_phase(node)
        if phase in FINAL:
            return
        task = self.tasks[name]
        if phase is TaskPhase.RUNNING and node.get("children"):
            for child in node["children"]:
                self._leaf(child, task, failing)
            return
        if phase is TaskPhase.RUNNING or _started(node):
            self._leaf(name, task, failing)
            return
        if name != self.exit_task:
            state, why = dependency_state(task, self.nodes)
            if state == "omit":
                self._move(name, TaskPhase.OMITTED, "UpstreamFailed", why)
                return
            if failing:
                self._move(name, TaskPhase.OMITTED, "FailFast", "not started: another task failed")
                return
            if state == "wait":
                self._note(node, "WaitingForDependencies", why)
                return
        when = task.get("when")
        try:
            scope = self._scope(task)
            if when and not _mentions_item(when) and not scope.when(when):
                self._move(name, TaskPhase.SKIPPED, "WhenFalse", f"when {when!r} is false")
                return
            if fans_out(task):
                self._expand(name, task, scope)
                return
        except UnresolvedReference as exc:
            self._move(name, TaskPhase.ERROR, "BadReference", str(exc))
            return
        self._leaf(name, task, failing)

    def _expand(self, name: str, task: Obj, scope: Scope) -> None:
        items = fan_out_items(task, scope)
        if not items:
            self._move(name, TaskPhase.SKIPPED, "EmptyFanOut", "withItems/withParam gave no items")
            return
        node = self.nodes[name]
        children = [child_name(name, i) for i in range(len(items))]
        for child, item in zip(children, items, strict=True):
            existing = self.nodes.get(child)
            if existing is None or existing.get("item") != item:
                self.nodes[child] = {"phase": "Pending", "attempts": 0, "item": item}
        for stale in set(node.get("children") or []) - set(children):
            self.nodes.pop(stale, None)
        node["children"] = children
        self._move(name, TaskPhase.RUNNING, "FannedOut", f"{len(items)} run(s)")

    def _leaf(self, name: str, task: Obj, failing: bool) -> None:
        node = self.nodes[name]
        phase = node_phase(node)
        if phase is not TaskPhase.PENDING:
            return  # running attempts were observed at the start of the pass
        if failing and not _started(node) and base_task(name) != self.exit_task:
            self._move(name, TaskPhase.OMITTED, "FailFast", "not started: another task failed")
            return
        when = task.get("when")
        if when and _mentions_item(when) and not _started(node):
            try:
                if not self._scope(task, node.get("item", NO_ITEM)).when(when):
                    self._move(name, TaskPhase.SKIPPED, "WhenFalse", f"when {when!r} is false")
                    return
            except UnresolvedReference as exc:
                self._move(name, TaskPhase.ERROR, "BadReference", str(exc))
                return
        retry_at = epoch(node.get("retryAt"))
        if retry_at is not None and retry_at > self.now:
            self.ctx.wake_at(retry_at, self.original)
            return
        if name not in self.ready:
            self.ready.append(name)

    # -- launching -------------------------------------------------------------------------------

    def _launch_ready(self) -> None:
        limit = self.wf["spec"].get("parallelism")
        running = sum(
            1 for n in self.nodes.values() if node_phase(n) is TaskPhase.RUNNING and not n.get("children")
        )
        for name in self.ready:
            node = self.nodes[name]
            task = self.tasks[base_task(name)]
            full = limit is not None and running >= int(limit)
            if full and (not _cached(task) or node.get("cacheKey")):
                # No slot, and its cache was looked up already (or it has none): wait as is.
                self._note(node, "Parallelism", f"waiting: {running} task(s) running, parallelism is {limit}")
                continue
            try:
                plan = self._plan(task, node)
            except (UnresolvedReference, MissingOutput) as exc:
                self._move(name, TaskPhase.ERROR, "BadReference", str(exc))
                continue
            if plan.key is not None:
                node.update(cacheKey=plan.key, cacheHit=plan.hit is not None)
            if plan.hit is not None:
                node["outputs"] = plan.hit
                node.pop("retryAt", None)
                self._move(
                    name, TaskPhase.CACHED, "CacheHit", f"reused the outputs of run {str(plan.key)[:12]}"
                )
                continue
            if full:
                self._note(node, "Parallelism", f"waiting: {running} task(s) running, parallelism is {limit}")
                continue
            try:
                priority = priority_of(
                    self.ctx.cache.list("PriorityClass"), self._pick(task, "priorityClassName")
                )
            except PriorityClassMissing as exc:
                self._note(node, "PriorityClassNotFound", str(exc))
                continue
            node["attempts"] = int(node.get("attempts") or 0) + 1
            node.pop("retryAt", None)
            launch = self._launch(name, task, node, priority, plan)
            how = f"attempt {node['attempts']}" + (f", cache miss: {plan.miss}" if plan.key else "")
            self._move(name, TaskPhase.RUNNING, "Launching", f"{how}; creating {launch.name}")
            self.actions.append(lambda ln=launch: create_attempt(self.ctx, ln))
            running += 1

    def _plan(self, task: Obj, node: Obj) -> _Plan:
        """The resolved definition and inputs of a ready task, and its cache decision."""
        plan = self._resolve(task, node)
        if not _cached(task):
            return plan
        cache = task["cache"]
        definition = canonical_definition(task, plan.resolved)
        plan.key = cache_key(
            definition, dict(plan.scope.inputs), plan.inputs, str(cache.get("version") or "")
        )
        max_age = parse_duration(cache["maxAge"]) if cache.get("maxAge") else None
        plan.hit, plan.miss = lookup(self.ctx.writer(), self.ns, plan.key, max_age, self.now, self.artifacts)
        return plan

    def _resolve(self, task: Obj, node: Obj) -> _Plan:
        scope = self._scope(task, node.get("item", NO_ITEM))
        inputs = self._input_artifacts(task, scope)
        resolved = {k: scope.resolve(task[k]) for k in ("template", "trainingJob") if task.get(k)}
        return _Plan(scope=scope, inputs=inputs, resolved=resolved)

    def _launch(
        self, name: str, task: Obj, node: Obj, priority: tuple[int, str | None], plan: _Plan | None = None
    ) -> Launch:
        plan = plan or self._resolve(task, node)
        attempt = int(node.get("attempts") or 1)
        object_name = attempt_name(self.wf, name, attempt)
        run = self.artifacts.run_dirs(self.ns, self.wf["metadata"]["uid"], object_name)
        paths = ArtifactPaths(str(run.inputs), lambda d: str(self.artifacts.path(d)))
        timeout = parse_duration(task["timeout"]) if task.get("timeout") else None
        return Launch(
            wf=self.original,
            node=name,
            task=task,
            name=object_name,
            attempt=attempt,
            resolved=plan.scope.resolve(plan.resolved, paths),
            inputs=plan.inputs,
            run=run,
            queue=self._queue(task),
            priority=priority,
            timeout=timeout,
        )

    # -- running attempts ------------------------------------------------------------------------

    def _observe_running(self) -> None:
        for name, node in list(self.nodes.items()):
            if node_phase(node) is not TaskPhase.RUNNING or node.get("children"):
                continue
            task = self.tasks[base_task(name)]
            object_name = attempt_name(self.wf, name, int(node.get("attempts") or 1))

            def launch(n: str = name, t: Obj = task, nd: Obj = node) -> Launch:
                priority = priority_of(
                    self.ctx.cache.list("PriorityClass"), self._pick(t, "priorityClassName")
                )
                return self._launch(n, t, nd, priority)

            try:
                outcome = observe(self.ctx, launch, object_name, node, self.original)
            except (UnresolvedReference, MissingOutput, PriorityClassMissing) as exc:
                self._move(name, TaskPhase.ERROR, "BadReference", str(exc))
                continue
            self.actions.extend(outcome.actions)
            self._follow(name, task, node, object_name, outcome)

    def _follow(self, name: str, task: Obj, node: Obj, object_name: str, outcome: Outcome) -> None:
        is_pod = task.get("template") is not None
        if outcome.state in ("waiting", "running"):
            if node.get("reason") == "DeadlineExceeded":
                return  # its stop was asked; the attempt fails once the pod is gone
            self._note(node, outcome.reason, outcome.message)
            if outcome.state == "running" and is_pod and task.get("timeout") and outcome.started:
                self._check_timeout(name, task, node, object_name, outcome.started)
            return
        if is_pod:
            self.actions.append(finish_attempt(self.ctx, object_name, self.ns, outcome.state == "succeeded"))
        if outcome.state == "succeeded":
            try:
                outputs = collect_outputs(task, self._run_dir(object_name).outputs, self.artifacts)
            except MissingOutput as exc:
                outcome = Outcome("error", "MissingOutput", str(exc))
            else:
                self._succeeded(name, task, node, outputs)
                return
        attempts = int(node.get("attempts") or 1)
        wait, why = next_retry(
            task.get("retryStrategy"),
            outcome.state,
            attempts,
            node.get("startedAt"),
            self.now,
            outcome.permanent,
        )
        if wait is not None:
            node["retryAt"] = iso(self.now + wait)
            self._move(
                name,
                TaskPhase.PENDING,
                "Backoff",
                f"attempt {attempts} {outcome.state}: {outcome.message}; attempt {attempts + 1} in {wait:g}s",
            )
            self.ctx.wake_at(self.now + wait, self.original)
            return
        final = TaskPhase.FAILED if outcome.state == "failed" else TaskPhase.ERROR
        self._move(name, final, outcome.reason, outcome.message + why)

    def _succeeded(self, name: str, task: Obj, node: Obj, outputs: Obj) -> None:
        node["outputs"] = outputs
        key = node.get("cacheKey")
        cache = task.get("cache") or {}
        if key and _cached(task):
            save(
                self.ctx.writer(),
                self.ns,
                key,
                f"{self.wf['metadata']['name']}/{name}",
                str(cache.get("version") or ""),
                outputs,
                self.now,
            )
        started = epoch(node.get("startedAt"))
        took = f" in {self.now - started:.0f}s" if started is not None else ""
        self._move(
            name, TaskPhase.SUCCEEDED, "Completed", f"completed{took} (attempt {node.get('attempts', 1)})"
        )

    def _check_timeout(self, name: str, task: Obj, node: Obj, object_name: str, started: float) -> None:
        limit = parse_duration(task["timeout"])
        if self.now < started + limit:
            self.ctx.wake_at(started + limit, self.original)
            return
        self._note(
            node, "DeadlineExceeded", f"attempt ran longer than its timeout {task['timeout']}; stopped"
        )
        self.actions.append(stop_attempt(self.ctx, object_name, self.ns, StopReasons.DEADLINE_EXCEEDED))

    def _aggregate(self, name: str) -> None:
        node = self.nodes[name]
        children = [(c, self.nodes.get(c) or {}) for c in node.get("children") or []]
        result = group_result(self.tasks[name], children)
        if result is None:
            done = sum(1 for _, c in children if node_phase(c) in FINAL)
            self._note(node, "FannedOut", f"{done}/{len(children)} run(s) done")
            return
        phase, reason, message, outputs = result
        if outputs:
            node["outputs"] = outputs
        self._move(name, phase, reason, message)

    # -- helpers ---------------------------------------------------------------------------------

    def _scope(self, task: Obj, item: Any = NO_ITEM) -> Scope:
        scope = Scope(self.wf, self.nodes, item=item)
        if task["name"] == self.exit_task:
            scope.status, _ = main_outcome(self.nodes, self.main)
            scope.failures = failures(self.nodes, self.main)
        for p in (task.get("inputs") or {}).get("parameters") or []:
            value = p.get("value") or ""
            if item is NO_ITEM and _mentions_item(value):
                continue  # a fan-out's group: each of its runs resolves it with its item
            scope.inputs[p["name"]] = scope.resolve(value)
        return scope

    def _input_artifacts(self, task: Obj, scope: Scope) -> dict[str, str]:
        out: dict[str, str] = {}
        for a in (task.get("inputs") or {}).get("artifacts") or []:
            ref = REFERENCE.search(a["from"])
            parts = ref.group(1).split(".") if ref else []
            source, artifact = parts[1], parts[4]
            digest = scope.artifact(source, artifact)
            if digest is None:
                phase = (self.nodes.get(source) or {}).get("phase", "Pending")
                raise UnresolvedReference(
                    f"input artifact {a['name']} comes from task {source}, which is {phase}: no outputs"
                )
            if not self.artifacts.exists(digest):
                raise UnresolvedReference(f"input artifact {a['name']} ({digest}) is no longer stored")
            out[a["name"]] = digest
        return out

    def _pick(self, task: Obj, field: str) -> str | None:
        return task.get(field) or self.wf["spec"].get(field)

    def _queue(self, task: Obj) -> str | None:
        queue = self._pick(task, "queueName")
        if not queue and self.ctx.cache.get("LocalQueue", DEFAULT_QUEUE, self.ns) is not None:
            queue = DEFAULT_QUEUE
        return queue

    def _run_dir(self, object_name: str) -> Any:
        return self.artifacts.run_dirs(self.ns, self.wf["metadata"]["uid"], object_name)

    def _move(self, name: str, to: TaskPhase, reason: str, message: str) -> None:
        self.events.append(move_node(self.nodes[name], name, to, reason, message, self.now))
        self.changed = True

    def _note(self, node: Obj, reason: str, message: str) -> None:
        """Reword a node's reason and message without a transition (no event)."""
        node["reason"], node["message"] = reason, message

    def _write(self) -> None:
        if self.status != (self.original.get("status") or {}):
            stored = self.ctx.update_status(self.wf)
            if stored is None:
                return  # changed meanwhile: the next pass decides again
            for event in self.events:
                self.ctx.event(stored, event)
        for action in self.actions:
            action()


class _Plan:
    """A ready task's resolved definition, input artifacts and cache decision."""

    def __init__(self, scope: Scope, inputs: dict[str, str], resolved: Obj) -> None:
        self.scope = scope
        self.inputs = inputs
        self.resolved = resolved
        self.key: str | None = None
        self.hit: Obj | None = None
        self.miss = ""


def _cached(task: Obj) -> bool:
    cache = task.get("cache")
    return cache is not None and cache.get("enabled", True) is not False


def _started(node: Obj) -> bool:
    """Whether the node made an attempt since it was (re)set: then it is retrying, not new."""
    return int(node.get("attempts") or 0) > int(node.get("attemptsBeforeRetry") or 0)


def _mentions_item(text: str) -> bool:
    return any(re.search(r"\bitem\b", ref) for ref in REFERENCE.findall(text))
