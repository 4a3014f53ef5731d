// Cluster pages: the overview, the job list, the TaskManagers and the JobManager.

import { get, getText, optional } from "./api.js";
import { facts, h, link, stateClass, table } from "./dom.js";
import * as f from "./format.js";

const enc = encodeURIComponent;

export async function renderOverview() {
  const [overview, jobs] = await Promise.all([get("/overview"), jobList()]);
  const card = (label, value, field) =>
    h("div", { class: "card" }, h("div", { class: "card-label" }, label), h("div", { class: "card-value", id: `overview-${field}`, testid: `overview-${field}` }, f.num(value)));
  return h(
    "section",
    { testid: "overview" },
    h("h1", {}, "Overview"),
    h(
      "div",
      { class: "cards" },
      card("Task Managers", overview.taskmanagers, "taskmanagers"),
      card("Slots total", overview["slots-total"], "slots-total"),
      card("Slots free", overview["slots-available"], "slots-free"),
      card("Jobs running", overview["jobs-running"], "jobs-running"),
      card("Jobs finished", overview["jobs-finished"], "jobs-finished"),
      card("Jobs failed", overview["jobs-failed"], "jobs-failed"),
      card("Jobs cancelled", overview["jobs-cancelled"], "jobs-cancelled"),
    ),
    h("h2", {}, "Jobs"),
    jobsTable(jobs),
  );
}

/** The jobs as /jobs/overview gives them, or built from /jobs and /jobs/<id> where the cluster
 * has no /jobs/overview. */
async function jobList() {
  const overview = await optional("/jobs/overview");
  if (overview) return overview.jobs || [];
  const listed = (await get("/jobs")).jobs || [];
  const details = await Promise.all(listed.map((j) => optional(`/jobs/${enc(j.id)}`)));
  return listed.map((j, i) => ({
    jid: j.id,
    name: details[i]?.name,
    state: details[i]?.state ?? j.status,
    "start-time": details[i]?.["start-time"],
    "end-time": details[i]?.["end-time"],
    duration: details[i]?.duration,
    tasks: null,
  }));
}

function jobsTable(jobs) {
  if (!jobs.length) return h("p", { class: "empty", testid: "jobs-empty" }, "No jobs.");
  const sorted = [...jobs].sort((a, b) => (b["start-time"] ?? 0) - (a["start-time"] ?? 0));
  const columns = [
    { label: "Name", field: "name", cell: (j) => link(`#/jobs/${enc(j.jid)}`, f.text(j.name)) },
    { label: "Job ID", field: "jid", cell: (j) => h("code", {}, j.jid) },
    { label: "Status", field: "state", cell: (j) => h("span", { class: stateClass(j.state) }, j.state) },
    { label: "Start", field: "start-time", cell: (j) => f.time(j["start-time"]) },
    { label: "Duration", field: "duration", num: true, cell: (j) => f.duration(j.duration) },
    { label: "Tasks", field: "tasks", cell: (j) => (j.tasks ? `${f.num(j.tasks.running)} running / ${f.num(j.tasks.total)}` : f.NA) },
  ];
  return table("jobs-table", columns, sorted, (j) => ({ testid: "job-row", "data-jid": j.jid }));
}

export async function renderJobs() {
  return h("section", { testid: "jobs" }, h("h1", {}, "Jobs"), jobsTable(await jobList()));
}

function hardware(tm, key) {
  return tm.hardware ? tm.hardware[key] : undefined;
}

export async function renderTaskManagers() {
  const tms = (await get("/taskmanagers")).taskmanagers || [];
  const columns = [
    { label: "ID", field: "id", cell: (t) => link(`#/taskmanagers/${enc(t.id)}`, t.id) },
    { label: "Address", field: "path", cell: (t) => f.text(t.path) },
    { label: "Data port", field: "dataPort", num: true, cell: (t) => f.text(t.dataPort) },
    { label: "Slots", field: "slotsNumber", num: true, cell: (t) => f.num(t.slotsNumber) },
    { label: "Free slots", field: "freeSlots", num: true, cell: (t) => f.num(t.freeSlots) },
    { label: "Last heartbeat", field: "timeSinceLastHeartbeat", num: true, cell: (t) => (t.timeSinceLastHeartbeat === undefined ? f.NA : `${f.duration(t.timeSinceLastHeartbeat)} ago`) },
    { label: "CPU cores", field: "cpuCores", num: true, cell: (t) => f.num(hardware(t, "cpuCores")) },
    { label: "Physical memory", field: "physicalMemory", num: true, cell: (t) => f.bytes(hardware(t, "physicalMemory")) },
    { label: "Free memory", field: "freeMemory", num: true, cell: (t) => f.bytes(hardware(t, "freeMemory")) },
  ];
  return h(
    "section",
    { testid: "taskmanagers" },
    h("h1", {}, "Task Managers"),
    tms.length
      ? table("tm-table", columns, tms, (t) => ({ testid: "tm-row", "data-tm-id": t.id }))
      : h("p", { class: "empty" }, "No TaskManager registered."),
  );
}

export async function renderTaskManager({ tmId }) {
  const detail = await optional(`/taskmanagers/${enc(tmId)}`);
  const entry = detail ?? ((await get("/taskmanagers")).taskmanagers || []).find((t) => t.id === tmId);
  if (!entry) return h("p", { class: "empty", testid: "not-found" }, `No TaskManager ${tmId}.`);
  const tasks = detail?.tasks;
  const columns = [
    { label: "Job", field: "jobId", cell: (t) => link(`#/jobs/${enc(t.jobId)}`, t.jobId) },
    { label: "Task", field: "taskName", cell: (t) => f.text(t.taskName) },
    { label: "Subtask", field: "subtask", num: true, cell: (t) => f.text(t.subtask) },
    { label: "Status", field: "status", cell: (t) => h("span", { class: stateClass(t.status) }, f.text(t.status)) },
  ];
  return h(
    "section",
    { testid: "taskmanager" },
    h("h1", { testid: "tm-id" }, entry.id),
    facts("tm-facts", [
      ["Address", f.text(entry.path), "path"],
      ["Data port", f.text(entry.dataPort), "dataPort"],
      ["Slots", f.num(entry.slotsNumber), "slotsNumber"],
      ["Free slots", f.num(entry.freeSlots), "freeSlots"],
      ["Last heartbeat", entry.timeSinceLastHeartbeat === undefined ? f.NA : `${f.duration(entry.timeSinceLastHeartbeat)} ago`, "timeSinceLastHeartbeat"],
      ["CPU cores", f.num(hardware(entry, "cpuCores")), "cpuCores"],
      ["Physical memory", f.bytes(hardware(entry, "physicalMemory")), "physicalMemory"],
      ["Free memory", f.bytes(hardware(entry, "freeMemory")), "freeMemory"],
      ["Managed memory", f.bytes(hardware(entry, "managedMemory")), "managedMemory"],
      ["Resident memory (RSS)", f.bytes(detail?.memory?.rss), "rss"],
      ["Allocated slots", detail ? f.num((detail.allocatedSlots || []).length) : f.NA, "allocatedSlots"],
    ]),
    h("h2", {}, "Tasks"),
    tasks
      ? tasks.length
        ? table("tm-tasks", columns, tasks, () => ({ testid: "tm-task-row" }))
        : h("p", { class: "empty" }, "No task.")
      : h("p", { class: "note", testid: "tm-tasks-missing" }, "Tasks n/a: this cluster has no /taskmanagers/<id>."),
  );
}

export async function renderJobManager({ logName }) {
  if (logName) {
    const text = await getText(`/jobmanager/logs/${enc(logName)}`).catch((error) => `n/a (${error.message})`);
    return h("section", { testid: "jobmanager-log" }, link("#/jobmanager", "← Job Manager"), h("h1", {}, logName), h("pre", { class: "log", testid: "log-text", "data-scroll-key": `log/${logName}` }, text));
  }
  const [config, logs] = await Promise.all([optional("/jobmanager/config"), optional("/jobmanager/logs")]);
  return h(
    "section",
    { testid: "jobmanager" },
    h("h1", {}, "Job Manager"),
    h("h2", {}, "Configuration"),
    config
      ? table("jm-config", [
          { label: "Key", field: "key", cell: (e) => e.key },
          { label: "Value", field: "value", cell: (e) => f.text(e.value) },
        ], config)
      : h("p", { class: "note", testid: "jm-config-missing" }, "n/a: this cluster has no /jobmanager/config."),
    h("h2", {}, "Logs"),
    logs
      ? table("jm-logs", [
          { label: "Name", field: "name", cell: (l) => link(`#/jobmanager/logs/${enc(l.name)}`, l.name) },
          { label: "Size", field: "size", num: true, cell: (l) => f.bytes(l.size) },
          { label: "Modified", field: "mtime", cell: (l) => f.time(l.mtime) },
        ], logs.logs || [])
      : h("p", { class: "note", testid: "jm-logs-missing" }, "n/a: this cluster has no /jobmanager/logs."),
  );
}
