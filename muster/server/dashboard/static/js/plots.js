// Plots with axes for the experiment page (inline SVG, no library): trials as dots with the
// best-so-far line, and curves, one line per trial.

import { s } from "./dom.js";
import { jobColor } from "./colors.js";

const W = 640, H = 260, PAD = { left: 56, right: 14, top: 12, bottom: 30 };

function scale(lo, hi, from, to) {
  const span = hi - lo || 1;
  return (v) => from + ((v - lo) / span) * (to - from);
}

function extent(values) {
  let lo = Math.min(...values), hi = Math.max(...values);
  if (lo === hi) { lo -= Math.abs(lo) * 0.1 || 1; hi += Math.abs(hi) * 0.1 || 1; }
  const pad = (hi - lo) * 0.06;
  return [lo - pad, hi + pad];
}

function ticks(lo, hi, n = 4) {
  const out = [];
  for (let i = 0; i <= n; i++) out.push(lo + ((hi - lo) * i) / n);
  return out;
}

function fmt(v) {
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(1);
  return Number(v.toPrecision(3)).toString();
}

function frame(svg, x, y, [xlo, xhi], [ylo, yhi], { xLabel, yLabel, integerX }) {
  const axes = s("g", { class: "axes" });
  for (const t of ticks(ylo, yhi)) {
    axes.append(s("line", { x1: PAD.left, x2: W - PAD.right, y1: y(t), y2: y(t), class: "grid" }));
    axes.append(s("text", { x: PAD.left - 6, y: y(t) + 4, class: "tick", "text-anchor": "end" }, fmt(t)));
  }
  const xt = integerX ? [...new Set(ticks(xlo, xhi, 5).map((t) => Math.round(t)))] : ticks(xlo, xhi, 5);
  for (const t of xt) {
    axes.append(s("text", { x: x(t), y: H - PAD.bottom + 16, class: "tick", "text-anchor": "middle" }, integerX ? String(t) : fmt(t)));
  }
  axes.append(s("line", { x1: PAD.left, x2: W - PAD.right, y1: H - PAD.bottom, y2: H - PAD.bottom, class: "axis" }));
  axes.append(s("text", { x: W - PAD.right, y: H - 2, class: "axis-label", "text-anchor": "end" }, xLabel));
  axes.append(s("text", { x: 4, y: PAD.top + 2, class: "axis-label", "dominant-baseline": "hanging" }, yLabel));
  svg.append(axes);
}

/**
 * The objective of each trial against its index: one dot per trial that reported it (class
 * by phase), and the best value so far as a step line. `trials`: [{index, name, value, phase}].
 */
export function objectivePlot(trials, { metric, maximize }) {
  const svg = s("svg", { class: "plot plot-objective", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${metric} per trial` });
  const scored = trials.filter((t) => typeof t.value === "number");
  if (!scored.length) return svg;
  const xs = [Math.min(...trials.map((t) => t.index)), Math.max(...trials.map((t) => t.index))];
  if (xs[0] === xs[1]) xs[1] += 1;
  const ys = extent(scored.map((t) => t.value));
  const x = scale(xs[0], xs[1], PAD.left + 6, W - PAD.right - 6), y = scale(ys[0], ys[1], H - PAD.bottom, PAD.top);
  frame(svg, x, y, xs, ys, { xLabel: "trial", yLabel: metric, integerX: true });
  let best = null, path = "";
  for (const t of [...scored].sort((a, b) => a.index - b.index)) {
    const better = best === null || (maximize ? t.value > best : t.value < best);
    if (better) {
      path += path ? `H${x(t.index).toFixed(1)}V${y(t.value).toFixed(1)}` : `M${x(t.index).toFixed(1)},${y(t.value).toFixed(1)}`;
      best = t.value;
    }
  }
  path += `H${x(xs[1]).toFixed(1)}`;
  svg.append(s("path", { d: path, class: "best-line" }));
  for (const t of scored) {
    const dot = s("circle", { cx: x(t.index), cy: y(t.value), r: 4.5, class: ["trial-dot", `dot-${t.phase}`].join(" "), "data-trial": t.name });
    dot.append(s("title", {}, `${t.name}: ${metric}=${fmt(t.value)} (${t.phase})`));
    svg.append(dot);
  }
  return svg;
}

/** Each trial's curve, `curves`: {trial: [[step, value], ...]}; `best` is drawn on top. */
export function curvesPlot(curves, { metric, best }) {
  const svg = s("svg", { class: "plot plot-curves", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${metric} per step, one line per trial` });
  const all = Object.values(curves).flat();
  if (!all.length) return svg;
  const xs = [Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0]))];
  if (xs[0] === xs[1]) xs[1] += 1;
  const ys = extent(all.map((p) => p[1]));
  const x = scale(xs[0], xs[1], PAD.left + 4, W - PAD.right - 4), y = scale(ys[0], ys[1], H - PAD.bottom, PAD.top);
  frame(svg, x, y, xs, ys, { xLabel: "step (report)", yLabel: metric, integerX: true });
  const names = Object.keys(curves).sort((a, b) => (a === best) - (b === best));
  for (const name of names) {
    const points = curves[name];
    const d = points.map(([px, py], i) => `${i ? "L" : "M"}${x(px).toFixed(1)},${y(py).toFixed(1)}`).join("");
    const line = s("path", { d, class: name === best ? "curve best" : "curve", "data-trial": name, style: name === best ? null : { stroke: jobColor(name) } });
    line.append(s("title", {}, `${name}: ${points.length} points, last ${fmt(points[points.length - 1][1])}`));
    svg.append(line);
    if (points.length === 1) svg.append(s("circle", { cx: x(points[0][0]), cy: y(points[0][1]), r: 2.5, class: "curve-dot", style: { fill: jobColor(name) } }));
  }
  return svg;
}
