# One virtual environment for everything; CPU torch first (a plain `torch` pulls a CUDA build).
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup demo test lint bench-ingest bench-retrieval

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
