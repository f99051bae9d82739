"""Webhooks: signed HTTP callbacks of what happened to a tenant's data (docs/webhooks.md).

- `events`: the event types and the outbox (deliveries inserted in the event's transaction,
  handed to the sender after the commit).
- `signing`: Standard Webhooks signatures (`webhook-id`, `webhook-timestamp`,
  `webhook-signature: v1,<base64 HMAC-SHA256>`).
- `guard`: which targets may be called (no private, loopback or link-local addresses).
- `sender` and `delivery`: one attempt over HTTP; claiming, recording and retrying deliveries.
"""
