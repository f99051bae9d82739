"""Consistency check and repair (seed 002 §7.7): does everything derived from the messages
still match them?

Found: chunks that cover a message that is gone (or of a retired generation), units none of
whose source messages exists, messages no live chunk covers (never indexed, or their chunk
lost), chunks whose messages changed since they were built (stale), and units left without
an embedding. Documents an operation is working on are left out (their work is in flight).

Repair deletes the orphaned and stale chunks and the orphaned units (with their links,
entity references and access counts), then creates one `repair` operation per affected
document, which embeds its units that have no vector and indexes its messages that no chunk
covers. Nothing else is touched. Each kind is examined up to `limit` rows per run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any
from uuid import UUID

from psycopg import Connection

from memora.basics.stages import OperationKind, Stage, first_stage
from memora.store import chunks, documents, entities, messages, operations, units

FINDINGS = ("orphaned_chunks", "orphaned_units", "unindexed_messages", "stale_chunks",
            "unembedded_units")  # fmt: skip


@dataclass
class Report:
    found: dict[str, list[dict[str, Any]]]  # finding -> rows (id, document_pk)
    repaired: dict[str, int] = field(default_factory=dict)
    operations: list[tuple[UUID, Stage]] = field(default_factory=list)  # to enqueue

    @property
    def counts(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.found.items()}

    @property
    def clean(self) -> bool:
        return not any(self.found.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "consistent": self.clean,
            "found": self.counts,
            "ids": {k: [str(r["id"]) for r in v[:100]] for k, v in self.found.items()},
            "repaired": self.repaired,
            "operations": [str(op) for op, _ in self.operations],
        }


def check(
    conn: Connection[Any],
    agent_key: str | None,
    roles: list[str] | None,
    limit: int = 10_000,
    exclude: Sequence[str] = (),
) -> Report:
    """`roles`: those the conversation index covers (Settings.indexed_roles); None when the
    index is turned off, so that messages no chunk covers are not findings. Messages matching
    an `exclude` pattern are not indexed, so not findings either."""
    return Report(
        {
            "orphaned_chunks": chunks.orphaned(conn, agent_key, limit),
            "orphaned_units": messages.orphaned_units(conn, agent_key, limit),
            "unindexed_messages": (
                chunks.unindexed(conn, agent_key, roles, limit, exclude)
                if roles is not None
                else []
            ),
            "stale_chunks": chunks.stale(conn, agent_key, limit),
            "unembedded_units": [asdict(u) for u in units.unembedded(conn, agent_key, limit)],
        }
    )


def repair(
    conn: Connection[Any],
    agent_key: str | None,
    roles: list[str] | None,
    limit: int = 10_000,
    exclude: Sequence[str] = (),
) -> Report:
    """Check, then fix what was found, in one transaction (committed by the caller); the
    caller enqueues the report's operations after the commit."""
    report = check(conn, agent_key, roles, limit, exclude)
    if report.clean:
        return report
    found = report.found
    dropped = [r["id"] for r in found["orphaned_chunks"] + found["stale_chunks"]]
    report.repaired["chunks_deleted"] = chunks.delete_ids(conn, list(dict.fromkeys(dropped)))
    orphans = [r["id"] for r in found["orphaned_units"]]
    report.repaired["unit_sources_deleted"] = messages.delete_dangling_sources(conn, orphans)
    report.repaired["units_deleted"] = messages.purge_units_by_id(conn, orphans)["memory_units"]
    agents = {
        d["agent_id"]
        for d in documents.owners(conn, [r["document_pk"] for r in found["orphaned_units"]])
    }
    report.repaired["entities_deleted"] = sum(entities.delete_orphans(conn, a) for a in agents)
    # Documents left with work for the pipeline: their stale chunks' messages are now
    # uncovered and are indexed with the never-indexed ones; missing vectors are embedded.
    to_redo = {
        r["document_pk"]
        for kind in ("orphaned_chunks", "unindexed_messages", "stale_chunks", "unembedded_units")
        for r in found[kind]
    }
    first = first_stage(OperationKind.REPAIR)
    for doc in documents.owners(conn, sorted(to_redo)):
        op = operations.create_operation_for_key(
            conn,
            doc["agent_id"],
            kind=OperationKind.REPAIR,
            first_stage=first,
            document_pk=doc["id"],
            document_id=doc["document_id"],
            payload={"priority": "live"},
        )
        report.operations.append((op, first))
    report.repaired["operations_created"] = len(report.operations)
    return report
