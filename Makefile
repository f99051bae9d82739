# One virtual environment for everything, installed from requirements.lock: the exact versions
# (and hashes) that were tested, torch as the CPU build. `make lock` regenerates the lock file
# after a change of dependencies in pyproject.toml (docs/deploy.md, Reproducible installs).
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Where the CPU torch wheel is found (`2.13.0+cpu` is not on PyPI): PyTorch's index when its
# name resolves, else pip's own configuration (a directory holding the wheel, say).
TORCH_FIND_LINKS ?= $(shell python3 -c "import socket; socket.getaddrinfo('download.pytorch.org', 443)" \
	2>/dev/null && echo https://download.pytorch.org/whl/cpu/torch/)
FIND_TORCH := $(if $(TORCH_FIND_LINKS),--find-links $(TORCH_FIND_LINKS))
UV_VERSION := 0.13.9
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup lock demo test lint bench-ingest bench-retrieval bench-latency bench-compare bench-cross-encoder bench-cross-encoder-service loadtest

$(STAMP): pyproject.toml clients/python/pyproject.toml requirements.lock
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(FIND_TORCH) -r requirements.lock
	$(PY) -m pip install --quiet --no-deps -e .
	# the Python client (clients/python, published on its own): its dependencies are in the lock
	$(PY) -m pip install --quiet --no-deps -e clients/python
	touch $(STAMP)

setup: $(STAMP)

# Re-resolves pyproject.toml ([tool.uv] and [tool.uv.pip] hold the options), keeping every pin
# it can; `make lock UPGRADE=--upgrade` moves everything to the newest versions.
lock:
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet uv==$(UV_VERSION)
	$(VENV)/bin/uv pip compile --quiet pyproject.toml $(FIND_TORCH) \
		--custom-compile-command "make lock" -o requirements.lock $(UPGRADE)

demo: $(STAMP)
	$(VENV)/bin/memora demo

test: $(STAMP)
	$(VENV)/bin/pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	PYTHONPATH=shared:.:clients/python $(VENV)/bin/lint-imports
	$(PY) clients/python/scripts/generate_async.py --check
	$(VENV)/bin/mypy clients/typescript/scripts/export_openapi.py
	$(PY) clients/typescript/scripts/export_openapi.py --check
	$(PY) -m memora.basics.settings_doc --check

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

# The read path's guard: the same search workload on BASE and on this working tree, each in its
# own checkout, database and query service, questions alternating; ratios per percentile, stage
# and CPU (docs/benchmarks.md records one for every change to the read path)
bench-compare: $(STAMP)
	@test -n "$(BASE)" || { echo "usage: make bench-compare BASE=<commit> [BENCH_ARGS=...]"; exit 2; }
	$(PY) bench/compare.py --base $(BASE) $(BENCH_ARGS)

bench-cross-encoder: $(STAMP)
	$(PY) bench/cross_encoder.py $(BENCH_ARGS)

# The rerank stage inside the query service, read from its own trace: fp32 (`onnx`) beside the
# CPU default (`auto`: int8 when its ranking check passes), 100 candidates, one query service
# each on one database, every question sent to both in turn (docs/benchmarks.md)
bench-cross-encoder-service: $(STAMP)
	$(PY) bench/search_latency.py --sizes 10000 --texts locomo --reranker cross-encoder \
		--cross-encoder-backend onnx auto --candidates 100 --queries 60 --warmup 5 \
		--trace-every 1 --out bench/results/cross_encoder_service.json $(BENCH_ARGS)
