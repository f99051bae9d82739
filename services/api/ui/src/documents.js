// A document's messages in the Agents view (GET /api/agents/{a}/documents/{id}): each can be
// edited (PATCH …/messages/{id}: re-extracted alone) or deleted (DELETE …/messages/{id}). The
// document itself can be moved to the trash (DELETE …?soft=true: out of every search, restorable)
// and restored from it (POST …/restore).

import { api } from "./api.js";
import { $, el, toast, when } from "./util.js";

export class DocumentView {
  // changed: called after an edit or a delete (the Agents view refreshes its documents' counts)
  constructor(state, changed) {
    this.state = state;
    this.changed = changed;
    this.documentId = null;
  }

  path(messageId) {
    const base = `/api/agents/${encodeURIComponent(this.state.agent)}/documents/${encodeURIComponent(this.documentId)}`;
    return messageId === undefined ? base : `${base}/messages/${encodeURIComponent(messageId)}`;
  }

  close() {
    this.documentId = null;
    $("#document-panel").hidden = true;
  }

  async open(documentId) {
    this.documentId = documentId;
    const box = $("#document-panel");
    box.hidden = false;
    $("#document-title").textContent = documentId;
    $("#document-error").hidden = true;
    let doc;
    try {
      doc = await api(this.path());
    } catch (error) {
      if (this.documentId === documentId) this.fail(error);
      return;
    }
    if (this.documentId !== documentId) return; // closed, or another one opened meanwhile
    const trash = doc.trashed_at ? ` · in the trash, deleted for good ${when(doc.purge_after)}` : "";
    $("#document-meta").textContent = `${doc.items.length} messages · ${doc.unit_count} memories · ${doc.status || ""}${trash}`;
    $("#document-trash").hidden = Boolean(doc.trashed_at);
    $("#document-restore").hidden = !doc.trashed_at;
    $("#messages-list").replaceChildren(...doc.items.map((item, position) =>
      this.message(item, item.message_id ?? String(position))));
  }

  message(item, id) {
    const who = [item.role, item.speaker, item.channel && `in ${item.channel}`].filter(Boolean).join(" · ");
    return el("li", { "data-message": id },
      el("div", { class: "muted small" }, `${id}${who ? ` · ${who}` : ""}${item.event_date ? ` · ${when(item.event_date)}` : ""}`),
      el("p", { class: "message-text" }, item.content),
      el("div", { class: "actions" },
        el("button", { class: "small", onclick: (e) => this.edit(e.target.closest("li"), item, id) }, "Edit"),
        el("button", { class: "small ghost", onclick: () => this.remove(id) }, "Delete")));
  }

  fail(error) {
    const box = $("#document-error");
    box.textContent = error.message;
    box.hidden = false;
    toast(error.message, "error");
  }

  edit(row, item, id) {
    const text = el("textarea", { name: "content", rows: 4, "aria-label": "message text" });
    text.value = item.content;
    const form = el("form", { class: "edit-form" }, text,
      el("div", { class: "actions" },
        el("button", { type: "submit", class: "small" }, "Save"),
        el("button", { type: "button", class: "small ghost", onclick: () => this.open(this.documentId) }, "Cancel")));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      await this.change(id, "PATCH", { content: text.value }, "Message saved");
    });
    row.replaceChildren(row.firstChild, form);
    text.focus();
  }

  async remove(id) {
    if (!window.confirm(`Delete message ${id}? What was extracted from it alone goes too.`)) return;
    await this.change(id, "DELETE", undefined, "Message deleted");
  }

  async trash() {
    const id = this.documentId;
    if (!window.confirm(`Move ${id} to the trash? Its memories and messages leave every search until it is restored.`)) return;
    await this.move({ method: "DELETE", params: { soft: "true" } }, (r) => `${id} moved to the trash until ${when(r.purge_after)}`);
  }

  async restore() {
    await this.move({ method: "POST", path: this.path() + "/restore" }, (r) => `${this.documentId} restored: ${r.restored.units_restored} memories back`);
  }

  // A trash or a restore of the open document; the list is refreshed (it leaves the one shown).
  async move({ method, params, path }, done) {
    $("#document-error").hidden = true;
    let result;
    try {
      result = await api(path || this.path(), { method, params });
    } catch (error) {
      this.fail(error);
      return;
    }
    toast(done(result));
    this.changed();
    await this.open(this.documentId);
  }

  async change(id, method, body, done) {
    $("#document-error").hidden = true;
    let result;
    try {
      result = await api(this.path(id), { method, body });
    } catch (error) {
      this.fail(error);
      return;
    }
    toast(result.operation_id ? `${done}; operation ${result.operation_id.slice(0, 8)} updates its memories` : done);
    this.changed();
    await this.open(this.documentId);
  }
}
