// The job graph as SVG: a layered layout (longest path from the sources, left to right, each
// layer ordered by the mean position of its inputs), one box per vertex, edges labelled with
// their ship strategy.

import { s } from "./dom.js";

const W = 260;
const H = 118;
const GAP_X = 90;
const GAP_Y = 30;
const PAD = 20;

/** Layers of node ids: nodes [{id, inputs: [{id}]}] -> [[id, ...], ...] (sources first). */
export function layers(nodes) {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const depth = new Map();
  const visiting = new Set();
  const depthOf = (id) => {
    if (depth.has(id)) return depth.get(id);
    if (visiting.has(id)) return 0; // a cycle (not in a JobGraph): cut it
    visiting.add(id);
    const inputs = (byId.get(id)?.inputs || []).filter((i) => byId.has(i.id));
    const d = inputs.length ? 1 + Math.max(...inputs.map((i) => depthOf(i.id))) : 0;
    visiting.delete(id);
    depth.set(id, d);
    return d;
  };
  nodes.forEach((n) => depthOf(n.id));
  const result = [];
  for (const n of nodes) {
    const d = depth.get(n.id);
    (result[d] ||= []).push(n.id);
  }
  const position = new Map();
  result.forEach((layer, index) => {
    if (index > 0) {
      const mean = (id) => {
        const ins = (byId.get(id).inputs || []).filter((i) => position.has(i.id));
        return ins.length ? ins.reduce((a, i) => a + position.get(i.id), 0) / ins.length : 0;
      };
      layer.sort((a, b) => mean(a) - mean(b));
    }
    layer.forEach((id, i) => position.set(id, i));
  });
  return result.filter(Boolean);
}

/** The SVG of the graph. nodes: [{id, inputs:[{id, ship_strategy}], lines:[[field, text]],
 * title, status, href}]; lines are the box's text rows (the first is the name). */
export function drawDag(nodes) {
  const grid = layers(nodes);
  const tallest = Math.max(1, ...grid.map((l) => l.length));
  const width = PAD * 2 + grid.length * W + Math.max(0, grid.length - 1) * GAP_X;
  const height = PAD * 2 + tallest * H + (tallest - 1) * GAP_Y;
  const at = new Map();
  grid.forEach((layer, col) => {
    const offset = ((tallest - layer.length) * (H + GAP_Y)) / 2;
    layer.forEach((id, row) => {
      at.set(id, { x: PAD + col * (W + GAP_X), y: PAD + offset + row * (H + GAP_Y) });
    });
  });
  const svg = s("svg", {
    testid: "job-dag",
    id: "job-dag",
    class: "dag",
    width,
    height,
    viewBox: `0 0 ${width} ${height}`,
    role: "img",
  });
  svg.appendChild(
    s(
      "defs",
      {},
      s(
        "marker",
        { id: "dag-arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto" },
        s("path", { d: "M0,0 L10,5 L0,10 z", class: "dag-arrowhead" }),
      ),
    ),
  );
  for (const node of nodes) {
    const to = at.get(node.id);
    for (const input of node.inputs || []) {
      const from = at.get(input.id);
      if (!from || !to) continue;
      const [x1, y1, x2, y2] = [from.x + W, from.y + H / 2, to.x, to.y + H / 2];
      const mid = (x1 + x2) / 2;
      svg.appendChild(
        s(
          "g",
          { testid: "dag-edge", "data-from": input.id, "data-to": node.id },
          s("path", {
            d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`,
            class: "dag-edge",
            "marker-end": "url(#dag-arrow)",
          }),
          s(
            "text",
            { x: mid, y: (y1 + y2) / 2 - 6, class: "dag-edge-label", "text-anchor": "middle" },
            input.ship_strategy || "n/a",
          ),
        ),
      );
    }
  }
  for (const node of nodes) {
    const { x, y } = at.get(node.id);
    const box = s(
      "a",
      { href: node.href, testid: "dag-node", "data-vertex-id": node.id, "data-vertex-name": node.name },
      s("title", {}, node.title),
      s("rect", { x, y, width: W, height: H, rx: 6, class: `dag-node ${node.statusClass}` }),
    );
    node.lines.forEach(([field, value], i) => {
      box.appendChild(
        s(
          "text",
          { x: x + 10, y: y + 20 + i * 16, "data-field": field, class: i === 0 ? "dag-name" : "dag-line" },
          value,
        ),
      );
    });
    svg.appendChild(box);
  }
  return svg;
}

export function shorten(value, length = 27) {
  const text = String(value);
  return text.length > length ? `${text.slice(0, length - 1)}…` : text;
}
