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

/** A link to what a GPU holder belongs to, or to nothing we have a page for. */
export function ownerHref(owner) {
  if (!owner) return null;
  if (owner.kind === "TrainingJob") return jobHref(owner.namespace, owner.name);
  if (owner.kind === "Workflow") return workflowHref(owner.namespace, owner.name);
  return null;
}

export function ownerKey(owner, pod) {
  return owner ? `${owner.namespace}/${owner.name}` : pod;
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
 * The usual page frame: fetch `url` now and whenever one of `kinds` changes, render the
 * answer with render(data); a failed fetch shows why (and the next change tries again).
 */
export function livePage(root, kinds, url, render) {
  const body = h("div", { class: "page" }, h("p", { class: "loading" }, "Loading…"));
  root.append(body);
  const controller = new AbortController();
  const stop = follow(kinds, async () => {
    try {
      const data = await getJSON(typeof url === "function" ? url() : url, controller.signal);
      render(data, body);
    } catch (err) {
      if (controller.signal.aborted) return;
      put(body, h("div", { class: "failure" }, h("strong", {}, "Could not load this page: "), err.message));
    }
  });
  return () => { controller.abort(); stop(); };
}
