// The client without a Memora server: webhook signatures, error answers and retries against a
// local node:http server, and the generated types.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";

import {
  MemoraClient,
  MemoraConnectionError,
  MemoraError,
  parseRetryAfter,
  signWebhook,
  verifyWebhook,
  type BatchAccepted,
  type ConversationSearchResponse,
  type MemoryItem,
  type Message,
  type Operation,
  type SearchResponse,
  type ThinkResponse,
} from "@memora/client";

// Derived from the generated schema: `never` would mean a route or its answer went missing.
type IsNever<T> = [T] extends [never] ? true : false;
const typesResolve: [
  IsNever<MemoryItem>,
  IsNever<Message>,
  IsNever<BatchAccepted>,
  IsNever<Operation>,
  IsNever<SearchResponse>,
  IsNever<ConversationSearchResponse>,
  IsNever<ThinkResponse>,
] = [false, false, false, false, false, false, false];

const SECRET = "whsec_" + Buffer.from("0123456789abcdef0123456789abcdef").toString("base64");
const BODY =
  '{"type":"operation.completed","timestamp":"2026-11-26T06:03:40.008Z","data":{"agent_id":"alice"}}';

function signed(body: string, timestamp = Math.floor(Date.now() / 1000)): Record<string, string> {
  return {
    "webhook-id": "msg_2b7c",
    "webhook-timestamp": String(timestamp),
    "webhook-signature": signWebhook(SECRET, "msg_2b7c", timestamp, body),
  };
}

describe("webhook signatures", () => {
  test("a correctly signed delivery is accepted", () => {
    assert.equal(typesResolve.length, 7);
    assert.equal(verifyWebhook(SECRET, signed(BODY), BODY), true);
    assert.equal(verifyWebhook(SECRET, new Headers(signed(BODY)), Buffer.from(BODY)), true);
    const headers = signed(BODY);
    // during a rotation: several signatures, one of them right
    headers["webhook-signature"] =
      `v1,${Buffer.alloc(32).toString("base64")} ${headers["webhook-signature"]}`;
    assert.equal(verifyWebhook(SECRET, headers, BODY), true);
  });

  test("a tampered body, signature, id or another secret is refused", () => {
    const headers = signed(BODY);
    assert.equal(verifyWebhook(SECRET, headers, BODY.replace("alice", "mallory")), false);
    assert.equal(verifyWebhook(SECRET, { ...headers, "webhook-id": "msg_other" }, BODY), false);
    const signature = headers["webhook-signature"] ?? "";
    const flipped = signature.slice(0, -2) + (signature.at(-2) === "A" ? "B" : "A") + signature.at(-1);
    assert.equal(verifyWebhook(SECRET, { ...headers, "webhook-signature": flipped }, BODY), false);
    const other = "whsec_" + Buffer.from("another secret of thirty-two b..").toString("base64");
    assert.equal(verifyWebhook(other, headers, BODY), false);
    assert.equal(verifyWebhook(SECRET, {}, BODY), false);
  });

  test("a timestamp outside the tolerance is refused (replays)", () => {
    const old = Math.floor(Date.now() / 1000) - 301;
    assert.equal(verifyWebhook(SECRET, signed(BODY, old), BODY), false);
    assert.equal(verifyWebhook(SECRET, signed(BODY, old), BODY, { toleranceSeconds: 600 }), true);
    assert.equal(verifyWebhook(SECRET, { ...signed(BODY), "webhook-timestamp": "soon" }, BODY), false);
  });

  // The pytest test (tests/integration/test_typescript_client.py) signs a delivery with the
  // server's own code (memora.webhooks.signing) and passes it here.
  const fixture = process.env.MEMORA_WEBHOOK_FIXTURE;
  test(
    "a delivery signed by the server's code",
    { skip: fixture ? false : "MEMORA_WEBHOOK_FIXTURE not set" },
    () => {
      const { secret, headers, body } = JSON.parse(fixture ?? "{}") as {
        secret: string;
        headers: Record<string, string>;
        body: string;
      };
      assert.equal(verifyWebhook(secret, headers, body), true);
      assert.equal(verifyWebhook(secret, headers, body + " "), false);
      assert.equal(verifyWebhook(secret, headers, body.replace(/"[^"]*"/, '"x"')), false);
    },
  );
});

// A server answering from a script: one handler per request, in order.
type Handler = (req: IncomingMessage, res: ServerResponse) => void;
let script: Handler[] = [];
let seen: IncomingMessage[] = [];
const server = createServer((req, res) => {
  seen.push(req);
  const next = script.shift();
  if (next) {
    next(req, res);
  } else {
    res.writeHead(500).end("no answer scripted");
  }
});
let base = "";

function json(status: number, body: unknown, headers: Record<string, string> = {}): Handler {
  return (_req, res) => {
    res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));
  };
}

function error(status: number, code: string, headers: Record<string, string> = {}): Handler {
  return json(status, { error: { code, message: `${code} happened`, details: null } }, headers);
}

describe("answers, errors and retries", () => {
  before(async () => {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  function client(extra: Partial<ConstructorParameters<typeof MemoraClient>[0]> = {}): MemoraClient {
    script = [];
    seen = [];
    return new MemoraClient({ baseUrl: base, apiKey: "mk_test", backoffMs: 1, ...extra });
  }

  test("429 and 503 are retried, after Retry-After", async () => {
    const memora = client();
    script = [
      error(429, "rate_limited", { "retry-after": "0" }),
      error(503, "database_unavailable"),
      json(200, { results: [] }),
    ];
    const found = await memora.search("maya", "Kyoto");
    assert.deepEqual(found.results, []);
    assert.equal(seen.length, 3);
    assert.equal(seen[0]?.headers.authorization, "Bearer mk_test");
    assert.equal(seen[0]?.url, "/api/search");
  });

  test("the tries are bounded; the last error is thrown", async () => {
    const memora = client({ maxRetries: 1 });
    script = [
      error(503, "query_service_unavailable", { "retry-after": "0" }),
      error(503, "query_service_unavailable", { "retry-after": "7" }),
    ];
    const thrown = await memora.operation("x").catch((e: unknown) => e);
    assert.ok(thrown instanceof MemoraError);
    assert.equal(thrown.status, 503);
    assert.equal(thrown.code, "query_service_unavailable");
    assert.equal(thrown.retryAfter, 7);
    assert.equal(seen.length, 2);
  });

  test("other errors are not retried and carry the API's code", async () => {
    const memora = client();
    script = [error(404, "not_found")];
    await assert.rejects(memora.operation("a/b c"), (e: unknown) => {
      assert.ok(e instanceof MemoraError);
      assert.deepEqual([e.status, e.code, e.message], [404, "not_found", "not_found happened"]);
      return true;
    });
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.url, "/api/operations/a%2Fb%20c");
  });

  test("an answer that is not the JSON error body still throws MemoraError", async () => {
    const memora = client();
    script = [(_req, res) => res.writeHead(502, { "content-type": "text/plain" }).end("bad gateway")];
    await assert.rejects(
      memora.operation("x"),
      (e: unknown) => e instanceof MemoraError && e.status === 502 && e.code === "http_error",
    );
  });

  test("a refused connection is a MemoraConnectionError, retried", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const memora = new MemoraClient({ baseUrl: `http://127.0.0.1:${port}`, maxRetries: 1, backoffMs: 1 });
    await assert.rejects(
      memora.operation("x"),
      (e: unknown) => e instanceof MemoraConnectionError && e.connectFailed && e.status === 0,
    );
  });

  test("Retry-After as seconds or as an HTTP date", () => {
    assert.equal(parseRetryAfter("5"), 5);
    assert.equal(
      parseRetryAfter(new Date(Date.now() + 10_000).toUTCString(), Date.now()) !== undefined,
      true,
    );
    assert.equal(parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT"), 0);
    assert.equal(parseRetryAfter("later"), undefined);
    assert.equal(parseRetryAfter(null), undefined);
  });
});
