"""The end check of live conversations (the chat users' append mode): per conversation, the
messages the clients got a 202 for, in the order they sent them, against what Memora holds once
the pipeline has drained, seen two ways: the document's items through the API (`GET
/api/agents/{a}/documents/{c}`) and the conversation's message rows in the database (by
position), with the memory units each message is the source of (one per message: the corpus's
turns are never dropped as noise).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import psycopg

from memora_client import APIError, MemoraClient


@dataclass
class Comparison:
    """Acknowledged message ids against stored ones, for one conversation."""

    lost: list[str] = field(default_factory=list)  # acknowledged, not stored
    duplicated: list[str] = field(default_factory=list)  # stored more than once
    extra: list[str] = field(default_factory=list)  # stored, never acknowledged
    in_order: bool = True  # the acknowledged ones are stored in the order they were sent


def compare(acknowledged: list[str], stored: list[str]) -> Comparison:
    counts = Counter(stored)
    sent = set(acknowledged)
    kept = [m for m in dict.fromkeys(stored) if m in sent]
    return Comparison(
        lost=[m for m in acknowledged if m not in counts],
        duplicated=sorted(m for m, n in counts.items() if n > 1),
        extra=[m for m in counts if m not in sent],
        in_order=kept == [m for m in acknowledged if m in counts],
    )


def check(host: str, db_url: str, conversations: list[list[Any]]) -> dict[str, Any]:
    """`conversations`: [agent, conversation, acknowledged ids] as the locust ledger has them.
    Returns counts and up to 20 problems; `ok` only with nothing lost, duplicated or reordered
    either way, and exactly one unit per acknowledged message."""
    rows: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
    agents = sorted({a for a, _, _ in conversations})
    with psycopg.connect(db_url, autocommit=True) as conn:
        for agent, document, message, units in conn.execute(
            "SELECT d.agent_id, d.document_id, m.message_id, "
            "(SELECT count(*) FROM unit_sources s WHERE s.message_pk = m.id) "
            "FROM conversation_messages m JOIN documents d ON d.id = m.document_pk "
            "WHERE d.agent_id = ANY(%s) ORDER BY d.agent_id, d.document_id, m.position",
            (agents,),
        ):
            rows[(agent, document)].append((message, int(units)))
    totals: Counter[str] = Counter()
    problems: list[str] = []
    with MemoraClient(host, timeout=60, max_retries=0) as client:
        for agent, conversation, acknowledged in conversations:
            try:
                items = client.get_document(agent, conversation).items
            except APIError:
                items = []
            db = rows.get((agent, conversation), [])
            views = {
                "items": compare(acknowledged, [str(i.get("message_id")) for i in items]),
                "messages": compare(acknowledged, [m for m, _ in db]),
            }
            sent = set(acknowledged)
            not_one = [m for m, units in db if m in sent and units != 1]
            totals["conversations"] += 1
            totals["messages"] += len(acknowledged)
            totals["units_not_one"] += len(not_one)
            for view, c in views.items():
                totals[f"{view}_lost"] += len(c.lost)
                totals[f"{view}_duplicated"] += len(c.duplicated)
                totals[f"{view}_extra"] += len(c.extra)
                totals[f"{view}_out_of_order"] += not c.in_order
                if c.lost or c.duplicated or not c.in_order:
                    problems.append(
                        f"{agent}/{conversation} ({view}): lost {c.lost[:5]}, duplicated "
                        f"{c.duplicated[:5]}, in order: {c.in_order}"
                    )
            if not_one:
                problems.append(
                    f"{agent}/{conversation}: messages without exactly one unit {not_one[:5]}"
                )
    return {**totals, "ok": not problems, "problems": problems[:20]}
