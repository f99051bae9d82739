"""Conversation archives (backfills, the demo's bundled sample), read as a stream of documents
(never the whole file).

Formats (`detect_format` picks one from the first byte):

- ``jsonl`` — one JSON object per line, either a whole conversation
  ``{"conversation_id", "agent_id"?, "started_at"?, "messages": [{"speaker", "text",
  "timestamp"?, "metadata"?}]}`` (the bundled sample's format), or one message
  ``{"conversation_id", "agent_id"?, "speaker"?, "text" | "content", "timestamp"?,
  "metadata"?}``. Consecutive messages of one conversation form one document.
- ``locomo`` — a JSON array of LoCoMo conversations (``sample_id``, ``conversation`` with
  ``session_N`` turn lists and ``session_N_date_time``), streamed with ijson: one document
  per session, ``<sample_id>:session_<N>``.

Document ids are deterministic, so a re-run re-posts identical documents (the API answers
"unchanged"): a conversation line gives ``<conversation_id>`` (``#2``, ``#3``... for the
parts of one longer than `max_items`); a run of message lines gives
``<conversation_id>#L<line of its first message>``.

Every document carries the `Position` to resume after it, which a `Checkpoint` stores.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, BinaryIO, Literal

from pydantic import ValidationError

from memora.basics.models import MemoryItem

Format = Literal["jsonl", "locomo"]
Problem = Callable[[int, str], None]  # (line, or document ordinal for JSON; reason)
LOCOMO_TIME = "%I:%M %p on %d %B, %Y"


@dataclass(frozen=True)
class Position:
    """Where to continue after a document: re-read from byte `offset` (the start of the line
    the document began on; None for JSON, read from the start) and pass over `skip` documents
    that start there; `index` documents precede the next one."""

    offset: int | None
    line: int
    skip: int
    index: int


@dataclass
class Document:
    agent_id: str
    document_id: str
    items: list[MemoryItem]
    resume: Position
    bytes_read: int
    conversation_id: str | None = None  # the conversation a part belongs to (appends)

    @property
    def conversation(self) -> str:
        """The id to append this document's messages to: its conversation's."""
        return self.conversation_id or self.document_id


def sample_archive() -> Path:
    """The bundled sample archive (JSONL conversations) that `memora demo` ingests."""
    return Path(str(resources.files("memora.data") / "sample_conversations.jsonl"))


def detect_format(path: Path) -> Format:
    with path.open("rb") as handle:
        while chunk := handle.read(4096):
            stripped = chunk.lstrip()
            if stripped:
                return "locomo" if stripped[:1] == b"[" else "jsonl"
    return "jsonl"


def read_documents(
    path: Path,
    fmt: Format,
    *,
    default_agent: str | None = None,
    max_items: int = 500,
    resume: Position | None = None,
    on_problem: Problem | None = None,
) -> Iterator[Document]:
    """Documents in archive order, from `resume` on. `default_agent` overrides the archive's
    agent ids when set."""
    report = on_problem or (lambda _line, _reason: None)
    if fmt == "locomo":
        yield from _locomo(path, default_agent, max_items, resume, report)
    else:
        yield from _jsonl(path, default_agent, max_items, resume, report)


# ----------------------------------------------------------------------------- items
def _scalar(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def make_item(message: dict[str, Any], default_time: str | None = None) -> MemoryItem:
    """A MemoryItem from an archive message; raises ValueError when it cannot be one."""
    if not isinstance(message, dict):
        raise ValueError("a message must be a JSON object")
    text = message.get("text", message.get("content"))
    when = message.get("timestamp") or message.get("event_date") or default_time
    metadata = message.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ValueError("metadata must be an object")
    try:
        return MemoryItem.model_validate(
            {
                "content": text,
                "speaker": message.get("speaker"),
                "event_date": when,
                "metadata": {str(k): _scalar(v) for k, v in metadata.items()},
            }
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "message"
        raise ValueError(f"{where}: {first['msg']}") from exc


def _chunks(items: list[MemoryItem], size: int) -> Iterator[list[MemoryItem]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# ----------------------------------------------------------------------------- JSONL
@dataclass
class _Run:
    """Consecutive message lines of one conversation."""

    agent_id: str
    conversation_id: str
    offset: int
    line: int
    items: list[MemoryItem] = field(default_factory=list)


def _jsonl(
    path: Path,
    default_agent: str | None,
    max_items: int,
    resume: Position | None,
    report: Problem,
) -> Iterator[Document]:
    return _JsonlReader(default_agent, max_items, resume, report).read(path)


class _JsonlReader:
    """A JSONL archive's documents from a position: a line with `messages` is a conversation
    (chunked by `max_items`); consecutive message lines of one conversation are one document.
    Documents before the position's `skip` are read again but not yielded, errors on them not
    reported."""

    def __init__(
        self, default_agent: str | None, max_items: int, resume: Position | None, report: Problem
    ) -> None:
        self.default_agent, self.max_items, self.report = default_agent, max_items, report
        self.offset = (resume.offset or 0) if resume else 0
        self.line_no = resume.line - 1 if resume else 0
        self.index = resume.index - resume.skip if resume else 0
        self.to_skip = resume.skip if resume else 0
        self.run: _Run | None = None
        # documents emitted from the current start offset (for Position.skip)
        self.same_start: dict[int, int] = {}

    def read(self, path: Path) -> Iterator[Document]:
        with path.open("rb") as handle:
            handle.seek(self.offset)
            for raw in handle:
                start = self.offset
                self.offset += len(raw)
                self.line_no += 1
                if raw.strip():
                    yield from self._line(raw, start)
            yield from self._flush()

    def _line(self, raw: bytes, start: int) -> Iterator[Document]:
        quiet = self.to_skip > 0
        record = self._record(raw, quiet)
        if record is None:
            return
        agent = self.default_agent or str(record.get("agent_id") or "default")
        conv_id = str(record.get("conversation_id") or f"line-{self.line_no}")
        if isinstance(record.get("messages"), list):
            yield from self._flush()
            yield from self._conversation(record, agent, conv_id, start, quiet)
            return
        try:
            item = make_item(record)
        except ValueError as exc:
            if not quiet:
                self.report(self.line_no, str(exc))
            return
        run = self.run
        if run is not None and (
            run.conversation_id != conv_id
            or run.agent_id != agent
            or len(run.items) >= self.max_items
        ):
            yield from self._flush()
        if self.run is None:
            self.run = _Run(agent, conv_id, start, self.line_no)
        self.run.items.append(item)

    def _record(self, raw: bytes, quiet: bool) -> dict[str, Any] | None:
        try:
            record = json.loads(raw)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            if not quiet:
                self.report(self.line_no, f"invalid JSON: {exc}")
            return None
        return record

    def _conversation(
        self, record: dict[str, Any], agent: str, conv_id: str, start: int, quiet: bool
    ) -> Iterator[Document]:
        """A line holding a whole conversation: its messages, chunked."""
        items = []
        for i, message in enumerate(record["messages"]):
            try:
                items.append(make_item(message, record.get("started_at")))
            except ValueError as exc:
                if not quiet:
                    self.report(self.line_no, f"message {i}: {exc}")
        for part, chunk in enumerate(_chunks(items, self.max_items)):
            doc_id = conv_id if part == 0 else f"{conv_id}#{part + 1}"
            yield from self._unless_skipped(
                self._emit(agent, conv_id, doc_id, chunk, start, self.line_no)
            )

    def _flush(self) -> Iterator[Document]:
        """The run of message lines read so far, as one document."""
        r, self.run = self.run, None
        if r is not None:
            doc_id = f"{r.conversation_id}#L{r.line}"
            yield from self._unless_skipped(
                self._emit(r.agent_id, r.conversation_id, doc_id, r.items, r.offset, r.line)
            )

    def _unless_skipped(self, doc: Document) -> Iterator[Document]:
        if self.to_skip:
            self.to_skip -= 1
        else:
            yield doc

    def _emit(
        self,
        agent: str,
        conversation: str,
        doc_id: str,
        items: list[MemoryItem],
        start: int,
        line: int,
    ) -> Document:
        skip = self.same_start.get(start, 0) + 1
        self.same_start.clear()
        self.same_start[start] = skip
        self.index += 1
        position = Position(start, line, skip, self.index)
        return Document(agent, doc_id, items, position, self.offset, conversation)


# ----------------------------------------------------------------------------- LoCoMo
def _locomo_time(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.strptime(value.strip(), LOCOMO_TIME).replace(tzinfo=UTC).isoformat()
    except ValueError:
        return None


def _locomo(
    path: Path,
    default_agent: str | None,
    max_items: int,
    resume: Position | None,
    report: Problem,
) -> Iterator[Document]:
    to_skip = resume.index if resume else 0
    index = 0
    with path.open("rb") as handle:
        for number, sample_id, sessions, times in _locomo_conversations(handle):
            name = sample_id or f"conversation-{number}"
            agent = default_agent or name
            for key in sorted(sessions, key=_session_number):
                when = _locomo_time(times.get(key))
                items = []
                for turn in sessions[key]:
                    try:
                        items.append(_locomo_item(turn, when))
                    except ValueError as exc:
                        if index >= to_skip:
                            report(index + 1, f"{name} {key}: {exc}")
                for part, chunk in enumerate(_chunks(items, max_items)):
                    doc_id = f"{name}:{key}" + (f"#{part + 1}" if part else "")
                    index += 1
                    if index <= to_skip:
                        continue
                    yield Document(
                        agent, doc_id, chunk, Position(None, 0, 0, index), handle.tell(),
                        f"{name}:{key}",
                    )  # fmt: skip


_Sessions = dict[str, list[dict[str, Any]]]


def _locomo_conversations(
    handle: BinaryIO,
) -> Iterator[tuple[int, str | None, _Sessions, dict[str, str]]]:
    """Each conversation of a LoCoMo file, streamed: its number, sample id, turns per session
    and the sessions' date-times (suspended at its end, so `handle.tell()` is past it)."""
    import ijson

    conversation = 0
    sessions: _Sessions = {}
    times: dict[str, str] = {}
    sample_id: str | None = None
    builder: Any = None
    session_key = ""
    for prefix, event, value in ijson.parse(handle):
        if builder is not None:
            builder.event(event, value)
            if prefix == f"item.conversation.{session_key}.item" and event == "end_map":
                sessions[session_key].append(builder.value)
                builder = None
            continue
        if prefix == "item" and event == "start_map":
            conversation += 1
            sessions, times, sample_id = {}, {}, None
        elif prefix == "item.sample_id" and event in ("string", "number"):
            sample_id = str(value)
        elif prefix.startswith("item.conversation.session_"):
            key = prefix.removeprefix("item.conversation.")
            if key.endswith("_date_time") and event == "string":
                times[key.removesuffix("_date_time")] = value
            elif "." not in key and event == "start_array":
                sessions.setdefault(key, [])
            elif key.endswith(".item") and event == "start_map":
                session_key = key.removesuffix(".item")
                builder = ijson.ObjectBuilder()
                builder.event(event, value)
        elif prefix == "item" and event == "end_map":
            yield conversation, sample_id, sessions, times


def _session_number(key: str) -> int:
    digits = key.removeprefix("session_")
    return int(digits) if digits.isdigit() else 0


def _locomo_item(turn: dict[str, Any], when: str | None) -> MemoryItem:
    text = turn.get("text") if isinstance(turn, dict) else None
    if isinstance(text, str) and turn.get("blip_caption"):
        text = f"{text} [shares image: {turn['blip_caption']}]"
    metadata = {"dia_id": turn["dia_id"]} if turn.get("dia_id") else {}
    return make_item(
        {"text": text, "speaker": turn.get("speaker"), "timestamp": when, "metadata": metadata}
    )


# ------------------------------------------------------------------------- checkpoint
def fingerprint(path: Path, size: int = 1 << 20) -> str:
    """SHA-256 of the file's first MiB: an archive that only grew keeps it."""
    with path.open("rb") as handle:
        return hashlib.sha256(handle.read(size)).hexdigest()


def content_hash(path: Path) -> str:
    """SHA-256 of the whole file, read in chunks (memory stays flat)."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def target_of(api_url: str, api_key: str | None) -> str:
    """Where a backfill posts: the API's URL and who posts (a one-way hash of the API key,
    never the key itself), so that a checkpoint never carries over to another server or
    tenant."""
    url = api_url.strip().rstrip("/").lower()
    if not api_key:
        return f"{url} anonymous"
    digest = hashlib.sha256(b"memora-backfill-target\0" + api_key.encode()).hexdigest()
    return f"{url} key:{digest[:16]}"


def checkpoint_name(archive: Path, target: str, content: str) -> str:
    """The default checkpoint file's name: one per (target, archive content)."""
    key = hashlib.sha256(f"{target}\n{content}".encode()).hexdigest()[:16]
    return f"{archive.name}.{key}.checkpoint.json"


@dataclass
class Checkpoint:
    """A backfill's progress, saved atomically: which documents are done and the counts."""

    source: str
    format: str
    fingerprint: str
    size: int
    resume: Position | None = None
    target: str = ""  # target_of(): checkpoints written before it had none
    content_sha256: str = ""
    documents: int = 0
    items: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    failed: int = 0
    skipped_items: int = 0
    seconds: float = 0.0
    finished: bool = False
    updated_at: str = ""

    @classmethod
    def load(cls, path: Path) -> Checkpoint | None:
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        resume = data.pop("resume", None)
        checkpoint = cls(**data)
        checkpoint.resume = Position(**resume) if resume else None
        return checkpoint

    def save(self, path: Path) -> None:
        self.updated_at = datetime.now(UTC).isoformat()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with tmp.open("w") as handle:
            json.dump(asdict(self), handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
