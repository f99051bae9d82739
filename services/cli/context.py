"""The application context of a CLI command (memora.pipeline.context.AppContext): what the use
cases it calls take first, built once for the command and closed after it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from memora.basics.config import Settings

if TYPE_CHECKING:
    from memora.pipeline.context import AppContext


@contextmanager
def cli_context(settings: Settings, name: str) -> Iterator[AppContext]:
    """A small pool across tenants (operator commands) and the Celery queues of
    MEMORA_BROKER_URL for the work a command hands off (its webhook deliveries, if any, are
    left to the sweep). Imported here, not at the top: every `memora` command loads the CLI's
    modules, and `memora worker` must set PROMETHEUS_MULTIPROC_DIR and its settings before
    prometheus-client and the Celery app are first imported (services/cli/main.py)."""
    from memora.db.pool import make_pool
    from memora.pipeline.context import AppContext
    from services.workers.celery_app import create_celery
    from services.workers.dispatch import CeleryStages

    pool = make_pool(
        settings.require_database_url(),
        min_size=1,
        max_size=2,
        name=name,
        row_security=settings.row_security,
    )
    try:
        yield AppContext(settings, pool, CeleryStages(create_celery(settings)))
    finally:
        pool.close()
