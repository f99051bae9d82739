"""The memory lifecycle's domain (seed 002 parts 3–4): the rules and scores (pure functions:
rules, scores, limits), changes of state read from a sentence (changes, over parsing and
relations), what remember and consolidation compare (memory) and reflect's prompt (reflect).
The use cases that run them (remember, edit, forget, restore, link, recall, reflect) are in
memora.usecases; the evolution jobs in memora.jobs."""
