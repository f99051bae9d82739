"""The `memora` command. Each command, or group of commands, lives in the module named for it
and registers itself here.

Heavy modules are imported inside the commands so that `memora worker-ready` (an exec probe) and
`memora --help` start quickly, and so that `memora worker` can set PROMETHEUS_MULTIPROC_DIR before
prometheus-client is imported (tests/unit/test_cli_startup.py).
"""

from __future__ import annotations

import typer

from services.cli import (
    db,
    demo,
    jobs,
    operations,
    portability,
    reembed,
    serve,
    simulation,
    status,
    tenants,
    worker,
)
from services.cli.backfill import command as backfill
from services.cli.bench import command as bench

app = typer.Typer(help="Memora: long-term memory for conversational agents.", no_args_is_help=True)
backfill.register(app)  # backfill PATH
status.register(app)  # status
worker.register(app)  # worker, worker-ready
tenants.register(app)  # tenants create|list|delete, keys create|list|revoke
jobs.register(app)  # jobs list|run (periodic jobs, run once now), repair, evolve
operations.register(app)  # ops list|retry
db.register(app)  # db wait
simulation.register(app)  # seed FILE, mcp --agent ID
serve.register(app)  # serve, migrate
demo.register(app)  # demo
bench.register(app)  # bench locomo|longmemeval FILE
portability.register(app)  # export -o FILE [--agent ID], import FILE
reembed.register(app)  # reembed --model NAME | --status | --abandon


@app.callback()
def _report_environment() -> None:
    from memora.basics.config import report_environment

    report_environment()  # an unknown MEMORA_* variable, with the nearest known name


if __name__ == "__main__":
    app()
