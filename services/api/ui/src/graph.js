// The memory graph view: /api/graph pages drawn with cytoscape.js (fcose layout).

import cytoscape from "cytoscape";
import fcose from "cytoscape-fcose";
import { api } from "./api.js";
import { MemoryPanel } from "./memory.js";
import { $, checkedValues, el, toast } from "./util.js";

cytoscape.use(fcose);

const CAUSAL = ["causes", "caused_by", "enables", "prevents"];
const COLORS = {
  world: "#3b7dd8",
  agent: "#2f9e62",
  opinion: "#e8833a",
  entity: "#8a8fa3",
  temporal: "#9aa7bd",
  semantic: "#8b6fe8",
  entityLink: "#e05d6f",
  causal: "#e0a100",
  mentions: "#c9ced8",
  relation: "#1f7a5a",
};
// relations between entities that read the same both ways: drawn without an arrow
const SYMMETRIC = ["sibling_of", "partner_of", "friend_of", "colleague_of"];

const STYLE = [
  {
    selector: "node",
    style: {
      "background-color": (n) => COLORS[n.data("fact_type")] || COLORS.world,
      width: 14,
      height: 14,
      label: "",
      "font-size": 9,
      color: "#2b2f3a",
      "text-wrap": "ellipsis",
      "text-max-width": 140,
      "text-valign": "bottom",
      "text-margin-y": 3,
      "border-width": 0,
    },
  },
  {
    selector: "node[kind = 'entity']",
    style: {
      shape: "round-rectangle",
      "background-color": COLORS.entity,
      width: (n) => 14 + Math.min(16, Math.sqrt(n.data("mentions") || 1) * 2),
      height: 12,
      label: "data(label)",
      "font-weight": 600,
    },
  },
  { selector: "node.seed", style: { "border-width": 2, "border-color": "#1d2330" } },
  { selector: "node:selected", style: { "border-width": 3, "border-color": "#ffbf00" } },
  { selector: "node.hover, node.labelled", style: { label: "data(label)", "z-index": 10 } },
  { selector: "node.labelled[kind = 'unit']", style: { "font-size": 7, color: "#555c6e" } },
  {
    selector: "edge",
    style: {
      width: (e) => 0.6 + 3 * Math.min(1, e.data("weight") || 0),
      "line-color": (e) => edgeColor(e.data("type")),
      opacity: 0.75,
      "curve-style": "haystack",
    },
  },
  {
    selector: "edge[type = 'mentions']",
    style: { "line-style": "dashed", width: 0.8, opacity: 0.6 },
  },
  {
    selector: "edge[type = 'relation']",
    style: {
      "curve-style": "bezier",
      width: 1.6,
      opacity: 0.9,
      label: "data(relation)",
      "font-size": 6,
      color: COLORS.relation,
      "text-rotation": "autorotate",
      "target-arrow-shape": (e) => (SYMMETRIC.includes(e.data("relation")) ? "none" : "triangle"),
      "target-arrow-color": COLORS.relation,
      "arrow-scale": 0.6,
    },
  },
  {
    selector: "edge.causal",
    style: {
      "curve-style": "bezier",
      "target-arrow-shape": "triangle",
      "target-arrow-color": COLORS.causal,
      "arrow-scale": 0.7,
    },
  },
];

function edgeColor(type) {
  if (type === "entity") return COLORS.entityLink;
  if (CAUSAL.includes(type)) return COLORS.causal;
  return COLORS[type] || COLORS.mentions;
}

export class GraphView {
  constructor(state) {
    this.state = state;
    this.cursor = null;
    this.params = null;
    this.loads = 0; // each load numbered: only the latest page is shown
    this.memory = new MemoryPanel(state, this);
    this.cy = cytoscape({
      container: $("#cy"),
      style: STYLE,
      wheelSensitivity: 0.3,
      minZoom: 0.05,
      maxZoom: 4,
    });
    this.cy.on("tap", "node", (e) => this.select(e.target));
    this.cy.on("mouseover", "node", (e) => e.target.addClass("hover"));
    this.cy.on("mouseout", "node", (e) => e.target.removeClass("hover"));
    $("#graph-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.load();
    });
    $("#graph-more").addEventListener("click", () => this.load({ more: true }));
  }

  formParams() {
    const form = $("#graph-form");
    const data = new FormData(form);
    const links = checkedValues(form, "link_type").flatMap((t) => (t === "causal" ? CAUSAL : [t]));
    const facts = checkedValues(form, "fact_type");
    return {
      agent_id: this.state.agent,
      q: data.get("q").trim() || undefined,
      entity: data.get("entity").trim() || undefined,
      fact_type: facts.length === 3 ? undefined : facts,
      link_type: links.length === 7 ? undefined : links,
      since: data.get("since") ? `${data.get("since")}T00:00:00Z` : undefined,
      until: data.get("until") ? `${data.get("until")}T23:59:59Z` : undefined,
      depth: data.get("depth"),
      limit: data.get("limit"),
    };
  }

  async load({ more = false, params } = {}) {
    if (!this.state.agent) {
      toast("Choose an agent first", "warn");
      return;
    }
    if (!more) {
      this.params = params || this.formParams();
      this.cursor = null;
    }
    const started = performance.now();
    const load = ++this.loads;
    $("#graph-status").textContent = "loading…";
    let page;
    try {
      page = await api("/api/graph", { params: { ...this.params, cursor: this.cursor } });
    } catch (error) {
      if (load !== this.loads) return;
      $("#graph-status").textContent = error.message;
      toast(error.message, "error");
      return;
    }
    if (load !== this.loads) return;
    if (!more) this.cy.elements().remove();
    this.merge(page, { seeds: true });
    this.cursor = page.next_cursor;
    $("#graph-more").disabled = !this.cursor;
    const ms = Math.round(performance.now() - started);
    $("#graph-status").textContent =
      `${this.cy.nodes().length} nodes · ${this.cy.edges().length} edges · page in ${ms} ms` +
      (page.truncated ? " · bounded (some neighbours left out)" : "");
  }

  merge(page, { seeds = false, around } = {}) {
    const fresh = [];
    for (const node of page.nodes) {
      if (this.cy.getElementById(node.id).nonempty()) continue;
      fresh.push({ group: "nodes", data: node, classes: seeds && node.kind === "unit" ? "seed" : "" });
    }
    for (const edge of page.edges) {
      const id = `${edge.source}>${edge.target}>${edge.relation || edge.type}`;
      if (this.cy.getElementById(id).nonempty()) continue;
      fresh.push({
        group: "edges",
        data: { id, ...edge },
        classes: CAUSAL.includes(edge.type) ? "causal" : "",
      });
    }
    const added = this.cy.add(fresh.filter((e) => e.group === "nodes"));
    this.cy.add(
      fresh.filter(
        (e) =>
          e.group === "edges" &&
          this.cy.getElementById(e.data.source).nonempty() &&
          this.cy.getElementById(e.data.target).nonempty(),
      ),
    );
    if (around) added.position(around.position());
    const layout = {
      name: this.cy.nodes().length > 1 ? "fcose" : "grid",
      animate: false,
      randomize: !around,
      quality: "default",
      nodeRepulsion: 6000,
      idealEdgeLength: 60,
      fit: true,
      padding: 20,
    };
    const small = this.cy.nodes().length <= 60;
    this.cy.nodes().toggleClass("labelled", small);
    this.cy.one("layoutstop", () => {
      if (this.cy.zoom() > 1.6) {
        this.cy.zoom(1.6);
        this.cy.center();
      }
    });
    this.cy.layout(layout).run();
  }

  async select(node) {
    this.cy.$(":selected").unselect();
    node.select();
    const data = node.data();
    const panel = $("#node-panel");
    panel.replaceChildren(el("h2", {}, data.kind === "entity" ? "Entity" : "Memory"));
    if (data.kind === "entity") {
      panel.append(
        el("p", { class: "node-text" }, data.label),
        el("dl", {}, el("dt", {}, "Type"), el("dd", {}, data.entity_type),
          el("dt", {}, "Mentions"), el("dd", {}, data.mentions)),
        el("div", { class: "actions" },
          el("button", { onclick: () => this.expandEntity(node) }, "Expand neighbours"),
          el("button", { class: "ghost", onclick: () => this.seedEntity(data) }, "Graph of this entity")),
      );
      await this.showRelations(data.id, panel);
      return;
    }
    await this.memory.show(data.id);
  }

  edgeColor(type) {
    return edgeColor(type);
  }

  /** The entity's relations (current first), each with its status and evidence count. */
  async showRelations(entityId, panel) {
    const path = `/api/agents/${encodeURIComponent(this.state.agent)}/entities/${entityId}`;
    let entity;
    try {
      entity = await api(path);
    } catch (error) {
      panel.append(el("p", { class: "muted" }, `Relations: ${error.message}`));
      return;
    }
    if (!entity.relations.length) return;
    const items = entity.relations.map((r) => {
      const words = r.direction === "outgoing"
        ? `${r.relation} ${r.other.name}` : `${r.other.name} ${r.relation} this`;
      const evidence = `${r.evidence.length} memor${r.evidence.length === 1 ? "y" : "ies"}`;
      return el("li", { class: r.status === "current" ? "" : "muted" },
        `${words} · ${r.status} · ${evidence}`);
    });
    panel.append(el("h3", {}, "Relations"), el("ul", { class: "relations" }, ...items));
  }

  expandUnit(node, memory) {
    const nodes = memory.links.map((l) => ({ id: l.target, kind: "unit", label: l.label }));
    const edges = memory.links.map((l) => ({ source: memory.id, target: l.target, type: l.type, weight: l.weight }));
    nodes.push(...memory.entities.map((e) => ({ id: e.id, kind: "entity", label: e.name, entity_type: e.entity_type, mentions: 1 })));
    edges.push(...memory.entities.map((e) => ({ source: memory.id, target: e.id, type: "mentions", weight: 1 })));
    this.merge({ nodes, edges }, { around: node });
  }

  async expandEntity(node) {
    const page = await api("/api/graph", {
      params: { agent_id: this.state.agent, entity: node.id(), depth: 0, limit: 60 },
    });
    this.merge(page, { around: node });
  }

  seedEntity(entity) {
    const form = $("#graph-form");
    form.q.value = "";
    form.entity.value = entity.label;
    this.load({ params: { ...this.formParams(), entity: entity.id } });
  }
}
