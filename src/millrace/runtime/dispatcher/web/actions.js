// The job's actions, behind the token: cancel, stop with a savepoint, trigger a savepoint.
// The bar lives outside the polled content (#actions) so that a refresh neither resets what
// the user typed nor the outcome shown.

import { get, send } from "./api.js";
import { h } from "./dom.js";

let bar = null; // {jid, element, buttons, status, directory}

function refusal(result) {
  if (result.status === 401 || result.status === 403) {
    return `Refused (${result.status}): the cluster wants its REST token; type it above. ${result.message}`;
  }
  if (result.status === 404) return `Not available on this cluster (404): ${result.message}`;
  return `Failed: ${result.message}`;
}

function say(text, kind) {
  bar.status.textContent = text;
  bar.status.className = `action-status ${kind}`;
  bar.status.setAttribute("data-kind", kind);
}

async function follow(jid, requestId, what) {
  const path = `/jobs/${encodeURIComponent(jid)}/savepoints/${encodeURIComponent(requestId)}`;
  for (let i = 0; i < 3600; i += 1) {
    let status;
    try {
      status = await get(path, { withToken: true });
    } catch (error) {
      if (bar?.jid === jid) say(`${what}: reading its status failed (${error.message})`, "error");
      return;
    }
    const state = typeof status.status === "object" ? status.status?.id : status.status;
    if (state === "COMPLETED") {
      const failure = status["failure-cause"] ?? status.operation?.["failure-cause"]?.["class"];
      const location = status.location ?? status.operation?.location;
      if (bar?.jid === jid) {
        if (failure) say(`${what} failed: ${failure}`, "error");
        else say(`${what} completed: ${location}`, "ok");
      }
      return;
    }
    if (bar?.jid === jid) say(`${what} in progress (request ${requestId})…`, "pending");
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

async function cancel(jid) {
  if (!window.confirm(`Cancel job ${jid}?`)) return;
  say("Cancelling…", "pending");
  const result = await send("PATCH", `/jobs/${encodeURIComponent(jid)}?mode=cancel`);
  say(result.ok ? "Cancel requested." : refusal(result), result.ok ? "ok" : "error");
}

async function savepoint(jid, stop) {
  const directory = bar.directory.value.trim() || null;
  const what = stop ? "Stop with savepoint" : "Savepoint";
  if (stop && !window.confirm(`Stop job ${jid} with a savepoint?`)) return;
  say(`${what}: requesting…`, "pending");
  const path = `/jobs/${encodeURIComponent(jid)}/${stop ? "stop" : "savepoints"}`;
  const body = stop
    ? { targetDirectory: directory, drain: false }
    : { "target-directory": directory, "cancel-job": false };
  const result = await send("POST", path, body);
  if (!result.ok) {
    say(`${what}: ${refusal(result)}`, "error");
    return;
  }
  await follow(jid, result.body["request-id"], what);
}

/** Show the action bar of job ``jid`` in ``slot`` (kept across refreshes), enabled unless the
 * job ended; ``jid`` null clears it. */
export function showActions(slot, jid, terminal) {
  if (!jid) {
    bar = null;
    slot.replaceChildren();
    return;
  }
  if (!bar || bar.jid !== jid) {
    const status = h("span", { id: "action-status", testid: "action-status", class: "action-status" });
    const directory = h("input", { id: "savepoint-directory", testid: "savepoint-directory", placeholder: "savepoint directory (default: state.savepoints.dir)" });
    const buttons = [
      h("button", { id: "action-cancel", testid: "action-cancel", class: "danger", onclick: () => cancel(jid) }, "Cancel job"),
      h("button", { id: "action-stop", testid: "action-stop", onclick: () => savepoint(jid, true) }, "Stop with savepoint"),
      h("button", { id: "action-savepoint", testid: "action-savepoint", onclick: () => savepoint(jid, false) }, "Trigger savepoint"),
    ];
    bar = { jid, status, directory, buttons, element: h("div", { class: "actions" }, buttons, directory, status) };
    slot.replaceChildren(bar.element);
  }
  for (const button of bar.buttons) button.disabled = terminal;
}
