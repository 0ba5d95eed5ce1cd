// One workflow: its DAG (tasks coloured by phase; click one for its status, its pods and a
// live log tail of the pod picked) and the workflow's own state.

import { h, put, table, card, empty, when, between } from "../dom.js";
import { API, getJSON, objectPath } from "../api.js";
import { follow } from "../live.js";
import { LogTail } from "../logtail.js";
import { renderDag } from "../dag.js";
import { pageHead, badge, loadFailure } from "./common.js";
import { progress } from "./workflows.js";

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

  const draw = () => {
    const { wf, pods } = last;
    if (!built) {
      built = true;
      put(page, head, card("Tasks", dag, h("span", { class: "muted" }, "click a task for its status and logs")), panel);
    }
    const status = wf.status || {};
    const p = progress(status);
    put(head, pageHead(name, `${namespace} · ${p.done}/${p.all} tasks done${status.startedAt ? ` · ran ${between(status.startedAt, status.finishedAt)}` : ""}`, badge(status.phase || "Pending")),
      status.message ? h("div", { class: "failure" }, status.message) : null);
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
