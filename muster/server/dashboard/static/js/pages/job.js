// One job: why it is where it is (the `muster why` explanation), its conditions, its replicas
// with node and GPUs, a live log tail, preemption history and every event about it.

import { h, put, table, when, card, empty, between } from "../dom.js";
import { getJSON, objectPath, send } from "../api.js";
import { follow } from "../live.js";
import { LogTail } from "../logtail.js";
import { pageHead, badge, eventsTable, swatch, jobHref, loadFailure } from "./common.js";

const KINDS = ["TrainingJob", "Workload", "Pod", "Event", "ClusterQueue", "LocalQueue"];

export default function job(root, [namespace, name]) {
  const page = h("div", { class: "page" }, h("p", { class: "loading" }, "Loading…"));
  root.append(page);
  const logs = new LogTail();
  const tabs = h("div", { class: "tabs", role: "tablist" });
  let selected = null; // the replica whose log is shown
  let last = null;
  const sections = {
    head: h("div"), why: h("div"), conditions: h("div"), replicas: h("div"), preemptions: h("div"), events: h("div"),
  };
  let built = false;
  const controller = new AbortController();

  const render = (data) => {
    last = data;
    if (!built) {
      built = true;
      put(page, sections.head, sections.why,
        card("Replicas", sections.replicas),
        card("Logs", logs.el, tabs),
        card("Conditions", sections.conditions),
        sections.preemptions,
        card("Events", sections.events));
    }
    const row = data.row;
    put(sections.head, pageHead(h("span", { class: "title-with-swatch" }, swatch(`${namespace}/${name}`), name),
      `${namespace} · queue ${row.queue}${row.priorityClass ? ` · priority ${row.priorityClass}` : ""} · ${row.replicas} replica${row.replicas === 1 ? "" : "s"}${row.gpus ? ` · ${row.gpus} GPU` : ""}`,
      badge(row.state), suspendButton(data.job)));
    put(sections.why, whyCard(data.why));
    put(sections.conditions, conditionsTable(data.job));
    put(sections.replicas, replicasTable(data.replicas));
    const pre = data.why.preemptions || [];
    put(sections.preemptions, pre.length ? card("Preemption history", preemptionsTable(pre)) : null);
    put(sections.events, eventsTable(data.events));
    showLogs();
  };

  const showLogs = () => {
    const replicas = last.replicas;
    if (!replicas.length) { logs.show({ message: "This job has no replicas." }); return; }
    if (!selected || !replicas.some((r) => r.pod === selected)) {
      selected = (replicas.find((r) => r.exists && r.phase !== "Pending") || replicas[0]).pod;
    }
    put(tabs, replicas.map((r) => h("button", {
      type: "button", role: "tab", class: ["tab", r.pod === selected ? "active" : null], "aria-selected": r.pod === selected ? "true" : "false",
      onclick: () => { selected = r.pod; showLogs(); },
    }, r.replica)));
    const r = replicas.find((x) => x.pod === selected);
    const container = r.containers.length > 1 ? r.containers[0] : undefined;
    if (r.exists && r.phase === "Pending") logs.show({ message: `${r.pod} is waiting to start` });
    else if (r.exists) logs.show({ namespace, pod: r.pod, container, key: `${r.pod}/${r.uid}` });
    else if (last.row.started || last.row.restarts || last.row.preemptions) logs.show({ namespace, pod: r.pod, container, key: `${r.pod}/gone` });
    else logs.show({ message: `${r.pod} has not been created yet` });
  };

  const stop = follow(KINDS, async () => {
    try {
      render(await getJSON(`/ui/api/jobs/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`, controller.signal));
    } catch (err) {
      if (controller.signal.aborted) return;
      logs.stop();
      built = false;
      put(page, loadFailure(err, "job", namespace, name, "#/jobs"));
    }
  });
  return () => { controller.abort(); stop(); logs.stop(); };
}

function whyCard(why) {
  const facts = [];
  // The fact behind the scheduler's reason (an unhealthy GPU, a quota limit) comes first.
  const cause = why.rootCause;
  if (cause) {
    facts.push(["Root cause", h("strong", { class: "why-cause" }, cause.message)]);
    for (const more of cause.also || []) facts.push(["and", h("strong", { class: "why-cause" }, more.message)]);
  }
  if (why.reason) facts.push(["Reason", h("strong", {}, why.reason)]);
  if (why.message && !why.summary.includes(why.message)) facts.push(["Message", why.message]);
  const q = why.queue;
  if (q && q.clusterQueue) {
    let text = `LocalQueue ${q.localQueue} → ClusterQueue ${q.clusterQueue}`;
    if (q.strategy) text += ` (${q.strategy})`;
    if (q.position !== null && q.position !== undefined) {
      text += `, position ${q.position} of ${q.pending} pending`;
      if (q.ahead && q.ahead.length) text += `; ahead: ${q.ahead.join(", ")}`;
    }
    facts.push(["Queue", text]);
  }
  const requests = Object.entries(why.requests || {});
  if (requests.length) facts.push(["Requests", requests.map(([r, v]) => `${r} ${v}`).join(", ")]);
  if (why.fitsWhen && why.fitsWhen.message) facts.push(["Fits when", why.fitsWhen.message]);
  if (why.fragmentation && why.fragmentation.message) facts.push(["Fragmentation", why.fragmentation.message]);
  const body = [
    h("p", { class: "why-summary" }, why.summary),
    facts.length ? h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])) : null,
  ];
  if (why.quota && why.quota.length) {
    body.push(h("h3", {}, `Quota of ClusterQueue ${q ? q.clusterQueue : ""}`), table([
      { label: "Flavor", cell: (r) => r.flavor }, { label: "Resource", cell: (r) => r.resource },
      { label: "Used", cell: (r) => r.used, class: "num" }, { label: "Nominal", cell: (r) => r.nominal, class: "num" },
      { label: "Borrowed", cell: (r) => r.borrowed, class: "num" }, { label: "Borrowing limit", cell: (r) => r.borrowingLimit ?? "—", class: "num" },
    ], why.quota, { class: "compact" }));
  }
  if (why.nodes && why.nodes.length) {
    body.push(h("h3", {}, "Nodes"), table([
      { label: "Node", cell: (n) => h("strong", {}, n.node) },
      { label: "Fits", cell: (n) => (n.fits ? h("span", { class: "cond-True" }, "yes") : h("span", { class: "muted" }, "no")) },
      { label: "Reason", cell: (n) => n.reason || "" },
      { label: "Detail", cell: (n) => h("span", { class: "message" }, n.message || "") },
    ], why.nodes, { class: "compact" }));
  }
  if (why.failure) {
    const f = why.failure;
    body.push(h("h3", {}, "Failure"), h("p", {}, h("strong", {}, f.reason), f.message ? `: ${f.message}` : ""));
    if (f.pod) body.push(h("p", { class: "muted" }, `${f.pod.replica} (${f.pod.name}): ${f.pod.reason || f.pod.phase}${f.pod.exitCode !== null && f.pod.exitCode !== undefined ? `, exit code ${f.pod.exitCode}` : ""}`));
    if (f.logTail && f.logTail.length) body.push(h("pre", { class: "log log-short" }, f.logTail.join("")));
  }
  if (why.unblock && why.unblock.length) {
    body.push(h("h3", {}, ["Failed", "Restarting"].includes(why.state) ? "What to do" : "What would unblock it"),
      h("ul", { class: "hints" }, why.unblock.map((u) => h("li", {}, u))));
  }
  return h("section", { class: ["card", "why", `why-${why.state}`] }, h("header", { class: "card-head" }, h("h2", {}, "Why"), badge(why.state)), h("div", { class: "card-body" }, body));
}

function conditionsTable(job) {
  const conds = (job.status && job.status.conditions) || [];
  if (!conds.length) return empty("No conditions yet.");
  return table([
    { label: "Type", cell: (c) => h("strong", {}, c.type) },
    { label: "Status", cell: (c) => h("span", { class: ["cond", `cond-${c.status}`] }, c.status) },
    { label: "Reason", cell: (c) => c.reason || "" },
    { label: "Message", cell: (c) => h("span", { class: "message" }, c.message || "") },
    { label: "Since", cell: (c) => when(c.lastTransitionTime), class: "nowrap" },
  ], [...conds].sort((a, b) => (b.lastTransitionTime || "").localeCompare(a.lastTransitionTime || "")), { class: "compact" });
}

function replicasTable(replicas) {
  if (!replicas.length) return empty("No replicas.");
  return table([
    { label: "Replica", cell: (r) => h("strong", {}, r.replica), class: "nowrap" },
    { label: "Pod", cell: (r) => h("code", {}, r.pod), class: "nowrap" },
    { label: "Phase", cell: (r) => (r.exists ? badge(r.phase, r.reason || null) : h("span", { class: "muted" }, "no pod")), class: "nowrap" },
    { label: "Reason", cell: (r) => r.reason || "" },
    { label: "Node", cell: (r) => r.node || "" },
    { label: "GPUs", cell: (r) => r.gpus.join(", ") + (r.gpuMilli ? ` (${r.gpuMilli}m)` : "") },
    { label: "Ran", cell: (r) => (r.started ? between(r.started, r.finished) : ""), class: "nowrap" },
  ], replicas, { class: "compact" });
}

function preemptionsTable(rows) {
  const cols = [
    { label: "When", cell: (p) => when(p.time), class: "nowrap" },
    { label: "By", cell: (p) => preemptor(p.preemptor) },
    { label: "Reason", cell: (p) => h("strong", {}, p.reason || "") },
    { label: "Message", cell: (p) => h("span", { class: "message" }, p.message || "") },
  ];
  if (rows.some((p) => "resumedAt" in p)) {
    cols.push({ label: "Resumed", cell: (p) => (p.resumedAt ? when(p.resumedAt) : h("span", { class: "muted" }, "not yet")), class: "nowrap" });
    cols.push({ label: "Checkpoint", cell: (p) => (p.checkpointFound ? (p.checkpoint || "found") : h("span", { class: "muted" }, "none found")) });
  }
  return table(cols, rows, { class: "compact" });
}

function preemptor(ref) {
  // namespace/name of the preempting Workload: a job's Workload has the job's name.
  if (!ref) return "—";
  const [ns, wl] = ref.includes("/") ? ref.split("/") : ["default", ref];
  return h("a", { href: jobHref(ns, wl) }, ref);
}

function suspendButton(job) {
  const suspended = Boolean(job.spec.runPolicy && job.spec.runPolicy.suspend);
  const terminal = ((job.status && job.status.conditions) || []).some((c) => ["Succeeded", "Failed"].includes(c.type) && c.status === "True");
  if (terminal) return null;
  const button = h("button", { type: "button", class: "button" }, suspended ? "Resume" : "Suspend");
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const path = objectPath("trainingjobs", job.metadata.namespace, job.metadata.name);
      const current = await getJSON(path);
      current.spec.runPolicy = { ...(current.spec.runPolicy || {}), suspend: !suspended };
      await send("PUT", path, current);
    } catch (err) {
      button.disabled = false;
      button.title = err.message;
      button.classList.add("button-error");
    }
  });
  return button;
}
