"""webhooks: hand due webhook deliveries to the sender (retries whose back-off has passed,
hand-offs that were lost). Runs on the `webhooks` queue, beside the deliveries themselves.
With a backend that sends no deliveries (`memora jobs run webhooks`) it sends them itself."""

from __future__ import annotations

from memora.jobs.base import JobContext, JobResult
from memora.webhooks import delivery, events


def run(ctx: JobContext) -> JobResult:
    ids = delivery.take_due(ctx.pool, ctx.settings)
    if not ids or events.dispatch(ids, ctx.backend):
        return JobResult(examined=len(ids), changed=len(ids))
    sent = sum(delivery.deliver(ctx.pool, i, ctx.settings) is not None for i in ids)
    return JobResult(examined=len(ids), changed=sent)
