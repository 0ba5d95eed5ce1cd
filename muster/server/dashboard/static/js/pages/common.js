// Pieces several pages share: the page header, state badges, links to objects, the events
// table, quota rows, and the loading/failure frame around a page's view.

import { h, put, table, when, empty } from "../dom.js";
import { phaseClass, jobColor } from "../colors.js";
import { follow } from "../live.js";
import { ApiError, getJSON } from "../api.js";
import { usageBar, amount } from "../charts.js";

export function pageHead(title, subtitle, ...actions) {
  return h("header", { class: "page-head" },
    h("div", {}, h("h1", {}, title), subtitle ? h("p", { class: "subtitle" }, subtitle) : null),
    actions.length ? h("div", { class: "actions" }, actions) : null);
}

export function badge(state, title) {
  return h("span", { class: ["badge", phaseClass(state)], title: title || null }, state || "—");
}

export function jobHref(namespace, name) {
  return `#/jobs/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
}

export function workflowHref(namespace, name) {
  return `#/workflows/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
}

/**
 * What a GPU holder (a row of GET /api/v1/gpus: namespace, pod, job, workflow, milli) belongs
 * to: its job, else its workflow, else the pod itself. `key` picks the colour, so a job's GPUs
 * share one; `href` is its page, when there is one.
 */
export function holderOwner(holder) {
  const { namespace } = holder;
  if (holder.job) return { name: holder.job, key: `${namespace}/${holder.job}`, href: jobHref(namespace, holder.job) };
  if (holder.workflow) return { name: holder.workflow, key: `${namespace}/${holder.workflow}`, href: workflowHref(namespace, holder.workflow) };
  return { name: holder.pod, key: `${namespace}/${holder.pod}`, href: null };
}

export function swatch(key) {
  return h("span", { class: "swatch", style: { background: jobColor(key) } });
}

export function objectLink(kind, namespace, name) {
  const label = `${(kind || "").toLowerCase()}/${name}`;
  if (kind === "TrainingJob") return h("a", { href: jobHref(namespace, name) }, label);
  if (kind === "Workflow") return h("a", { href: workflowHref(namespace, name) }, label);
  return label;
}

export function eventsTable(events, { showObject = true } = {}) {
  if (!events.length) return empty("No events yet.");
  const cols = [
    { label: "Last seen", cell: (e) => when(e.lastTimestamp), class: "nowrap" },
    { label: "Type", cell: (e) => h("span", { class: ["event-type", e.type === "Warning" ? "warning" : "normal"] }, e.type) },
    { label: "Reason", cell: (e) => h("strong", {}, e.reason) },
  ];
  if (showObject) cols.push({ label: "Object", cell: (e) => objectLink(e.kind, e.namespace, e.name), class: "nowrap" });
  cols.push({ label: "Message", cell: (e) => h("span", { class: "message" }, e.message, e.count > 1 ? h("span", { class: "count" }, ` ×${e.count}`) : null) });
  return table(cols, events, { class: "events", rowClass: (e) => (e.type === "Warning" ? "row-warning" : null) });
}

/** One ClusterQueue's quota rows as labelled bars (used against nominal; borrowing shaded). */
export function quotaBars(queue) {
  if (!queue.quota.length) return empty("No quota.");
  return h("div", { class: "quota" }, queue.quota.map((r) => {
    const used = amount(r.used), nominal = amount(r.nominal);
    const limit = r.borrowingLimit === null ? null : amount(r.borrowingLimit);
    const total = limit === null ? Math.max(nominal, used) : nominal + limit;
    return h("div", { class: "quota-row" },
      h("div", { class: "quota-label" }, h("span", {}, r.resource), h("span", { class: "muted" }, ` · ${r.flavor}`)),
      usageBar(used, total, { nominal, label: `${r.resource} in ${r.flavor}` }),
      h("div", { class: "quota-value" }, `${r.used} / ${r.nominal}`,
        amount(r.borrowed) > 0 ? h("span", { class: "borrowed" }, ` (+${r.borrowed} borrowed)`) : null));
  }));
}

/** What a page of one object shows when it cannot load it (gone, or the server failed). */
export function loadFailure(err, what, namespace, name, back) {
  const gone = err instanceof ApiError && err.status === 404;
  return [pageHead(name, namespace),
    h("div", { class: "failure" }, gone ? `There is no ${what} ${name} in namespace ${namespace} (any more).` : `Could not load the ${what}: ${err.message}`),
    h("p", {}, h("a", { href: back }, `← All ${what}s`))];
}

/**
 * The usual page frame: fetch `url` (or call `url(signal)`, which returns the data) now and
 * whenever one of `kinds` changes, render the answer with render(data, element); a failed
 * fetch shows why (and the next change tries again).
 */
export function livePage(root, kinds, url, render) {
  const body = h("div", { class: "page" }, h("p", { class: "loading" }, "Loading…"));
  root.append(body);
  const controller = new AbortController();
  const stop = follow(kinds, async () => {
    try {
      const data = await (typeof url === "function" ? url(controller.signal) : getJSON(url, controller.signal));
      render(data, body);
    } catch (err) {
      if (controller.signal.aborted) return;
      put(body, h("div", { class: "failure" }, h("strong", {}, "Could not load this page: "), err.message));
    }
  });
  const dispose = () => { controller.abort(); stop(); };
  dispose.refresh = stop.refresh;
  return dispose;
}
