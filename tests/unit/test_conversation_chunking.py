"""Message chunking (seed 002 §7.4.1): windows, overlap, combined short messages, roles and
the enrichment prefix."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from itertools import pairwise

from memora.basics.config import Settings
from memora.nlp.chunking import (
    ChunkingConfig,
    Message,
    Run,
    chunk_run,
    content_hash,
    groups,
    source_hash,
)

WHEN = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


def msg(text: str, role: str | None = "user", channel: str | None = None) -> Message:
    return Message(uuid.uuid4(), text, role, None, WHEN, content_hash(text), channel)


def test_defaults_are_the_seeds() -> None:
    cfg = ChunkingConfig.from_settings(Settings())
    assert (cfg.max_chars, cfg.overlap, cfg.short_chars, cfg.max_combined) == (500, 50, 100, 5)
    assert cfg.roles == ("user", "assistant") and cfg.combine_short
    assert cfg.include_title and cfg.include_timestamp and cfg.include_preceding


def test_a_short_message_is_one_chunk_with_title_date_role_and_context() -> None:
    m = msg("Let us meet at the station.")
    (chunk,) = chunk_run(
        Run([m], preceding="Where should we meet?", title="Plans"), ChunkingConfig()
    )
    assert chunk.text == (
        'Context: "Where should we meet?..." → [Conversation: Plans] [2024-05-01] [user]: '
        "Let us meet at the station."
    )
    assert chunk.snippet == m.text and chunk.owner == m.pk and chunk.covers == (m.pk,)
    assert chunk.roles == ("user",) and chunk.source_hash == source_hash([m.content_hash])


def test_enrichment_can_be_switched_off() -> None:
    cfg = ChunkingConfig(include_title=False, include_timestamp=False, include_preceding=False)
    (chunk,) = chunk_run(Run([msg("hello there")], preceding="hi", title="T"), cfg)
    assert chunk.text == "[user]: hello there"


def test_a_long_message_is_cut_into_overlapping_windows_each_with_the_prefix() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(1800))
    cfg = ChunkingConfig(include_preceding=False, include_title=False)
    chunks = chunk_run(Run([msg(text)]), cfg)
    prefix = "[2024-05-01] [user]: "
    size = cfg.max_chars - len(prefix)
    assert all(c.text.startswith(prefix) and len(c.text) <= cfg.max_chars for c in chunks)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for a, b in pairwise(chunks):
        assert a.snippet[-cfg.overlap :] == b.snippet[: cfg.overlap]  # 50 characters overlap
    assert chunks[0].snippet == text[:size]
    assert chunks[-1].snippet.endswith(text[-10:])
    covered = "".join(c.snippet[cfg.overlap if i else 0 :] for i, c in enumerate(chunks))
    assert covered == text


def test_adjacent_short_messages_are_combined_up_to_five() -> None:
    shorts = [msg(f"short {i}", "user" if i % 2 else "assistant") for i in range(7)]
    long = msg("x" * 150)
    run = [*shorts[:3], long, *shorts[3:]]
    assert [len(g) for g in groups(run, ChunkingConfig())] == [3, 1, 4]
    assert [len(g) for g in groups(shorts, ChunkingConfig())] == [5, 2]
    assert [len(g) for g in groups(shorts, ChunkingConfig(combine_short=False))] == [1] * 7
    first = chunk_run(Run(shorts), ChunkingConfig())[0]
    assert first.owner == shorts[0].pk and first.covers == tuple(m.pk for m in shorts[:5])
    assert first.snippet.splitlines()[:2] == ["[assistant]: short 0", "[user]: short 1"]
    assert first.roles == ("assistant", "user")
    assert first.source_hash == source_hash([m.content_hash for m in shorts[:5]])
    second = chunk_run(Run(shorts), ChunkingConfig())[1]
    assert 'Context: "short 4..."' in second.text  # the message before the group


def test_short_messages_of_different_channels_are_not_combined() -> None:
    said = ["teams", "teams", "web", None, None, "teams"]
    run = [msg(f"short {i}", channel=c) for i, c in enumerate(said)]
    assert [len(g) for g in groups(run, ChunkingConfig())] == [2, 1, 2, 1]
    chunks = chunk_run(Run(run), ChunkingConfig())
    assert [c.channels for c in chunks] == [("teams",), ("web",), (), ("teams",)]


def test_roles_left_out_are_not_indexed() -> None:
    cfg = ChunkingConfig()
    chunks = chunk_run(Run([msg("tool output " * 20, "tool"), msg("a user line " * 10)]), cfg)
    assert len(chunks) == 1 and chunks[0].roles == ("user",)
    (untagged,) = chunk_run(Run([msg("no role given " * 10, None)]), cfg)
    assert untagged.roles == () and "[message]:" in untagged.text


def test_the_source_hash_changes_with_any_covered_message() -> None:
    a, b = msg("one"), msg("two")
    assert source_hash([a.content_hash, b.content_hash]) != source_hash(
        [a.content_hash, content_hash("two!")]
    )
