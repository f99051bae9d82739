"""The bottom layer: settings, plain data, tenancy, the pipeline's vocabulary (stages,
operation kinds and statuses, queues), typed errors, logs and metrics. Imports no other memora
package."""
