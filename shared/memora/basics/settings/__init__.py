"""The settings' sections, one class per concern, that `memora.basics.config.Settings` composes
by inheritance: every setting stays a flat attribute (`settings.rrf_k`) read from its MEMORA_*
variable, and each section's docstring and fields' descriptions make docs/configuration.md
(`python -m memora.basics.settings_doc`)."""
