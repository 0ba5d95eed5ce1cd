// One experiment: why it is where it is (trials running, waiting and why, stopped), the
// objective of every trial with the best so far, each trial's curve, the trials, events.

import { h, put, table, card, empty, when } from "../dom.js";
import { pageHead, badge, eventsTable, jobHref, livePage } from "./common.js";
import { objectivePlot, curvesPlot } from "../plots.js";
import { params, num } from "./experiments.js";

const KINDS = ["Experiment", "Trial", "TrainingJob", "Pod", "Event"];

export default function experiment(root, [namespace, name]) {
  const url = `/ui/api/experiments/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
  return livePage(root, KINDS, url, (data, body) => {
    const r = data.row;
    const maximize = r.direction === "maximize";
    const scored = data.trials.map((t) => ({ index: t.index, name: t.name, value: t.value, phase: t.phase }));
    put(body,
      pageHead(name, `${namespace} · ${r.algorithm}${r.earlyStopping ? ` + ${r.earlyStopping}` : ""} · ${r.direction} ${r.metric}${r.goal !== null && r.goal !== undefined ? ` (goal ${r.goal})` : ""} · queue ${r.queue}`, badge(r.state, r.message)),
      whyCard(data.why),
      h("div", { class: "plots" },
        card(`${r.metric} per trial`, data.trials.some((t) => typeof t.value === "number") ? objectivePlot(scored, { metric: r.metric, maximize }) : empty("No trial has reported yet.")),
        card("Curves", Object.keys(data.curves).length ? curvesPlot(data.curves, { metric: r.metric, best: r.best }) : empty("No curve yet."))),
      card("Trials", trialTable(data.trials, r)),
      card("Events", eventsTable(data.events)));
  });
}

function whyCard(why) {
  const facts = [];
  if (why.reason) facts.push(["Reason", h("strong", {}, why.reason)]);
  if (why.best) facts.push(["Best", `${why.best.trial}: ${why.best.metric}=${num(why.best.value)} (${params(why.best.parameters)})`]);
  facts.push(["GPU-time", `${Number(why.gpuSeconds || 0).toFixed(1)} GPU-seconds`]);
  const groups = [...why.waiting, ...why.stopped, ...why.failed];
  return h("section", { class: ["card", "why", `why-${why.state}`] },
    h("header", { class: "card-head" }, h("h2", {}, "Why"), badge(why.state)),
    h("div", { class: "card-body" },
      h("p", { class: "why-summary" }, why.summary),
      h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      groups.length ? table([
        { label: "State", cell: (g) => badge(g.state) },
        { label: "Reason", cell: (g) => h("strong", {}, g.reason) },
        { label: "Trials", cell: (g) => g.trials.join(", ") },
        { label: "Message", cell: (g) => h("span", { class: "message" }, g.message) },
      ], groups, { class: "compact why-groups" }) : null,
      why.unblock.length ? [h("h3", {}, "What would unblock it"), h("ul", { class: "hints" }, why.unblock.map((u) => h("li", {}, u)))] : null));
}

function trialTable(trials, row) {
  if (!trials.length) return empty("No trials yet.");
  return table([
    { label: "Trial", cell: (t) => h("a", { href: jobHref(row.namespace, t.name), class: t.name === row.best ? "best-trial" : null }, t.name) },
    { label: "Phase", cell: (t) => badge(t.phase, t.message) },
    { label: row.metric, cell: (t) => num(t.value), class: "num" },
    { label: "Parameters", cell: (t) => h("code", {}, params(t.parameters)) },
    { label: "Rungs", cell: (t) => t.rungs.map((g) => `${g.rung}@${g.step}: ${g.decision}`).join("; ") },
    { label: "Reason", cell: (t) => h("span", { class: "message", title: t.message }, t.reason) },
    { label: "GPU-s", cell: (t) => Number(t.gpuSeconds || 0).toFixed(1), class: "num" },
    { label: "Started", cell: (t) => when(t.started), class: "nowrap" },
  ], trials, { class: "trials", rowClass: (t) => (t.name === row.best ? "row-best" : null) });
}
