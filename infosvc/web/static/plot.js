// A host's history as an inline SVG chart: time across, values up, one line per series.
//
// Drawn at the width the page has for it (the caller measures it), so that its text stays the
// size of the page's text on a phone as on a desktop, rather than an image scaled down.

import {clock, h, svg} from "./dom.js";

const MARGIN = {left: 56, right: 12, top: 10, bottom: 24};

/** The points split where reports stopped for a while, so a silent spell is a gap, not a line. */
function segments(points) {
  if (points.length < 3) return [points];
  const steps = points.slice(1).map(([t], i) => t - points[i][0]).sort((a, b) => a - b);
  const gap = Math.max(5 * steps[Math.floor(steps.length / 2)], 1000);
  const out = [[points[0]]];
  for (let i = 1; i < points.length; i++) {
    if (points[i][0] - points[i - 1][0] > gap) out.push([]);
    out.at(-1).push(points[i]);
  }
  return out;
}

/**
 * A chart of series [{name, cls, points: [[time in ms, value], ...]}] (points oldest first), from
 * 0 up to `max` or the largest value; `format` writes a value for the axis.
 */
export function chart({title, series, max = 0, width = 600, height = 180, format = String}) {
  const legend = h("span", {class: "legend"},
    series.map((s) => h("span", {class: ["key", s.cls]}, s.name)));
  const figure = h("figure", {class: "chart"}, h("figcaption", {}, h("strong", {}, title), " ", legend));
  const points = series.flatMap((s) => s.points);
  if (!points.length) {
    figure.append(h("p", {class: "empty"}, "nothing reported yet"));
    return figure;
  }
  let t0 = Math.min(...points.map(([t]) => t));
  let t1 = Math.max(...points.map(([t]) => t));
  if (t1 === t0) [t0, t1] = [t0 - 60000, t1 + 60000];  // one report: in the middle of two minutes
  const top = Math.max(max, ...points.map(([, v]) => v)) || 1;
  const inner = {w: width - MARGIN.left - MARGIN.right, h: height - MARGIN.top - MARGIN.bottom};
  const x = (t) => MARGIN.left + ((t - t0) / (t1 - t0)) * inner.w;
  const y = (v) => MARGIN.top + (1 - v / top) * inner.h;
  const round = (n) => Math.round(n * 10) / 10;

  const plot = svg("svg", {class: "plot", viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
                           "aria-label": `${title}, ${clock(new Date(t0))} to ${clock(new Date(t1))}`});
  for (const v of [0, top / 2, top]) {
    plot.append(svg("line", {class: "gridline", x1: MARGIN.left, x2: width - MARGIN.right, y1: round(y(v)), y2: round(y(v))}),
                svg("text", {class: "axis", x: MARGIN.left - 6, y: round(y(v)) + 4, "text-anchor": "end"}, format(v)));
  }
  // over a day or so, the times need their dates
  const two = (n) => String(n).padStart(2, "0");
  const stamp = (t) => {
    const d = new Date(t);
    return (t1 - t0 > 20 * 3600e3 ? `${two(d.getMonth() + 1)}-${two(d.getDate())} ` : "") + clock(d);
  };
  plot.append(svg("text", {class: "axis", x: MARGIN.left, y: height - 6}, stamp(t0)),
              svg("text", {class: "axis", x: width - MARGIN.right, y: height - 6, "text-anchor": "end"}, stamp(t1)));
  for (const s of series) {
    for (const part of segments(s.points)) {
      if (part.length === 1) {
        plot.append(svg("circle", {class: ["dot", s.cls], cx: round(x(part[0][0])), cy: round(y(part[0][1])), r: 3}));
      } else if (part.length > 1) {
        const line = part.map(([t, v]) => `${round(x(t))},${round(y(v))}`).join(" ");
        plot.append(svg("polyline", {class: ["line", s.cls], points: line}));
      }
    }
  }
  figure.append(plot);
  return figure;
}
