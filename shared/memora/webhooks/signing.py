"""Standard Webhooks signing (https://www.standardwebhooks.com).

A secret is `whsec_` + base64 of 32 random bytes; the key is those bytes. Each attempt is
signed over `"{webhook-id}.{webhook-timestamp}.{body}"` with HMAC-SHA256, sent base64-encoded
as `webhook-signature: v1,<signature>` (space-separated when several are sent).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SECRET_MARK = "whsec_"


def generate_secret() -> str:
    return SECRET_MARK + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_MARK))


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header's value for one attempt."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {
        "content-type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, message_id, timestamp, body),
    }


def verify(secret: str, message_id: str, timestamp: int, body: bytes, signature: str) -> bool:
    """Whether one of the space-separated `v1,` signatures is this body's (constant time)."""
    expected = sign(secret, message_id, timestamp, body)
    return any(hmac.compare_digest(expected, s) for s in signature.split())
