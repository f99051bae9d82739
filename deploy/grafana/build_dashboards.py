"""Writes the Grafana dashboards in deploy/grafana/dashboards/ from the panel lists below.

    python deploy/grafana/build_dashboards.py

The JSON files are committed (Grafana provisions them as they are); a test checks that they
match this script's output and that every metric they query is defined in memora.basics.metrics.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

OUT = Path(__file__).parent / "dashboards"
# Every panel queries the data source picked in the `datasource` variable, and every series
# selector is narrowed to the `namespace` (Kubernetes; all in compose) and `instance` picked.
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
FILTER = 'namespace=~"$namespace", instance=~"$instance"'
SERIES = re.compile(r"\b((?:memora|flower|redis|pg)_[a-z0-9_]+)(\{[^}]*\})?")
RATE = "$__rate_interval"

Panel = tuple[str, str, list[tuple[str, str]]]  # title, unit, [(expr, legend)]


def quantiles(
    metric: str, by: str, selector: str = "", window: str = "5m"
) -> list[tuple[str, str]]:
    group = f"le, {by}" if by else "le"
    legend = f"{{{{{by}}}}} " if by else ""
    return [
        (
            f"histogram_quantile({q}, sum by ({group}) "
            f"(rate({metric}_bucket{selector}[{window}])))",
            f"{legend}p{int(q * 100)}",
        )
        for q in (0.5, 0.95, 0.99)
    ]


PIPELINE: list[tuple[str, list[Panel]]] = [
    (
        "Throughput",
        [
            (
                "Documents accepted /s",
                "reqps",
                [
                    (
                        f"sum by (outcome, priority) (rate(memora_ingest_documents_total[{RATE}]))",
                        "{{priority}} {{outcome}}",
                    )
                ],
            ),
            (
                "Items accepted /s",
                "ops",
                [
                    (
                        f"sum by (priority) (rate(memora_ingest_items_total[{RATE}]))",
                        "{{priority}}",
                    )
                ],
            ),
            (
                "Stage throughput (tasks done /s)",
                "ops",
                [
                    (
                        f"sum by (stage) (rate(memora_task_successes_total[{RATE}]))",
                        "{{stage}}",
                    )
                ],
            ),
            (
                "Operations completed /s",
                "ops",
                [
                    (
                        f"sum by (priority) (rate(memora_ingest_lag_seconds_count[{RATE}]))",
                        "{{priority}}",
                    )
                ],
            ),
        ],
    ),
    (
        "Lag and queues",
        [
            ("POST → searchable lag", "s", quantiles("memora_ingest_lag_seconds", "priority")),
            ("Queue depth", "short", [("max by (queue) (memora_queue_depth)", "{{queue}}")]),
            (
                "Oldest waiting message by queue",
                "s",
                [("max by (queue) (memora_queue_oldest_age_seconds)", "{{queue}}")],
            ),
            (
                "Operations by status",
                "short",
                [("max by (status) (memora_operations)", "{{status}}")],
            ),
            (
                "Active operations per stage",
                "short",
                [("max by (stage) (memora_operations_active)", "{{stage}}")],
            ),
            (
                "Oldest active operation",
                "s",
                [("max(memora_oldest_active_operation_age_seconds)", "age")],
            ),
        ],
    ),
    (
        "Failures",
        [
            (
                "Task failures /s (final)",
                "ops",
                [
                    (
                        f"sum by (stage, exception) (rate(memora_task_failures_total[{RATE}]))",
                        "{{stage}} {{exception}}",
                    )
                ],
            ),
            (
                "Task retries /s",
                "ops",
                [
                    (
                        f"sum by (stage, exception) (rate(memora_task_retries_total[{RATE}]))",
                        "{{stage}} {{exception}}",
                    )
                ],
            ),
            (
                "Failed operations",
                "short",
                [('max(memora_operations{status="failed"})', "failed")],
            ),
        ],
    ),
    (
        "Stages, embedding and database",
        [
            ("Task duration", "s", quantiles("memora_task_duration_seconds", "stage")),
            (
                "Tasks in progress",
                "short",
                [("sum by (stage) (memora_tasks_in_progress)", "{{stage}}")],
            ),
            (
                "Embedding throughput",
                "ops",
                [
                    (
                        f"sum by (job) (rate(memora_embedding_texts_total[{RATE}]))",
                        "{{job}} texts/s",
                    ),
                    (
                        f"sum by (job) (rate(memora_embedding_texts_total[{RATE}])) / "
                        f"sum by (job) (rate(memora_embedding_duration_seconds_sum[{RATE}]))",
                        "{{job}} texts/s while embedding",
                    ),
                ],
            ),
            ("Embedding batch size", "short", quantiles("memora_embedding_batch_size", "job")),
            (
                "Database pool connections",
                "short",
                [
                    (
                        'sum by (job, pool) (memora_db_pool_connections{state="in_use"})',
                        "{{job}} {{pool}} in use",
                    ),
                    (
                        'sum by (job, pool) (memora_db_pool_connections{state="max"})',
                        "{{job}} {{pool}} max",
                    ),
                    (
                        "sum by (job, pool) (memora_db_pool_requests_waiting)",
                        "{{job}} {{pool}} waiting",
                    ),
                ],
            ),
        ],
    ),
]

# Periodic jobs (memora.jobs: reconcile and the memory evolution worker). Their `job` label
# collides with Prometheus' target label, so scraped series carry it as `exported_job`.
JOBS: list[tuple[str, list[Panel]]] = [
    (
        "Periodic jobs and memory evolution",
        [
            (
                "Job runs /s",
                "ops",
                [
                    (
                        f"sum by (exported_job, outcome) (rate(memora_job_runs_total[{RATE}]))",
                        "{{exported_job}} {{outcome}}",
                    )
                ],
            ),
            (
                "Memories examined and changed /s",
                "ops",
                [
                    (
                        f"sum by (exported_job) (rate(memora_job_examined_total[{RATE}]))",
                        "{{exported_job}} examined",
                    ),
                    (
                        f"sum by (exported_job) (rate(memora_job_changed_total[{RATE}]))",
                        "{{exported_job}} changed",
                    ),
                ],
            ),
            (
                "Job duration",
                "s",
                quantiles("memora_job_duration_seconds", "exported_job", window="1h"),
            ),
            (
                "Memories removed by the per-agent limits (last day)",
                "short",
                [
                    (
                        "sum by (action) (increase(memora_limit_actions_total[1d]))",
                        "{{action}}",
                    )
                ],
            ),
        ],
    ),
]

SEARCH: list[tuple[str, list[Panel]]] = [
    (
        "Search",
        [
            (
                "Search latency",
                "s",
                quantiles(
                    "memora_http_request_duration_seconds",
                    "",
                    '{service="query", route="/api/search"}',
                ),
            ),
            (
                "Query service requests /s",
                "reqps",
                [
                    (
                        "sum by (route, status) "
                        f'(rate(memora_http_requests_total{{service="query"}}[{RATE}]))',
                        "{{route}} {{status}}",
                    )
                ],
            ),
            (
                "Think latency",
                "s",
                quantiles(
                    "memora_http_request_duration_seconds",
                    "",
                    '{service="query", route="/api/think"}',
                ),
            ),
        ],
    ),
    (
        "Read replica",
        [
            (
                "Replica lag (-1: not answering)",
                "s",
                [("max(memora_read_replica_lag_seconds)", "lag")],
            ),
            (
                "Reads /s by where they went and why",
                "reqps",
                [
                    (
                        f"sum by (source, reason) (rate(memora_reads_total[{RATE}]))",
                        "{{source}}: {{reason}}",
                    )
                ],
            ),
            (
                "after_operation wait",
                "s",
                quantiles("memora_read_after_operation_wait_seconds", "", ""),
            ),
        ],
    ),
    (
        "Write API and errors",
        [
            (
                "Write API latency p95 by route",
                "s",
                [
                    (
                        "histogram_quantile(0.95, sum by (le, route) "
                        '(rate(memora_http_request_duration_seconds_bucket{service="api"}[5m])))',
                        "{{route}}",
                    )
                ],
            ),
            (
                "5xx answers /s",
                "reqps",
                [
                    (
                        "sum by (service, route) "
                        f'(rate(memora_http_requests_total{{status=~"5.."}}[{RATE}]))',
                        "{{service}} {{route}}",
                    )
                ],
            ),
            (
                "Requests in progress",
                "short",
                [("sum by (service) (memora_http_requests_in_progress)", "{{service}}")],
            ),
        ],
    ),
]

LLM: list[tuple[str, list[Panel]]] = [
    (
        "LLM usage",
        [
            (
                "LLM calls /s",
                "reqps",
                [
                    (
                        f"sum by (operation, outcome) (rate(memora_llm_requests_total[{RATE}]))",
                        "{{operation}} {{outcome}}",
                    )
                ],
            ),
            (
                "Tokens /s",
                "short",
                [
                    (
                        f"sum by (operation, kind) (rate(memora_llm_tokens_total[{RATE}]))",
                        "{{operation}} {{kind}}",
                    )
                ],
            ),
            (
                "Tokens in the last 24 h by model",
                "short",
                [
                    (
                        "sum by (model, kind) (increase(memora_llm_tokens_total[24h]))",
                        "{{model}} {{kind}}",
                    )
                ],
            ),
            (
                "LLM latency",
                "s",
                quantiles("memora_llm_request_duration_seconds", "operation"),
            ),
            (
                "Failed LLM attempts /s",
                "reqps",
                [
                    (
                        "sum by (operation, outcome) "
                        f'(rate(memora_llm_requests_total{{outcome!="ok"}}[{RATE}]))',
                        "{{operation}} {{outcome}}",
                    )
                ],
            ),
        ],
    ),
]


INFRA: list[tuple[str, list[Panel]]] = [
    (
        "Beat and workers",
        [
            (
                "Seconds since beat's last heartbeat",
                "s",
                [("time() - max(memora_beat_last_heartbeat_timestamp_seconds)", "age")],
            ),
            ("Workers online (Flower)", "short", [("sum(flower_worker_online)", "online")]),
            (
                "Tasks executing (Flower)",
                "short",
                [
                    (
                        "sum by (worker) (flower_worker_number_of_currently_executing_tasks)",
                        "{{worker}}",
                    )
                ],
            ),
            (
                "Task events /s (Flower)",
                "ops",
                [(f"sum by (type) (rate(flower_events_total[{RATE}]))", "{{type}}")],
            ),
            ("Task runtime (Flower)", "s", quantiles("flower_task_runtime_seconds", "task")),
        ],
    ),
    (
        "Redis (broker)",
        [
            ("Redis up", "short", [("min(redis_up)", "up")]),
            (
                "Memory",
                "bytes",
                [
                    ("sum(redis_memory_used_bytes)", "used"),
                    ("sum(redis_memory_max_bytes)", "max (0: no limit)"),
                ],
            ),
            ("Connected clients", "short", [("sum(redis_connected_clients)", "clients")]),
            (
                "Commands /s",
                "ops",
                [(f"sum(rate(redis_commands_processed_total[{RATE}]))", "commands")],
            ),
            (
                "Evicted keys /s (must stay 0: queues live here)",
                "ops",
                [(f"sum(rate(redis_evicted_keys_total[{RATE}]))", "evicted")],
            ),
        ],
    ),
    (
        "PostgreSQL",
        [
            ("PostgreSQL up", "short", [("min(pg_up)", "up")]),
            (
                "Connections by state",
                "short",
                [('sum by (state) (pg_stat_activity_count{datname="memora"})', "{{state}}")],
            ),
            (
                "Transactions /s",
                "ops",
                [
                    (
                        f'sum(rate(pg_stat_database_xact_commit{{datname="memora"}}[{RATE}]))',
                        "commits",
                    ),
                    (
                        f'sum(rate(pg_stat_database_xact_rollback{{datname="memora"}}[{RATE}]))',
                        "rollbacks",
                    ),
                ],
            ),
            (
                "Buffer cache hit ratio",
                "percentunit",
                [
                    (
                        f'sum(rate(pg_stat_database_blks_hit{{datname="memora"}}[{RATE}])) / '
                        f'(sum(rate(pg_stat_database_blks_hit{{datname="memora"}}[{RATE}])) + '
                        f'sum(rate(pg_stat_database_blks_read{{datname="memora"}}[{RATE}])))',
                        "hit ratio",
                    )
                ],
            ),
            (
                "Database size",
                "bytes",
                [('max(pg_database_size_bytes{datname="memora"})', "memora")],
            ),
            (
                "Deadlocks /s",
                "ops",
                [
                    (
                        f'sum(rate(pg_stat_database_deadlocks{{datname="memora"}}[{RATE}]))',
                        "deadlocks",
                    )
                ],
            ),
        ],
    ),
]


def filtered(expr: str) -> str:
    """`expr` with FILTER added to every series selector."""

    def narrow(match: re.Match[str]) -> str:
        inner = (match.group(2) or "{}")[1:-1]
        return f"{match.group(1)}{{{inner + ', ' if inner else ''}{FILTER}}}"

    return SERIES.sub(narrow, expr)


def variables() -> list[dict[str, Any]]:
    def query(name: str, label: str) -> dict[str, Any]:
        source = "up" if name == "namespace" else 'up{namespace=~"$namespace"}'
        return {
            "name": name,
            "label": name.capitalize(),
            "type": "query",
            "datasource": DATASOURCE,
            "query": {"query": f"label_values({source}, {label})", "refId": name},
            "definition": f"label_values({source}, {label})",
            "refresh": 2,
            "multi": True,
            "includeAll": True,
            "allValue": ".*",  # also matches series without the label (compose: no namespace)
            "current": {"text": "All", "value": "$__all"},
            "sort": 1,
        }

    return [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            "current": {"text": "Prometheus", "value": "prometheus"},
        },
        query("namespace", "namespace"),
        query("instance", "instance"),
    ]


def dashboard(uid: str, title: str, rows: list[tuple[str, list[Panel]]]) -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    y = 0
    next_id = 1
    for row_title, row_panels in rows:
        panels.append(
            {
                "id": next_id,
                "type": "row",
                "title": row_title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
                "panels": [],
            }
        )
        next_id += 1
        y += 1
        for i, (panel_title, unit, targets) in enumerate(row_panels):
            panels.append(
                {
                    "id": next_id,
                    "type": "timeseries",
                    "title": panel_title,
                    "datasource": DATASOURCE,
                    "gridPos": {"h": 8, "w": 8, "x": (i % 3) * 8, "y": y + (i // 3) * 8},
                    "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                    "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
                    "targets": [
                        {
                            "refId": chr(ord("A") + n),
                            "datasource": DATASOURCE,
                            "expr": filtered(expr),
                            "legendFormat": legend,
                        }
                        for n, (expr, legend) in enumerate(targets)
                    ],
                }
            )
            next_id += 1
        y += ((len(row_panels) + 2) // 3) * 8
    return {
        "uid": uid,
        "title": title,
        "tags": ["memora"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": False,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": variables()},
        "annotations": {"list": []},
        "panels": panels,
    }


DASHBOARDS = {
    "memora-pipeline.json": dashboard("memora-pipeline", "Memora · pipeline", PIPELINE + JOBS),
    "memora-search.json": dashboard("memora-search", "Memora · search and API", SEARCH),
    "memora-llm.json": dashboard("memora-llm", "Memora · LLM usage", LLM),
    "memora-infra.json": dashboard(
        "memora-infra", "Memora · beat, workers, Redis and PostgreSQL", INFRA
    ),
}


def render(name: str) -> str:
    return json.dumps(DASHBOARDS[name], indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in DASHBOARDS:
        (OUT / name).write_text(render(name), encoding="utf-8")
        print(f"wrote {OUT / name}")


if __name__ == "__main__":
    main()
