// The overview: every GPU of every node as a tile coloured by the job holding it, quota usage
// of every ClusterQueue, recent events, and a few headline numbers.

import { h, put, card, empty } from "../dom.js";
import { jobColor } from "../colors.js";
import { pageHead, eventsTable, quotaBars, holderOwner, swatch, badge } from "./common.js";
import { livePage } from "./common.js";
import { amount } from "../charts.js";

const KINDS = ["Node", "Pod", "Workload", "TrainingJob", "ClusterQueue", "LocalQueue", "Event"];

export default function overview(root) {
  return livePage(root, KINDS, "/ui/api/overview", (data, body) => put(body,
    pageHead("Overview", "GPUs, quotas and what happened lately"),
    stats(data),
    h("div", { class: "grid-2" },
      card("GPUs", gpuGrid(data.gpus), legend(data.gpus)),
      card("Queues", queueList(data.queues), h("a", { class: "more", href: "#/queues" }, "All queues →"))),
    card("Recent events", eventsTable(data.events.slice(0, 15)))));
}

function stats(data) {
  const total = data.gpus.length;
  const used = data.gpus.reduce((a, g) => a + g.allocatedMilli, 0) / 1000;
  const { ready, total: nodes } = data.nodes;
  const st = data.jobStates;
  const count = (...names) => names.reduce((a, n) => a + (st[n] || 0), 0);
  const tile = (label, value, note, cls) => h("div", { class: ["stat", cls] }, h("div", { class: "stat-value" }, value), h("div", { class: "stat-label" }, label), note ? h("div", { class: "stat-note" }, note) : null);
  return h("div", { class: "stats" },
    tile("GPUs allocated", `${fmt(used)} / ${total}`, total ? `${Math.round((100 * used) / total)}% of the cluster` : "no GPUs", "stat-gpu"),
    tile("Nodes ready", `${ready} / ${nodes}`, nodes - ready ? `${nodes - ready} not ready` : "all ready"),
    tile("Jobs running", count("Running", "Restarting"), null, "stat-running"),
    tile("Jobs queued", count("Queued", "Created", "Preempted"), null, "stat-wait"),
    tile("Jobs failed", count("Failed"), `${count("Succeeded")} succeeded`, count("Failed") ? "stat-bad" : null));
}

function fmt(n) {
  return Number.isInteger(n) ? String(n) : n.toFixed(2).replace(/0+$/, "");
}

function gpuGrid(gpus) {
  if (!gpus.length) return empty("No GPUs registered. Start the server with --fake-gpus N to try Muster without GPUs.");
  const byNode = new Map();
  gpus.forEach((g) => { if (!byNode.has(g.node)) byNode.set(g.node, []); byNode.get(g.node).push(g); });
  return h("div", { class: "gpu-nodes" }, [...byNode].map(([node, list]) =>
    h("div", { class: "gpu-node" },
      h("div", { class: "gpu-node-name" }, h("a", { href: "#/nodes" }, node), h("span", { class: "muted" }, ` ${list[0].model || ""}`)),
      h("div", { class: "gpu-tiles" }, list.map(gpuTile)))));
}

export function gpuTile(g) {
  const unhealthy = g.health !== "Healthy";
  const holders = g.holders;
  const title = [`${g.node} GPU ${g.index} · ${g.model} ${g.memory}`, unhealthy ? `health: ${g.health}${g.healthReason ? ` (${g.healthReason})` : ""}` : null,
    ...holders.map((x) => `${x.namespace}/${x.pod}${x.milli < 1000 ? ` (${x.milli}m)` : ""}`)].filter(Boolean).join("\n");
  const fills = holders.map((x) => h("div", { class: "gpu-fill", style: { background: jobColor(holderOwner(x).key), flexGrow: String(x.milli) } }));
  const free = 1000 - g.allocatedMilli;
  if (holders.length && free > 0) fills.push(h("div", { class: "gpu-fill gpu-free", style: { flexGrow: String(free) } }));
  const first = holders.length ? holderOwner(holders[0]) : null;
  const href = first ? first.href : null;
  const label = first ? first.name : unhealthy ? g.health : "free";
  const tile = h(href ? "a" : "div", {
    class: ["gpu-tile", holders.length ? "busy" : "idle", unhealthy ? "unhealthy" : null],
    href, title, "data-gpu": `${g.node}/${g.index}`,
  },
  h("div", { class: "gpu-fills" }, fills),
  h("div", { class: "gpu-text" }, h("span", { class: "gpu-index" }, `GPU ${g.index}`), h("span", { class: "gpu-job" }, holders.length > 1 ? `${label} +${holders.length - 1}` : label)));
  return tile;
}

function legend(gpus) {
  const owners = new Map(); // key -> {owner, gpus}
  gpus.forEach((g) => g.holders.forEach((x) => {
    const owner = holderOwner(x);
    const seen = owners.get(owner.key) || { owner, gpus: 0 };
    seen.gpus += x.milli / 1000;
    owners.set(owner.key, seen);
  }));
  if (!owners.size) return null;
  return h("div", { class: "legend" }, [...owners.values()].sort((a, b) => a.owner.key.localeCompare(b.owner.key)).map(({ owner, gpus: n }) =>
    h(owner.href ? "a" : "span", { class: "legend-item", href: owner.href, title: owner.key }, swatch(owner.key), owner.name, h("span", { class: "muted" }, ` ${fmt(n)}`))));
}

function queueList(queues) {
  if (!queues.length) return empty("No ClusterQueues.");
  return h("div", { class: "queues" }, queues.map((q) => h("div", { class: "queue" },
    h("div", { class: "queue-head" },
      h("strong", {}, q.name), q.cohort ? h("span", { class: "chip" }, `cohort ${q.cohort}`) : null,
      h("span", { class: "queue-counts" }, badge("Admitted", "admitted Workloads"), ` ${q.admitted}  `, badge("Pending", "pending Workloads"), ` ${q.pending}`)),
    quotaBars({ ...q, quota: q.quota.filter((r) => amount(r.nominal) > 0 || amount(r.used) > 0) }))));
}
