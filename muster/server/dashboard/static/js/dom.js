// Building DOM without a framework: h() creates elements, text goes in as text nodes (never
// as HTML, so names and messages from objects cannot inject markup).

const SVG_NS = "http://www.w3.org/2000/svg";

/** h("a", {href: "#/jobs", class: "x", onclick: fn, style: {width: "3px"}}, "text", child, [more]) */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** An SVG element (attributes are SVG attributes). */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "style") Object.assign(el.style, value); // CSSOM: allowed by the page's CSP
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.setAttribute("class", Array.isArray(value) ? value.filter(Boolean).join(" ") : value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace what `el` holds. */
export function put(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function card(title, body, extra) {
  return h("section", { class: "card" },
    title || extra ? h("header", { class: "card-head" }, title ? h("h2", {}, title) : h("span"), extra || null) : null,
    h("div", { class: "card-body" }, body));
}

export function empty(text) {
  return h("p", { class: "empty" }, text);
}

/** A table: columns [{label, cell(row) -> node|text, class}], rows. */
export function table(columns, rows, opts = {}) {
  return h("table", { class: ["table", opts.class] },
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { class: c.class }, c.label)))),
    h("tbody", {}, rows.map((row) => h("tr", { class: opts.rowClass ? opts.rowClass(row) : null },
      columns.map((c) => h("td", { class: c.class }, c.cell(row)))))));
}

// -- formatting -----------------------------------------------------------------------------

export function age(iso, now = Date.now()) {
  if (!iso) return "";
  const seconds = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  return duration(seconds);
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "";
  if (seconds < 60) return `${seconds}s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m}m${seconds % 60 ? ` ${seconds % 60}s` : ""}`;
  const hours = Math.floor(m / 60);
  if (hours < 48) return `${hours}h${m % 60 ? ` ${m % 60}m` : ""}`;
  return `${Math.floor(hours / 24)}d`;
}

export function between(startIso, endIso) {
  if (!startIso) return "";
  const end = endIso ? Date.parse(endIso) : Date.now();
  return duration(Math.max(0, Math.round((end - Date.parse(startIso)) / 1000)));
}

export function when(iso) {
  return iso ? h("time", { datetime: iso, title: new Date(iso).toLocaleString() }, age(iso)) : "";
}
