"""The pipeline's stages, one module each with `prepare(ctx, conn, job) -> write`, registered in
memora.pipeline.runner. Their names, order and queues are in memora.basics.stages."""
