// The page's loop: read the site every few seconds, draw the view the address asks for (#/ the
// overview, #/host/ID one host), and say when it last read the site and what went wrong, inline.
// Nothing reloads the page: each read replaces the view's content in place.

import {getJSON, setToken, token} from "./api.js";
import {clock, h} from "./dom.js";
import {HISTORY_LIMIT, hostView} from "./host.js";
import {overview} from "./view.js";

const REFRESH_MS = 5000;
const JOBS_LIMIT = 500;

const main = document.getElementById("main");
const updated = document.getElementById("updated");
const problem = document.getElementById("problem");
const tokenForm = document.getElementById("token-form");
const tokenInput = document.getElementById("token-input");
const forget = document.getElementById("forget-token");

// What the API said last; kept when a read fails, so the page shows the last good data and the error.
const state = {glue: null, jobs: null, jobsError: null, host: null, updated: null, error: null};
let timer = null;
let reading = null;
const subclusterNames = new Map();  // subcluster id -> its readable name, for the host view

/** The view the address asks for: {host: ID} or {} for the overview. */
function route() {
  const match = /^#\/host\/(.+)$/.exec(location.hash);
  if (!match) return {};
  try {
    return {host: decodeURIComponent(match[1])};
  } catch {
    return {host: match[1]};
  }
}

async function readSite() {
  const [glue, jobs] = await Promise.allSettled([getJSON("/v1/glue"), getJSON(`/v1/jobs?limit=${JOBS_LIMIT}`)]);
  if (glue.status === "rejected") throw glue.reason;
  state.glue = glue.value;
  if (jobs.status === "fulfilled") [state.jobs, state.jobsError] = [jobs.value, null];
  else if (jobs.reason.status === 404) [state.jobs, state.jobsError] = [null, null];  // a server with no queue
  else state.jobsError = jobs.reason;
}

/** A host's GLUE Host, newest Node and history; the history read from its last report on. */
async function readHost(id) {
  const path = encodeURIComponent(id);
  const host = state.host?.id === id ? {...state.host} : {id};
  const last = host.history?.reports?.at(-1)?.reported_at;
  const since = last ? `since=${encodeURIComponent(last)}&` : "";
  const [glueHost, node, history] = await Promise.allSettled([
    getJSON(`/v1/glue/hosts/${path}`), getJSON(`/v1/nodes/${path}`),
    getJSON(`/v1/nodes/${path}/history?${since}limit=${HISTORY_LIMIT}`)]);
  host.glueHost = glueHost.status === "fulfilled" ? glueHost.value : null;
  [host.node, host.nodeError] = node.status === "fulfilled" ? [node.value, null] : [null, node.reason];
  if (history.status === "fulfilled") {
    // `since` is inclusive, to the second: the reports of that second come again, so the kept
    // ones from it on are replaced by the answer's. An answer with a `next` page (its reports
    // past the server's page size) leaves a gap after the kept ones: they go.
    const fresh = history.value.reports ?? [];
    const kept = last && !history.value.next && fresh.length < HISTORY_LIMIT
      ? host.history.reports.filter((r) => Date.parse(r.reported_at) < Date.parse(last)) : [];
    [host.history, host.historyError] = [{...history.value, reports: kept.concat(fresh).slice(-HISTORY_LIMIT)}, null];
  } else {
    host.historyError = history.reason;
  }
  const sub = host.glueHost?.subcluster;
  if (sub && !subclusterNames.has(sub)) {
    try {
      subclusterNames.set(sub, (await getJSON(`/v1/glue/subclusters/${encodeURIComponent(sub)}`)).name);
    } catch {
      // its id is shown instead; a subcluster that went away with the host's last change
    }
  }
  if (route().host === id) state.host = host;  // unless the reader has gone elsewhere meanwhile
  for (const result of [glueHost, node]) {
    if (result.status === "rejected" && result.reason.status !== 404) throw result.reason;
  }
}

/** One read of what the current view shows; then the next one is due in REFRESH_MS. */
async function refresh() {
  clearTimeout(timer);
  if (reading) return reading;
  reading = (async () => {
    const {host} = route();
    const started = performance.now();
    try {
      await (host !== undefined ? readHost(host) : readSite());
      state.updated = new Date();
      state.error = null;
    } catch (error) {
      state.error = error;
    } finally {
      reading = null;
      render();
      // A big site's tree takes a while to read and draw: then read it less often, so that the
      // page never spends more than a fifth of its time (and the server's) on it.
      const spent = performance.now() - started;
      if (!document.hidden) timer = setTimeout(refresh, Math.max(REFRESH_MS, 5 * spent));
    }
  })();
  return reading;
}

function status() {
  const error = state.error;
  updated.textContent = state.updated ? `updated at ${clock(state.updated)}` : "not read yet";
  document.body.dataset.updated = state.updated ? state.updated.toISOString() : "";
  problem.hidden = !error;
  problem.textContent = "";
  if (error) {
    let text = error.message;
    if (error.status === 401) text = token() ? `The read token was refused: ${error.message}` :
      "This server needs a read token for its data: paste one below.";
    problem.append(text, state.updated ? ` Showing what was read at ${clock(state.updated)}.` : "");
  }
  tokenForm.hidden = !(error?.status === 401);
  forget.hidden = !token();
}

function render() {
  status();
  const {host} = route();
  // <details> the reader opened stay open across the redraw
  const open = new Set([...main.querySelectorAll("details[open]")].map((d) => d.className));
  let content;
  if (host !== undefined) {
    const seen = state.host?.id === host ? state.host : {id: host};
    const width = Math.max(280, Math.min(900, main.clientWidth || 600));
    content = hostView({...seen, id: host, subclusterName: subclusterNames.get(seen.glueHost?.subcluster), width});
    document.title = `${host} · infosvc`;
  } else {
    content = state.glue ? overview(state.glue, state.jobs, state.jobsError)
      : h("p", {class: "empty"}, state.error ? "Nothing read yet." : "Reading the site…");
    document.title = "infosvc";
  }
  main.replaceChildren(...[content].flat());
  for (const details of main.querySelectorAll("details")) if (open.has(details.className)) details.open = true;
}

window.addEventListener("hashchange", () => {
  if (route().host !== state.host?.id) state.host = null;
  render();
  window.scrollTo(0, 0);
  refresh();
});

document.addEventListener("visibilitychange", () => {
  if (!document.hidden) refresh();  // a hidden tab stops reading; shown again, it reads at once
});

let resized = null;
window.addEventListener("resize", () => {
  clearTimeout(resized);
  resized = setTimeout(render, 200);  // the charts are drawn at the width there is
});

tokenForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const value = tokenInput.value.trim();
  tokenInput.value = "";
  if (value) setToken(value);
  refresh();
});

forget.addEventListener("click", () => {
  setToken(null);
  refresh();
});

refresh();
