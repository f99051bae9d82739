"""Message chunking (seed 002 §7.4.1): a long message is cut into windows of `max_chars` with
`overlap`; adjacent short messages are combined, up to `max_combined`, into one chunk; every
chunk is enriched with the conversation's title, the date, the roles and a snippet of the
message before it, which is what gets embedded and matched.

A chunk is owned by the first message it covers (search results are attributed to it) and
records every message it covers, so that an edit or a delete of any of them re-indexes it.
Unlike the seed's sliding window over prefix + text, each window of a long message carries
the prefix, so the last window of a message is as well placed as the first.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from memora.basics.config import Settings


@dataclass(frozen=True)
class ChunkingConfig:
    max_chars: int = 500
    overlap: int = 50
    combine_short: bool = True
    short_chars: int = 100
    max_combined: int = 5
    roles: tuple[str, ...] = ("user", "assistant")
    include_title: bool = True
    include_timestamp: bool = True
    include_preceding: bool = True
    preceding_chars: int = 100

    @classmethod
    def from_settings(cls, s: Settings) -> ChunkingConfig:
        return cls(
            max_chars=s.conversation_chunk_chars,
            overlap=s.conversation_chunk_overlap,
            combine_short=s.conversation_combine_short,
            short_chars=s.conversation_short_message_chars,
            max_combined=s.conversation_max_combined,
            roles=tuple(s.conversation_roles),
            include_title=s.conversation_include_title,
            include_timestamp=s.conversation_include_timestamp,
            include_preceding=s.conversation_include_preceding,
            preceding_chars=s.conversation_preceding_chars,
        )

    def indexes(self, role: str | None) -> bool:
        return role is None or role in self.roles


@dataclass(frozen=True)
class Message:
    pk: UUID
    text: str
    role: str | None
    speaker: str | None
    occurred_at: datetime
    content_hash: str
    channel: str | None = None  # where it was said

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Message:
        return cls(
            row["id"], row["text"], row["role"], row["speaker"], row["occurred_at"],
            row["content_hash"], row.get("channel"),
        )  # fmt: skip


@dataclass(frozen=True)
class Run:
    """Messages adjacent in their conversation, with the text of the message before them."""

    messages: Sequence[Message]
    preceding: str | None = None
    title: str | None = None


@dataclass(frozen=True)
class Chunk:
    owner: UUID
    covers: tuple[UUID, ...]
    index: int
    text: str  # what is embedded and matched: prefix + window
    snippet: str  # the window alone, shown in results
    roles: tuple[str, ...]
    occurred_at: datetime
    source_hash: str
    channels: tuple[str, ...] = ()  # of the messages it covers (conversation search's filter)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def source_hash(hashes: Sequence[str]) -> str:
    """The hash of the covered messages' hashes, in order (what makes a chunk stale)."""
    return hashlib.sha256(",".join(hashes).encode()).hexdigest()


def _label(m: Message) -> str:
    return m.role or m.speaker or "message"


def groups(messages: Sequence[Message], cfg: ChunkingConfig) -> list[list[Message]]:
    """Adjacent short messages of one channel together (at most `max_combined`), every other
    one alone."""
    out: list[list[Message]] = []
    for m in messages:
        short = cfg.combine_short and len(m.text) < cfg.short_chars
        last = out[-1] if out else None
        if (
            short
            and last is not None
            and len(last) < cfg.max_combined
            and last[-1].channel == m.channel
            and all(len(p.text) < cfg.short_chars for p in last)
        ):
            last.append(m)
        else:
            out.append([m])
    return out


def _prefix(group: list[Message], preceding: str | None, title: str | None,
            cfg: ChunkingConfig) -> str:  # fmt: skip
    parts = []
    if preceding and cfg.include_preceding:
        snippet = preceding[: cfg.preceding_chars]
        parts.append(f'Context: "{snippet}..." →')
    if title and cfg.include_title:
        parts.append(f"[Conversation: {title}]")
    if cfg.include_timestamp:
        parts.append(f"[{group[0].occurred_at.date().isoformat()}]")
    if len(group) == 1:
        parts.append(f"[{_label(group[0])}]:")
    return " ".join(parts) + ("\n" if len(group) > 1 else " ")


def _windows(body: str, size: int, overlap: int) -> list[str]:
    if len(body) <= size:
        return [body]
    step = max(size - overlap, 1)
    out = []
    start = 0
    while True:
        out.append(body[start : start + size])
        if start + size >= len(body):
            return out
        start += step


def chunk_run(run: Run, cfg: ChunkingConfig) -> list[Chunk]:
    """The chunks of a run of messages (messages of roles not indexed are left out)."""
    chunks: list[Chunk] = []
    preceding = run.preceding
    for group in groups([m for m in run.messages if cfg.indexes(m.role)], cfg):
        prefix = _prefix(group, preceding, run.title, cfg)
        if len(group) == 1:
            body = group[0].text
        else:
            body = "\n".join(f"[{_label(m)}]: {m.text}" for m in group)
        size = max(cfg.max_chars - len(prefix), cfg.max_chars // 2)
        digest = source_hash([m.content_hash for m in group])
        roles = tuple(dict.fromkeys(m.role for m in group if m.role))
        channels = tuple(dict.fromkeys(m.channel for m in group if m.channel))
        for i, window in enumerate(_windows(body, size, cfg.overlap)):
            chunks.append(
                Chunk(
                    owner=group[0].pk,
                    covers=tuple(m.pk for m in group),
                    index=i,
                    text=prefix + window,
                    snippet=window,
                    roles=roles,
                    occurred_at=group[0].occurred_at,
                    source_hash=digest,
                    channels=channels,
                )
            )
        preceding = group[-1].text
    return chunks
