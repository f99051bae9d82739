"""Opaque paging cursors: a keyset position (a timestamp and an id) or an offset, sent to
clients as URL-safe base64 so that they pass it back unchanged."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from uuid import UUID

from services.api.errors import APIError

Position = tuple[datetime, UUID] | int


def encode(position: Position | None) -> str | None:
    if position is None:
        return None
    raw = str(position) if isinstance(position, int) else f"{position[0].isoformat()}|{position[1]}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode(cursor: str | None) -> Position | None:
    """The position in `cursor`; 422 `invalid_cursor` for anything this module did not write."""
    if not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if raw.isdigit():
            return int(raw)
        at, _, ident = raw.partition("|")
        moment = datetime.fromisoformat(at)
        if moment.tzinfo is None:
            raise ValueError("naive timestamp")
        return moment, UUID(ident)
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise APIError(422, "invalid_cursor", "the cursor is not one this API returned") from exc
