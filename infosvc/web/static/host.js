// One host's own view (#/host/ID): its GLUE facts, its newest SSS Node (consumables and every
// extension it reports) and its history plotted, from GET /v1/nodes/{id} and
// GET /v1/nodes/{id}/history.

import {facts, h, mebibytes, percent, table, when} from "./dom.js";
import {chart} from "./plot.js";
import {hostLoad, reportedAt, stateBadge} from "./view.js";

/** The reports the history asks for: a few hours of minute-by-minute reports. */
export const HISTORY_LIMIT = 360;

// Appendix A units as powers of two, by the names the SSS documents use (case-insensitive).
const EXPONENTS = {byte: 0, bytes: 0, b: 0, kilobyte: 10, kb: 10, kib: 10, megabyte: 20, mb: 20, mib: 20,
                   gigabyte: 30, gb: 30, gib: 30, terabyte: 40, tb: 40, tib: 40, petabyte: 50, pb: 50, pib: 50};
const SIZED = new Set(["Memory", "Swap", "Disk"]);  // their missing units are MB (SSS Node, Appendix A)

/** A consumable's value in MB, or null when it is no size. */
function inMB(item) {
  if (!item) return null;
  const units = item.units ?? (SIZED.has(item.kind) ? "MB" : null);
  const exponent = units === null ? undefined : EXPONENTS[units.toLowerCase()];
  return exponent === undefined ? null : Number(item.value) * 2 ** (exponent - 20);
}

function find(node, category, kind, name, type) {
  return (node?.[category] ?? []).find((item) => item.kind === kind && (name === undefined || item.name === name)
                                                 && (type === undefined || item.type === type));
}

function value(item) {
  if (!item) return "";
  const mb = SIZED.has(item.kind) ? inMB(item) : null;
  if (mb !== null) return mebibytes(mb);
  return `${item.value}${item.units ? ` ${item.units}` : ""}`;
}

/** Configured, Available and Utilized side by side, one row per consumable. */
function consumables(node) {
  const rows = new Map();
  for (const category of ["configured", "available", "utilized"]) {
    for (const item of node?.[category] ?? []) {
      const key = [item.kind, item.name ?? "", item.type ?? ""].join("\u0000");
      if (!rows.has(key)) rows.set(key, {label: [item.kind, item.name, item.type].filter(Boolean).join(" "), items: {}});
      rows.get(key).items[category] = item;
    }
  }
  if (!rows.size) return null;
  return table(["resource", "configured", "available", "utilized"],
               [...rows.values()].map((row) => [row.label, value(row.items.configured), value(row.items.available),
                                                value(row.items.utilized)]), {class: "numbers"});
}

function extensions(node) {
  const list = node?.extensions ?? [];
  if (!list.length) return null;
  return h("details", {class: "extensions"}, h("summary", {}, `Every fact it reports (${list.length})`),
    table(["type", "name", "value"], list.map((e) => [e.type ?? "", e.name, e.value]), {class: "wrap"}));
}

const extension = (node, type, name) => node?.extensions?.find((e) => e.type === type && e.name === name)?.value;

/** The load and memory series of a host's reports, oldest first. */
export function series(reports) {
  const load = [], busy = [], memory = [];
  let cpus = 0, ram = 0;
  for (const report of reports) {
    const node = report.node ?? {};
    const t = Date.parse(report.reported_at ?? node.reported_at ?? node.reportedAt ?? "");
    if (Number.isNaN(t)) continue;
    const load1 = find(node, "utilized", "Resource", "Load", "1min");
    if (load1) load.push([t, Number(load1.value)]);
    const used = find(node, "utilized", "Processors");
    if (used) busy.push([t, Number(used.value)]);
    cpus = Math.max(cpus, Number(find(node, "configured", "Processors")?.value ?? 0));
    const total = inMB(find(node, "configured", "Memory"));
    const free = inMB(find(node, "available", "Memory"));
    const taken = inMB(find(node, "utilized", "Memory"));
    if (total !== null) ram = Math.max(ram, total);
    if (total !== null && free !== null) memory.push([t, total - free]);
    else if (taken !== null) memory.push([t, taken]);
  }
  return {load, busy, memory, cpus, ram};
}

function charts(history, width) {
  const s = series(history.reports ?? []);
  return h("div", {class: "charts"},
    chart({title: "Load", max: s.cpus, width, format: (v) => (v >= 10 || Number.isInteger(v) ? String(Math.round(v)) : v.toFixed(1)),
           series: [{name: "load average, 1 min", cls: "s-load", points: s.load},
                    {name: "busy CPUs", cls: "s-busy", points: s.busy}]}),
    chart({title: "Memory in use", max: s.ram, width, format: mebibytes,
           series: [{name: "in use", cls: "s-memory", points: s.memory}]}));
}

/**
 * The host's view. `glueHost` is its GLUE Host (null when the server has none), `node` and
 * `history` what the API said, or the errors it gave; undefined before the first answer.
 */
export function hostView({id, glueHost, subclusterName, node, nodeError, history, historyError, width}) {
  const host = glueHost ?? {};
  const lifeCycle = host.state ?? node?.life_cycle ?? node?.state;
  // the agent's own SSS state, where the server gives it apart from the life-cycle state
  const agentState = host.reported_state ?? (node?.life_cycle !== undefined ? node.state : undefined);
  const paused = host.paused ?? node?.paused;
  const load = glueHost ? hostLoad(host) : null;
  const os = [host.operating_system?.name ?? extension(node, "OperatingSystem", "Name"),
              host.operating_system?.release ?? extension(node, "OperatingSystem", "Release")].filter(Boolean).join(" ");
  const model = host.processor?.model ?? extension(node, "Processor", "Model");
  const clock = host.processor?.clock_speed ?? extension(node, "Processor", "ClockSpeed");
  const reported = reportedAt(host) ?? node?.reported_at ?? node?.reportedAt;
  const title = h("h2", {}, node?.name ?? host.name ?? id, " ", stateBadge(lifeCycle));
  const parts = [h("p", {class: "back"}, h("a", {href: "#/"}, "← the site")), title];
  if (nodeError) parts.push(h("p", {class: "error", role: "alert"}, nodeError.message));
  if (!glueHost && !node) {
    if (glueHost === undefined && !nodeError) parts.push(h("p", {class: "empty"}, "Reading…"));
    return h("section", {class: "host", "data-host": id}, parts);
  }
  parts.push(facts([
    ["Id", id],
    ["life-cycle state", lifeCycle],
    ["paused", paused === undefined ? undefined : paused ? "yes" : "no"],
    ["reason", host.reason ?? node?.reason],
    ["agent's state", agentState],
    ["last report", reported ? when(reported) : undefined],
    ["cluster", host.cluster],
    ["subcluster", subclusterName ?? host.subcluster],
    ["operating system", [os, node?.opsys && `(${node.opsys})`].filter(Boolean).join(" ")],
    ["architecture", host.architecture?.platform_type ?? node?.arch],
    ["processor", [model, clock && `${clock} MHz`].filter(Boolean).join(", ")],
    ["CPUs", host.total_cpus !== undefined ? `${host.total_cpus} (${host.available_cpus ?? host.free_cpus ?? "?"} available, ${host.free_cpus ?? 0} free for jobs)` : undefined],
    ["load", load !== null ? percent(load) : undefined],
    ["memory", host.main_memory ? `${mebibytes(host.main_memory.ram_size)} (${mebibytes(host.main_memory.ram_available)} available)` : undefined],
    ["features", node?.features?.join(", ")],
    ["description", node?.description],
  ]));
  parts.push(h("h3", {}, "History"));
  if (historyError) parts.push(h("p", {class: "error"}, historyError.message));
  else if (history) parts.push(charts(history, width));
  else parts.push(h("p", {class: "empty"}, "loading…"));
  const resources = consumables(node);
  if (resources) parts.push(h("h3", {}, "Resources"), resources);
  const all = extensions(node);
  if (all) parts.push(all);
  return h("section", {class: "host", "data-host": id}, parts);
}
