"""The application layer: one typed function per use case, in a module per area. Every use
case takes the application context first (`memora.pipeline.context.AppContext`: settings, pool,
task backend, LLM and models, built once per process), then the caller's connection when it
works on one (the API's tenant connection), then its own arguments. Each owns its transaction
and, after the commit, hands its work to the pipeline (`memora.pipeline.handoff.hand_off`) and
its webhook deliveries to the same backend (`memora.webhooks.events.dispatch_committed`); the
API routes, MCP tools and CLI commands only parse, call one of these and map the result."""
