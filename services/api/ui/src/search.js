// The search playground: POST /api/search with trace, its results and its trace.

import { api } from "./api.js";
import { $, checkedValues, el, toast, when } from "./util.js";

export class SearchView {
  constructor(state) {
    this.state = state;
    $("#search-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.run();
    });
  }

  async run() {
    if (!this.state.agent) {
      toast("Choose an agent first", "warn");
      return;
    }
    const form = $("#search-form");
    const data = new FormData(form);
    const body = {
      agent_id: this.state.agent,
      query: data.get("query"),
      reranker: data.get("reranker"),
      fact_type: checkedValues(form, "fact_type"),
      top_k: Number(data.get("top_k")),
      thinking_budget: Number(data.get("thinking_budget")),
      trace: true,
    };
    if (data.get("reference_time")) body.reference_time = `${data.get("reference_time")}:00Z`;
    if (!body.fact_type.length) {
      toast("Choose at least one fact type", "warn");
      return;
    }
    $("#search-meta").textContent = "searching…";
    const started = performance.now();
    let outcome;
    try {
      outcome = await api("/api/search", { method: "POST", body });
    } catch (error) {
      $("#search-meta").textContent = "";
      toast(error.message, "error");
      return;
    }
    const ms = Math.round(performance.now() - started);
    $("#search-meta").textContent = `${outcome.results.length} in ${ms} ms`;
    const texts = new Map(outcome.results.map((r) => [r.id, r.text]));
    $("#search-results").replaceChildren(
      ...outcome.results.map((r) =>
        el("li", { class: "result" },
          el("div", { class: "result-head" },
            el("span", { class: `pill ${r.fact_type}` }, r.fact_type),
            el("span", { class: "weight", title: "weight" }, r.weight.toFixed(3)),
            el("span", { class: "muted" }, when(r.event_date))),
          el("p", {}, r.text),
          r.context ? el("p", { class: "muted small" }, r.context) : null)),
    );
    this.showTrace(outcome.trace, texts);
  }

  showTrace(trace, texts) {
    const box = $("#search-trace");
    if (!trace) {
      box.replaceChildren(el("p", { class: "muted" }, "no trace"));
      return;
    }
    const timings = Object.entries(trace.timings_ms || {});
    const longest = Math.max(1, ...timings.map(([, v]) => v));
    box.replaceChildren(
      ...[el("h3", {}, "Stage timings"),
      el("table", { class: "grid timings" }, el("tbody", {},
        timings.map(([name, ms]) => el("tr", {},
          el("td", {}, name),
          el("td", { class: "bar-cell" }, el("span", { class: "timing-bar", style: `width:${(100 * ms) / longest}%` })),
          el("td", { class: "num" }, `${Number(ms).toFixed(1)} ms`))))),
      trace.time_range
        ? el("p", { class: "muted small" }, `time range “${trace.time_range.expression}”: ${when(trace.time_range.start)} → ${when(trace.time_range.end)}`)
        : null,
      el("h3", {}, "Retrievers"),
      el("div", { class: "paths" }, Object.entries(trace.paths).map(([name, path]) =>
        el("details", { class: "path", open: path.count > 0 },
          el("summary", {}, el("b", {}, name), ` ${path.count} hits · ${Number(path.ms).toFixed(1)} ms`,
            path.ran ? "" : " · skipped", path.note ? ` · ${path.note}` : ""),
          el("ol", { class: "ranked" }, path.results.slice(0, 10).map((r) =>
            el("li", {}, el("span", { class: "score" }, r.score.toFixed(3)), " ",
              texts.get(r.id) || el("code", { class: "muted" }, r.id.slice(0, 8)))))))),
      el("p", { class: "muted small" },
        `${trace.candidates.length} candidates fused (RRF) → ${trace.selected.length} selected within ${trace.max_tokens} tokens`),
      ].filter(Boolean),
    );
  }
}
