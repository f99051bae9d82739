"""Schema migrations through Alembic (raw SQL revisions; no ORM models)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def sqlalchemy_url(url: str) -> str:
    """Alembic talks to PostgreSQL through SQLAlchemy's psycopg 3 dialect."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def alembic_config(url: str, embedding_dim: int) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    cfg.attributes["embedding_dim"] = embedding_dim
    return cfg


def upgrade(url: str, embedding_dim: int, revision: str = "head") -> None:
    command.upgrade(alembic_config(url, embedding_dim), revision)


def downgrade(url: str, embedding_dim: int, revision: str) -> None:
    command.downgrade(alembic_config(url, embedding_dim), revision)
