// The client against a running Memora: MEMORA_URL (the write API's port) and, when the server
// asks for one, MEMORA_API_KEY. Skipped without MEMORA_URL. The pytest test
// tests/integration/test_typescript_client.py serves a stack and runs this file against it.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";

import { MemoraClient, MemoraError } from "@memora/client";

const url = process.env.MEMORA_URL;
const memora = new MemoraClient({
  baseUrl: url ?? "http://localhost:8080",
  apiKey: process.env.MEMORA_API_KEY,
  timeoutMs: 60_000,
});
const agent = `ts-client-${randomUUID()}`;

describe("against a Memora server", { skip: url ? false : "MEMORA_URL not set" }, () => {
  test("storeBatch, waitFor, then search finds the fact", async () => {
    const items = [
      {
        content: "Maya is planning a trip to Kyoto in November.",
        speaker: "Maya",
        event_date: "2024-05-01T09:00:00Z",
      },
      "Maya's sister Hanna is allergic to peanuts.",
    ];
    const accepted = await memora.storeBatch(agent, items, { document_id: "notes/may 1", title: "Notes" });
    assert.equal(accepted.status, "created");
    assert.equal(accepted.items_count, 2);
    const operation = await memora.waitFor(accepted.operation_id, { timeoutMs: 60_000, intervalMs: 200 });
    assert.equal(operation.status, "completed");
    assert.equal(operation.document_id, "notes/may 1");
    const again = await memora.storeBatch(agent, items, { document_id: "notes/may 1", title: "Notes" });
    assert.equal(again.status, "unchanged");

    const found = await memora.search(agent, "Where is Maya travelling?", { top_k: 5 });
    const kyoto = found.results.filter((hit) => hit.text.includes("Kyoto"));
    assert.ok(kyoto.length > 0, JSON.stringify(found));
    assert.ok(kyoto[0] && kyoto[0].weight > 0 && kyoto[0].id);

    const maya = await memora.entity(agent, "Maya");
    const sister = maya.relations.filter((r) => r.relation === "sibling_of");
    assert.deepEqual(
      sister.map((r) => [r.other.name, r.status]),
      [["Hanna", "current"]],
    );
    assert.ok((sister[0]?.evidence.length ?? 0) > 0);
  });

  test("appendMessages twice, then conversationSearch finds a message", async () => {
    const m1 = {
      message_id: "m1",
      role: "user",
      event_date: "2024-05-02T09:00:00Z",
      content: "Could you find a ryokan in Gion for our Kyoto trip in November?",
    } as const;
    const m2 = {
      message_id: "m2",
      role: "assistant",
      event_date: "2024-05-02T09:01:00Z",
      content: "Gion has several quiet ryokan; I would book one near Yasaka Shrine.",
    } as const;
    const first = await memora.appendMessages(agent, "chat-1", [m1], { title: "Kyoto trip" });
    assert.equal(first.status, "created");
    assert.equal(first.messages_new, 1);
    const second = await memora.appendMessages(agent, "chat-1", [m1, m2]);
    assert.deepEqual([second.messages_new, second.messages_existing], [1, 1]);
    await memora.waitFor(second.operation_id, { timeoutMs: 60_000, intervalMs: 200 });

    const found = await memora.conversationSearch(agent, "ryokan in Gion", { limit: 5 });
    assert.ok(found.total_results >= 1, JSON.stringify(found));
    assert.deepEqual(new Set(found.results.map((r) => r.conversation_id)), new Set(["chat-1"]));
    assert.ok(["m1", "m2"].includes(found.results[0]?.message_id ?? ""));

    const changed = { ...m1, content: "Something else entirely." };
    await assert.rejects(memora.appendMessages(agent, "chat-1", [changed]), (e: unknown) => {
      assert.ok(e instanceof MemoraError);
      assert.deepEqual([e.status, e.code], [409, "message_conflict"]);
      return true;
    });
  });

  test("4xx answers are MemoraError with the API's code", async () => {
    await assert.rejects(memora.search(agent, ""), (e: unknown) => {
      assert.ok(e instanceof MemoraError, String(e));
      assert.equal(e.status, 422);
      assert.equal(e.code, "validation_error");
      assert.ok(e.message.length > 0);
      assert.ok(e.details !== undefined);
      return true;
    });
    await assert.rejects(memora.operation(randomUUID()), (e: unknown) => {
      assert.ok(e instanceof MemoraError);
      assert.deepEqual([e.status, e.code], [404, "not_found"]);
      return true;
    });
  });
});
