"""Entities from a chat through the real pipeline (issue 32): clean names, no interjections,
each speaker one PERSON entity under their own name."""

from __future__ import annotations

from typing import Any

TURNS = [
    ("Caroline", "Hey Mel! I joined a support group last Tues, it was so powerful."),
    ("Melanie", "Bye Caroline! Glad you went. I took my cat Oscar to Paris."),
    ("Caroline", "ya, Melanie, that sounds lovely. I love Ed Sheeran's songs."),
    ("Melanie", "Glad to hear it! Nah, I am good. Wanna paint with me on Fri?"),
]


def test_chat_gives_clean_person_entities_one_per_speaker(
    inline_api: Any, agent_id: str, pool: Any
) -> None:
    items = [
        {"content": text, "speaker": who, "event_date": f"2023-05-08T10:0{i}:00Z"}
        for i, (who, text) in enumerate(TURNS)
    ]
    response = inline_api.post(
        "/api/memories/batch",
        json={"agent_id": agent_id, "items": items, "document_id": "chat-1"},
    )
    assert response.status_code == 200, response.text
    op = inline_api.get(f"/api/operations/{response.json()['operation_id']}").json()
    assert op["status"] == "completed"
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT canonical_name, entity_type, mention_count FROM entities "
            "WHERE agent_id = %s ORDER BY canonical_name",
            (agent_id,),
        ).fetchall()
    entities = {r["canonical_name"]: r for r in rows}
    for speaker in ("Caroline", "Melanie"):
        assert entities[speaker]["entity_type"] == "PERSON"
        same = [n for n in entities if speaker.lower() in n.lower() or n == "Mel"]
        assert same == [speaker], entities
    # Melanie: her two turns, "Hey Mel!" and "ya, Melanie"
    assert entities["Melanie"]["mention_count"] == 4
    assert entities["Caroline"]["mention_count"] == 3
    noise = {"Bye Caroline", "ya, Melanie", "Glad", "Nah", "Wanna", "Tues", "Fri", "Mel"}
    assert not noise & set(entities), entities
    assert "Ed Sheeran's" not in entities
