// Webhooks: the tenant's endpoints (register, ping, delete) and each one's recent deliveries
// with their status, attempts and the receiver's last answer (docs/webhooks.md).

import { api } from "./api.js";
import { $, checkedValues, el, toast, when } from "./util.js";

export class WebhooksView {
  constructor(state) {
    this.state = state;
    this.selected = null;
    $("#webhook-form").addEventListener("submit", (e) => this.register(e));
    $("#webhooks-refresh").addEventListener("click", () => this.load());
    setInterval(() => {
      if (this.state.view === "webhooks" && !document.hidden) this.load({ quiet: true });
    }, 5000);
  }

  async load({ quiet = false } = {}) {
    let data;
    try {
      data = await api("/api/webhooks");
    } catch (error) {
      if (!quiet) toast(error.message, "error");
      return;
    }
    $("#webhooks-table tbody").replaceChildren(...data.webhooks.map((w) => this.row(w)));
    $("#webhooks-empty").hidden = data.webhooks.length > 0;
    if (this.selected && !data.webhooks.some((w) => w.id === this.selected)) this.selected = null;
    if (!this.selected && data.webhooks.length) this.selected = data.webhooks[0].id;
    await this.deliveries();
  }

  row(w) {
    const counts = w.deliveries;
    const button = (label, action) =>
      el("button", { class: "small ghost", onclick: (e) => { e.stopPropagation(); action(); } }, label);
    return el("tr", {
      "data-webhook": w.id,
      class: w.id === this.selected ? "selected" : "",
      onclick: () => { this.selected = w.id; this.load({ quiet: true }); },
    },
      el("td", {}, el("b", {}, w.url), w.description ? el("div", { class: "muted small" }, w.description) : null),
      el("td", { class: "small" }, w.events.join(", ")),
      el("td", { class: "num" }, counts.succeeded),
      el("td", { class: "num" }, counts.pending),
      el("td", { class: `num ${counts.failed ? "bad" : ""}` }, counts.failed),
      el("td", { class: "nowrap" }, when(w.created_at)),
      el("td", { class: "nowrap" }, button("Test", () => this.ping(w)), " ", button("Delete", () => this.remove(w))));
  }

  async deliveries() {
    const body = $("#deliveries-table tbody");
    $("#deliveries-for").textContent = this.selected ? "" : "select an endpoint";
    if (!this.selected) return body.replaceChildren();
    let data;
    try {
      data = await api(`/api/webhooks/${this.selected}/deliveries`, { params: { limit: 50 } });
    } catch (error) {
      return toast(error.message, "error");
    }
    body.replaceChildren(...data.deliveries.map((d) => {
      const answer = d.last_error || d.last_response || "";
      const next = d.status === "pending" && d.attempts ? `next ${when(d.next_attempt_at)}` : "";
      return el("tr", { "data-delivery": d.id, class: d.status },
        el("td", { class: "nowrap" }, when(d.created_at)),
        el("td", {}, d.event_type),
        el("td", {}, el("span", { class: `badge ${d.status}` }, d.status), " ",
          el("span", { class: "muted small" }, next)),
        el("td", { class: "num" }, d.attempts),
        el("td", { class: "num" }, d.last_status_code ?? "—"),
        el("td", { class: "error-cell", title: answer }, answer));
    }));
    $("#deliveries-empty").hidden = data.deliveries.length > 0;
  }

  async register(event) {
    event.preventDefault();
    const form = event.target;
    const body = {
      url: form.url.value.trim(),
      events: checkedValues(form, "events"),
      description: form.description.value.trim(),
    };
    try {
      const created = await api("/api/webhooks", { method: "POST", body });
      $("#webhook-secret").hidden = false;
      $("#webhook-secret code").textContent = created.secret;
      this.selected = created.id;
      form.reset();
    } catch (error) {
      return toast(error.message, "error");
    }
    this.load();
  }

  async ping(w) {
    try {
      await api(`/api/webhooks/${w.id}/test`, { method: "POST" });
      toast("Ping sent: see its delivery below");
    } catch (error) {
      toast(error.message, "error");
    }
    this.selected = w.id;
    this.load({ quiet: true });
  }

  async remove(w) {
    if (!window.confirm(`Delete the endpoint ${w.url} and its deliveries?`)) return;
    try {
      await api(`/api/webhooks/${w.id}`, { method: "DELETE" });
    } catch (error) {
      toast(error.message, "error");
    }
    this.load();
  }
}
