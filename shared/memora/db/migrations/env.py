"""Alembic environment: runs revisions online against the configured URL."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

config = context.config


def run_migrations_online() -> None:
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "", poolclass=pool.NullPool)
    with engine.connect() as connection:
        # One migrator at a time, even when several pods start together.
        connection.exec_driver_sql("SELECT pg_advisory_lock(74210001)")
        try:
            context.configure(connection=connection, target_metadata=None)
            with context.begin_transaction():
                context.run_migrations()
        finally:
            connection.exec_driver_sql("SELECT pg_advisory_unlock(74210001)")
            connection.commit()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run `memora migrate`")
run_migrations_online()
