/**
 * Errors. Every error answer of the API, `{"error": {"code", "message", "details"}}`, becomes a
 * `MemoraError` carrying the HTTP `status`, the API's stable `code` (`not_found`,
 * `validation_error`, `rate_limited`, ...) and its `message`. Failures without an answer (the
 * server unreachable, a timeout) and `waitFor`'s outcomes are subclasses with `status` 0.
 */

import type { components } from "./schema.js";

/** The body of every 4xx/5xx answer (services/api/errors.py). */
export type ErrorBody = components["schemas"]["ErrorResponse"];

export interface MemoraErrorOptions {
  /** For `validation_error`: the fields that failed. */
  details?: unknown;
  /** Seconds the answer's `Retry-After` asked to wait. */
  retryAfter?: number | undefined;
  cause?: unknown;
}

export class MemoraError extends Error {
  /** The HTTP status; 0 when no answer came (connection errors, `waitFor`'s errors). */
  readonly status: number;
  /** The API's error code, e.g. `not_found`, `validation_error`, `message_conflict`. */
  readonly code: string;
  readonly details: unknown;
  /** Seconds, from the answer's `Retry-After` header when it had one. */
  readonly retryAfter: number | undefined;

  constructor(status: number, code: string, message: string, options: MemoraErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.details = options.details;
    this.retryAfter = options.retryAfter;
  }

  /** 429 and 503 answers: the client retries them itself, up to `maxRetries` times. */
  get retryable(): boolean {
    return this.status === 429 || this.status === 503;
  }
}

/** The server could not be reached, or did not answer in time (`code`: `connection_error`,
 * `timeout`). `connectFailed`: the connection was never made, so the request never left. */
export class MemoraConnectionError extends MemoraError {
  readonly connectFailed: boolean;

  constructor(message: string, options: { cause?: unknown; connectFailed?: boolean; code?: string } = {}) {
    super(0, options.code ?? "connection_error", message, { cause: options.cause });
    this.connectFailed = options.connectFailed ?? false;
  }

  override get retryable(): boolean {
    return this.connectFailed;
  }
}

type Operation = components["schemas"]["OperationResponse"];

/** `waitFor`: the operation ended `failed`; `operation` holds its last state. */
export class OperationFailedError extends MemoraError {
  readonly operation: Operation;

  constructor(operation: Operation) {
    const why = operation.error ? `: ${operation.error}` : "";
    super(0, "operation_failed", `operation ${operation.id} ended ${operation.status}${why}`);
    this.operation = operation;
  }
}

/** `waitFor`: the operation had not finished when the time ran out; `operation` is its last
 * state. */
export class OperationTimeoutError extends MemoraError {
  readonly operation: Operation;

  constructor(operation: Operation, timeoutMs: number) {
    super(
      0,
      "operation_timeout",
      `operation ${operation.id} still ${operation.status} after ${timeoutMs} ms`,
    );
    this.operation = operation;
  }
}

/**
 * Seconds from a `Retry-After` value: delay-seconds or an HTTP date (RFC 9110 §10.2.3; a date
 * in the past is 0). `undefined` without one or with one that cannot be read.
 */
export function parseRetryAfter(
  value: string | null | undefined,
  now: number = Date.now(),
): number | undefined {
  const text = value?.trim();
  if (!text) {
    return undefined;
  }
  if (/^\d+$/.test(text)) {
    return Number(text);
  }
  const when = Date.parse(text);
  if (Number.isNaN(when)) {
    return undefined;
  }
  return Math.max(0, (when - now) / 1000);
}

function isErrorBody(body: unknown): body is ErrorBody {
  if (typeof body !== "object" || body === null || !("error" in body)) {
    return false;
  }
  const error: unknown = body.error;
  return typeof error === "object" && error !== null;
}

/** The error for an answer with an error status, from its JSON body (or its status alone). */
export async function errorFrom(response: Response): Promise<MemoraError> {
  let code = "http_error";
  let message = response.statusText || `HTTP ${response.status}`;
  let details: unknown;
  const text = await response.text().catch(() => "");
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  if (isErrorBody(body)) {
    const error = body.error as Partial<ErrorBody["error"]>;
    if (error.code !== undefined) code = String(error.code);
    if (error.message !== undefined) message = String(error.message);
    details = error.details;
  } else if (text) {
    message = text.slice(0, 500);
  }
  return new MemoraError(response.status, code, message, {
    details,
    retryAfter: parseRetryAfter(response.headers.get("retry-after")),
  });
}
