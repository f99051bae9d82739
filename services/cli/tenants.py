"""`memora tenants …` and `memora keys …`: tenants and API keys, straight in the database
(MEMORA_DATABASE_URL), for the first admin key and for operators (docs/security.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

import typer
from rich.console import Console
from rich.table import Table

from memora.basics.config import Settings
from memora.basics.models import utcnow
from memora.db.pool import connect_system
from memora.store import tenants

console = Console(stderr=True)
tenants_app = typer.Typer(help="Tenants: create, list, delete.", no_args_is_help=True)
keys_app = typer.Typer(help="API keys: create, list, revoke.", no_args_is_help=True)
JsonOption = Annotated[bool, typer.Option("--json", help="print JSON")]


@contextmanager
def _connection() -> Iterator[Any]:
    """A connection across tenants, in a transaction committed when the block ends without
    an error."""
    conn = connect_system(Settings())
    try:
        with conn.transaction():
            yield conn
    finally:
        conn.close()


def _print(rows: list[dict[str, Any]], columns: list[str], as_json: bool) -> None:
    if as_json:
        print(json.dumps(rows, default=str))
        return
    table = Table(*columns)
    for row in rows:
        table.add_row(*("" if row[c] is None else str(row[c]) for c in columns))
    Console().print(table)


@tenants_app.command("create")
def create_tenant(
    tenant_id: Annotated[str, typer.Argument(help="letters, digits and _.:@- (no /)")],
    name: Annotated[str, typer.Option(help="a display name")] = "",
) -> None:
    try:
        with _connection() as conn:
            row = tenants.create_tenant(conn, tenant_id, name)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    except tenants.TenantExists as exc:
        console.print(f"[red]tenant {tenant_id} already exists[/]")
        raise typer.Exit(1) from exc
    console.print(f"[green]created tenant {row['tenant_id']}[/]")


@tenants_app.command("list")
def list_tenants(json_output: JsonOption = False) -> None:
    with _connection() as conn:
        rows = tenants.list_tenants(conn)
    _print(rows, ["tenant_id", "name", "agents", "keys", "created_at"], json_output)


@tenants_app.command("delete")
def delete_tenant(
    tenant_id: str,
    yes: Annotated[bool, typer.Option("--yes", help="do not ask for confirmation")] = False,
) -> None:
    """Hard delete of every agent of the tenant with all its data, its keys and the tenant
    ("default" is emptied but stays)."""
    if not yes:
        typer.confirm(f"Delete tenant {tenant_id} and ALL its data?", abort=True)
    with _connection() as conn:
        counts = tenants.delete_tenant(conn, tenant_id)
    console.print(f"deleted {tenant_id}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))


@keys_app.command("create")
def create_key(
    tenant_id: str,
    admin: Annotated[bool, typer.Option(help="may manage tenants and keys")] = False,
    name: Annotated[str, typer.Option(help="a label, e.g. who uses it")] = "",
    expires_in: Annotated[
        str | None, typer.Option(help='it stops working after this long: "30d", "12h", "2w"')
    ] = None,
    expires_at: Annotated[
        str | None, typer.Option(help="it stops working then (ISO 8601; UTC unless a zone)")
    ] = None,
) -> None:
    """Print a new key on stdout: it is shown this once (only its hash is stored)."""
    if expires_in is not None and expires_at is not None:
        raise typer.BadParameter("give --expires-in or --expires-at, not both")
    try:
        expiry = (
            utcnow() + tenants.parse_duration(expires_in)
            if expires_in is not None
            else _aware(datetime.fromisoformat(expires_at))
            if expires_at is not None
            else None
        )
        with _connection() as conn:
            new = tenants.create_key(conn, tenant_id, is_admin=admin, name=name, expires_at=expiry)
    except tenants.UnknownTenant as exc:
        console.print(f"[red]no tenant {tenant_id}[/] (memora tenants create {tenant_id})")
        raise typer.Exit(1) from exc
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    until = f", expires {new.expires_at.isoformat()}" if new.expires_at else ""
    console.print(f"key {new.id} ({new.prefix}…) for tenant {tenant_id}{until}; keep it secret:")
    print(new.key)


def _aware(moment: datetime) -> datetime:
    """A time without a zone is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@keys_app.command("list")
def list_keys(
    tenant: Annotated[str | None, typer.Option(help="only this tenant's keys")] = None,
    json_output: JsonOption = False,
) -> None:
    with _connection() as conn:
        rows = tenants.list_keys(conn, tenant)
    columns = ["id", "tenant_id", "prefix", "name", "is_admin", "created_at", "expires_at"]
    columns.append("revoked_at")
    _print(rows, columns, json_output)


@keys_app.command("revoke")
def revoke_key(key_id: UUID) -> None:
    with _connection() as conn:
        row = tenants.revoke_key(conn, key_id)
    if row is None:
        console.print(f"[red]no key {key_id}[/]")
        raise typer.Exit(1)
    console.print(f"revoked {key_id} ({row['prefix']}…) at {row['revoked_at']}")


def register(app: typer.Typer) -> None:
    app.add_typer(tenants_app, name="tenants")
    app.add_typer(keys_app, name="keys")
