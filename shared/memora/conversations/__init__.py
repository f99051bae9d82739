"""Conversation search over raw messages (seed 002 §7): chunking, sync, consistency."""
