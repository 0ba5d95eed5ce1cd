// Jobs: every TrainingJob with its state and the reason for it; filter by text, state, queue.
// The filters live in the URL (#/jobs?state=Failed), so a filtered list can be linked to.

import { h, put, table, when, empty, card } from "../dom.js";
import { pageHead, badge, jobHref, swatch } from "./common.js";
import { livePage } from "./common.js";

const KINDS = ["TrainingJob", "Workload"];
const STATES = ["Running", "Queued", "Restarting", "Preempted", "Suspended", "Succeeded", "Failed", "Created"];

export default function jobs(root, _params, query) {
  const filters = { q: query.get("q") || "", state: query.get("state") || "", queue: query.get("queue") || "" };
  let last = null;
  const text = h("input", { type: "search", class: "input", placeholder: "Filter by name or namespace", value: filters.q, "aria-label": "Filter jobs" });
  const state = select("state", ["", ...STATES], filters.state, "All states");
  const queue = select("queue", [""], filters.queue, "All queues");
  const count = h("span", { class: "muted" });
  const list = h("div");
  const update = () => {
    filters.q = text.value.trim();
    filters.state = state.value;
    filters.queue = queue.value;
    const params = new URLSearchParams(Object.entries(filters).filter(([, v]) => v));
    history.replaceState(null, "", `#/jobs${params.size ? `?${params}` : ""}`);
    if (last) show(last);
  };
  [text, state, queue].forEach((el) => el.addEventListener("input", update));

  const show = (data) => {
    const queues = [...new Set(data.jobs.map((j) => j.queue))].sort();
    fillOptions(queue, ["", ...queues], filters.queue, "All queues");
    const q = filters.q.toLowerCase();
    const rows = data.jobs.filter((j) =>
      (!q || j.name.toLowerCase().includes(q) || j.namespace.toLowerCase().includes(q)) &&
      (!filters.state || j.state === filters.state) &&
      (!filters.queue || j.queue === filters.queue));
    count.textContent = `${rows.length} of ${data.jobs.length}`;
    put(list, rows.length ? jobTable(rows) : empty(data.jobs.length ? "No job matches the filters." : "No jobs yet. Submit one with `muster apply -f job.yaml`."));
  };

  const dispose = livePage(root, KINDS, "/ui/api/jobs", (data, body) => {
    last = data;
    if (!body.contains(list)) {
      put(body, pageHead("Jobs", "Training jobs, their state and why"),
        card("", list, h("div", { class: "filters" }, text, state, queue, count)));
    }
    show(data);
  });
  return dispose;
}

function jobTable(rows) {
  return table([
    { label: "Name", cell: (j) => h("a", { class: "job-link", href: jobHref(j.namespace, j.name) }, swatch(`${j.namespace}/${j.name}`), j.name) },
    { label: "Namespace", cell: (j) => j.namespace },
    { label: "State", cell: (j) => badge(j.state) },
    { label: "Reason", cell: (j) => h("span", { class: "reason", title: j.message || null }, j.reason ? h("strong", {}, j.reason) : "", j.message ? h("span", { class: "muted" }, ` ${j.message}`) : ""), class: "fill" },
    { label: "Queue", cell: (j) => j.queue },
    { label: "Replicas", cell: (j) => String(j.replicas), class: "num" },
    { label: "GPUs", cell: (j) => j.gpus ?? "", class: "num" },
    { label: "Restarts", cell: (j) => String(j.restarts), class: "num" },
    { label: "Age", cell: (j) => when(j.created), class: "nowrap" },
  ], rows, { class: "jobs" });
}

function select(name, values, current, allLabel) {
  const el = h("select", { class: "input", name, "aria-label": name });
  fillOptions(el, values, current, allLabel);
  return el;
}

function fillOptions(el, values, current, allLabel) {
  const wanted = values.includes(current) ? values : [...values, current];
  if ([...el.options].map((o) => o.value).join("\n") === wanted.join("\n")) return;
  put(el, wanted.map((v) => h("option", { value: v, selected: v === current }, v || allLabel)));
}
