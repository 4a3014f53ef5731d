// DOM builders that only ever set text through textContent / createTextNode: API strings (job
// names come from users) never reach an HTML parser, so they cannot become markup.

const SVG_NS = "http://www.w3.org/2000/svg";

function build(element, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "testid") element.setAttribute("data-testid", String(value));
    else if (key === "class") element.setAttribute("class", String(value));
    else if (key.startsWith("on") && typeof value === "function") {
      element.addEventListener(key.slice(2), value);
    } else element.setAttribute(key, value === true ? "" : String(value));
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(element, child);
    else if (child instanceof Node) element.appendChild(child);
    else element.appendChild(document.createTextNode(String(child)));
  }
}

/** An HTML element: h("td", {testid: "x", class: "num"}, "text", otherNode). */
export function h(tag, attrs = {}, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element, built the same way. */
export function s(tag, attrs = {}, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** A CSS class token from an API state ("RUNNING" -> "state-RUNNING"); anything else dropped. */
export function stateClass(state) {
  const token = String(state ?? "").replace(/[^A-Za-z_]/g, "");
  return token ? `state state-${token}` : "state";
}

/** A table: columns [{label, field, cell(row) -> Node|string, num}], one <tr> per row. */
export function table(testid, columns, rows, rowAttrs = () => ({})) {
  const head = h("tr", {}, columns.map((c) => h("th", { class: c.num ? "num" : null }, c.label)));
  const body = rows.map((row) =>
    h(
      "tr",
      rowAttrs(row),
      columns.map((c) =>
        h("td", { "data-field": c.field, class: c.num ? "num" : null }, c.cell(row)),
      ),
    ),
  );
  return h("table", { testid, class: "grid" }, h("thead", {}, head), h("tbody", {}, body));
}

/** A definition list of [label, value, field] triples. */
export function facts(testid, items) {
  return h(
    "dl",
    { testid, class: "facts" },
    items.map(([label, value, field]) => [
      h("dt", {}, label),
      h("dd", { "data-field": field }, value),
    ]),
  );
}

export function link(href, text, attrs = {}) {
  return h("a", { href, ...attrs }, text);
}
