// Nodes and GPUs: allocation per node against what it has, and per GPU its holders, health
// and a sparkline. The sparkline plots the GPU's allocation as this tab has seen it (sampled
// at every change and every few seconds); the server keeps no history of its own yet.

import { h, put, table, card, empty } from "../dom.js";
import { jobColor } from "../colors.js";
import { sparkline, usageBar, amount } from "../charts.js";
import { pageHead, badge, ownerHref, ownerKey, livePage } from "./common.js";

const KINDS = ["Node", "Pod"];
const SAMPLES = 60;
const SAMPLE_EVERY_MS = 5000;
const history = new Map(); // "node/index" -> [used fraction, ...]; kept across visits of the page

export default function nodes(root) {
  let last = null;
  const sample = () => {
    if (!last) return;
    last.gpus.forEach((g) => {
      const key = `${g.node}/${g.index}`;
      const series = history.get(key) || [];
      series.push(Math.min(1, g.usedMilli / 1000));
      if (series.length > SAMPLES) series.shift();
      history.set(key, series);
    });
  };
  let body = null;
  const timer = setInterval(() => { sample(); if (body && last) draw(last, body); }, SAMPLE_EVERY_MS);
  const dispose = livePage(root, KINDS, "/ui/api/nodes", (data, el) => {
    last = data;
    body = el;
    sample();
    draw(data, el);
  });
  return () => { clearInterval(timer); dispose(); };
}

function draw(data, body) {
  put(body, pageHead("Nodes & GPUs", "What each node and GPU has allocated"),
    data.nodes.length ? data.nodes.map((n) => nodeCard(n, data.gpus.filter((g) => g.node === n.name))) : card("Nodes", empty("No nodes registered yet.")));
}

function nodeCard(node, gpus) {
  const res = node.resources;
  const row = (label, key) => {
    const r = res[key];
    if (!r) return null;
    return h("div", { class: "quota-row" }, h("div", { class: "quota-label" }, label),
      usageBar(amount(r.used), amount(r.total), { label: `${label} of ${node.name}` }),
      h("div", { class: "quota-value" }, `${r.used} / ${r.total ?? "?"}${r.percent !== null ? ` (${r.percent}%)` : ""}`));
  };
  const status = node.ready === "True" ? badge("Ready") : h("span", { class: "badge phase-bad" }, `Ready: ${node.ready}`);
  return card(node.name, [
    h("div", { class: "node-summary" },
      h("div", { class: "quota" }, row("GPU", "nvidia.com/gpu"), row("CPU", "cpu"), row("Memory", "memory")),
      h("div", { class: "node-facts" }, h("div", {}, status, node.unschedulable ? h("span", { class: "badge phase-idle" }, "cordoned") : null), h("div", { class: "muted" }, `${node.pods} pod${node.pods === 1 ? "" : "s"} holding resources`))),
    gpus.length ? gpuTable(gpus) : empty("This node has no GPUs."),
  ]);
}

function gpuTable(gpus) {
  return table([
    { label: "GPU", cell: (g) => h("strong", {}, String(g.index)), class: "num" },
    { label: "Model", cell: (g) => `${g.model} ${g.memory}` },
    { label: "Health", cell: (g) => (g.health === "Healthy" ? h("span", { class: "health-ok" }, "Healthy") : h("span", { class: "badge phase-bad" }, g.health)) },
    { label: "Allocated", cell: (g) => h("span", {}, g.used) },
    { label: "History", cell: (g) => sparkline(history.get(`${g.node}/${g.index}`) || [], { label: `allocation of GPU ${g.index}`, max: 1 }) },
    { label: "Held by", cell: (g) => (g.holders.length ? g.holders.map((x) => {
      const href = ownerHref(x.owner);
      const name = x.owner ? x.owner.name : x.pod;
      return h(href ? "a" : "span", { class: "holder", href }, h("span", { class: "swatch", style: { background: jobColor(ownerKey(x.owner, x.pod)) } }), name, x.milli < 1000 ? h("span", { class: "muted" }, ` ${x.milli}m`) : null);
    }) : h("span", { class: "muted" }, "free")) },
  ], gpus, { class: "compact gpus" });
}
