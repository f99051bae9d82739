"""Load tests: locust scenarios and a headless runner (docs/loadtests.md)."""
