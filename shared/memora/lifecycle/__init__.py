"""The memory lifecycle (seed 002 parts 3–4): remember with conflict detection, forget with
undo, recall, reflect, link; the rules and scores are pure functions (rules, scores), the
operations are in memory, recall and reflect; the evolution jobs live in memora.jobs."""
