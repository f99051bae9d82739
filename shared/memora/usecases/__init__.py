"""The application layer: one typed function (or small class) per use case. Each owns its
transaction and hands its work to the pipeline after the commit
(`memora.pipeline.handoff.hand_off`); the API routes, MCP tools and CLI commands only parse,
call one of these and map the result."""
