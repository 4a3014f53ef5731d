// Formatting of API figures; "n/a" where a figure is missing (a path this cluster lacks).

export const NA = "n/a";
const MIN_WATERMARK = -(2 ** 63);
const MAX_WATERMARK = 2 ** 63 - 1;

const has = (v) => v !== null && v !== undefined && !(typeof v === "number" && Number.isNaN(v));

export function num(v) {
  return has(v) ? Number(v).toLocaleString("en-US") : NA;
}

export function rate(v) {
  if (!has(v)) return NA;
  return `${v >= 100 ? Math.round(v).toLocaleString("en-US") : v.toFixed(1)}/s`;
}

export function percent(v) {
  return has(v) ? `${Math.round(v * 100)}%` : NA;
}

export function bytes(v) {
  if (!has(v) || v < 0) return NA;
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = Number(v);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

export function duration(ms) {
  if (!has(ms) || ms < 0) return NA;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const total = Math.floor(ms / 1000);
  const [d, h, m, s] = [
    Math.floor(total / 86400),
    Math.floor((total % 86400) / 3600),
    Math.floor((total % 3600) / 60),
    total % 60,
  ];
  if (d) return `${d}d ${h}h ${m}m`;
  if (h) return `${h}h ${m}m ${s}s`;
  if (m) return `${m}m ${s}s`;
  return `${(ms / 1000).toFixed(1)} s`;
}

export function time(ms) {
  if (!has(ms) || ms <= 0) return NA;
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function watermark(ms) {
  if (!has(ms)) return NA;
  if (ms <= MIN_WATERMARK) return "no watermark";
  if (ms >= MAX_WATERMARK) return "idle / ended";
  return time(ms);
}

export function text(v) {
  return has(v) && v !== "" ? String(v) : NA;
}
