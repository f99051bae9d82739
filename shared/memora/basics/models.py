"""Plain data shared by the API, the CLI and the pipeline."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, TypeVar, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

AGENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"
DOCUMENT_ID_PATTERN = r"^[^\x00-\x1f\x7f]{1,256}$"
# The three memory networks (seed 000 §2.1): world facts, the agent's own experiences, opinions.
FactType = Literal["world", "agent", "opinion"]
FACT_TYPES: tuple[FactType, ...] = get_args(FactType)

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(value: str) -> str:
    """PostgreSQL text and JSON cannot hold NUL, nor UTF-8 unpaired surrogates (which JSON
    escapes such as \\ud800 can produce)."""
    if _UNSTORABLE.search(value):
        raise ValueError("must not contain NUL characters or unpaired surrogates")
    return value


StorableText = Annotated[str, AfterValidator(storable)]
AgentId = Annotated[str, StringConstraints(pattern=AGENT_ID_PATTERN)]
DocumentId = Annotated[
    str, StringConstraints(pattern=DOCUMENT_ID_PATTERN), AfterValidator(storable)
]


def aware(value: datetime | None) -> datetime | None:
    """Naive timestamps are taken as UTC. Times the pipeline could not store are refused here,
    rather than failing after they were accepted: PostgreSQL takes UTC offsets below 16 hours
    only (Python up to 24), and the time must exist in UTC (not 0001-01-01T00:00+01:00)."""
    if value is None:
        return value
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    offset = value.utcoffset()
    if offset is not None and abs(offset) >= timedelta(hours=16):
        raise ValueError("the UTC offset must be less than 16 hours")
    try:
        value.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("the time is out of range in UTC") from exc
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or whitespace")
    return value


MessageId = Annotated[
    str, StringConstraints(pattern=DOCUMENT_ID_PATTERN, max_length=200), AfterValidator(storable)
]
Role = Literal["user", "assistant", "system", "tool"]
# Where a message was said (seed 002 §7.3): `web`, `console`, `teams`, any short label.
CHANNEL_PATTERN = r"^[^\x00-\x1f\x7f]{1,64}$"
Channel = Annotated[str, StringConstraints(pattern=CHANNEL_PATTERN)]
CHANNEL_KEY = "channel"  # the metadata key that carries it to the memories made from the item


Item = TypeVar("Item", bound="MemoryItem")


class MemoryItem(BaseModel):
    """One piece of raw content: a message, a turn, or a whole transcript."""

    model_config = ConfigDict(extra="forbid")

    content: Annotated[str, AfterValidator(_not_blank), AfterValidator(storable)]
    context: StorableText | None = Field(default=None, max_length=2000)
    event_date: Annotated[datetime | None, AfterValidator(aware)] = None
    speaker: StorableText | None = Field(default=None, max_length=200)
    # lists of strings are tags (`{"tags": ["a", "b"]}`, searched with the `tags` filter)
    metadata: dict[StorableText, StorableText | int | float | bool | list[StorableText] | None] = (
        Field(default_factory=dict)
    )
    # The message this item is, unique within its document (the conversation); default: its
    # position ("0", "1", ...). See docs/conversations.md.
    message_id: MessageId | None = None
    role: Role | None = None
    # Privacy (docs/security.md): `remember: false`, nothing is extracted from this message;
    # `searchable: false`, it stays out of the conversation index (default: as `remember`).
    remember: bool | None = None
    searchable: bool | None = None
    # Where it was said; also the memories' metadata `channel` (what memory search filters
    # on). A string `metadata.channel` is taken as the channel when this is not given.
    channel: Channel | None = None

    @model_validator(mode="after")
    def _channel(self) -> MemoryItem:
        given = self.metadata.get(CHANNEL_KEY)
        if self.channel is None:
            if given is not None and not (
                isinstance(given, str) and re.fullmatch(CHANNEL_PATTERN, given)
            ):
                raise ValueError("metadata.channel, the item's channel: 1 to 64 characters")
            self.channel = given
        elif given is not None and given != self.channel:
            raise ValueError("channel and metadata.channel differ")
        if self.channel is not None:
            self.metadata[CHANNEL_KEY] = self.channel
        return self


def with_channel(items: list[Item], channel: str | None) -> list[Item]:
    """A request's `channel` given to its items that name none."""
    if channel is None:
        return items
    return [
        i
        if i.channel is not None
        else i.model_copy(
            update={"channel": channel, "metadata": {**i.metadata, CHANNEL_KEY: channel}}
        )
        for i in items
    ]


def message_ids(items: list[MemoryItem]) -> list[str]:
    """Each item's message id: its own, else its position."""
    return [item.message_id or str(i) for i, item in enumerate(items)]


def utcnow() -> datetime:
    return datetime.now(UTC)


# stored only when given (older items lack them)
_OPTIONAL_KEYS = ("message_id", "role", "remember", "searchable", "channel")


def temporary_items(items: list[Item]) -> list[Item]:
    """A temporary chat's items (a request marked `temporary`): nothing remembered from any
    of them; an item's own `remember`/`searchable` still wins."""
    return [i.model_copy(update={"remember": False}) if i.remember is None else i for i in items]


def jsonable_item(item: MemoryItem) -> dict[str, Any]:
    unset = {k for k in _OPTIONAL_KEYS if getattr(item, k) is None}
    return item.model_dump(mode="json", exclude=unset)


def jsonable_items(items: list[MemoryItem]) -> list[dict[str, Any]]:
    return [jsonable_item(item) for item in items]
