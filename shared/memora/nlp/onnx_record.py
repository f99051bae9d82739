"""What a process needs to embed with a verified ONNX export, without torch.

The first process to run a local embedding model on ONNX Runtime loads it with
sentence-transformers (and so torch), exports it, and checks the export against torch's
vectors (`memora.nlp.onnx_encoder`). It then writes a record beside the export: the file, the
tokenizer as the encoder calls it (padding and truncation set), the model's input names, its
pooling, its dimension and torch's vectors of the probe sentences. Later processes on the same
model directory read the record and open ONNX Runtime directly: importing sentence-transformers
and torch costs a process about 4 CPU seconds and 500 MB, which a stack of six embedding
processes paid at every start. The record is keyed by the model directory's path and its
files' sizes and modification times, so a changed model is exported and checked again; a
reader that does not reproduce the recorded probe vectors falls back to the checked path.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OnnxRecord:
    model: str  # the exported ONNX file
    tokenizer: str  # the `tokenizers` JSON, padding and truncation as the encoder calls it
    inputs: list[str]
    pooling: str
    dim: int
    probes: list[list[float]]  # torch's unit vectors of the encoder's probe sentences

    @property
    def expected(self) -> np.ndarray:
        return np.asarray(self.probes, dtype=np.float32)


def _path(model_dir: Path, cache_dir: Path) -> Path:
    """The record's file: named by the model directory and its files' sizes and times."""
    root = model_dir.resolve()
    digest = hashlib.sha256(str(root).encode())
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        stat = file.stat()
        digest.update(f"{file.relative_to(root)}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    return cache_dir / f"record-{digest.hexdigest()[:24]}.json"


def read(model_dir: Path, cache_dir: Path) -> OnnxRecord | None:
    """The model's record when there is one and its export is still there."""
    try:
        record = OnnxRecord(**json.loads(_path(model_dir, cache_dir).read_text()))
    except (OSError, ValueError, TypeError):  # none yet, or unreadable: export and check again
        return None
    return record if Path(record.model).is_file() else None


def write(model_dir: Path, cache_dir: Path, record: OnnxRecord) -> None:
    """Written atomically; a cache folder that cannot be written leaves the next process the
    checked path (the export itself then lives in a temporary folder)."""
    target = _path(model_dir, cache_dir)
    try:
        fd, partial = tempfile.mkstemp(dir=cache_dir, suffix=".json.partial")
        with os.fdopen(fd, "w") as out:
            json.dump(asdict(record), out)
        os.replace(partial, target)
    except OSError as exc:
        log.info("no ONNX record written in %s (%s)", cache_dir, exc)
