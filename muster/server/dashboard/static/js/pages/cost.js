// Cost: what the GPUs cost over a window, per group (namespace, queue, job, pool, capacity
// type or a team label), the cost over time as stacked bars, each NodePool's idle cost, and the
// pools with the nodes they are making now. Computed by the server from the cost ledger
// (GET /api/v1/cost, docs/cost.md), the same answer as `muster cost`.

import { h, s, put, table, card, empty, when } from "../dom.js";
import { jobColor } from "../colors.js";
import { getJSON, API } from "../api.js";
import { pageHead, livePage } from "./common.js";

const KINDS = ["UsageRecord", "NodePool", "NodeClaim"];
const WINDOWS = { "24h": [86400, 3600], "7d": [7 * 86400, 6 * 3600], "30d": [30 * 86400, 86400] };
const GROUPS = ["namespace", "queue", "job", "pool", "capacity-type", "label:team"];

export default function cost(root, _params, query) {
  const windowName = WINDOWS[query.get("window")] ? query.get("window") : "7d";
  const by = GROUPS.includes(query.get("by")) ? query.get("by") : "namespace";
  const [span, bucket] = WINDOWS[windowName];
  const load = async (signal) => {
    const end = new Date();
    const start = new Date(end.getTime() - span * 1000);
    const params = new URLSearchParams({ start: start.toISOString(), end: end.toISOString(), by, bucket: String(bucket) });
    const [report, pools, claims] = await Promise.all([
      getJSON(`/api/v1/cost?${params}`, signal),
      getJSON(`${API}/nodepools`, signal),
      getJSON(`${API}/nodeclaims`, signal),
    ]);
    return { report, pools: pools.items, claims: claims.items };
  };
  return livePage(root, KINDS, load, (data, body) => put(body,
    pageHead("Cost", `GPU-hours and what they cost, by ${by}, over the last ${windowName}`, controls(windowName, by)),
    totals(data.report),
    card(`Cost over time by ${by}`, chart(data.report)),
    card(`By ${by}`, groups(data.report)),
    card("Idle cost per pool", idle(data.report.pools)),
    card("NodePools", nodePools(data.pools, data.claims))));
}

function controls(windowName, by) {
  const go = (w, b) => { window.location.hash = `#/cost?window=${w}&by=${encodeURIComponent(b)}`; };
  const pick = (options, value, onChange, label) => {
    const el = h("select", { "aria-label": label }, options.map((o) => h("option", { value: o, selected: o === value ? "" : null }, o)));
    el.addEventListener("change", () => onChange(el.value));
    return el;
  };
  return h("div", { class: "controls" },
    pick(Object.keys(WINDOWS), windowName, (w) => go(w, by), "Window"),
    pick(GROUPS, by, (b) => go(windowName, b), "Group by"));
}

function money(v) {
  return Number(v || 0).toFixed(2);
}

function totals(r) {
  const facts = [
    ["Nodes", money(r.totalCost)],
    ["Allocated to pods", money(r.allocatedCost)],
    ["Idle", money(r.idleCost)],
    ["GPU-hours", Number(r.gpuHours || 0).toFixed(1)],
  ];
  return h("div", { class: "cost-totals" }, facts.map(([k, v]) => h("div", { class: "cost-total" }, h("span", { class: "muted" }, k), h("strong", {}, v))));
}

function chart(r) {
  const buckets = r.series || [];
  const keys = [...new Set(buckets.flatMap((b) => Object.keys(b.cost)))];
  if (!buckets.length || !keys.length) return empty("No usage in this window.");
  const width = 720, height = 180, pad = 24;
  const totalsPer = buckets.map((b) => Object.values(b.cost).reduce((a, v) => a + v, 0));
  const max = Math.max(...totalsPer, 1e-9);
  const barW = (width - 2 * pad) / buckets.length;
  const svg = s("svg", { class: "cost-chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "cost over time" });
  buckets.forEach((b, i) => {
    let y = height - pad;
    for (const key of keys) {
      const v = b.cost[key] || 0;
      if (!v) continue;
      const hgt = (v / max) * (height - 2 * pad);
      y -= hgt;
      const rect = s("rect", { x: pad + i * barW + 1, y, width: Math.max(barW - 2, 1), height: hgt, fill: jobColor(key) });
      rect.append(s("title", {}, `${key}: ${money(v)} from ${b.start}`));
      svg.append(rect);
    }
  });
  svg.append(s("text", { x: pad, y: 14, class: "axis" }, `max ${money(max)} per bucket`));
  const legend = h("div", { class: "legend" }, keys.map((k) => h("span", { class: "legend-item" }, h("span", { class: "swatch", style: { background: jobColor(k) } }), k)));
  return [svg, legend];
}

function groups(r) {
  if (!r.rows.length) return empty("No pod ran on a priced or GPU node in this window.");
  return table([
    { label: r.by, cell: (x) => h("strong", {}, x.key) },
    { label: "GPU-hours", cell: (x) => Number(x.gpuHours).toFixed(2), class: "num" },
    { label: "Cost", cell: (x) => money(x.cost), class: "num" },
    { label: "Lost GPU-h (spot)", cell: (x) => Number(x.lostGpuHours).toFixed(2), class: "num" },
    { label: "Jobs", cell: (x) => String(x.jobs), class: "num" },
    { label: "Pods", cell: (x) => String(x.pods), class: "num" },
  ], r.rows, { class: "compact" });
}

function idle(pools) {
  if (!pools.length) return empty("No priced nodes in this window.");
  return table([
    { label: "Pool", cell: (p) => h("strong", {}, p.pool) },
    { label: "Node-hours", cell: (p) => Number(p.nodeHours).toFixed(2), class: "num" },
    { label: "Cost", cell: (p) => money(p.cost), class: "num" },
    { label: "Allocated", cell: (p) => money(p.allocatedCost), class: "num" },
    { label: "Idle", cell: (p) => money(p.idleCost), class: "num" },
    { label: "Idle %", cell: (p) => `${Number(p.idlePct).toFixed(0)}%`, class: "num" },
  ], pools, { class: "compact", rowClass: (p) => (p.idlePct >= 50 ? "row-warning" : null) });
}

function nodePools(pools, claims) {
  if (!pools.length) return empty("No NodePools: the cluster is the nodes it has (docs/capacity.md).");
  return table([
    { label: "Pool", cell: (p) => h("strong", {}, p.metadata.name) },
    { label: "Capacity", cell: (p) => p.spec.capacityType || "on-demand" },
    { label: "Node", cell: (p) => `${(p.spec.template || {}).gpus || 0} × ${(p.spec.template || {}).gpuModel || "CPU"}` },
    { label: "Price/h", cell: (p) => money(p.spec.pricePerHour), class: "num" },
    { label: "Nodes", cell: (p) => `${(p.status || {}).readyNodes || 0} ready, ${(p.status || {}).provisioning || 0} coming (max ${p.spec.maxNodes})` },
    { label: "Cost/h now", cell: (p) => money((p.status || {}).costPerHour), class: "num" },
    { label: "Coming up", cell: (p) => comingUp(claims.filter((c) => c.spec.nodePool === p.metadata.name)) },
  ], pools, { class: "compact" });
}

function comingUp(claims) {
  const coming = claims.filter((c) => ["Pending", "Launched"].includes((c.status || {}).phase));
  if (!coming.length) return "—";
  return h("span", {}, coming.map((c) => h("div", {}, `${c.metadata.name} (${c.status.phase}${c.status.expectedReadyAt ? `, ready ${when(c.status.expectedReadyAt)}` : ""})`,
    c.status.lastError ? h("span", { class: "warning" }, ` ${c.status.lastError}`) : null)));
}
