// Queues: every ClusterQueue's quota and what its admitted Workloads use of it (borrowing
// shaded), its policies and counts, and the LocalQueues that lead to it.

import { h, put, table, card, empty } from "../dom.js";
import { pageHead, badge, quotaBars, livePage } from "./common.js";

const KINDS = ["ClusterQueue", "LocalQueue", "Workload"];

export default function queues(root) {
  return livePage(root, KINDS, "/ui/api/queues", (data, body) => put(body,
    pageHead("Queues", "Quota per ClusterQueue against what admitted jobs use"),
    data.clusterQueues.length ? h("div", { class: "grid-2" }, data.clusterQueues.map(clusterQueue)) : card("ClusterQueues", empty("No ClusterQueues.")),
    card("LocalQueues", localQueues(data.localQueues))));
}

function clusterQueue(q) {
  const pre = q.preemption || {};
  const policies = [
    ["Strategy", q.strategy],
    ["Cohort", q.cohort || "—"],
    ["Preemption", `within: ${pre.withinClusterQueue || "Never"}, reclaim: ${pre.reclaimWithinCohort || "Never"}`],
  ];
  if (q.fairSharingWeight !== null && q.fairSharingWeight !== undefined) policies.push(["Fair-sharing weight", String(q.fairSharingWeight)]);
  if (q.stopPolicy && q.stopPolicy !== "None") policies.push(["Stopped", q.stopPolicy]);
  return card(q.name, [
    h("div", { class: "queue-counts" }, badge("Admitted"), ` ${q.admitted}   `, badge("Pending"), ` ${q.pending}`),
    quotaBars(q),
    h("dl", { class: "facts compact" }, policies.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
  ], q.cohort ? h("span", { class: "chip" }, `cohort ${q.cohort}`) : null);
}

function localQueues(rows) {
  if (!rows.length) return empty("No LocalQueues.");
  return table([
    { label: "Namespace", cell: (r) => r.namespace },
    { label: "Name", cell: (r) => h("strong", {}, r.name) },
    { label: "ClusterQueue", cell: (r) => r.clusterQueue },
    { label: "Stopped", cell: (r) => (r.stopPolicy && r.stopPolicy !== "None" ? r.stopPolicy : "") },
    { label: "Jobs", cell: (r) => h("a", { href: `#/jobs?queue=${encodeURIComponent(r.name)}` }, "jobs →") },
  ], rows, { class: "compact" });
}
