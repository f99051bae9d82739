"""Conversation archives in and out: the formats backfills stream (JSONL, LoCoMo)."""
