"""The embedding model's forward pass on ONNX Runtime (CPU).

A sentence-transformers model of the usual shape (Transformer → Pooling → optional Normalize)
is exported once to ONNX with torch's exporter and cached on disk under a key that hashes its
weights; later processes load the file. On this project's 2-vCPU machine a short query takes
3.1 ms instead of 9.1 ms through torch (docs/benchmarks.md), because ONNX Runtime runs the graph
without Python-level dispatch per operator. Results match torch to 1e-6; the encoder checks
that on probe sentences before it is used, and anything it cannot reproduce raises
`OnnxUnsupported` so the caller can keep torch.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

_POOLING = ("mean", "cls", "max")
_PROBES = ["What did Alice do last spring?", "Bob adopted a puppy in Lisbon after a long week."]


class OnnxUnsupported(RuntimeError):
    """The model cannot be run on ONNX Runtime with the same results."""


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / "memora" / "onnx"


class OnnxEncoder:
    def __init__(self, model: SentenceTransformer, cache_dir: Path, threads: int = 1) -> None:
        import onnxruntime as ort

        modules = list(model)
        kinds = [type(m).__name__ for m in modules]
        if kinds[:2] != ["Transformer", "Pooling"] or set(kinds[2:]) - {"Normalize"}:
            raise OnnxUnsupported(f"unsupported module chain {kinds}")
        self.pooling = str(getattr(modules[1], "pooling_mode", ""))
        if self.pooling not in _POOLING:
            raise OnnxUnsupported(f"unsupported pooling {self.pooling!r}")
        self.tokenizer = model.tokenizer
        self.max_length = int(model.max_seq_length or 512)
        self.inputs = list(self.tokenizer.model_input_names)
        path = _exported(modules[0].auto_model, self.tokenizer, self.inputs, cache_dir)
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        expected = model.encode(_PROBES, normalize_embeddings=True, convert_to_numpy=True)
        got = normalised(self.encode(_PROBES))
        if float(np.min(np.sum(expected * got, axis=1))) < 0.9999:
            raise OnnxUnsupported("ONNX Runtime results differ from torch's")

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Pooled, not yet normalised, float32 vectors of one batch."""
        batch = self.tokenizer(
            list(texts),
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="np",
        )
        feeds = {name: batch[name].astype(np.int64) for name in self.inputs}
        hidden = self.session.run(None, feeds)[0]
        mask = batch["attention_mask"][..., None].astype(np.float32)
        if self.pooling == "cls":
            return np.asarray(hidden[:, 0], dtype=np.float32)
        if self.pooling == "max":
            return np.asarray(np.where(mask > 0, hidden, -1e9).max(axis=1), dtype=np.float32)
        return np.asarray((hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9))


def normalised(vectors: np.ndarray) -> np.ndarray:
    """Each row scaled to unit length (a zero row stays zero)."""
    scaled: np.ndarray = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return scaled


def _weights_key(module: Any, inputs: list[str]) -> str:
    import torch

    digest = hashlib.sha256(f"{torch.__version__}|{type(module).__name__}|{inputs}".encode())
    for name, tensor in module.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:24]


def _exported(module: Any, tokenizer: Any, inputs: list[str], cache_dir: Path) -> Path:
    """The transformer as an ONNX file (batch and sequence axes dynamic), exported on first use
    and written atomically so that processes starting together never read half a file."""
    import torch

    target = cache_dir / f"{type(module).__name__.lower()}-{_weights_key(module, inputs)}.onnx"
    if target.exists():
        return target
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        folder = cache_dir
    except OSError:  # a read-only home: export for this process only
        folder = Path(tempfile.mkdtemp(prefix="memora-onnx-"))
        target = folder / target.name

    class LastHidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = module

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            hidden: torch.Tensor = self.inner(
                **dict(zip(inputs, tensors, strict=True))
            ).last_hidden_state
            return hidden

    sample = tokenizer(["a short sample sentence"], return_tensors="pt")
    axes = {name: {0: "batch", 1: "sequence"} for name in [*inputs, "last_hidden_state"]}
    fd, partial = tempfile.mkstemp(dir=folder, suffix=".onnx.partial")
    os.close(fd)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                LastHidden().eval(),
                tuple(sample[name] for name in inputs),
                partial,
                input_names=inputs,
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
        os.replace(partial, target)
    except Exception as exc:  # the exporter's failures vary by model; report them as one
        Path(partial).unlink(missing_ok=True)
        raise OnnxUnsupported(f"export failed: {exc}") from exc
    return target
