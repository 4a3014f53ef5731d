// The REST API as the dashboard reads it: same origin, JSON, the token from sessionStorage.

const TOKEN_KEY = "millrace.rest-token";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers(withToken) {
  const result = { Accept: "application/json" };
  if (withToken && token()) result.Authorization = `Bearer ${token()}`;
  return result;
}

async function errorOf(response) {
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && Array.isArray(body.errors)) message = `${response.status}: ${body.errors.join("; ")}`;
    else if (body && typeof body.detail === "string") message = `${response.status}: ${body.detail}`;
  } catch {
    /* not JSON */
  }
  return new ApiError(response.status, message);
}

/** GET a JSON path; throws ApiError on any status but 2xx. */
export async function get(path, { withToken = false } = {}) {
  const response = await fetch(path, { headers: headers(withToken), cache: "no-store" });
  if (!response.ok) throw await errorOf(response);
  return response.json();
}

/** GET a JSON path that this cluster may not have yet (or an object that is gone): null on
 * 404 (shown as "n/a"), or on a 400 for a job whose state does not have the figure. */
export async function optional(path) {
  try {
    return await get(path);
  } catch (error) {
    if (error instanceof ApiError && (error.status === 404 || error.status === 400)) return null;
    throw error;
  }
}

export async function getText(path) {
  const response = await fetch(path, { cache: "no-store" });
  if (!response.ok) throw await errorOf(response);
  return response.text();
}

/** A write with the token: resolves {ok, status, body, message}; never throws on HTTP errors. */
export async function send(method, path, body) {
  const init = { method, headers: headers(true) };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (response.ok) {
    let json = {};
    try {
      json = await response.json();
    } catch {
      /* empty body */
    }
    return { ok: true, status: response.status, body: json, message: "" };
  }
  const error = await errorOf(response);
  return { ok: false, status: response.status, body: null, message: error.message };
}
