// Memora's web UI: agents and their documents' messages, the memory graph (a memory's edit,
// forget and restore), the search playground, the operations console,
// webhooks and benchmark results.

import { api, apiKey, onKeyNeeded } from "./api.js";
import { DocumentView } from "./documents.js";
import { GraphView } from "./graph.js";
import { OperationsView, QueuesView } from "./ops.js";
import { ResultsView } from "./results.js";
import { SearchView } from "./search.js";
import { WebhooksView } from "./webhooks.js";
import { $, $$, el, toast, when } from "./util.js";

const state = { agent: sessionStorage.getItem("memora.agent") || "", view: "agents" };
const views = {};

function showView(name) {
  state.view = name;
  $$("#tabs button").forEach((b) => b.classList.toggle("active", b.dataset.view === name));
  $$(".view").forEach((v) => v.classList.toggle("active", v.id === `view-${name}`));
  if (name === "graph") {
    views.graph.cy.resize();
    if (state.agent && views.graph.cy.elements().empty()) views.graph.load();
  }
  if (name === "operations") views.operations.load();
  if (name === "queues") views.queues.load();
  if (name === "webhooks") views.webhooks.load();
  if (name === "results") views.results.load();
  history.replaceState(null, "", `#${name}`);
}

function selectAgent(agent) {
  state.agent = agent;
  sessionStorage.setItem("memora.agent", agent);
  $("#agent-select").value = agent;
  $$("#agents-table tbody tr").forEach((r) => r.classList.toggle("selected", r.dataset.agent === agent));
  views.documents.close();
  loadDocuments();
  views.graph.cy.elements().remove();
}

async function loadAgents() {
  let data;
  try {
    data = await api("/api/graph/agents");
  } catch (error) {
    toast(error.message, "error");
    return;
  }
  const agents = data.agents;
  $("#agent-select").replaceChildren(
    el("option", { value: "" }, "—"),
    ...agents.map((a) => el("option", { value: a.agent_id }, a.agent_id)),
  );
  $("#agents-table tbody").replaceChildren(...agents.map((a) =>
    el("tr", { "data-agent": a.agent_id, onclick: () => selectAgent(a.agent_id) },
      el("td", {}, el("b", {}, a.agent_id)),
      el("td", { class: "num" }, a.memories.toLocaleString()),
      el("td", { class: "num" }, a.entities.toLocaleString()),
      el("td", { class: "num" }, a.documents.toLocaleString()),
      el("td", { class: `num ${a.failed_operations ? "bad" : ""}` }, a.failed_operations),
      el("td", { class: "nowrap" }, el("button", {
        class: "small ghost",
        onclick: (e) => { e.stopPropagation(); selectAgent(a.agent_id); showView("graph"); },
      }, "Graph"), " ", el("button", {
        class: "small ghost",
        title: "Consolidate now (and reflect when due), instead of at the next hourly run",
        onclick: (e) => { e.stopPropagation(); evolve(a.agent_id); },
      }, "Evolve")))));
  $("#agents-empty").hidden = agents.length > 0;
  if (!agents.some((a) => a.agent_id === state.agent)) state.agent = agents[0]?.agent_id || "";
  if (state.agent) selectAgent(state.agent);
}

// The agent's memory evolution now: an `evolve` operation (shown in Operations).
async function evolve(agent) {
  try {
    const answer = await api(`/api/agents/${encodeURIComponent(agent)}/evolve`, { method: "POST" });
    toast(`Evolving ${agent}: operation ${answer.operation_id.slice(0, 8)}… (see Operations)`);
  } catch (error) {
    toast(error.message, "error");
  }
}

// Each load is numbered: only the latest one's answer is shown (choosing another agent while a
// list is on its way must not let the earlier agent's list land last).
let documentsLoad = 0;

async function loadDocuments() {
  const list = $("#documents-list");
  const load = ++documentsLoad;
  $("#documents-hint").hidden = Boolean(state.agent);
  if (!state.agent) return list.replaceChildren();
  const trashed = $("#documents-trash").checked; // the trash instead of the live documents
  try {
    const data = await api(`/api/agents/${encodeURIComponent(state.agent)}/documents`,
      { params: { trashed: trashed ? "true" : undefined } });
    if (load !== documentsLoad) return;
    list.replaceChildren(...data.documents.map((d) =>
      el("li", { "data-document": d.document_id }, el("b", {}, d.document_id), " ",
        el("span", { class: `badge ${d.status || ""}` }, d.status || ""),
        el("div", { class: "muted small" }, `${d.item_count} items · ${d.unit_count} memories · ${
          d.purge_after ? `deleted for good ${when(d.purge_after)}` : when(d.updated_at)}`),
        el("button", { class: "small ghost", onclick: () => views.documents.open(d.document_id) }, "Messages"))));
    if (!data.documents.length) {
      list.replaceChildren(el("li", { class: "muted" }, trashed ? "the trash is empty" : "no documents"));
    }
  } catch (error) {
    toast(error.message, "error");
  }
}

function keyDialog(reason) {
  const dialog = $("#key-dialog");
  if (reason) $("#key-reason").textContent = `${reason}. The key is kept for this browser session only.`;
  dialog.querySelector("input").value = apiKey.get();
  return new Promise((resolve) => {
    const done = () => {
      dialog.removeEventListener("close", done);
      const saved = dialog.returnValue === "save";
      if (saved) apiKey.set(dialog.querySelector("input").value.trim());
      $("#key-button").textContent = apiKey.get() ? "API key ✓" : "API key";
      resolve(saved && Boolean(apiKey.get()));
    };
    dialog.addEventListener("close", done);
    dialog.showModal();
  });
}

function init() {
  onKeyNeeded(keyDialog);
  views.graph = new GraphView(state);
  views.documents = new DocumentView(state, loadDocuments);
  views.search = new SearchView(state);
  views.operations = new OperationsView(state);
  views.queues = new QueuesView(state);
  views.webhooks = new WebhooksView(state);
  views.results = new ResultsView();
  window.memoraUI = views; // for the browser test and the console
  $$("#tabs button").forEach((b) => b.addEventListener("click", () => showView(b.dataset.view)));
  $("#agent-select").addEventListener("change", (e) => {
    selectAgent(e.target.value);
    if (state.view === "graph") views.graph.load();
  });
  $("#document-close").addEventListener("click", () => views.documents.close());
  $("#document-trash").addEventListener("click", () => views.documents.trash());
  $("#document-restore").addEventListener("click", () => views.documents.restore());
  $("#documents-trash").addEventListener("change", () => {
    views.documents.close();
    loadDocuments();
  });
  $("#key-button").textContent = apiKey.get() ? "API key ✓" : "API key";
  $("#key-button").addEventListener("click", async () => {
    if (await keyDialog()) {
      loadAgents();
      if (state.view !== "agents") showView(state.view);
    }
  });
  $("#key-clear").addEventListener("click", () => {
    apiKey.set("");
    $("#key-dialog").close("cleared");
  });
  const start = window.location.hash.slice(1);
  loadAgents().then(() => {
    if (views[start]) showView(start);
  });
}

init();
