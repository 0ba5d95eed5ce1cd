// A workflow's DAG as SVG, laid out in layers by longest path (a task sits one layer right of
// its deepest dependency), ordered within a layer by the mean position of its dependencies
// (one barycentre pass, which untangles the usual fan-out/fan-in shapes), edges as curves.

import { s } from "./dom.js";
import { phaseClass } from "./colors.js";

export const NODE_W = 168;
export const NODE_H = 46;
const GAP_X = 64;
const GAP_Y = 18;
const PAD = 12;

/**
 * tasks: [{name, dependencies: [name], exit: bool}] -> {nodes: {name: {layer, row, x, y}}, width, height}.
 * An onExit task goes in a layer of its own after every other.
 */
export function layout(tasks) {
  const byName = new Map(tasks.map((t) => [t.name, t]));
  const layer = new Map();
  const depth = (name, seen = new Set()) => {
    if (layer.has(name)) return layer.get(name);
    if (seen.has(name)) return 0; // a cycle: validation rejects these, but never loop
    seen.add(name);
    const deps = (byName.get(name)?.dependencies || []).filter((d) => byName.has(d));
    const value = deps.length ? 1 + Math.max(...deps.map((d) => depth(d, seen))) : 0;
    layer.set(name, value);
    return value;
  };
  tasks.forEach((t) => depth(t.name));
  const last = Math.max(0, ...tasks.filter((t) => !t.exit).map((t) => layer.get(t.name)));
  tasks.filter((t) => t.exit).forEach((t) => layer.set(t.name, last + 1));

  const layers = [];
  tasks.forEach((t) => (layers[layer.get(t.name)] ||= []).push(t.name));
  const row = new Map();
  layers.forEach((names, i) => {
    if (i > 0) {
      const centre = (n) => {
        const deps = (byName.get(n).dependencies || []).filter((d) => row.has(d));
        return deps.length ? deps.reduce((a, d) => a + row.get(d), 0) / deps.length : Infinity;
      };
      names.sort((a, b) => centre(a) - centre(b) || a.localeCompare(b));
    }
    names.forEach((n, r) => row.set(n, r));
  });

  const tallest = Math.max(1, ...layers.map((l) => (l ? l.length : 0)));
  const height = 2 * PAD + tallest * NODE_H + (tallest - 1) * GAP_Y;
  const nodes = {};
  layers.forEach((names, i) => {
    const span = names.length * NODE_H + (names.length - 1) * GAP_Y;
    const top = (height - span) / 2; // centre each layer vertically
    names.forEach((n, r) => {
      nodes[n] = { layer: i, row: r, x: PAD + i * (NODE_W + GAP_X), y: top + r * (NODE_H + GAP_Y) };
    });
  });
  const width = 2 * PAD + layers.length * NODE_W + Math.max(0, layers.length - 1) * GAP_X;
  return { nodes, width, height };
}

/**
 * The SVG. tasks as for layout(); status(name) -> {phase, detail}; onSelect(name) on click.
 */
export function renderDag(tasks, status, onSelect, selected) {
  const { nodes, width, height } = layout(tasks);
  const svg = s("svg", { class: "dag", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "Workflow tasks" });
  const edges = s("g", { class: "dag-edges" });
  for (const t of tasks) {
    for (const d of t.dependencies || []) {
      if (!nodes[d]) continue;
      const a = nodes[d], b = nodes[t.name];
      const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2;
      const mx = (x1 + x2) / 2;
      edges.append(s("path", { d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2 - 4},${y2}`, class: "dag-edge", "marker-end": "url(#arrow)" }));
    }
  }
  const defs = s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 8 8", refX: 6, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto" },
    s("path", { d: "M0,0 L8,4 L0,8 Z", class: "dag-arrow" })));
  svg.append(defs, edges);
  for (const t of tasks) {
    const n = nodes[t.name];
    const st = status(t.name);
    const g = s("g", {
      class: ["dag-node", phaseClass(st.phase), t.exit ? "dag-exit" : null, selected === t.name ? "selected" : null].filter(Boolean).join(" "),
      transform: `translate(${n.x},${n.y})`, tabindex: 0, role: "button", "data-task": t.name,
      "aria-label": `${t.name}: ${st.phase}`,
      onclick: () => onSelect(t.name),
      onkeydown: (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); onSelect(t.name); } },
    });
    g.append(
      s("rect", { width: NODE_W, height: NODE_H, rx: 8, class: "dag-box" }),
      s("rect", { width: 5, height: NODE_H, rx: 2, class: "dag-stripe" }),
      s("text", { x: 14, y: 19, class: "dag-name" }, clip(t.name, 20)),
      s("text", { x: 14, y: 36, class: "dag-phase" }, clip(st.detail ? `${st.phase} · ${st.detail}` : st.phase, 26)),
      s("title", {}, `${t.name}: ${st.phase}${st.detail ? ` (${st.detail})` : ""}`));
    svg.append(g);
  }
  return svg;
}

function clip(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}
