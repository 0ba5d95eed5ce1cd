// Small inline-SVG charts: a sparkline and a usage bar.

import { h, s } from "./dom.js";

/** A sparkline of `values` (numbers, oldest first) between 0 and `max`. */
export function sparkline(values, { width = 120, height = 28, max = 1, label = "" } = {}) {
  const svg = s("svg", { class: "spark", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label });
  if (values.length === 0) return svg;
  const pad = 2;
  const step = values.length > 1 ? (width - 2 * pad) / (values.length - 1) : 0;
  const y = (v) => height - pad - (Math.min(Math.max(v, 0), max) / (max || 1)) * (height - 2 * pad);
  const points = values.map((v, i) => [pad + i * step, y(v)]);
  if (points.length === 1) points.push([width - pad, points[0][1]]);
  const line = points.map(([px, py], i) => `${i ? "L" : "M"}${px.toFixed(1)},${py.toFixed(1)}`).join("");
  const area = `${line}L${points[points.length - 1][0].toFixed(1)},${height - pad}L${pad},${height - pad}Z`;
  svg.append(s("path", { d: area, class: "spark-area" }), s("path", { d: line, class: "spark-line" }));
  const [lx, ly] = points[points.length - 1];
  svg.append(s("circle", { cx: lx, cy: ly, r: 2.2, class: "spark-dot" }));
  return svg;
}

/** A horizontal bar: `used` of `total`; the part past `nominal` (borrowed) is shaded apart. */
export function usageBar(used, total, { nominal = total, label = "" } = {}) {
  const scale = Math.max(total || 0, used || 0) || 1;
  const within = Math.min(used, nominal ?? used);
  const over = Math.max(0, used - (nominal ?? used));
  const pct = (v) => `${((100 * v) / scale).toFixed(2)}%`;
  const level = total && used / total >= 0.9 ? "high" : total && used / total >= 0.6 ? "mid" : "low";
  return h("div", { class: "bar", role: "meter", "aria-label": label, "aria-valuenow": used, "aria-valuemax": total || 0 },
    h("div", { class: `bar-fill bar-${level}`, style: { width: pct(within) } }),
    over > 0 ? h("div", { class: "bar-fill bar-borrowed", style: { width: pct(over) } }) : null);
}

/** Parse the amounts muster.controllers.usage.fmt_amount writes ("2", "0.5", "12.5Gi"). */
export function amount(text) {
  if (text === null || text === undefined || text === "") return 0;
  const m = /^(-?[\d.]+)(Ki|Mi|Gi|Ti)?$/.exec(String(text));
  if (!m) return Number(text) || 0;
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 }[m[2]] || 1;
  return Number(m[1]) * unit;
}
