"""`memora backfill PATH`: stream a conversation archive into the write API on the backfill queues.

- Streams the file (memora.interchange.archives): memory stays flat however large the archive is.
- Posts documents concurrently (`--concurrency`), in order of the archive for the checkpoint:
  the checkpoint advances over the longest prefix of documents the API acknowledged, and is
  saved (atomically) every second, on Ctrl-C or SIGTERM, and at the end. A re-run resumes
  there; documents posted twice are harmless (the API answers "unchanged" for identical
  content), so a crash loses nothing and duplicates nothing.
- The default checkpoint is keyed by target (API URL and a hash of the API key) and by the
  archive's content (SHA-256, streamed): the same archive posted to another server, or as
  another tenant, starts from the beginning; a re-run against the same one resumes.
- Sends `X-Memora-Priority: backfill`: the pipeline runs on the `<stage>.backfill` queues, which
  workers drain after their live queues; it pauses while those queues hold more than
  `--max-backlog` messages (read from the API's /metrics). When the depths cannot be read it
  says so on stderr and in the summary, posts on without pausing, and keeps trying to read them.
- Transient failures (connection errors, 408, 429, 5xx) are retried (tenacity): after the
  `Retry-After` the API sends with a 429 or 503, else with exponential back-off; a document
  the API refuses (4xx) is logged to `<checkpoint>.failures.jsonl` and counted, and the run
  goes on.

Its parts: `command` (the Typer command, light to import), `options` (the options, the default
checkpoint, the error that stops a run), `checkpoint` (where a run resumes), `posting` (one
document, with its retries), `backpressure` (the backfill queues' depths), `run` (the run loop
and the wait until searchable), `summary` (the summary and its printing). This package imports
none of them: `memora --help` loads only `command`.
"""
