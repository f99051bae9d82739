// The operations console (list, error, retry) and the queues and workers view (admin keys).

import { api, apiKey } from "./api.js";
import { $, el, toast, when } from "./util.js";

const STAGES = ["extract", "embed", "entities", "links"];

// How long the oldest message of a queue has waited: "" when none waits.
function waited(seconds) {
  if (!seconds) return "";
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

export class OperationsView {
  constructor(state) {
    this.state = state;
    this.cursor = null;
    $("#ops-refresh").addEventListener("click", () => this.load());
    $("#ops-status").addEventListener("change", () => this.load());
    $("#ops-this-agent").addEventListener("change", () => this.load());
    $("#ops-more").addEventListener("click", () => this.load({ more: true }));
    setInterval(() => {
      if (this.state.view === "operations" && $("#ops-auto").checked && !document.hidden) {
        this.load({ quiet: true });
      }
    }, 3000);
  }

  async load({ more = false, quiet = false } = {}) {
    const params = {
      status: $("#ops-status").value || undefined,
      agent_id: $("#ops-this-agent").checked ? this.state.agent || undefined : undefined,
      limit: 50,
      cursor: more ? this.cursor : undefined,
    };
    let page;
    try {
      page = await api("/api/operations", { params });
    } catch (error) {
      if (!quiet) toast(error.message, "error");
      return;
    }
    const body = $("#ops-table tbody");
    const rows = page.operations.map((op) => this.row(op));
    if (more) body.append(...rows);
    else body.replaceChildren(...rows);
    this.cursor = page.next_cursor;
    $("#ops-more").hidden = !this.cursor;
    $("#ops-empty").hidden = body.children.length > 0;
  }

  row(op) {
    const chain = Object.keys(op.stages).length ? Object.keys(op.stages) : [op.stage || op.kind];
    const stages = (op.document_id ? STAGES : chain).map((name) => {
      const s = op.stages[name] || { status: "pending" };
      const tip = `${name}: ${s.status}${s.attempts ? ` · ${s.attempts} attempt(s)` : ""}` +
        `${s.retries ? ` · retried ${s.retries}×` : ""}${s.error ? `\n${s.error}` : ""}`;
      return el("span", { class: `stage ${s.status}`, title: tip }, name);
    });
    const retry = op.status === "failed"
      ? el("button", { class: "small", onclick: (e) => this.retry(op, e.target) }, "Retry")
      : null;
    return el("tr", { "data-operation": op.id, class: op.status },
      el("td", { class: "nowrap" }, when(op.created_at)),
      el("td", {}, op.agent_id),
      el("td", {}, op.document_id || op.kind),
      el("td", {}, el("span", { class: `badge ${op.status}` }, op.status)),
      el("td", { class: "stages" }, stages),
      el("td", { class: "error-cell", title: op.error || "" }, op.error || ""),
      el("td", {}, retry));
  }

  async retry(op, button) {
    button.disabled = true;
    try {
      const answer = await api(`/api/operations/${op.id}/retry`, { method: "POST" });
      toast(answer.outcome === "reopened" ? "Retrying from the failed stage" : "Already retrying");
    } catch (error) {
      toast(error.message, "error");
    }
    this.load({ quiet: true });
  }
}

export class QueuesView {
  constructor(state) {
    this.state = state;
    setInterval(() => {
      if (this.state.view === "queues" && !document.hidden) this.load();
    }, 5000);
  }

  async load() {
    const notice = $("#queues-notice");
    const needKey = "Queues and workers need an admin API key: set one with the “API key” button.";
    if (!apiKey.get()) {
      notice.hidden = false;
      notice.textContent = needKey;
      return;
    }
    let data;
    try {
      data = await api("/api/admin/queues");
    } catch (error) {
      notice.hidden = false;
      notice.textContent = error.status === 403 || error.status === 401 ? needKey : error.message;
      return;
    }
    notice.hidden = true;
    const deepest = Math.max(1, ...Object.values(data.queues));
    $("#queues-table tbody").replaceChildren(...Object.entries(data.queues).map(([name, depth]) =>
      el("tr", { class: depth ? "busy" : "" },
        el("td", {}, name),
        el("td", { class: "num" }, depth.toLocaleString()),
        el("td", { class: "num" }, waited(data.oldest_seconds?.[name] ?? 0)),
        el("td", { class: "bar-cell" },
          depth ? el("span", { class: "timing-bar", style: `width:${(100 * depth) / deepest}%` }) : null))));
    $("#workers-list").replaceChildren(
      ...(data.workers.length
        ? data.workers.map((w) => el("li", {}, el("span", { class: "live-dot" }), el("b", {}, w.name),
            el("div", { class: "muted small" }, w.queues.join(", "))))
        : [el("li", { class: "muted" }, "no worker answered")]),
    );
  }
}
