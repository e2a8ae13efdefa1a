// The site at a glance, from GET /v1/glue and GET /v1/jobs: totals, each cluster's subclusters with
// their hosts as a grid of tiles (coloured by life-cycle state, filled by load), the computing
// elements' figures, and the queue.

import {duration, h, mebibytes, percent, table, when} from "./dom.js";

export const STATES = ["Ready", "Paused", "Unreachable", "Pending"];
const JOBS_SHOWN = 200;

/** The address of a host's own view. */
export function hostHref(id) {
  return `#/host/${encodeURIComponent(id)}`;
}

/** A GLUE host's load 0..1: the share of its CPUs not available; null when it reports no CPUs. */
export function hostLoad(host) {
  const total = host.total_cpus ?? host.architecture?.smp_size;
  const available = host.available_cpus ?? host.free_cpus;
  if (!total || available === undefined || available === null) return null;
  return Math.min(1, Math.max(0, 1 - available / total));
}

/** A GLUE host's time of its newest report, by either name the server has given it. */
export function reportedAt(host) {
  return host.reported_at ?? host.last_report;
}

const stateClass = (state) => `state-${String(state ?? "unknown").toLowerCase().replace(/[^a-z]/g, "")}`;
const collator = new Intl.Collator(undefined, {numeric: true});  // node2 before node10
const byName = (a, b) => collator.compare(String(a.name ?? a.unique_id), String(b.name ?? b.unique_id));

export function stateBadge(state) {
  return h("span", {class: ["badge", stateClass(state)]}, state ?? "unknown");
}

/** One host as a tile of the grid: a link to its view, its state and load in class and title. */
export function tile(host) {
  const state = host.state ?? "unknown";
  const load = hostLoad(host);
  const name = host.name ?? host.unique_id;
  let label = `${host.unique_id}: ${state}`;
  if (load !== null) label += `, load ${percent(load)}`;
  if (host.reason) label += ` (${host.reason})`;
  return h("a", {class: ["tile", stateClass(state), load !== null && `load-${Math.round(load * 10)}`],
                 href: hostHref(host.unique_id), "data-host": host.unique_id, "data-state": state, title: label,
                 "aria-label": label},
    h("span", {class: "name"}, name));
}

function stateCounts(hosts) {
  const counts = Object.fromEntries(STATES.map((state) => [state, 0]));
  for (const host of hosts) counts[host.state] = (counts[host.state] ?? 0) + 1;
  return counts;
}

function countsLine(counts) {
  return Object.entries(counts).filter(([, n]) => n > 0)
    .map(([state, n]) => h("span", {class: ["count", stateClass(state)]}, `${n} ${state}`));
}

function jobCounts(jobs) {
  const counts = {};
  for (const job of jobs?.jobs ?? []) counts[job.state] = (counts[job.state] ?? 0) + 1;
  return counts;
}

function totals(glue, jobs) {
  const cpus = glue.subclusters.reduce((sum, s) => sum + (s.total_cpus ?? 0), 0);
  const free = glue.subclusters.reduce((sum, s) => sum + (s.free_cpus ?? 0), 0);
  const ram = glue.hosts.reduce((sum, host) => sum + (host.main_memory?.ram_size ?? 0), 0);
  const jobStates = jobCounts(jobs);
  const more = jobs?.truncated ? "+" : "";
  const figure = (value, label) => h("div", {class: "figure"}, h("strong", {}, value), h("span", {}, label));
  return h("section", {class: "totals", "aria-label": "site totals"},
    figure(glue.hosts.length, glue.hosts.length === 1 ? "host" : "hosts"),
    figure(`${free} / ${cpus}`, "CPUs free"),
    figure(mebibytes(ram) || "0 MiB", "memory"),
    figure(glue.clusters.length, glue.clusters.length === 1 ? "cluster" : "clusters"),
    figure(glue.computing_elements.length, "CEs"),
    jobs ? figure(`${jobStates.Running ?? 0}${more} / ${jobStates.Queued ?? 0}${more}`, "jobs running / queued") : null,
    h("p", {class: "states"}, countsLine(stateCounts(glue.hosts))));
}

function subclusterBlock(sub, hosts) {
  const count = sub.host_count ?? hosts.length;
  const facts = [`${count} ${count === 1 ? "host" : "hosts"} (${sub.live_hosts ?? "?"} live)`,
                 `CPUs ${sub.free_cpus ?? 0} free of ${sub.total_cpus ?? 0}`];
  if (sub.ram_available !== undefined) facts.push(`${mebibytes(sub.ram_available)} RAM available`);
  return h("section", {class: "subcluster", "data-subcluster": sub.unique_id},
    h("h3", {}, sub.name ?? sub.unique_id),
    h("p", {class: "summary"}, facts.join(" · "), " ", countsLine(sub.states ?? stateCounts(hosts))),
    h("div", {class: "grid"}, hosts.sort(byName).map(tile)));
}

function clusters(glue) {
  const hosts = new Map(glue.hosts.map((host) => [host.unique_id, host]));
  const subclusters = new Map(glue.subclusters.map((sub) => [sub.unique_id, sub]));
  const placed = new Set();
  const blocks = glue.clusters.map((cluster) => {
    const subs = (cluster.subclusters ?? []).map((id) => subclusters.get(id)).filter(Boolean);
    return h("section", {class: "cluster", "data-cluster": cluster.unique_id},
      h("h2", {}, `Cluster ${cluster.name ?? cluster.unique_id}`),
      subs.length ? subs.map((sub) => {
        const members = (sub.hosts ?? []).map((id) => hosts.get(id)).filter(Boolean);
        members.forEach((host) => placed.add(host.unique_id));
        return subclusterBlock(sub, members);
      }) : h("p", {class: "empty"}, "no hosts have reported in this cluster"));
  });
  const unplaced = glue.hosts.filter((host) => !placed.has(host.unique_id));
  if (unplaced.length) {
    blocks.push(h("section", {class: "cluster"}, h("h2", {}, "Hosts in no subcluster"),
      h("div", {class: "grid"}, unplaced.sort(byName).map(tile))));
  }
  if (!blocks.length) blocks.push(h("p", {class: "empty"}, "No host has reported yet."));
  return h("section", {class: "clusters", "aria-label": "clusters and hosts"}, blocks, legend());
}

function legend() {
  return h("p", {class: "legend"}, "Tiles: ", STATES.map((state) => [stateBadge(state), " "]),
           h("span", {class: "fill-key"}, "filled by the share of CPUs in use"));
}

function computingElements(glue) {
  const rows = glue.computing_elements.map((ce) => {
    const state = ce.state ?? {};
    return [ce.unique_id, state.status ?? "", String(state.running_jobs ?? 0), String(state.waiting_jobs ?? 0),
            String(state.total_jobs ?? 0), `${state.free_cpus ?? 0} / ${ce.info?.total_cpus ?? 0}`,
            duration(state.estimated_response_time), duration(state.worst_response_time),
            (ce.clusters ?? []).join(", ")];
  });
  return h("section", {class: "ces"}, h("h2", {}, "Computing elements"),
    rows.length ? table(["CE", "status", "running", "waiting", "jobs", "CPUs free", "est. response",
                         "worst response", "clusters"], rows, {class: "numbers"})
      : h("p", {class: "empty"}, "No computing element is configured."));
}

/** A job's state; a Running job no executor has begun is shown placed (its `phase`). */
function jobBadge(job) {
  const shown = job.phase === "placed" ? "Placed" : String(job.state);
  return h("span", {class: ["badge", `job-${shown.toLowerCase()}`], title: job.phase === "placed"
    ? "placed on its hosts; its executor has not started it" : null}, shown);
}

function queue(jobs, error) {
  const section = h("section", {class: "queue"}, h("h2", {}, "Queue"));
  if (error) {
    section.append(h("p", {class: "error"}, error.message));
    return section;
  }
  const list = jobs?.jobs ?? [];
  if (!list.length) {
    section.append(h("p", {class: "empty"}, "No jobs."));
    return section;
  }
  const rows = list.slice(0, JOBS_SHOWN).map((job) => [
    job.id, job.name ?? "", job.owner ?? "", jobBadge(job),
    job.processors ? `${job.processors.held ?? 0} (${job.processors.min}${job.processors.max !== job.processors.min ? `-${job.processors.max}` : ""})` : "",
    job.hosts ?? "", job.reason ?? "", job.submitted ? when(job.submitted) : ""]);
  section.append(table(["job", "name", "owner", "state", "CPUs held (asked)", "hosts", "reason", "submitted"], rows,
                       {class: "jobs"}));
  const total = jobs.total ?? list.length;
  if (total > rows.length) section.append(h("p", {class: "more"}, `${total - rows.length} more jobs not shown (GET /v1/jobs)`));
  return section;
}

/** The whole overview: what GET /v1/glue and GET /v1/jobs said (jobs null when the server has no queue). */
export function overview(glue, jobs, jobsError) {
  return [totals(glue, jobs), clusters(glue), computingElements(glue), queue(jobs, jobsError)];
}
