// The dashboard's entry: hash routes, polling, the token field.

import { setToken, token } from "./api.js";
import { showActions } from "./actions.js";
import { renderJobManager, renderJobs, renderOverview, renderTaskManager, renderTaskManagers } from "./cluster.js";
import { h } from "./dom.js";
import { isTerminal, renderJob } from "./job.js";

const INTERVAL_KEY = "millrace.refresh-ms";
const content = document.getElementById("content");
const actions = document.getElementById("actions");
const banner = document.getElementById("error-banner");
const lastRefresh = document.getElementById("last-refresh");
const intervalSelect = document.getElementById("refresh-interval");
let timer = null;
let generation = 0;
let busy = false;

/** The route of a hash: {page, params}. */
export function route(hash) {
  const parts = hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const [first, second, third, fourth] = parts;
  if (first === "jobs" && second) return { page: "job", nav: "jobs", params: { jid: second, tab: third || "", arg: fourth } };
  if (first === "jobs") return { page: "jobs", nav: "jobs", params: {} };
  if (first === "taskmanagers" && second) return { page: "taskmanager", nav: "taskmanagers", params: { tmId: second } };
  if (first === "taskmanagers") return { page: "taskmanagers", nav: "taskmanagers", params: {} };
  if (first === "jobmanager") return { page: "jobmanager", nav: "jobmanager", params: { logName: second === "logs" ? third : undefined } };
  return { page: "overview", nav: "overview", params: {} };
}

const PAGES = {
  overview: renderOverview,
  jobs: renderJobs,
  job: renderJob,
  taskmanagers: renderTaskManagers,
  taskmanager: renderTaskManager,
  jobmanager: renderJobManager,
};

/** Replace the content with ``node``, keeping what the user opened and scrolled: the open
 * ``<details data-key>`` (stack traces) and the scroll offsets of ``[data-scroll-key]``. */
function swap(node) {
  const open = new Set([...content.querySelectorAll("details[data-key][open]")].map((d) => d.dataset.key));
  const scrolled = new Map(
    [...content.querySelectorAll("[data-scroll-key]")].map((e) => [e.dataset.scrollKey, [e.scrollTop, e.scrollLeft]]),
  );
  content.replaceChildren(node);
  for (const d of content.querySelectorAll("details[data-key]")) if (open.has(d.dataset.key)) d.open = true;
  for (const e of content.querySelectorAll("[data-scroll-key]")) {
    const at = scrolled.get(e.dataset.scrollKey);
    if (at) [e.scrollTop, e.scrollLeft] = at;
  }
}

async function refresh() {
  if (busy) return; // the previous refresh is still reading: skip this tick
  busy = true;
  const mine = ++generation;
  const hash = location.hash;
  const current = route(hash);
  try {
    const answer = await PAGES[current.page](current.params);
    if (mine !== generation) return; // the route changed meanwhile
    const node = answer instanceof Node ? answer : answer.node;
    const job = answer instanceof Node ? null : answer.job;
    showActions(actions, job ? job.jid : null, job ? isTerminal(job.state) : true);
    swap(node);
    content.setAttribute("data-page", current.page);
    content.setAttribute("data-route", hash); // what is shown: tests wait on it
    banner.hidden = true;
    lastRefresh.textContent = `Updated ${new Date().toLocaleTimeString()}`;
    lastRefresh.setAttribute("data-refreshes", String(Number(lastRefresh.getAttribute("data-refreshes") || 0) + 1));
  } catch (error) {
    if (mine !== generation) return;
    banner.textContent = `Could not read the REST API: ${error.message}`;
    banner.hidden = false;
  } finally {
    busy = false;
  }
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.getAttribute("data-nav") === current.nav);
  }
}

function schedule() {
  clearInterval(timer);
  const ms = Number(intervalSelect.value);
  localStorage.setItem(INTERVAL_KEY, String(ms));
  timer = ms > 0 ? setInterval(refresh, ms) : null;
}

function showToken() {
  const state = document.getElementById("token-state");
  state.textContent = token() ? "token set" : "no token";
  state.setAttribute("data-set", token() ? "true" : "false");
}

function start() {
  const stored = localStorage.getItem(INTERVAL_KEY);
  const asked = new URLSearchParams(location.search).get("refresh-ms");
  const wanted = asked ?? stored;
  if (wanted !== null && [...intervalSelect.options].some((o) => o.value === wanted)) intervalSelect.value = wanted;
  intervalSelect.addEventListener("change", schedule);
  document.getElementById("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const input = document.getElementById("token-input");
    setToken(input.value.trim());
    input.value = "";
    showToken();
  });
  document.getElementById("token-clear").addEventListener("click", () => {
    setToken("");
    showToken();
  });
  window.addEventListener("hashchange", () => {
    busy = false;
    content.replaceChildren(h("p", { class: "empty" }, "Loading…"));
    refresh();
  });
  showToken();
  schedule();
  refresh();
}

start();
