"""Schema migrations through Alembic (raw SQL revisions; no ORM models)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from memora.basics.config import Settings

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def sqlalchemy_url(url: str) -> str:
    """Alembic talks to PostgreSQL through SQLAlchemy's psycopg 3 dialect."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def alembic_config(url: str, embedding_dim: int, settings: Settings | None = None) -> Config:
    """`settings`: the embedding model the schema's first embedding generation records
    (migration 0037); without them the first process to use the database records its own."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    cfg.attributes["embedding_dim"] = embedding_dim
    if settings is not None:
        cfg.attributes["embedding_provider"] = settings.embedding_provider
        cfg.attributes["embedding_model"] = settings.embedding_model
        remote = settings.embedding_provider != "local"
        cfg.attributes["embedding_base_url"] = settings.embedding_base_url if remote else None
    return cfg


def schema_dim(url: str) -> int | None:
    """The dimension of the schema's vectors (`memory_units.embedding`), None before the first
    migration: once it exists it is the schema's, not the setting's (`memora reembed` changes
    it), and later revisions that name the dimension take it."""
    engine = create_engine(sqlalchemy_url(url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            dim = conn.exec_driver_sql(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = "
                "to_regclass('memory_units') AND attname = 'embedding' AND NOT attisdropped"
            ).scalar()
    finally:
        engine.dispose()
    return int(dim) if dim is not None and dim > 0 else None


def upgrade(
    url: str, embedding_dim: int, revision: str = "head", *, settings: Settings | None = None
) -> None:
    command.upgrade(alembic_config(url, schema_dim(url) or embedding_dim, settings), revision)


def downgrade(url: str, embedding_dim: int, revision: str) -> None:
    command.downgrade(alembic_config(url, embedding_dim), revision)


SchemaState = Literal["missing", "behind", "current", "ahead"]


def head_revision() -> str:
    """The newest revision this code knows."""
    head = ScriptDirectory.from_config(alembic_config("", 0)).get_current_head()
    assert head is not None, "no migrations"
    return head


def schema_state(url: str) -> SchemaState:
    """Where the database's schema stands against this code's head: "ahead" when it carries a
    revision this code does not know (a newer release migrated it; old pods may run on)."""
    script = ScriptDirectory.from_config(alembic_config(url, 0))
    engine = create_engine(sqlalchemy_url(url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            current = MigrationContext.configure(conn).get_current_heads()
    finally:
        engine.dispose()
    if not current:
        return "missing"
    if script.get_current_head() in current:
        return "current"
    known = {r.revision for r in script.walk_revisions()}
    return "ahead" if any(rev not in known for rev in current) else "behind"
