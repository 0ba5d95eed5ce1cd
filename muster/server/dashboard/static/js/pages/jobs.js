// Jobs: every TrainingJob with its state and the reason for it, newest first, a page at a time;
// filter by text, state, queue. The server filters and pages (a cluster may hold 100,000 jobs:
// the page carries only its rows). The filters live in the URL (#/jobs?state=Failed), so a
// filtered list can be linked to.

import { h, put, table, when, empty, card } from "../dom.js";
import { getJSON } from "../api.js";
import { pageHead, badge, jobHref, swatch } from "./common.js";
import { livePage } from "./common.js";

const KINDS = ["TrainingJob", "Workload"];
const STATES = ["Running", "Queued", "Restarting", "Preempted", "Suspended", "Succeeded", "Failed", "Created"];
const PAGE = 100;

export default function jobs(root, _params, query) {
  const filters = { q: query.get("q") || "", state: query.get("state") || "", queue: query.get("queue") || "" };
  let offset = 0;
  const text = h("input", { type: "search", class: "input", placeholder: "Filter by name or namespace", value: filters.q, "aria-label": "Filter jobs" });
  const state = select("state", ["", ...STATES], filters.state, "All states");
  const queue = select("queue", [""], filters.queue, "All queues");
  const count = h("span", { class: "muted count" });
  const previous = h("button", { type: "button", class: "button", "aria-label": "Previous page", disabled: true }, "‹ Newer");
  const next = h("button", { type: "button", class: "button", "aria-label": "Next page", disabled: true }, "Older ›");
  const list = h("div");

  const url = () => {
    const params = new URLSearchParams(Object.entries(filters).filter(([, v]) => v));
    params.set("limit", String(PAGE));
    params.set("offset", String(offset));
    return `/ui/api/jobs?${params}`;
  };
  const show = (data) => {
    fillOptions(queue, ["", ...data.queues], filters.queue, "All queues");
    if (data.matched && data.offset >= data.matched) { // the last page emptied: go back one
      offset = Math.max(0, data.matched - PAGE);
      dispose.refresh();
      return;
    }
    const shown = data.jobs.length ? `${data.offset + 1}–${data.offset + data.jobs.length} of ${data.matched}` : "0";
    count.textContent = data.matched === data.total ? shown : `${shown} (of ${data.total})`;
    previous.disabled = data.offset === 0;
    next.disabled = data.offset + data.jobs.length >= data.matched;
    put(list, data.jobs.length ? jobTable(data.jobs) : empty(data.total ? "No job matches the filters." : "No jobs yet. Submit one with `muster apply -f job.yaml`."));
  };
  const dispose = livePage(root, KINDS, (signal) => getJSON(url(), signal), (data, body) => {
    if (!body.contains(list)) {
      put(body, pageHead("Jobs", "Training jobs, their state and why"),
        card("", list, h("div", { class: "filters" }, text, state, queue, count, previous, next)));
    }
    show(data);
  });

  const update = () => {
    filters.q = text.value.trim();
    filters.state = state.value;
    filters.queue = queue.value;
    offset = 0;
    const params = new URLSearchParams(Object.entries(filters).filter(([, v]) => v));
    history.replaceState(null, "", `#/jobs${params.size ? `?${params}` : ""}`);
    dispose.refresh();
  };
  [text, state, queue].forEach((el) => el.addEventListener("input", update));
  previous.addEventListener("click", () => { offset = Math.max(0, offset - PAGE); dispose.refresh(); });
  next.addEventListener("click", () => { offset += PAGE; dispose.refresh(); });
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
