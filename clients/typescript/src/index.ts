/**
 * @memora/client: a TypeScript client of Memora's HTTP API for Node 20+, with no runtime
 * dependencies (the global fetch, node:crypto).
 */

export {
  MemoraClient,
  VERSION,
  type AppendAccepted,
  type AppendMessagesOptions,
  type BatchAccepted,
  type ConversationSearchOptions,
  type ConversationSearchResponse,
  type Entity,
  type MemoraClientOptions,
  type MemoryItem,
  type Message,
  type Operation,
  type RawRequest,
  type RequestBody,
  type ResponseBody,
  type SearchOptions,
  type SearchResponse,
  type StoreBatchOptions,
  type ThinkOptions,
  type ThinkResponse,
  type WaitForOptions,
} from "./client.js";
export {
  MemoraConnectionError,
  MemoraError,
  OperationFailedError,
  OperationTimeoutError,
  errorFrom,
  parseRetryAfter,
  type ErrorBody,
  type MemoraErrorOptions,
} from "./errors.js";
export {
  DEFAULT_TOLERANCE_SECONDS,
  signWebhook,
  verifyWebhook,
  type HeadersLike,
  type VerifyOptions,
} from "./webhooks.js";
/** The API's OpenAPI document as types (generated: src/schema.ts). */
export type { components, operations, paths } from "./schema.js";
