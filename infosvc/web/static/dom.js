// Building the page's DOM, and the small formats it shows values in.
//
// Every text goes in as a text node, never as markup: a host name, a job's owner or an admin's
// reason comes from whoever reported it, and must read as text. (The page's Content-Security-Policy
// also forbids inline script and style, so nothing here sets a style attribute: looks are classes.)

const SVG = "http://www.w3.org/2000/svg";

function build(element, attrs, children) {
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") element.setAttribute("class", Array.isArray(value) ? value.filter(Boolean).join(" ") : value);
    else if (key.startsWith("on")) element.addEventListener(key.slice(2), value);
    else element.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** An HTML element: h("td", {class: "n"}, "text", otherElement). */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element, as h() builds HTML ones. */
export function svg(tag, attrs, ...children) {
  return build(document.createElementNS(SVG, tag), attrs, children);
}

/** A table with a header row and the given rows (arrays of cells: text or elements). */
export function table(headers, rows, attrs = {}) {
  return h("div", {class: "scroll"},
    h("table", attrs,
      h("thead", {}, h("tr", {}, headers.map((title) => h("th", {scope: "col"}, title)))),
      h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((cell) => h("td", {}, cell)))))));
}

/** A definition list of [term, value] pairs, the empty values left out. */
export function facts(pairs) {
  return h("dl", {class: "facts"},
    pairs.filter(([, value]) => value !== undefined && value !== null && value !== "")
      .map(([term, value]) => [h("dt", {}, term), h("dd", {}, value)]));
}

const pad = (n) => String(n).padStart(2, "0");

/** The local time of day of a Date, HH:MM:SS. */
export function clock(date) {
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

/** An ISO 8601 time from the API as the local date and time, and how long ago. */
export function when(iso, now = Date.now()) {
  const t = Date.parse(iso ?? "");
  if (Number.isNaN(t)) return iso ?? "";
  const d = new Date(t);
  const date = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${clock(d)}`;
  return `${date} (${ago((now - t) / 1000)})`;
}

/** A span of seconds, roughly: "12 s ago", "5 min ago", "3 h ago". */
export function ago(seconds) {
  if (seconds < -5) return "in the future";  // a little ahead is one clock against another
  seconds = Math.max(0, seconds);
  if (seconds < 90) return `${Math.round(seconds)} s ago`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 172800) return `${Math.round(seconds / 3600)} h ago`;
  return `${Math.round(seconds / 86400)} days ago`;
}

/** A size in MB (2^20 bytes, as GLUE and the agent write them) as MiB, GiB or TiB. */
export function mebibytes(mb) {
  if (mb === undefined || mb === null || !Number.isFinite(Number(mb))) return "";
  let value = Number(mb);
  for (const unit of ["MiB", "GiB", "TiB"]) {
    if (Math.abs(value) < 1024 || unit === "TiB") {
      return `${value >= 100 || Number.isInteger(value) ? Math.round(value) : value.toFixed(1)} ${unit}`;
    }
    value /= 1024;
  }
  return "";
}

/** A fraction 0..1 as a whole percentage. */
export function percent(fraction) {
  return Number.isFinite(fraction) ? `${Math.round(fraction * 100)}%` : "";
}

/** A number of seconds as a short duration: "45 s", "12 min", "3 h 20 min". */
export function duration(seconds) {
  if (!Number.isFinite(seconds)) return "";
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  const hours = Math.floor(seconds / 3600);
  const minutes = Math.round((seconds % 3600) / 60);
  return minutes ? `${hours} h ${minutes} min` : `${hours} h`;
}
