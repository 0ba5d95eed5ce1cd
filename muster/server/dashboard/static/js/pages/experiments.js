// Experiments: every hyperparameter search with its progress and its best trial.

import { h, put, table, card, empty, when } from "../dom.js";
import { pageHead, badge, livePage } from "./common.js";

export function experimentHref(namespace, name) {
  return `#/experiments/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
}

export function params(map) {
  return Object.entries(map || {}).map(([k, v]) => `${k}=${v}`).join(", ");
}

export function num(v) {
  return typeof v === "number" ? Number(v.toPrecision(5)).toString() : "—";
}

export default function experiments(root) {
  return livePage(root, ["Experiment", "Trial"], "/ui/api/experiments", (data, body) => {
    put(body, pageHead("Experiments", "Hyperparameter searches: trials run as jobs through the queues"),
      card("", data.experiments.length ? experimentTable(data.experiments) : empty("No experiments yet. Apply one with `muster apply -f examples/experiment.yaml`.")));
  });
}

function experimentTable(rows) {
  return table([
    { label: "Name", cell: (r) => h("a", { class: "experiment-link", href: experimentHref(r.namespace, r.name) }, r.name) },
    { label: "Namespace", cell: (r) => r.namespace },
    { label: "State", cell: (r) => badge(r.state, r.message) },
    { label: "Algorithm", cell: (r) => r.algorithm + (r.earlyStopping ? ` + ${r.earlyStopping}` : "") },
    { label: "Trials", cell: (r) => `${r.counts.trials || 0}${r.maxTrials ? ` / ${r.maxTrials}` : ""}`, class: "num" },
    { label: "Running", cell: (r) => String(r.counts.trialsRunning || 0), class: "num" },
    { label: "Stopped early", cell: (r) => String(r.counts.trialsEarlyStopped || 0), class: "num" },
    { label: "Best", cell: (r) => (r.best ? h("span", {}, h("strong", {}, `${r.metric}=${num(r.bestValue)}`), " ", h("span", { class: "muted" }, `${r.best} · ${params(r.bestParameters)}`)) : "—") },
    { label: "Age", cell: (r) => when(r.created), class: "nowrap" },
  ], rows, { class: "experiments" });
}
