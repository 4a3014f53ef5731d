// The job page: header, tabs, the DAG with each vertex's figures, and a vertex's subtasks.

import { ApiError, get, optional } from "./api.js";
import { drawDag, shorten } from "./dag.js";
import { facts, h, link, stateClass, table } from "./dom.js";
import * as f from "./format.js";
import { checkpointsTab, configTab, exceptionsTab, watermarksTab } from "./job_tabs.js";

const TERMINAL = new Set(["FINISHED", "CANCELED", "FAILED"]);
const samples = new Map(); // "jid/vertex" -> the previous poll's counters, for rates
const enc = encodeURIComponent;

export const TABS = [
  ["", "Overview"],
  ["checkpoints", "Checkpoints"],
  ["exceptions", "Exceptions"],
  ["config", "Configuration"],
  ["watermarks", "Watermarks"],
];

export function isTerminal(state) {
  return TERMINAL.has(state);
}

/** The key a vertex is addressed by: its JobVertexId where the API gives one, else its name. */
export function vertexKey(vertex) {
  return vertex.id ?? vertex.name;
}

export async function renderJob(params) {
  const { jid, tab, arg } = params;
  let job;
  try {
    job = await get(`/jobs/${enc(jid)}`);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      return { node: h("p", { testid: "not-found", class: "empty" }, `No job ${jid}.`), job: null };
    }
    throw error;
  }
  const base = `#/jobs/${enc(jid)}`;
  const header = h(
    "section",
    { class: "job-header" },
    h("h1", { testid: "job-name", id: "job-name" }, job.name),
    h("span", { testid: "job-state", id: "job-state", class: stateClass(job.state) }, job.state),
    facts("job-facts", [
      ["Job ID", job.jid, "jid"],
      ["Start", f.time(job["start-time"]), "start-time"],
      ["End", f.time(job["end-time"]), "end-time"],
      ["Duration", f.duration(job.duration), "duration"],
      ["Restarts", f.num(job.restarts), "restarts"],
      ["Splits", `${f.num(job["splits-assigned"])} / ${f.num(job["splits-total"])}`, "splits"],
    ]),
  );
  const current = tab === "vertices" ? "" : tab || "";
  const tabs = h(
    "nav",
    { class: "tabs", testid: "job-tabs" },
    TABS.map(([key, label]) =>
      link(key ? `${base}/${key}` : base, label, {
        class: key === current ? "active" : null,
        testid: `tab-${key || "overview"}`,
      }),
    ),
  );
  let body;
  if (tab === "vertices") body = await subtasksTab(job, arg);
  else if (tab === "checkpoints") body = await checkpointsTab(job, arg);
  else if (tab === "exceptions") body = await exceptionsTab(job);
  else if (tab === "config") body = await configTab(job);
  else if (tab === "watermarks") body = await watermarksTab(job);
  else body = await overviewTab(job);
  return { node: h("div", { class: "job-page" }, header, tabs, body), job };
}

function lowWatermarks(watermarks) {
  const low = new Map();
  for (const task of watermarks?.tasks || []) {
    const prior = low.get(task.vertex);
    low.set(task.vertex, prior === undefined ? task.watermark : Math.min(prior, task.watermark));
  }
  return low;
}

function share(part, parts) {
  const total = parts.reduce((a, b) => a + b, 0);
  return total > 0 ? part / total : null;
}

/** Rates and busy/backpressured shares of a vertex from this poll and the one before. */
function figures(job, vertex, pressure) {
  const m = vertex.metrics || {};
  const now = job.now ?? Date.now();
  const key = `${job.jid}/${vertexKey(vertex)}`;
  const sample = {
    t: now,
    in: m["read-records"],
    out: m["write-records"],
    busy: m["accumulated-busy-time"],
    idle: m["accumulated-idle-time"],
    bp: m["accumulated-backpressured-time"],
  };
  const before = samples.get(key);
  samples.set(key, sample);
  const seconds = before ? (sample.t - before.t) / 1000 : 0;
  const running = !isTerminal(job.state);
  const perSecond = (field) =>
    seconds > 0 && running && sample[field] !== undefined ? (sample[field] - before[field]) / seconds : null;
  let busy = null;
  let backpressured = null;
  if (sample.busy !== undefined) {
    const d = before && seconds > 0 ? ["busy", "idle", "bp"].map((k) => sample[k] - before[k]) : null;
    const parts = d && d.some((x) => x > 0) ? d : [sample.busy, sample.idle, sample.bp];
    busy = share(parts[0], parts);
    backpressured = share(parts[2], parts);
  } else if (pressure?.subtasks?.length) {
    const mean = (k) => pressure.subtasks.reduce((a, t) => a + (t[k] ?? 0), 0) / pressure.subtasks.length;
    busy = mean("busyRatio");
    backpressured = mean("ratio");
  }
  return { inRate: perSecond("in"), outRate: perSecond("out"), busy, backpressured };
}

function vertexStatus(vertex) {
  if (vertex.status) return vertex.status;
  const tasks = Object.entries(vertex.tasks || {}).filter(([, n]) => n > 0);
  return tasks.length === 1 ? tasks[0][0] : tasks.map(([state, n]) => `${state}:${n}`).join(" ");
}

async function overviewTab(job) {
  const jid = enc(job.jid);
  const vertices = job.vertices || [];
  const [planAnswer, watermarks, pressures] = await Promise.all([
    job.plan ? Promise.resolve({ plan: job.plan }) : optional(`/jobs/${jid}/plan`),
    isTerminal(job.state) ? Promise.resolve(null) : optional(`/jobs/${jid}/watermarks`),
    Promise.all(
      vertices.map((v) =>
        v.id && !isTerminal(job.state) ? optional(`/jobs/${jid}/vertices/${enc(v.id)}/backpressure`) : null,
      ),
    ),
  ]);
  const low = lowWatermarks(watermarks);
  const rows = vertices.map((v, i) => ({ vertex: v, ...figures(job, v, pressures[i]) }));
  const plan = planAnswer?.plan;
  const byKey = new Map(rows.map((r) => [String(vertexKey(r.vertex)), r]));
  const byName = new Map(rows.map((r) => [r.vertex.name, r]));
  const planned = plan?.nodes?.length
    ? plan.nodes.map((n) => ({
        id: String(n.id),
        inputs: (n.inputs || []).map((i) => ({ id: String(i.id), ship_strategy: i.ship_strategy })),
        row: byKey.get(String(n.id)) || byName.get(n.description) || byName.get(n.operator),
        name: n.description || n.operator || String(n.id),
      }))
    : rows.map((r) => ({ id: String(vertexKey(r.vertex)), inputs: [], row: r, name: r.vertex.name }));
  const nodes = planned.map((p) => {
    const v = p.row?.vertex;
    const m = v?.metrics || {};
    const status = v ? vertexStatus(v) : null;
    const name = v?.name ?? p.name;
    return {
      id: p.id,
      name,
      inputs: p.inputs,
      title: name,
      href: `#/jobs/${jid}/vertices/${enc(v ? vertexKey(v) : p.id)}`,
      statusClass: stateClass(status),
      lines: [
        ["name", shorten(name)],
        ["parallelism", `Parallelism ${f.num(v?.parallelism)} · ${f.text(status)}`],
        ["records-in", `In ${f.num(m["read-records"])} (${f.rate(p.row?.inRate)})`],
        ["records-out", `Out ${f.num(m["write-records"])} (${f.rate(p.row?.outRate)})`],
        ["busy", `Busy ${f.percent(p.row?.busy)} · Backpressured ${f.percent(p.row?.backpressured)}`],
        ["low-watermark", `Low watermark ${v && low.has(v.name) ? f.watermark(low.get(v.name)) : f.NA}`],
      ],
    };
  });
  const note = plan ? null : h("p", { class: "note", testid: "plan-missing" }, "Edges n/a: this cluster has no /jobs/<id>/plan.");
  const columns = [
    { label: "Name", field: "name", cell: (r) => link(`#/jobs/${jid}/vertices/${enc(vertexKey(r.vertex))}`, r.vertex.name) },
    { label: "Status", field: "status", cell: (r) => h("span", { class: stateClass(vertexStatus(r.vertex)) }, vertexStatus(r.vertex)) },
    { label: "Parallelism", field: "parallelism", num: true, cell: (r) => f.num(r.vertex.parallelism) },
    { label: "Records in", field: "read-records", num: true, cell: (r) => f.num(r.vertex.metrics?.["read-records"]) },
    { label: "In rate", field: "in-rate", num: true, cell: (r) => f.rate(r.inRate) },
    { label: "Records out", field: "write-records", num: true, cell: (r) => f.num(r.vertex.metrics?.["write-records"]) },
    { label: "Out rate", field: "out-rate", num: true, cell: (r) => f.rate(r.outRate) },
    { label: "Busy", field: "busy", num: true, cell: (r) => f.percent(r.busy) },
    { label: "Backpressured", field: "backpressured", num: true, cell: (r) => f.percent(r.backpressured) },
    { label: "Low watermark", field: "low-watermark", cell: (r) => (low.has(r.vertex.name) ? f.watermark(low.get(r.vertex.name)) : f.NA) },
    { label: "Late", field: "late-records", num: true, cell: (r) => f.num(r.vertex.metrics?.["late-records"]) },
    { label: "Spark jobs", field: "spark-jobs", num: true, cell: (r) => f.num(r.vertex.metrics?.["spark-jobs"]) },
  ];
  return h(
    "section",
    { testid: "job-overview" },
    h("div", { class: "dag-frame", "data-scroll-key": `dag/${job.jid}` }, nodes.length ? drawDag(nodes) : h("p", { class: "empty" }, "No vertices.")),
    note,
    h("h2", {}, "Vertices"),
    table("vertex-table", columns, rows, (r) => ({ testid: "vertex-row", "data-vertex-name": r.vertex.name })),
  );
}

async function subtasksTab(job, key) {
  const jid = enc(job.jid);
  const vertex = (job.vertices || []).find((v) => String(vertexKey(v)) === key);
  const name = vertex?.name ?? key;
  const [detail, pressure] = await Promise.all([
    optional(`/jobs/${jid}/vertices/${enc(key)}`),
    isTerminal(job.state) ? null : optional(`/jobs/${jid}/vertices/${enc(key)}/backpressure`),
  ]);
  const levels = new Map((pressure?.subtasks || []).map((t) => [t.subtask, t]));
  const title = h("h2", { testid: "vertex-name" }, `Subtasks of ${name}`);
  if (!detail) {
    return h("section", { testid: "subtasks" }, title, h("p", { class: "note", testid: "subtasks-missing" }, "Subtasks n/a: this cluster has no /jobs/<id>/vertices/<vertex-id>."));
  }
  const columns = [
    { label: "#", field: "subtask", num: true, cell: (t) => String(t.subtask) },
    { label: "Status", field: "status", cell: (t) => h("span", { class: stateClass(t.status) }, f.text(t.status)) },
    { label: "Attempt", field: "attempt", num: true, cell: (t) => f.num(t.attempt) },
    { label: "TaskManager", field: "taskmanager-id", cell: (t) => (t["taskmanager-id"] ? link(`#/taskmanagers/${enc(t["taskmanager-id"])}`, t["taskmanager-id"]) : f.NA) },
    { label: "Endpoint", field: "endpoint", cell: (t) => f.text(t.endpoint) },
    { label: "Start", field: "start-time", cell: (t) => f.time(t["start-time"]) },
    { label: "Duration", field: "duration", num: true, cell: (t) => f.duration(t.duration) },
    { label: "Records in", field: "read-records", num: true, cell: (t) => f.num(t.metrics?.["read-records"]) },
    { label: "Records out", field: "write-records", num: true, cell: (t) => f.num(t.metrics?.["write-records"]) },
    { label: "Backpressure", field: "backpressure", cell: (t) => f.text(levels.get(t.subtask)?.backpressureLevel) },
  ];
  return h(
    "section",
    { testid: "subtasks" },
    title,
    facts("vertex-facts", [
      ["Vertex ID", f.text(detail.id), "id"],
      ["Parallelism", f.num(detail.parallelism), "parallelism"],
      ["Max parallelism", f.num(detail.maxParallelism), "maxParallelism"],
      ["Backpressure", f.text(pressure?.backpressureLevel), "backpressure"],
    ]),
    table("subtask-table", columns, detail.subtasks || [], (t) => ({ testid: "subtask-row", "data-subtask": t.subtask })),
  );
}
