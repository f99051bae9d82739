/**
 * Webhook signatures (Standard Webhooks, docs/webhooks.md). Each delivery carries
 * `webhook-id`, `webhook-timestamp` (seconds since the epoch) and
 * `webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">` (several,
 * space-separated, during a secret's rotation), keyed by the base64-decoded part of the
 * endpoint's secret after `whsec_`.
 */

import { createHmac, timingSafeEqual } from "node:crypto";

const SECRET_MARK = "whsec_";
/** How far a delivery's timestamp may be from now, in seconds, before it is refused as a replay. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/** A `Headers` object (fetch, undici), or Node's `IncomingHttpHeaders`, or a plain record. */
export type HeadersLike =
  { get(name: string): string | null } | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** Seconds either side of now a timestamp may be (default 300). */
  toleranceSeconds?: number;
  /** Now, in seconds since the epoch (default: the clock's). */
  now?: number;
}

function header(headers: HeadersLike, name: string): string | undefined {
  if (typeof headers.get === "function") {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  }
  const record = headers as Record<string, string | string[] | undefined>;
  for (const [key, value] of Object.entries(record)) {
    if (key.toLowerCase() === name) {
      return Array.isArray(value) ? value.join(" ") : value;
    }
  }
  return undefined;
}

function bytes(body: string | Uint8Array): Buffer {
  return typeof body === "string"
    ? Buffer.from(body, "utf8")
    : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

/** The `webhook-signature` value of one delivery: `v1,<base64 HMAC-SHA256>`. */
export function signWebhook(
  secret: string,
  messageId: string,
  timestamp: number,
  body: string | Uint8Array,
): string {
  const key = Buffer.from(
    secret.startsWith(SECRET_MARK) ? secret.slice(SECRET_MARK.length) : secret,
    "base64",
  );
  const mac = createHmac("sha256", key)
    .update(`${messageId}.${timestamp}.`)
    .update(bytes(body))
    .digest("base64");
  return `v1,${mac}`;
}

/**
 * Whether a delivery is Memora's: its timestamp within `toleranceSeconds` of now and one of its
 * signatures this body's (compared in constant time). Pass the raw body, before any JSON
 * parsing: a re-serialised body does not match.
 */
export function verifyWebhook(
  secret: string,
  headers: HeadersLike,
  body: string | Uint8Array,
  options: VerifyOptions = {},
): boolean {
  const messageId = header(headers, "webhook-id");
  const timestamp = header(headers, "webhook-timestamp")?.trim();
  const signatures = header(headers, "webhook-signature");
  if (!messageId || !timestamp || !signatures || !/^\d+$/.test(timestamp)) {
    return false;
  }
  const sent = Number(timestamp);
  const now = options.now ?? Date.now() / 1000;
  if (Math.abs(now - sent) > (options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS)) {
    return false;
  }
  const expected = Buffer.from(signWebhook(secret, messageId, sent, body), "utf8");
  let matched = false;
  for (const candidate of signatures.split(/\s+/)) {
    const given = Buffer.from(candidate, "utf8");
    // timingSafeEqual needs equal lengths; a length says nothing about the secret
    if (given.length === expected.length && timingSafeEqual(given, expected)) {
      matched = true;
    }
  }
  return matched;
}
