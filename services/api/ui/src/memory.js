// One memory in the graph's side panel (GET /api/agents/{a}/memories/{id}) and what the user
// may do with it: edit (a new version that supersedes it), forget, restore.

import { api } from "./api.js";
import { $, el, toast, when } from "./util.js";

export class MemoryPanel {
  // graph: the GraphView (seeds by an entity, expands a node, colours link types)
  constructor(state, graph) {
    this.state = state;
    this.graph = graph;
  }

  path(id) {
    return `/api/agents/${encodeURIComponent(this.state.agent)}/memories/${id}`;
  }

  async show(id) {
    const panel = $("#node-panel");
    panel.replaceChildren(el("h2", {}, "Memory"), el("p", { class: "muted" }, "loading…"));
    let memory;
    try {
      memory = await api(this.path(id));
    } catch (error) {
      panel.append(el("p", { class: "error" }, error.message));
      return;
    }
    this.memory = memory;
    panel.replaceChildren(...this.render(memory));
  }

  render(memory) {
    const changed = memory.status === "active" ? "" : ` ${when(memory.status_at)}`;
    const rows = [
      ["Fact type", el("span", { class: `pill ${memory.fact_type}` }, memory.fact_type)],
      ["Status", `${memory.status}${changed}${memory.status_reason ? ` · ${memory.status_reason}` : ""}`],
      ["Said", when(memory.event_date)],
      ["Happened", memory.occurred_start
        ? `${when(memory.occurred_start)}${memory.occurred_end ? ` → ${when(memory.occurred_end)}` : ""}`
        : "—"],
      ["Document", memory.document_id || "—"],
      ["Context", memory.context || "—"],
      ["Confidence", memory.confidence_score ?? "—"],
      ["Accessed", memory.access_count],
    ];
    const versions = [
      ...(memory.superseded_by ? [["Newer version", memory.superseded_by]] : []),
      ...memory.replaced.map((id) => ["Replaces", id]),
    ];
    const node = this.graph.cy.getElementById(memory.id);
    return [
      el("h2", {}, "Memory"),
      el("p", { class: "node-text" }, memory.text),
      el("dl", {}, rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
      el("p", { class: "error", id: "memory-error", hidden: true }),
      el("div", { class: "actions", id: "memory-actions" },
        memory.status === "active" && el("button", { onclick: () => this.edit() }, "Edit"),
        memory.status !== "forgotten" && el("button", { class: "ghost", onclick: () => this.forget() }, "Forget"),
        memory.status !== "active" && el("button", { onclick: () => this.restore() }, "Restore"),
        node.nonempty() && el("button", { class: "ghost", onclick: () => this.graph.expandUnit(node, memory) }, "Expand neighbours")),
      ...(versions.length ? [
        el("h3", {}, "Versions"),
        el("ul", { class: "list versions" }, versions.map(([label, id]) =>
          el("li", {}, `${label} `, el("button", { class: "small ghost", onclick: () => this.show(id) }, "open"),
            el("span", { class: "muted small" }, ` ${id.slice(0, 8)}`)))),
      ] : []),
      el("h3", {}, `Entities (${memory.entities.length})`),
      el("div", { class: "chips" }, memory.entities.map((e) =>
        el("button", { class: "chip", title: e.entity_type, onclick: () => this.graph.seedEntity({ id: e.id, label: e.name }) }, e.name))),
      el("h3", {}, `Links (${memory.links.length})`),
      el("ul", { class: "list links" }, memory.links.slice(0, 15).map((l) =>
        el("li", {}, el("span", { class: "link-type", style: `border-color:${this.graph.edgeColor(l.type)}` }, l.type),
          ` ${l.weight.toFixed(2)} · ${l.label}${l.relationship ? ` (${l.relationship})` : ""}`))),
      ...(memory.history.length ? [
        el("h3", {}, `History (${memory.history.length})`),
        el("ul", { class: "list history" }, memory.history.map((e) =>
          el("li", {}, el("span", { class: "muted" }, when(e.at)), ` ${e.event}`,
            e.reason ? ` · ${e.reason}` : "", el("span", { class: "muted" }, ` · ${e.actor}`)))),
      ] : []),
    ];
  }

  // Runs an API call; on failure the panel shows the API's error (and a toast), else true.
  async attempt(call) {
    const box = $("#memory-error");
    box.hidden = true;
    try {
      return await call();
    } catch (error) {
      box.textContent = error.message;
      box.hidden = false;
      toast(error.message, "error");
      return null;
    }
  }

  edit() {
    const text = el("textarea", { name: "content", rows: 4, "aria-label": "memory text" });
    text.value = this.memory.text;
    const form = el("form", { class: "edit-form", id: "memory-edit" }, text,
      el("div", { class: "actions" },
        el("button", { type: "submit" }, "Save as new version"),
        el("button", { type: "button", class: "ghost", onclick: () => this.show(this.memory.id) }, "Cancel")));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const done = await this.attempt(() =>
        api(this.path(this.memory.id), { method: "PATCH", body: { content: text.value } }));
      if (!done) return;
      toast("Saved as a new version; the old one is kept, superseded");
      this.show(done.memory_id);
    });
    $("#node-panel .node-text").replaceWith(form);
    $("#memory-actions").hidden = true;
    text.focus();
  }

  async forget() {
    if (!window.confirm("Forget this memory? It leaves every search and can be restored for a while.")) return;
    const agent = encodeURIComponent(this.state.agent);
    const body = { memory_id: this.memory.id, reason: "forgotten in the web UI" };
    const done = await this.attempt(() => api(`/api/agents/${agent}/forget`, { method: "POST", body }));
    if (done) this.show(this.memory.id);
  }

  async restore() {
    const done = await this.attempt(() => api(`${this.path(this.memory.id)}/restore`, { method: "POST" }));
    if (done) this.show(this.memory.id);
  }
}
