// One workflow: its DAG (tasks coloured by phase; click one for its status, its pods and a
// live log tail of the pod picked), the workflow's own state with Retry and Resubmit (as
// Argo's UI has them), its parameters, each task's results and a timeline of the task runs.

import { h, put, table, card, empty, when, between, duration } from "../dom.js";
import { API, getJSON, objectPath, send } from "../api.js";
import { follow } from "../live.js";
import { LogTail } from "../logtail.js";
import { renderDag } from "../dag.js";
import { pageHead, badge, loadFailure } from "./common.js";
import { phaseClass } from "../colors.js";
import { progress, outcomes } from "./workflows.js";

// Labels and annotation the Workflow controller sets on every object of a task attempt
// (muster.controllers.workflow_launch).
const WORKFLOW_LABEL = "muster.dev/workflow";
const TASK_LABEL = "muster.dev/workflow-task";
const NODE_ANNOTATION = "muster.dev/workflow-node";
const ATTEMPT_LABEL = "muster.dev/workflow-attempt";

export default function workflow(root, [namespace, name], query) {
  const page = h("div", { class: "page" }, h("p", { class: "loading" }, "Loading…"));
  root.append(page);
  const logs = new LogTail();
  const head = h("div"), dag = h("div", { class: "dag-scroll" }), panel = h("div");
  const notice = h("div"), facts = h("div", { class: "grid-2" }), timeline = h("div");
  const retry = h("button", { type: "button", class: "button", onclick: () => act("retry") }, "Retry");
  const resubmit = h("button", { type: "button", class: "button", onclick: () => act("resubmit") }, "Resubmit");
  let selected = query.get("task");
  let selectedPod = null;
  let last = null;
  let built = false;
  const controller = new AbortController();

  const select = (task) => {
    selected = task;
    selectedPod = null;
    history.replaceState(null, "", `#/workflows/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}?task=${encodeURIComponent(task)}`);
    draw();
  };

  // Retry (a failed workflow's failed and omitted tasks run again) and Resubmit (a new
  // workflow from the same spec); the server carries both out (POST .../retry|resubmit).
  const act = async (verb) => {
    retry.disabled = resubmit.disabled = true;
    try {
      const answer = await send("POST", `${objectPath("workflows", namespace, name)}/${verb}`);
      if (verb === "resubmit") {
        window.location.hash = `#/workflows/${encodeURIComponent(namespace)}/${encodeURIComponent(answer.metadata.name)}`;
        return;
      }
      const tasks = answer.tasks.length ? answer.tasks.join(", ") : "its onExit task";
      put(notice, h("div", { class: "notice" }, `Retried: ${tasks} run again.`));
    } catch (err) {
      put(notice, h("div", { class: "failure" }, `Could not ${verb} ${name}: ${err.message}`));
    } finally {
      if (last) draw();
    }
  };

  const draw = () => {
    const { wf, pods } = last;
    if (!built) {
      built = true;
      put(page, head, notice, card("Tasks", dag, h("span", { class: "muted" }, "click a task for its status and logs")), panel, facts, timeline);
    }
    const status = wf.status || {};
    const p = progress(status);
    const phase = status.phase || "Pending";
    retry.disabled = !["Failed", "Error"].includes(phase);
    retry.title = retry.disabled ? "only a failed workflow is retried" : "run its failed and omitted tasks again";
    resubmit.disabled = false;
    resubmit.title = "run it again from the start, as a new workflow";
    const outcome = outcomes(status).map(([ph, n]) => ` · ${n} ${ph.toLowerCase()}`).join("");
    put(head, pageHead(name, `${namespace} · ${p.done}/${p.all} tasks ended well${outcome}${status.startedAt ? ` · ran ${between(status.startedAt, status.finishedAt)}` : ""}`, badge(phase), retry, resubmit),
      status.message ? h("div", { class: "failure" }, status.message) : null);
    put(facts, card("Parameters", parameters(wf)), card("Results", results(wf)));
    put(timeline, card("Timeline", timelineOf(wf), h("span", { class: "muted" }, "when each task ran")));
    const tasks = wf.spec.tasks.map((t) => ({ name: t.name, dependencies: t.dependencies || [], exit: t.name === wf.spec.onExit }));
    put(dag, renderDag(tasks, (t) => taskStatus(status.nodes || {}, t), select, selected));
    const task = wf.spec.tasks.find((t) => t.name === selected);
    put(panel, task ? taskPanel(task, status.nodes || {}, pods.filter((pod) => labels(pod)[TASK_LABEL] === task.name)) : null);
  };

  const taskPanel = (task, nodes, pods) => {
    const node = nodes[task.name] || { phase: "Pending" };
    const runs = childNames(task.name, nodes);
    const facts = [
      ["Phase", badge(node.phase)],
      node.reason ? ["Reason", h("strong", {}, node.reason)] : null,
      node.message ? ["Message", node.message] : null,
      ["Kind", task.trainingJob ? "TrainingJob" : "Pod"],
      ["Attempts", String(node.attempts || 0)],
      node.startedAt ? ["Started", when(node.startedAt)] : null,
      node.startedAt ? ["Duration", between(node.startedAt, node.finishedAt)] : null,
      node.cacheKey ? ["Cache", `${node.cacheHit ? "hit" : "miss"} · ${node.cacheKey.slice(0, 12)}`] : null,
      task.dependencies && task.dependencies.length ? ["Depends on", task.dependencies.join(", ")] : null,
    ].filter(Boolean);
    const params = Object.entries((node.outputs && node.outputs.parameters) || {});
    const sorted = [...pods].sort((a, b) => Number(labels(b)[ATTEMPT_LABEL] || 0) - Number(labels(a)[ATTEMPT_LABEL] || 0) || (b.metadata.creationTimestamp || "").localeCompare(a.metadata.creationTimestamp || ""));
    if (!selectedPod || !sorted.some((pod) => pod.metadata.name === selectedPod)) selectedPod = sorted.length ? sorted[0].metadata.name : null;
    const podTable = sorted.length ? table([
      { label: "Pod", cell: (pod) => h("button", { type: "button", class: ["link-button", pod.metadata.name === selectedPod ? "active" : null], onclick: () => { selectedPod = pod.metadata.name; draw(); } }, pod.metadata.name) },
      { label: "Run", cell: (pod) => (pod.metadata.annotations || {})[NODE_ANNOTATION] || task.name },
      { label: "Attempt", cell: (pod) => labels(pod)[ATTEMPT_LABEL] || "", class: "num" },
      { label: "Phase", cell: (pod) => badge((pod.status && pod.status.phase) || "Pending", pod.status && pod.status.reason) },
      { label: "Node", cell: (pod) => pod.spec.nodeName || "" },
      { label: "GPUs", cell: (pod) => (pod.spec.gpus || []).join(", ") },
    ], sorted, { class: "compact" }) : empty("No pods for this task (yet).");
    const pod = sorted.find((x) => x.metadata.name === selectedPod);
    if (!pod) logs.show({ message: "no pod to follow" });
    else if (((pod.status && pod.status.phase) || "Pending") === "Pending") logs.show({ message: `${pod.metadata.name} is waiting to start` });
    else logs.show({ namespace, pod: pod.metadata.name, container: pod.spec.containers.length > 1 ? pod.spec.containers[0].name : undefined, key: `${pod.metadata.name}/${pod.metadata.uid}` });
    return h("div", { class: "grid-2" },
      card(`Task ${task.name}`, [
        h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
        runs.length ? [h("h3", {}, "Runs"), h("div", { class: "runs" }, runs.map((r) => h("span", { class: "run" }, badge(nodes[r].phase), ` ${r}`)))] : null,
        params.length ? [h("h3", {}, "Output parameters"), table([{ label: "Name", cell: ([k]) => k }, { label: "Value", cell: ([, v]) => h("code", {}, v) }], params, { class: "compact" })] : null,
        h("h3", {}, "Pods"), podTable,
      ]),
      card("Logs", logs.el, pod ? h("code", {}, pod.metadata.name) : null));
  };

  const stop = follow(["Workflow", "Pod"], async () => {
    try {
      const [wf, pods] = await Promise.all([
        getJSON(objectPath("workflows", namespace, name), controller.signal),
        getJSON(`${API}/namespaces/${encodeURIComponent(namespace)}/pods?labelSelector=${encodeURIComponent(`${WORKFLOW_LABEL}=${name}`)}`, controller.signal),
      ]);
      last = { wf, pods: pods.items };
      draw();
    } catch (err) {
      if (controller.signal.aborted) return;
      logs.stop();
      built = false;
      put(page, loadFailure(err, "workflow", namespace, name, "#/workflows"));
    }
  });
  return () => { controller.abort(); stop(); logs.stop(); };
}

function labels(obj) {
  return obj.metadata.labels || {};
}

function parameters(wf) {
  const params = ((wf.spec.arguments || {}).parameters || []);
  if (!params.length) return empty("This workflow takes no parameters.");
  return table([
    { label: "Name", cell: (p) => h("code", {}, p.name) },
    { label: "Value", cell: (p) => h("code", {}, p.value ?? "") },
  ], params, { class: "compact" });
}

function results(wf) {
  const nodes = (wf.status || {}).nodes || {};
  const rows = [];
  for (const run of taskRuns(wf)) {
    const outputs = (nodes[run] || {}).outputs || {};
    for (const [k, v] of Object.entries(outputs.parameters || {})) rows.push({ task: run, kind: "parameter", name: k, value: v });
    for (const [k, v] of Object.entries(outputs.artifacts || {})) rows.push({ task: run, kind: "artifact", name: k, value: v });
  }
  if (!rows.length) return empty("No task has recorded outputs yet.");
  return table([
    { label: "Task", cell: (r) => r.task, class: "nowrap" },
    { label: "Output", cell: (r) => [h("code", {}, r.name), h("span", { class: "muted" }, ` ${r.kind}`)], class: "nowrap" },
    { label: "Value", cell: (r) => h("code", { class: "value" }, r.value) },
  ], rows, { class: "compact results" });
}

/** Every task run in DAG order (a fan-out's runs in place of the task; onExit last). */
function taskRuns(wf) {
  const nodes = (wf.status || {}).nodes || {};
  const exit = wf.spec.onExit;
  const names = wf.spec.tasks.map((t) => t.name).filter((n) => n !== exit);
  if (exit) names.push(exit);
  return names.flatMap((n) => {
    const runs = childNames(n, nodes);
    return runs.length ? runs : [n];
  });
}

/** One row per task run: a bar from its start to its end (now, while it runs) on the
 * workflow's own time axis. */
function timelineOf(wf) {
  const status = wf.status || {};
  const nodes = status.nodes || {};
  const runs = taskRuns(wf);
  const started = runs.map((r) => (nodes[r] || {}).startedAt).filter(Boolean).map(Date.parse);
  if (!started.length) return empty("No task has started yet.");
  const t0 = Math.min(...started, status.startedAt ? Date.parse(status.startedAt) : Infinity);
  const ends = runs.map((r) => nodes[r] || {}).filter((n) => n.startedAt).map((n) => (n.finishedAt ? Date.parse(n.finishedAt) : Date.now()));
  const t1 = Math.max(...ends, status.finishedAt ? Date.parse(status.finishedAt) : 0, t0 + 1000);
  const span = t1 - t0;
  return h("div", { class: "timeline" },
    h("div", { class: "timeline-axis muted" }, h("span", {}, "0s"), h("span", {}, duration(Math.round(span / 1000)))),
    runs.map((run) => {
      const node = nodes[run] || { phase: "Pending" };
      let track;
      if (!node.startedAt) {
        track = h("span", { class: "muted timeline-none" }, node.phase === "Cached" ? "from the cache" : node.phase === "Skipped" ? "skipped" : "not started");
      } else {
        const start = Date.parse(node.startedAt) - t0;
        const end = (node.finishedAt ? Date.parse(node.finishedAt) : Date.now()) - t0;
        track = h("div", {
          class: ["timeline-bar", phaseClass(node.phase)],
          "data-task": run,
          title: `${run}: ${node.phase}, ${between(node.startedAt, node.finishedAt)}`,
          style: { left: `${(100 * start) / span}%`, width: `${Math.max(0.5, (100 * (end - start)) / span)}%` },
        });
      }
      return h("div", { class: "timeline-row" },
        h("div", { class: "timeline-label" }, h("span", {}, run), " ", badge(node.phase)),
        h("div", { class: "timeline-track" }, track),
        h("div", { class: "timeline-time muted" }, node.startedAt ? between(node.startedAt, node.finishedAt) : ""));
    }));
}

function childNames(task, nodes) {
  const fromStatus = nodes[task] && nodes[task].children;
  if (fromStatus && fromStatus.length) return fromStatus.filter((c) => nodes[c]);
  const pattern = new RegExp(`^${task.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\(\\d+\\)$`);
  return Object.keys(nodes).filter((k) => pattern.test(k)).sort((a, b) => Number(a.match(/\((\d+)\)$/)[1]) - Number(b.match(/\((\d+)\)$/)[1]));
}

function taskStatus(nodes, task) {
  const node = nodes[task];
  if (!node) return { phase: "Pending", detail: "" };
  const runs = childNames(task, nodes);
  if (runs.length) {
    const done = runs.filter((r) => ["Succeeded", "Cached", "Skipped"].includes(nodes[r].phase)).length;
    return { phase: node.phase, detail: `${done}/${runs.length} runs` };
  }
  const detail = node.phase === "Running" && node.startedAt ? between(node.startedAt) : node.attempts > 1 ? `${node.attempts} attempts` : node.reason || "";
  return { phase: node.phase, detail };
}
