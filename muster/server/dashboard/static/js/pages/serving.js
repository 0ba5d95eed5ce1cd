// Serving: every InferenceService with its traffic split, what the autoscaler decided per
// revision, its replicas on their GPUs, and request rate and latency over the last half hour
// (measured at the gateway). Refreshed on changes and every few seconds for the charts.

import { h, put, table, card, empty } from "../dom.js";
import { getJSON } from "../api.js";
import { follow } from "../live.js";
import { sparkline } from "../charts.js";
import { jobColor } from "../colors.js";
import { pageHead, badge } from "./common.js";

const REFRESH_MS = 5000;

export default function serving(root) {
  const body = h("div", { class: "page" }, h("p", { class: "loading" }, "Loading…"));
  root.append(body);
  const controller = new AbortController();
  const load = async () => {
    try {
      render(await getJSON("/ui/api/serving", controller.signal), body);
    } catch (err) {
      if (!controller.signal.aborted) put(body, h("div", { class: "failure" }, h("strong", {}, "Could not load this page: "), err.message));
    }
  };
  const stop = follow(["InferenceService", "Workload", "Pod"], load);
  const timer = setInterval(load, REFRESH_MS);
  return () => { controller.abort(); stop(); clearInterval(timer); };
}

function render(data, body) {
  const services = data.services;
  put(body, pageHead("Serving", "Served models: replicas on GPUs, traffic split, requests and latency"),
    services.length ? services.map(service) : card("", empty("No InferenceService yet. Apply one with `muster apply -f examples/serving/tiny-llm.yaml`.")));
}

function service(s) {
  const state = s.ready ? "Ready" : s.reason === "ScaledToZero" ? "ScaledToZero" : (s.reason || "NotReady");
  const bounds = `${s.minReplicas}..${s.maxReplicas ?? Math.max(1, s.minReplicas)}`;
  const head = h("div", { class: "serving-head" },
    badge(state, s.message),
    h("span", { class: "muted" }, ` ${s.namespace} · models ${s.models.join(", ")} · ${s.strategy}`),
    s.url ? h("code", { class: "serving-url" }, `${s.url}/v1`) : null);
  return card(`${s.name}`, [
    head,
    h("div", { class: "serving-grid" },
      stat("Replicas ready", `${s.readyReplicas} / ${s.desiredReplicas}`, `bounds ${bounds}`),
      trafficBar(s.traffic),
      chart("Requests/s", s.series.map((p) => p.rps), (v) => v.toFixed(1)),
      chart("Latency p50", s.series.map((p) => p.p50), ms),
      chart("Latency p99", s.series.map((p) => p.p99), ms)),
    h("h3", {}, "Revisions"),
    revisions(s),
    h("h3", {}, "Replicas"),
    s.replicas.length ? replicas(s.replicas) : empty("No replica runs: the first request starts one."),
  ]);
}

function stat(label, value, note) {
  return h("div", { class: "serving-stat" }, h("div", { class: "muted" }, label), h("div", { class: "serving-value" }, value), h("div", { class: "muted" }, note));
}

function trafficBar(traffic) {
  const parts = traffic.filter((t) => t.percent > 0);
  return h("div", { class: "serving-stat" }, h("div", { class: "muted" }, "Traffic"),
    h("div", { class: "bar", role: "img", "aria-label": "traffic split" },
      parts.map((t) => h("div", { class: "bar-fill", title: `${t.revisionName} ${t.percent}%`, style: { width: `${t.percent}%`, background: jobColor(t.revisionName) } }))),
    h("div", { class: "muted" }, parts.map((t) => `${t.revisionName} ${t.percent}%`).join(" · ") || "none"));
}

function chart(label, values, fmt) {
  const last = values.length ? values[values.length - 1] : null;
  const max = Math.max(1e-9, ...values);
  return h("div", { class: "serving-stat" }, h("div", { class: "muted" }, label),
    sparkline(values, { width: 160, height: 32, max, label }),
    h("div", { class: "muted" }, last === null ? "no requests yet" : `now ${fmt(last)} · max ${fmt(max)}`));
}

function ms(seconds) {
  return seconds >= 1 ? `${seconds.toFixed(2)} s` : `${(seconds * 1000).toFixed(1)} ms`;
}

function revisions(s) {
  const pct = Object.fromEntries(s.traffic.map((t) => [t.revisionName, t.percent]));
  return table([
    { label: "Revision", cell: (r) => r.name },
    { label: "Traffic", cell: (r) => `${pct[r.name] || 0}%`, class: "num" },
    { label: "Desired", cell: (r) => String(r.desiredReplicas), class: "num" },
    { label: "Ready", cell: (r) => String(r.readyReplicas), class: "num" },
    { label: "Mode", cell: (r) => (r.autoscaler.panicking ? "panic" : r.autoscaler.reason ? "stable" : "") },
    { label: "Why", cell: (r) => h("span", { class: "message" }, r.autoscaler.reason || "") },
  ], s.revisions);
}

function replicas(items) {
  return table([
    { label: "Replica", cell: (r) => r.name },
    { label: "Revision", cell: (r) => r.revision },
    { label: "State", cell: (r) => badge(r.state, r.message) },
    { label: "Node", cell: (r) => r.node || "" },
    { label: "GPUs", cell: (r) => (r.gpus || []).join(",") },
    { label: "Address", cell: (r) => r.address || "" },
    { label: "Restarts", cell: (r) => String(r.restarts || 0), class: "num" },
    { label: "Message", cell: (r) => h("span", { class: "message" }, r.message || "") },
  ], items);
}
