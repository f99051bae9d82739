// Benchmark results (`memora bench … --out`): a file from the server's folder
// (GET /api/bench/results) or one opened from disk; figures overall and per category, then
// each question with its expected answer, the answer, and the retrieved memories, evidence marked.

import { api } from "./api.js";
import { $, el, toast, when } from "./util.js";

const HEADLINE = [
  "accuracy", "f1", "recall@5", "recall@10", "recall@50", "mrr",
  "session/recall_any@5", "session/recall_all@5", "session/ndcg_any@5",
  "turn/recall_any@10", "turn/recall_all@10", "turn/ndcg_any@10",
];
const SHOWN = 200; // questions drawn at once; the filter narrows the rest

const figure = (value) => (typeof value === "number" ? value.toFixed(3) : "–");

function missed(q) {
  if (typeof q.correct === "boolean") return !q.correct;
  return q.evidence.length > 0 && !q.retrieved.slice(0, 10).some((m) => m.evidence);
}

export class ResultsView {
  constructor() {
    this.results = null;
    $("#results-file").addEventListener("change", (e) => e.target.value && this.open(e.target.value));
    $("#results-refresh").addEventListener("click", () => this.load());
    $("#results-upload").addEventListener("change", (e) => e.target.files[0] && this.upload(e.target.files[0]));
    for (const id of ["#results-category", "#results-missed", "#results-filter"]) {
      $(id).addEventListener("input", () => this.showQuestions());
    }
  }

  async load() {
    const notice = $("#results-notice");
    try {
      const data = await api("/api/bench/results");
      notice.hidden = true;
      $("#results-file").replaceChildren(el("option", { value: "" }, data.files.length ? "—" : "no files yet"),
        ...data.files.map((f) => el("option", { value: f.name }, `${f.name} · ${when(f.modified)}`)));
    } catch (error) {
      notice.hidden = false;
      notice.textContent = error.code === "bench_results_not_configured"
        ? "The server has no results folder (MEMORA_BENCH_RESULTS_DIR): open a results file instead."
        : error.message;
    }
  }

  async open(name) {
    try {
      this.show(await api(`/api/bench/results/${encodeURIComponent(name)}`), name);
    } catch (error) {
      toast(error.message, "error");
    }
  }

  async upload(file) {
    let data;
    try {
      data = JSON.parse(await file.text());
    } catch {
      toast(`${file.name} is not JSON`, "error");
      return;
    }
    if (!data || !Array.isArray(data.questions)) {
      toast(`${file.name} is not a results file of memora bench`, "error");
      return;
    }
    this.show(data, `${file.name} (opened from disk)`);
  }

  show(results, source) {
    this.results = results;
    $("#results-source").textContent = source;
    const names = results.metric_names || [];
    const columns = HEADLINE.filter((m) => names.includes(m));
    const rows = [["overall", results.overall], ...Object.entries(results.categories || {})];
    $("#results-summary").replaceChildren(
      el("h2", {}, `${results.benchmark} · ${results.mode} `,
        el("span", { class: "muted" }, `${results.dataset || ""} · ${when(results.started_at)} · ${results.base_url || ""}`)),
      el("div", { class: "figures" }, columns.map((m) =>
        el("div", { class: "figure" }, el("b", {}, figure(results.overall[m])), el("span", {}, m)))),
      el("table", { class: "grid", id: "results-categories" },
        el("thead", {}, el("tr", {}, el("th", {}, "category"), el("th", { class: "num" }, "questions"),
          columns.map((m) => el("th", { class: "num" }, m)))),
        el("tbody", {}, rows.map(([name, f]) => el("tr", { "data-category": name },
          el("td", {}, el("b", {}, name)), el("td", { class: "num" }, f.questions),
          columns.map((m) => el("td", { class: "num" }, figure(f[m]))))))),
      names.length > columns.length
        ? el("details", { class: "all-figures" }, el("summary", {}, `all ${names.length} figures`),
          el("table", { class: "grid" }, el("tbody", {}, names.map((m) =>
            el("tr", {}, el("td", {}, m), el("td", { class: "num" }, figure(results.overall[m])))))))
        : null,
    );
    $("#results-category").replaceChildren(el("option", { value: "" }, "all categories"),
      ...Object.keys(results.categories || {}).map((c) => el("option", { value: c }, c)));
    $("#results-tools").hidden = false;
    this.showQuestions();
  }

  showQuestions() {
    if (!this.results) return;
    const category = $("#results-category").value;
    const onlyMissed = $("#results-missed").checked;
    const text = $("#results-filter").value.trim().toLowerCase();
    const chosen = this.results.questions.filter((q) => (!category || q.category === category)
      && (!onlyMissed || missed(q)) && (!text || q.question.toLowerCase().includes(text)));
    $("#results-count").textContent = `${chosen.length} of ${this.results.questions.length} questions`
      + (chosen.length > SHOWN ? ` (first ${SHOWN} shown)` : "");
    $("#results-questions").replaceChildren(...chosen.slice(0, SHOWN).map((q) => this.question(q)));
  }

  question(q) {
    const verdict = typeof q.correct === "boolean"
      ? el("span", { class: `badge ${q.correct ? "completed" : "failed"}` }, q.correct ? "correct" : "wrong") : null;
    const found = q.retrieved.filter((m) => m.evidence).length;
    const item = el("details", { class: "question", "data-question": q.id },
      el("summary", {}, el("span", { class: "pill" }, q.category), " ", el("b", {}, q.question), " ", verdict,
        el("span", { class: "muted small" }, ` ${found} evidence of ${q.retrieved.length} retrieved`)));
    item.addEventListener("toggle", () => item.open && item.children.length === 1 && item.append(this.detail(q)), { once: false });
    return item;
  }

  detail(q) {
    const metrics = Object.entries({ ...(q.metrics_answer || {}), ...q.metrics });
    return el("div", { class: "question-body" },
      el("dl", {},
        el("dt", {}, "expected"), el("dd", { class: "expected" }, q.expected_answer),
        q.answer !== undefined ? [el("dt", {}, "answer"), el("dd", { class: "answer" }, q.answer)] : null,
        q.judge !== undefined ? [el("dt", {}, "judge"), el("dd", {}, q.judge)] : null,
        el("dt", {}, "evidence"), el("dd", {}, q.evidence.length ? q.evidence.join(", ") : "none (not scored)"),
        q.reference_time ? [el("dt", {}, "asked"), el("dd", {}, when(q.reference_time))] : null,
        metrics.length ? [el("dt", {}, "figures"), el("dd", { class: "small" },
          metrics.map(([m, v]) => `${m} ${figure(v)}`).join(" · "))] : null),
      el("ol", { class: "retrieved" }, q.retrieved.map((m) =>
        el("li", { class: m.evidence ? "evidence" : "", "data-memory": m.id },
          m.evidence ? el("span", { class: "badge completed" }, "evidence") : null, " ",
          el("span", {}, m.text), " ", el("code", { class: "muted" }, m.turn || m.id.slice(0, 8))))));
  }
}
