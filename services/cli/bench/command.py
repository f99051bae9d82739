"""`memora bench locomo FILE` and `memora bench longmemeval FILE`: the seed's benchmark runners
against a running server (services/cli/bench/runner.py; docs/benchmarks.md).

Light to import: the client, the datasets and the judge are imported when a command runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from services.cli.bench.dataset import Dataset

console = Console(stderr=True)
bench_app = typer.Typer(
    help="Benchmarks (LoCoMo, LongMemEval) against a running server.", no_args_is_help=True
)

DataFile = Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="the dataset (JSON)")]
BaseUrl = Annotated[
    str | None,
    typer.Option(help="the server's write API (env MEMORA_API_URL; default MEMORA_HOST:PORT)"),
]
ApiKey = Annotated[str | None, typer.Option(help="API key, when the server requires one")]
MaxQuestions = Annotated[int | None, typer.Option(min=1, help="ask at most this many")]
SkipIngestion = Annotated[
    bool, typer.Option(help="ask the agents an earlier run ingested; ingest nothing")
]
UseThink = Annotated[
    bool,
    typer.Option(help="answer through think and grade with the judge LLM (accuracy, F1)"),
]
FollowUp = Annotated[
    bool,
    typer.Option(
        help="search with an LLM-planned follow-up round (the server needs an LLM; its calls "
        "are counted per question)"
    ),
]
Out = Annotated[Path | None, typer.Option(help="write the results (JSON) to this file")]
TopK = Annotated[int, typer.Option(min=1, max=200, help="memories searched per question")]
ThinkTopK = Annotated[int, typer.Option(min=1, max=100, help="memories think answers from")]
Reranker = Annotated[str, typer.Option(help="heuristic or cross-encoder")]
WaitTimeout = Annotated[float, typer.Option(help="seconds to wait for each ingestion")]
Timeout = Annotated[float, typer.Option(help="seconds per request (search, think)")]
HEADLINE = (
    "accuracy", "f1", "recall@5", "recall@10", "recall@50", "mrr", "session/recall_any@5",
    "session/recall_all@5", "session/ndcg_any@5", "turn/recall_any@10", "turn/ndcg_any@10",
)  # fmt: skip


def locomo(
    data: DataFile,
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
    max_conversations: Annotated[
        int | None, typer.Option(min=1, help="the first N conversations")
    ] = None,
    max_questions: Annotated[
        int | None, typer.Option(min=1, help="the first N questions of each conversation")
    ] = None,
    skip_ingestion: SkipIngestion = False,
    use_think: UseThink = False,
    follow_up: FollowUp = False,
    out: Out = None,
    top_k: TopK = 50,
    think_top_k: ThinkTopK = 20,
    reranker: Reranker = "heuristic",
    agent_prefix: Annotated[str, typer.Option(help="agent id = prefix + sample_id")] = "locomo-",
    wait_timeout: WaitTimeout = 600.0,
    timeout: Timeout = 120.0,
) -> None:
    """LoCoMo: recall@k and MRR of the evidence turns; with --use-think, judged answers."""
    from services.cli.bench import locomo as reader

    options = dict(locals())
    _run(lambda: reader.load(data, agent_prefix, max_conversations, max_questions), options)


def longmemeval(
    data: DataFile,
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
    max_questions: Annotated[
        int | None,
        typer.Option("--max-questions", "--max-instances", min=1, help="the first N instances"),
    ] = None,
    skip_ingestion: SkipIngestion = False,
    use_think: UseThink = False,
    follow_up: FollowUp = False,
    out: Out = None,
    top_k: TopK = 50,
    think_top_k: ThinkTopK = 20,
    reranker: Reranker = "heuristic",
    agent_prefix: Annotated[str, typer.Option(help="agent id = prefix + question_id")] = "lme-",
    wait_timeout: WaitTimeout = 600.0,
    timeout: Timeout = 120.0,
) -> None:
    """LongMemEval: recall_any/recall_all/ndcg_any@k at session and turn level; with
    --use-think, judged answers (one agent per instance: its own haystack)."""
    from services.cli.bench import longmemeval as reader

    options = dict(locals())
    _run(lambda: reader.load(data, agent_prefix, max_questions), options)


def _run(load: Any, o: dict[str, Any]) -> None:
    from memora.basics.config import Settings
    from services.cli.bench import runner
    from services.cli.bench.dataset import DatasetError
    from services.cli.bench.judge import Judge, judge_settings

    if o["reranker"] not in ("heuristic", "cross-encoder"):
        raise typer.BadParameter("--reranker must be heuristic or cross-encoder")
    settings = Settings()
    judge = None
    if o["use_think"]:
        try:
            judged_by = judge_settings(settings)
        except ValueError as exc:
            _fail(str(exc))
        if judged_by is None:
            _fail(
                "--use-think needs a judge LLM: set MEMORA_JUDGE_LLM_BASE_URL/_API_KEY/_MODEL "
                "(or JUDGE_LLM_*), or the main MEMORA_LLM_BASE_URL/MEMORA_LLM_API_KEY"
            )
        judge = Judge(judged_by)
    key = o["api_key"] or (settings.api_key.get_secret_value() if settings.api_key else None)
    options = runner.RunOptions(
        base_url=o["base_url"] or settings.resolved_api_url, api_key=key, top_k=o["top_k"],
        think_top_k=o["think_top_k"], reranker=o["reranker"], use_think=o["use_think"],
        follow_up=o["follow_up"], skip_ingestion=o["skip_ingestion"],
        wait_timeout=o["wait_timeout"], request_timeout=o["timeout"],
    )  # fmt: skip
    try:
        dataset: Dataset = load()
        results = runner.run(dataset, o["data"], options, judge, lambda s: console.print(s))
    except (DatasetError, runner.BenchError) as exc:
        _fail(str(exc))
    _print(results)
    if o["out"] is not None:
        runner.write(results, o["out"])
        console.print(f"results written to {o['out']}")


def _fail(message: str) -> NoReturn:
    console.print(f"[red]error:[/red] {message}")
    raise typer.Exit(2)


def _print(results: dict[str, Any]) -> None:
    shown = [m for m in HEADLINE if m in results["metric_names"]]
    table = Table(title=f"{results['benchmark']} ({results['mode']})")
    for column in ("category", "questions", *shown):
        table.add_column(column, justify="left" if column == "category" else "right")
    rows = {"overall": results["overall"], **results["categories"]}
    for name, figures in rows.items():
        cells = [f"{figures[m]:.3f}" if m in figures else "-" for m in shown]
        table.add_row(name, str(figures["questions"]), *cells)
    Console().print(table)


def register(app: typer.Typer) -> None:
    bench_app.command("locomo")(locomo)
    bench_app.command("longmemeval")(longmemeval)
    app.add_typer(bench_app, name="bench")
