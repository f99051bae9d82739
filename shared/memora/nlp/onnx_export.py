"""A transformers module on ONNX Runtime (CPU): exported once with torch's exporter, cached on
disk under a key that hashes its weights, optionally quantised to int8, opened as a session.

Shared by the embedder (`memora.nlp.onnx_encoder`) and the cross-encoder
(`retrieval.rerank.cross_encoder_model`); each checks the session's results against torch before
using it and raises `OnnxUnsupported` when it cannot reproduce them, so the caller can keep
torch.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any


class OnnxUnsupported(RuntimeError):
    """The model cannot be run on ONNX Runtime with the same results."""


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / "memora" / "onnx"


def exported(module: Any, tokenizer: Any, inputs: list[str], output: str, cache_dir: Path) -> Path:
    """`module`'s output field `output` (`last_hidden_state`, `logits`) as an ONNX file, batch
    and sequence axes dynamic, exported on first use."""
    import torch

    name = f"{type(module).__name__.lower()}-{_weights_key(module, inputs, output)}.onnx"

    class Output(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = module

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            result: torch.Tensor = getattr(
                self.inner(**dict(zip(inputs, tensors, strict=True))), output
            )
            return result

    def export(partial: Path) -> None:
        sample = tokenizer(["a short sample sentence"], return_tensors="pt")
        axes = {name: {0: "batch", 1: "sequence"} for name in inputs} | {output: {0: "batch"}}
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Output().eval(),
                tuple(sample[name] for name in inputs),
                str(partial),
                input_names=inputs,
                output_names=[output],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )

    return _cached(cache_dir, name, export, "export")


def quantized(model: Path) -> Path:
    """The model with int8 weights and dynamically quantised activations (MatMul, Attention,
    per channel), written beside it on first use. On an x86 CPU without VNNI, weights keep 7
    bits (`reduce_range`): ONNX Runtime's u8 × s8 kernels there add pairs of products in 16
    bits, which saturate with full-range weights (seen on an AMD EPYC with AVX2 only: a
    cross-encoder's int8 ranking at Spearman 0.76 against torch's, where VNNI machines
    passed the 0.9 check)."""
    reduced = not _has_vnni()

    def quantize(partial: Path) -> None:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        root = logging.getLogger()  # where the quantiser logs
        root.addFilter(_quiet_quantiser)
        try:
            quantize_dynamic(
                model, partial, weight_type=QuantType.QInt8, per_channel=True,
                reduce_range=reduced,
            )  # fmt: skip
        finally:
            root.removeFilter(_quiet_quantiser)

    suffix = ".r7.int8.onnx" if reduced else ".int8.onnx"
    return _cached(
        model.parent, model.name.removesuffix(".onnx") + suffix, quantize, "quantisation"
    )


def _has_vnni() -> bool:
    """Whether the CPU has the VNNI instructions (AVX512-VNNI or AVX-VNNI) that ONNX Runtime's
    int8 kernels use without 16-bit intermediate sums (Linux's /proc/cpuinfo; elsewhere: not
    known, so no)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_vnni" in flags or "avx_vnni" in flags


def _quiet_quantiser(record: logging.LogRecord) -> bool:
    """Drops what ONNX Runtime's quantiser logs on the root logger that asks nothing of an
    operator: a line per tensor at INFO ('Quantization parameters for tensor … not specified',
    about 40 for a 6-layer BERT), 'Please consider to run pre-processing before quantization'
    (shape inference and graph optimisation run in the session anyway) and 'Please check if the
    model is already quantized' (it is not: it is the exported fp32 file)."""
    return record.levelno >= logging.WARNING and not record.getMessage().startswith(
        ("Please consider to run pre-processing", "Please check if the model is already quantized")
    )


def session(model: Path, threads: int, *, spinning: bool = True) -> Any:
    """An ONNX Runtime CPU session with `threads` intra-op threads. Without `spinning` idle
    threads sleep at once rather than burn a core waiting for the next call."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])


def _weights_key(module: Any, inputs: list[str], output: str) -> str:
    import torch

    digest = hashlib.sha256(
        f"{torch.__version__}|{type(module).__name__}|{inputs}|{output}".encode()
    )
    for name, tensor in module.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:24]


def _cached(folder: Path, name: str, write: Callable[[Path], None], what: str) -> Path:
    """`folder/name`, made by `write` on first use and renamed into place atomically so that
    processes starting together never read half a file."""
    target = folder / name
    if target.exists():
        return target
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK):
            raise PermissionError(folder)
    except OSError:  # a read-only home: write for this process only
        folder = Path(tempfile.mkdtemp(prefix="memora-onnx-"))
        target = folder / name
    fd, partial = tempfile.mkstemp(dir=folder, suffix=".onnx.partial")
    os.close(fd)
    try:
        write(Path(partial))
        os.replace(partial, target)
    except Exception as exc:  # the exporter's and quantiser's failures vary by model
        Path(partial).unlink(missing_ok=True)
        raise OnnxUnsupported(f"{what} failed: {exc}") from exc
    return target
