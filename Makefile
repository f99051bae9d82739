# One virtual environment for everything; CPU torch first (a plain `torch` pulls a CUDA build).
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup demo test lint bench-ingest bench-retrieval bench-latency bench-cross-encoder loadtest

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/memora demo

test: $(STAMP)
	$(VENV)/bin/pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	PYTHONPATH=shared:. $(VENV)/bin/lint-imports

# Headless locust run against an embedded stack it starts itself (docs/loadtests.md), e.g.
#   make loadtest LOADTEST_ARGS="--scenario mixed --users 8 --run-time 5m"
loadtest: $(STAMP)
	$(PY) -m loadtests.run $(LOADTEST_ARGS)

# Benchmarks (docs/benchmarks.md): not tests; each prints its figures and writes bench/results/.
bench-ingest: $(STAMP)
	$(PY) bench/ingest.py $(BENCH_ARGS)

bench-retrieval: $(STAMP)
	$(PY) bench/locomo.py $(BENCH_ARGS)

bench-latency: $(STAMP)
	$(PY) bench/search_latency.py $(BENCH_ARGS)

bench-cross-encoder: $(STAMP)
	$(PY) bench/cross_encoder.py $(BENCH_ARGS)
