// The lineage DAG drawn as SVG. Layout (ranks, crossing reduction, coordinates, edge routes) is
// dagre's; this module only sizes the boxes and draws what dagre computed.

import { Graph, layout } from "@dagrejs/dagre";
import { s, short } from "./dom.js";

const NODE_W = 176;
const NODE_H = 50;

export function lineageSvg(lineage, { focus, input, output, onPick } = {}) {
  const g = new Graph();
  g.setGraph({ rankdir: "TB", nodesep: 28, ranksep: 44, marginx: 12, marginy: 12 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const node of lineage.nodes) g.setNode(node.id, { width: NODE_W, height: NODE_H, node });
  for (const edge of lineage.edges) {
    if (g.hasNode(edge.parent) && g.hasNode(edge.child)) g.setEdge(edge.parent, edge.child);
  }
  layout(g);
  const { width, height } = g.graph();
  const svg = s("svg", {
    class: "lineage",
    viewBox: `0 0 ${Math.ceil(width)} ${Math.ceil(height)}`,
    width: Math.ceil(width),
    height: Math.ceil(height),
    role: "img",
    "aria-label": `lineage of ${focus}: ${lineage.nodes.length} sessions, ${lineage.edges.length} edges`,
  });
  svg.append(
    s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }))),
  );
  for (const e of g.edges()) {
    const points = g.edge(e).points || [];
    const d = points.map((p, i) => `${i ? "L" : "M"} ${p.x.toFixed(1)} ${p.y.toFixed(1)}`).join(" ");
    const kind = g.node(e.w).node.op;
    svg.append(s("path", { class: `edge op-${kind}`, d, "marker-end": "url(#arrow)", "data-parent": e.v, "data-child": e.w }));
  }
  for (const id of g.nodes()) {
    const { x, y, node } = g.node(id);
    const roles = [id === focus && "focus", id === input && "input", id === output && "output", node.stub && "stub"].filter(Boolean);
    const tag = id === output ? "output" : id === input ? "input" : node.op;
    const group = s("g", {
      class: ["node", `op-${node.op}`, ...roles].join(" "),
      transform: `translate(${(x - NODE_W / 2).toFixed(1)} ${(y - NODE_H / 2).toFixed(1)})`,
      "data-session": id,
      tabindex: 0,
      onclick: () => onPick && onPick(id),
      onkeydown: (ev) => ev.key === "Enter" && onPick && onPick(id),
    });
    group.append(
      s("title", {}, `${id}\n${node.op} · ${node.length} chunks`),
      s("rect", { width: NODE_W, height: NODE_H, rx: node.op === "merge" ? 22 : 7 }),
      s("text", { x: 10, y: 20, class: "id" }, short(id)),
      s("text", { x: 10, y: 38, class: "meta" }, `${tag} · ${node.length} chunks`),
    );
    svg.append(group);
  }
  return svg;
}
