// Nodes and GPUs: allocation per node against what it has (GET /api/v1/nodes/usage), and per
// GPU its holders, health, latest reading and a sparkline of its utilisation over the last ten
// minutes (GET /api/v1/gpus: the control plane samples every GPU; fake GPUs report readings
// too). A server without a control plane has no readings, and says so.

import { h, put, table, card, empty } from "../dom.js";
import { jobColor } from "../colors.js";
import { getJSON } from "../api.js";
import { sparkline, usageBar, amount } from "../charts.js";
import { pageHead, badge, holderOwner, livePage } from "./common.js";

const KINDS = ["Node", "Pod"];
const HISTORY_SECONDS = 600;
const READINGS_EVERY_MS = 5000; // readings change without any object changing: poll them

export default function nodes(root) {
  let refresh = null;
  const load = async (signal) => {
    const [usage, gpus] = await Promise.all([
      getJSON("/api/v1/nodes/usage", signal),
      getJSON(`/api/v1/gpus?historySeconds=${HISTORY_SECONDS}`, signal),
    ]);
    return { nodes: usage.nodes, gpus: gpus.gpus, sampleSeconds: gpus.sampleSeconds };
  };
  const dispose = livePage(root, KINDS, load, (data, body) => {
    refresh = () => load().then((fresh) => draw(fresh, body)).catch(() => {});
    draw(data, body);
  });
  const timer = setInterval(() => { if (refresh && document.visibilityState === "visible") refresh(); }, READINGS_EVERY_MS);
  return () => { clearInterval(timer); dispose(); };
}

function draw(data, body) {
  const note = data.sampleSeconds ? `GPU readings every ${data.sampleSeconds}s, last ${HISTORY_SECONDS / 60} minutes` : "no GPU readings: this server runs no control plane";
  put(body, pageHead("Nodes & GPUs", `What each node and GPU has allocated · ${note}`),
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
    { label: "Health", cell: (g) => (g.health === "Healthy" ? h("span", { class: "health-ok" }, "Healthy") : h("span", { class: "badge phase-bad", title: g.healthReason || null }, g.health)) },
    { label: "Allocated", cell: (g) => fraction(g.allocatedMilli) },
    { label: "Utilisation", cell: (g) => utilisation(g) },
    { label: "Memory used", cell: (g) => memory(g.latest), class: "nowrap" },
    { label: "Temp · power", cell: (g) => heat(g.latest), class: "nowrap" },
    { label: "Held by", cell: (g) => (g.holders.length ? g.holders.map((x) => {
      const owner = holderOwner(x);
      return h(owner.href ? "a" : "span", { class: "holder", href: owner.href, title: `${x.namespace}/${x.pod}` },
        h("span", { class: "swatch", style: { background: jobColor(owner.key) } }), owner.name, x.milli < 1000 ? h("span", { class: "muted" }, ` ${x.milli}m`) : null);
    }) : h("span", { class: "muted" }, "free")) },
  ], gpus, { class: "compact gpus" });
}

function utilisation(g) {
  const series = (g.history || []).map((r) => r.utilization).filter((u) => u !== null && u !== undefined);
  const latest = g.latest && g.latest.utilization;
  return h("div", { class: "util" },
    sparkline(series, { label: `utilisation of GPU ${g.index}`, max: 1 }),
    h("span", { class: "util-value" }, latest === null || latest === undefined ? "—" : `${Math.round(latest * 100)}%`));
}

function fraction(milli) {
  return milli === 0 ? h("span", { class: "muted" }, "0") : milli === 1000 ? "1" : (milli / 1000).toFixed(2).replace(/0+$/, "");
}

function memory(r) {
  if (!r || r.memoryUsedBytes === null || r.memoryUsedBytes === undefined) return h("span", { class: "muted" }, "—");
  const gib = (b) => (b / 2 ** 30).toFixed(1);
  return `${gib(r.memoryUsedBytes)} / ${gib(r.memoryTotalBytes)} GiB`;
}

function heat(r) {
  if (!r) return h("span", { class: "muted" }, "—");
  const parts = [r.temperatureCelsius === null ? null : `${Math.round(r.temperatureCelsius)}°C`, r.powerWatts === null ? null : `${Math.round(r.powerWatts)} W`].filter(Boolean);
  return parts.length ? parts.join(" · ") : h("span", { class: "muted" }, "—");
}
