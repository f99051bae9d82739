/**
 * The client: the API's main verbs over Node's global `fetch`, with retries of 429 and 503
 * answers and errors as `MemoraError`. Request and answer types come from src/schema.ts,
 * generated from the API's OpenAPI document (see README.md).
 *
 * Naming: the options that go into a request body keep the API's field names (`top_k`,
 * `document_id`); the client's own options are camelCase (`backfill`, `timeoutMs`).
 */

import type { paths } from "./schema.js";
import {
  MemoraConnectionError,
  MemoraError,
  OperationFailedError,
  OperationTimeoutError,
  errorFrom,
} from "./errors.js";

export const VERSION = "0.1.0";

type Method = "get" | "put" | "post" | "delete" | "patch";
type Json<T> = T extends { content: { "application/json": infer J } } ? J : never;
/** The JSON body a route takes. */
export type RequestBody<P extends keyof paths, M extends Method> = paths[P][M] extends {
  requestBody?: infer B;
}
  ? Json<NonNullable<B>>
  : never;
/** The JSON a route answers with on success (200, 201 or 202). */
export type ResponseBody<P extends keyof paths, M extends Method> = paths[P][M] extends {
  responses: infer R;
}
  ? R extends { 200: infer A }
    ? Json<A>
    : R extends { 201: infer A }
      ? Json<A>
      : R extends { 202: infer A }
        ? Json<A>
        : never
  : never;

const APPEND = "/api/agents/{agent_id}/conversations/{conversation_id}/messages";
const OPERATION = "/api/operations/{operation_id}";
const ENTITY = "/api/agents/{agent_id}/entities/{name}";

export type MemoryItem = RequestBody<"/api/memories/batch", "post">["items"][number];
export type Message = RequestBody<typeof APPEND, "post">["messages"][number];
export type BatchAccepted = ResponseBody<"/api/memories/batch", "post">;
export type AppendAccepted = ResponseBody<typeof APPEND, "post">;
export type Operation = ResponseBody<typeof OPERATION, "get">;
export type SearchResponse = ResponseBody<"/api/search", "post">;
export type ConversationSearchResponse = ResponseBody<"/api/conversation_search", "post">;
export type ThinkResponse = ResponseBody<"/api/think", "post">;
export type Entity = ResponseBody<typeof ENTITY, "get">;

/** Fields of the batch besides its agent and items; `backfill`: the backfill queues. */
export type StoreBatchOptions = Partial<
  Omit<RequestBody<"/api/memories/batch", "post">, "agent_id" | "items">
> & {
  backfill?: boolean;
};
/** Fields of the append besides its messages; `backfill`: the backfill queues. */
export type AppendMessagesOptions = Partial<Omit<RequestBody<typeof APPEND, "post">, "messages">> & {
  backfill?: boolean;
};
export type SearchOptions = Partial<Omit<RequestBody<"/api/search", "post">, "agent_id" | "query">>;
/** `document_id`: one conversation only (its conversation id). */
export type ConversationSearchOptions = Partial<
  Omit<RequestBody<"/api/conversation_search", "post">, "agent_id" | "query">
>;
export type ThinkOptions = Partial<Omit<RequestBody<"/api/think", "post">, "agent_id" | "query">>;

export interface WaitForOptions {
  /** Give up after this long (default 120 000 ms): `OperationTimeoutError`. */
  timeoutMs?: number;
  /** Between polls (default 500 ms). */
  intervalMs?: number;
  /** Throw `OperationFailedError` for an operation that ended `failed` (default true). */
  raiseOnFailure?: boolean;
}

export interface MemoraClientOptions {
  /** The write API's port, which serves every route (default `http://localhost:8080`). */
  baseUrl?: string;
  /** Sent as `Authorization: Bearer <key>`. */
  apiKey?: string;
  /** Per request, in milliseconds (default 30 000). */
  timeoutMs?: number;
  /** More tries of a 429 or 503 answer, or of a connection refused (default 3; 0: none). */
  maxRetries?: number;
  /** The first back-off, when the answer gives no `Retry-After` (default 500 ms); doubled each try. */
  backoffMs?: number;
  /** No wait longer than this, `Retry-After` included (default 30 000 ms). */
  maxBackoffMs?: number;
  /** Added to every request. */
  headers?: Record<string, string>;
  /** Instead of the global `fetch` (tests, proxies). */
  fetch?: typeof fetch;
}

export interface RawRequest {
  json?: unknown;
  params?: Record<string, string | number | boolean | undefined>;
  headers?: Record<string, string>;
}

/** One path segment, escaped as the Python client does (document ids may hold slashes). */
function seg(value: string): string {
  return encodeURIComponent(value).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/** Body fields left undefined are not sent: the API's defaults apply. */
function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// Failures before a connection was made: the request cannot have reached the server.
const CONNECT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

function errorCode(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 5; depth++) {
    if (typeof e === "object" && "code" in e && typeof e.code === "string") {
      return e.code;
    }
    e = typeof e === "object" && "cause" in e ? e.cause : undefined;
  }
  return undefined;
}

export class MemoraClient {
  readonly baseUrl: string;
  readonly maxRetries: number;
  private readonly timeoutMs: number;
  private readonly backoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly headers: Record<string, string>;
  private readonly fetch: typeof fetch;

  constructor(options: MemoraClientOptions = {}) {
    this.baseUrl = (options.baseUrl ?? "http://localhost:8080").replace(/\/+$/, "");
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.maxRetries = options.maxRetries ?? 3;
    this.backoffMs = options.backoffMs ?? 500;
    this.maxBackoffMs = options.maxBackoffMs ?? 30_000;
    this.headers = {
      Accept: "application/json",
      "User-Agent": `memora-client-ts/${VERSION}`,
      ...(options.apiKey ? { Authorization: `Bearer ${options.apiKey}` } : {}),
      ...options.headers,
    };
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  // ------------------------------------------------------------------------------ writes
  /**
   * Stores raw items (`POST /api/memories/batch`); extraction runs in the background as the
   * answer's `operation_id` (see `waitFor`). Items are `MemoryItem`s or plain strings (the
   * content). Idempotent per `document_id`: the same content again is `unchanged`.
   */
  storeBatch(
    agentId: string,
    items: ReadonlyArray<MemoryItem | string>,
    options: StoreBatchOptions = {},
  ): Promise<BatchAccepted> {
    const { backfill, ...fields } = options;
    const body = defined({
      ...fields,
      agent_id: agentId,
      items: items.map((item) => (typeof item === "string" ? { content: item } : item)),
    });
    return this.request<BatchAccepted>("POST", "/api/memories/batch", {
      json: body,
      headers: backfill ? { "X-Memora-Priority": "backfill" } : {},
    });
  }

  /**
   * Appends messages to a live conversation (created on first use). Each needs `message_id`
   * and `role`; an id already stored is skipped (safe retries), the same id with other content
   * is a 409 `message_conflict`.
   */
  appendMessages(
    agentId: string,
    conversationId: string,
    messages: ReadonlyArray<Message>,
    options: AppendMessagesOptions = {},
  ): Promise<AppendAccepted> {
    const { backfill, ...fields } = options;
    const path = `/api/agents/${seg(agentId)}/conversations/${seg(conversationId)}/messages`;
    return this.request<AppendAccepted>("POST", path, {
      json: defined({ ...fields, messages: [...messages] }),
      headers: backfill ? { "X-Memora-Priority": "backfill" } : {},
    });
  }

  /** An operation's status and stages (404 `not_found` for another tenant's). */
  operation(operationId: string): Promise<Operation> {
    return this.request<Operation>("GET", `/api/operations/${seg(operationId)}`);
  }

  /**
   * Polls the operation until it is completed, failed or superseded, and returns it; throws
   * `OperationTimeoutError` after `timeoutMs`, and `OperationFailedError` when it ended
   * `failed` (unless `raiseOnFailure: false`).
   */
  async waitFor(operationId: string, options: WaitForOptions = {}): Promise<Operation> {
    const timeoutMs = options.timeoutMs ?? 120_000;
    const intervalMs = options.intervalMs ?? 500;
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const op = await this.operation(operationId);
      if (op.status === "completed" || op.status === "failed" || op.status === "superseded") {
        if (op.status === "failed" && (options.raiseOnFailure ?? true)) {
          throw new OperationFailedError(op);
        }
        return op;
      }
      const left = deadline - performance.now();
      if (left <= 0) {
        throw new OperationTimeoutError(op, timeoutMs);
      }
      await sleep(Math.min(intervalMs, left));
    }
  }

  // ------------------------------------------------------------------------------- reads
  /** Fused retrieval over the agent's memories (`POST /api/search`). */
  search(agentId: string, query: string, options: SearchOptions = {}): Promise<SearchResponse> {
    return this.request<SearchResponse>("POST", "/api/search", {
      json: defined({ ...options, agent_id: agentId, query }),
    });
  }

  /** Hybrid search over the raw messages of the agent's conversations, one result per message. */
  conversationSearch(
    agentId: string,
    query: string,
    options: ConversationSearchOptions = {},
  ): Promise<ConversationSearchResponse> {
    return this.request<ConversationSearchResponse>("POST", "/api/conversation_search", {
      json: defined({ ...options, agent_id: agentId, query }),
    });
  }

  /** An entity (id, name or alias) with its relations to others, current first, each with its
   * evidence memories and validity (404 `entity_not_found`, `agent_not_found`). */
  entity(agentId: string, name: string): Promise<Entity> {
    return this.request<Entity>("GET", `/api/agents/${seg(agentId)}/entities/${seg(name)}`);
  }

  /** An answer in the agent's voice from its memories (needs the server's LLM). */
  think(agentId: string, query: string, options: ThinkOptions = {}): Promise<ThinkResponse> {
    return this.request<ThinkResponse>("POST", "/api/think", {
      json: defined({ ...options, agent_id: agentId, query }),
    });
  }

  // ----------------------------------------------------------------------------- any route
  /**
   * Any route, e.g. `request("GET", "/api/queues")`: its JSON answer (undefined for an empty
   * one), with the same retries and errors as every method.
   */
  async request<T = unknown>(method: string, path: string, raw: RawRequest = {}): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once<T>(method.toUpperCase(), path, raw);
      } catch (error) {
        if (!(error instanceof MemoraError) || !error.retryable || attempt >= this.maxRetries) {
          throw error;
        }
        await sleep(this.delay(error, attempt));
      }
    }
  }

  /** The answer's Retry-After (capped), else exponential back-off with jitter. */
  private delay(error: MemoraError, attempt: number): number {
    if (error.retryAfter !== undefined) {
      return Math.min(error.retryAfter * 1000, this.maxBackoffMs);
    }
    const ceiling = Math.min(this.backoffMs * 2 ** attempt, this.maxBackoffMs);
    return ceiling / 2 + Math.random() * (ceiling / 2);
  }

  private async once<T>(method: string, path: string, raw: RawRequest): Promise<T> {
    const url = new URL(this.baseUrl + path);
    for (const [key, value] of Object.entries(raw.params ?? {})) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    const headers: Record<string, string> = { ...this.headers, ...raw.headers };
    let body: string | undefined;
    if (raw.json !== undefined) {
      body = JSON.stringify(raw.json);
      headers["Content-Type"] = "application/json";
    }
    let response: Response;
    try {
      response = await this.fetch(url, {
        method,
        headers,
        body,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (error) {
      const timedOut = error instanceof Error && error.name === "TimeoutError";
      const code = errorCode(error);
      throw new MemoraConnectionError(
        `${method} ${path}: ${timedOut ? `no answer in ${this.timeoutMs} ms` : (code ?? String(error))}`,
        {
          cause: error,
          code: timedOut ? "timeout" : "connection_error",
          connectFailed: code !== undefined && CONNECT_CODES.has(code),
        },
      );
    }
    if (!response.ok) {
      throw await errorFrom(response);
    }
    const text = await response.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }
}
