// Workflows: every Workflow with its phase and progress.

import { h, put, table, card, empty, when, between } from "../dom.js";
import { API } from "../api.js";
import { pageHead, badge, workflowHref, livePage } from "./common.js";

export default function workflows(root) {
  return livePage(root, ["Workflow"], `${API}/workflows`, (data, body) => {
    const items = [...data.items].sort((a, b) => (b.metadata.creationTimestamp || "").localeCompare(a.metadata.creationTimestamp || ""));
    put(body, pageHead("Workflows", "DAG pipelines and how far they got"),
      card("", items.length ? workflowTable(items) : empty("No workflows yet. Apply one with `muster apply -f examples/pipeline.yaml`.")));
  });
}

/** status.progress: task runs that ended well (Succeeded, Cached, Skipped) of all. */
export function progress(status) {
  const [done, all] = ((status && status.progress) || "0/0").split("/").map(Number);
  return { done: done || 0, all: all || 0 };
}

/** The finished runs that did not end well, by phase: [["Failed", 1], ["Omitted", 2]]. */
export function outcomes(status) {
  const counts = (status && status.taskPhases) || {};
  return ["Failed", "Error", "Omitted"].filter((p) => counts[p]).map((p) => [p, counts[p]]);
}

function workflowTable(items) {
  return table([
    { label: "Name", cell: (w) => h("a", { href: workflowHref(w.metadata.namespace, w.metadata.name) }, w.metadata.name) },
    { label: "Namespace", cell: (w) => w.metadata.namespace },
    { label: "Phase", cell: (w) => badge((w.status && w.status.phase) || "Pending") },
    { label: "Progress", cell: (w) => {
      const p = progress(w.status);
      const bad = outcomes(w.status);
      const failed = bad.reduce((n, [, k]) => n + k, 0);
      const pct = (n) => `${p.all ? (100 * n) / p.all : 0}%`;
      const note = bad.map(([ph, n]) => ` · ${n} ${ph.toLowerCase()}`).join("");
      return h("div", { class: "progress", title: `${p.done} of ${p.all} task runs ended well${note}` },
        h("div", { class: "bar" },
          h("div", { class: "bar-fill bar-low", style: { width: pct(p.done) } }),
          failed ? h("div", { class: "bar-fill bar-high", style: { width: pct(failed) } }) : null),
        h("span", { class: "muted" }, `${p.done}/${p.all}${note}`));
    } },
    { label: "Tasks", cell: (w) => String(w.spec.tasks.length), class: "num" },
    { label: "Duration", cell: (w) => (w.status && w.status.startedAt ? between(w.status.startedAt, w.status.finishedAt) : ""), class: "nowrap" },
    { label: "Age", cell: (w) => when(w.metadata.creationTimestamp), class: "nowrap" },
  ], items);
}
