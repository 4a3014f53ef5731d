// The job page's other tabs: checkpoints (and one checkpoint's details), exceptions, the
// configuration and the watermarks.

import { optional } from "./api.js";
import { facts, h, link, stateClass, table } from "./dom.js";
import * as f from "./format.js";

const enc = encodeURIComponent;
const MILLISECONDS = new Set(["interval", "timeout", "min_pause"]); // checkpoint config, ms
const missing = (testid, path) => h("p", { class: "note", testid }, `n/a: this cluster has no ${path}.`);

export async function checkpointsTab(job, checkpointId) {
  const jid = enc(job.jid);
  if (checkpointId) return checkpointDetails(job, checkpointId);
  const [stats, config] = await Promise.all([
    optional(`/jobs/${jid}/checkpoints`),
    optional(`/jobs/${jid}/checkpoints/config`),
  ]);
  if (!stats) return h("section", { testid: "checkpoints" }, h("p", { class: "empty" }, "No checkpoint statistics (n/a)."));
  const counts = stats.counts || {};
  const latest = stats.latest;
  const history = [...(stats.history || [])].reverse();
  const columns = [
    { label: "ID", field: "id", num: true, cell: (c) => link(`#/jobs/${jid}/checkpoints/${enc(c.id)}`, String(c.id)) },
    { label: "Status", field: "status", cell: (c) => h("span", { class: stateClass(c.status) }, c.status) },
    { label: "Type", field: "type", cell: (c) => (c.is_savepoint ? "Savepoint" : "Checkpoint") },
    { label: "Triggered", field: "trigger_timestamp", cell: (c) => f.time(c.trigger_timestamp) },
    { label: "Duration", field: "end_to_end_duration", num: true, cell: (c) => f.duration(c.end_to_end_duration) },
    { label: "Size", field: "state_size", num: true, cell: (c) => f.bytes(c.state_size) },
    { label: "Alignment buffered", field: "alignment_buffered", num: true, cell: (c) => f.bytes(c.alignment_buffered) },
    { label: "Path", field: "external_path", cell: (c) => f.text(c.external_path) },
    { label: "Failure", field: "failure_message", cell: (c) => f.text(c.failure_message) },
  ];
  return h(
    "section",
    { testid: "checkpoints" },
    h("h2", {}, "Counts"),
    facts("checkpoint-counts", [
      ["Completed", f.num(counts.completed), "completed"],
      ["In progress", f.num(counts.in_progress), "in_progress"],
      ["Failed", f.num(counts.failed), "failed"],
      ["Restored", f.num(counts.restored), "restored-count"],
    ]),
    h("h2", {}, "Latest"),
    facts("checkpoint-latest", [
      ["Latest completed", latest ? `#${latest.id} at ${f.time(latest.trigger_timestamp)}` : f.NA, "latest-id"],
      ["Its duration", latest ? f.duration(latest.end_to_end_duration) : f.NA, "latest-duration"],
      ["Its size", latest ? f.bytes(latest.state_size) : f.NA, "latest-size"],
      ["Its path", latest ? f.text(latest.external_path) : f.NA, "latest-path"],
      ["Latest restore", f.text(stats.restored), "restored"],
      ["Interval", stats.interval ? f.duration(stats.interval) : "off", "interval"],
      ["Mode", f.text(stats.mode), "mode"],
    ]),
    h("h2", {}, "History"),
    history.length
      ? table("checkpoint-history", columns, history, (c) => ({ testid: "checkpoint-row", "data-checkpoint-id": c.id, "data-status": c.status }))
      : h("p", { class: "empty", testid: "checkpoint-history-empty" }, "No checkpoint yet."),
    h("h2", {}, "Configuration"),
    config ? configFacts("checkpoint-config", config) : missing("checkpoint-config-missing", "/jobs/<id>/checkpoints/config"),
  );
}

function configFacts(testid, object) {
  const items = [];
  const walk = (prefix, value) => {
    if (value && typeof value === "object" && !Array.isArray(value)) {
      for (const [k, v] of Object.entries(value)) walk(prefix ? `${prefix}.${k}` : k, v);
    } else if (MILLISECONDS.has(prefix) && typeof value === "number") {
      items.push([prefix, value > 0 ? f.duration(value) : String(value), prefix]);
    } else items.push([prefix, f.text(Array.isArray(value) ? value.join(", ") : value), prefix]);
  };
  walk("", object);
  return facts(testid, items);
}

async function checkpointDetails(job, checkpointId) {
  const jid = enc(job.jid);
  const detail = await optional(`/jobs/${jid}/checkpoints/details/${enc(checkpointId)}`);
  const back = link(`#/jobs/${jid}/checkpoints`, "← all checkpoints");
  if (!detail) {
    return h("section", { testid: "checkpoint-details" }, back, missing("checkpoint-details-missing", `/jobs/<id>/checkpoints/details/${checkpointId}`));
  }
  const tasks = Object.values(detail.tasks || {});
  const columns = [
    { label: "Vertex", field: "id", cell: (t) => f.text(t.id) },
    { label: "Status", field: "status", cell: (t) => f.text(t.status) },
    { label: "Acknowledged", field: "acks", num: true, cell: (t) => `${f.num(t.num_acknowledged_subtasks)} / ${f.num(t.num_subtasks)}` },
    { label: "Latest ack", field: "latest_ack_timestamp", cell: (t) => f.time(t.latest_ack_timestamp) },
    { label: "Duration", field: "end_to_end_duration", num: true, cell: (t) => f.duration(t.end_to_end_duration) },
    { label: "Size", field: "state_size", num: true, cell: (t) => f.bytes(t.state_size) },
  ];
  return h(
    "section",
    { testid: "checkpoint-details" },
    back,
    h("h2", {}, `Checkpoint ${detail.id}`),
    facts("checkpoint-detail-facts", [
      ["Status", f.text(detail.status), "status"],
      ["Type", detail.is_savepoint ? "Savepoint" : "Checkpoint", "type"],
      ["Triggered", f.time(detail.trigger_timestamp), "trigger_timestamp"],
      ["Latest acknowledgement", f.time(detail.latest_ack_timestamp), "latest_ack_timestamp"],
      ["Duration", f.duration(detail.end_to_end_duration), "end_to_end_duration"],
      ["Size", f.bytes(detail.state_size), "state_size"],
      ["Alignment buffered", f.bytes(detail.alignment_buffered), "alignment_buffered"],
      ["Subtasks acknowledged", `${f.num(detail.num_acknowledged_subtasks)} / ${f.num(detail.num_subtasks)}`, "acks"],
      ["Path", f.text(detail.external_path), "external_path"],
      ["Discarded", f.text(detail.discarded), "discarded"],
    ]),
    table("checkpoint-tasks", columns, tasks),
  );
}

export async function exceptionsTab(job) {
  const answer = await optional(`/jobs/${enc(job.jid)}/exceptions`);
  if (!answer) return h("section", { testid: "exceptions" }, missing("exceptions-missing", "/jobs/<id>/exceptions"));
  const entries = answer.exceptionHistory?.entries || [];
  const columns = [
    { label: "Time", field: "timestamp", cell: (e) => f.time(e.timestamp) },
    { label: "Exception", field: "exceptionName", cell: (e) => f.text(e.exceptionName) },
    { label: "Task", field: "taskName", cell: (e) => f.text(e.taskName) },
    { label: "TaskManager", field: "taskManagerId", cell: (e) => (e.taskManagerId ? link(`#/taskmanagers/${enc(e.taskManagerId)}`, e.taskManagerId) : f.NA) },
    { label: "Endpoint", field: "endpoint", cell: (e) => f.text(e.endpoint) },
    { label: "Stack trace", field: "stacktrace", cell: (e) => h("details", { "data-key": `${e.timestamp}/${e.taskName}/${e.exceptionName}` }, h("summary", {}, "show"), h("pre", {}, f.text(e.stacktrace))) },
  ];
  return h(
    "section",
    { testid: "exceptions" },
    h("h2", {}, "Root exception"),
    answer["root-exception"]
      ? [h("p", {}, f.time(answer.timestamp)), h("pre", { testid: "root-exception", class: "trace", "data-scroll-key": "root-exception" }, answer["root-exception"])]
      : h("p", { class: "empty", testid: "root-exception-none" }, "No exception."),
    h("h2", {}, "History"),
    entries.length
      ? table("exception-history", columns, entries, () => ({ testid: "exception-row" }))
      : h("p", { class: "empty" }, "No exception in the history."),
    answer.exceptionHistory?.truncated ? h("p", { class: "note" }, "The history is truncated.") : null,
  );
}

export async function configTab(job) {
  const jid = enc(job.jid);
  const [config, checkpoints] = await Promise.all([
    optional(`/jobs/${jid}/config`),
    optional(`/jobs/${jid}/checkpoints/config`),
  ]);
  const execution = config?.["execution-config"];
  const user = Object.entries(execution?.["user-config"] || {}).map(([key, value]) => ({ key, value }));
  return h(
    "section",
    { testid: "job-config" },
    h("h2", {}, "Execution configuration"),
    execution
      ? facts("execution-config", [
          ["Execution mode", f.text(execution["execution-mode"]), "execution-mode"],
          ["Restart strategy", f.text(execution["restart-strategy"]), "restart-strategy"],
          ["Job parallelism", f.num(execution["job-parallelism"]), "job-parallelism"],
          ["Object reuse", f.text(execution["object-reuse-mode"]), "object-reuse-mode"],
        ])
      : missing("job-config-missing", "/jobs/<id>/config"),
    h("h2", {}, "User configuration"),
    user.length
      ? table("user-config", [
          { label: "Key", field: "key", cell: (e) => e.key },
          { label: "Value", field: "value", cell: (e) => f.text(e.value) },
        ], user)
      : h("p", { class: "empty" }, execution ? "None." : f.NA),
    h("h2", {}, "Checkpointing"),
    checkpoints ? configFacts("checkpoint-config", checkpoints) : missing("checkpoint-config-missing", "/jobs/<id>/checkpoints/config"),
  );
}

export async function watermarksTab(job) {
  const answer = await optional(`/jobs/${enc(job.jid)}/watermarks`);
  if (!answer) return h("section", { testid: "watermarks" }, h("p", { class: "empty" }, "Watermarks n/a (the job does not run)."));
  const columns = [
    { label: "Vertex", field: "vertex", cell: (t) => t.vertex },
    { label: "Subtask", field: "subtask", num: true, cell: (t) => String(t.subtask) },
    { label: "Watermark", field: "watermark", cell: (t) => f.watermark(t.watermark) },
  ];
  return h(
    "section",
    { testid: "watermarks" },
    facts("watermark-facts", [["Global min clock", f.watermark(answer["min-clock"]), "min-clock"]]),
    table("watermark-table", columns, answer.tasks || [], () => ({ testid: "watermark-row" })),
  );
}
