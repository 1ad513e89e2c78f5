"""The catalogue's Qwen2, Qwen2.5, Qwen3 and Qwen3-MoE (qwen2, qwen3, qwen3_moe): each entry's config.json facts and
their source."""

from __future__ import annotations

from app.ledger.models.catalogue.sources import Entry, hf

_QWEN2 = "; Yang et al., Qwen2 Technical Report, arXiv:2407.10671 (July 2024)"
_QWEN25 = "; Qwen Team, Qwen2.5 Technical Report, arXiv:2412.15115 (December 2024)"
_QWEN3 = "; Qwen Team, Qwen3 Technical Report, arXiv:2505.09388 (May 2025)"
# Qwen2.5-7B keeps Qwen2-7B's architecture (the same keys, the same values).
_QWEN2_7B: dict[str, object] = {
    "model_type": "qwen2",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
}


def _qwen3(hidden: int, intermediate: int, layers: int, heads: int, tied: bool) -> dict[str, object]:
    """A dense Qwen3 config.json: what its sizes leave to every released one (8 key/value heads of 128, the
    151,936-token vocabulary, 40,960 positions, no attention bias, no sliding window)."""
    return {
        "model_type": "qwen3", "hidden_size": hidden, "intermediate_size": intermediate, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
        "max_position_embeddings": 40960, "attention_bias": False, "use_sliding_window": False,
        "sliding_window": None, "tie_word_embeddings": tied,
    }  # fmt: skip


def _qwen3_moe(hidden: int, expert: int, dense: int, layers: int, heads: int) -> dict[str, object]:
    """A Qwen3-MoE config.json: 128 experts a layer, 8 per token, their weights renormalised (norm_topk_prob),
    every layer sparse (decoder_sparse_step 1, no mlp_only_layers), 4 key/value heads of 128, untied.
    ``intermediate_size`` (``dense``) sizes only the dense MLP layers, of which the released models have none."""
    return {
        "model_type": "qwen3_moe", "hidden_size": hidden, "intermediate_size": dense, "moe_intermediate_size": expert,
        "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": 4, "head_dim": 128,
        "num_experts": 128, "num_experts_per_tok": 8, "norm_topk_prob": True, "decoder_sparse_step": 1,
        "mlp_only_layers": [], "output_router_logits": False, "vocab_size": 151936, "max_position_embeddings": 40960,
        "attention_bias": False, "use_sliding_window": False, "sliding_window": None, "tie_word_embeddings": False,
    }  # fmt: skip


ENTRIES: dict[str, Entry] = {
    "qwen2-0.5b": (
        "Qwen2-0.5B",
        hf("Qwen/Qwen2-0.5B", _QWEN2),
        {
            "model_type": "qwen2",
            "hidden_size": 896,
            "intermediate_size": 4864,
            "num_hidden_layers": 24,
            "num_attention_heads": 14,
            "num_key_value_heads": 2,
            "vocab_size": 151936,
            "max_position_embeddings": 131072,
            "tie_word_embeddings": True,
        },
    ),
    "qwen2-7b": (
        "Qwen2-7B",
        hf("Qwen/Qwen2-7B", _QWEN2),
        _QWEN2_7B,
    ),
    "qwen2.5-7b": (
        "Qwen2.5-7B",
        hf("Qwen/Qwen2.5-7B", _QWEN25),
        _QWEN2_7B,
    ),
    "qwen2.5-72b": (
        "Qwen2.5-72B",
        hf("Qwen/Qwen2.5-72B", _QWEN25),
        {
            "model_type": "qwen2",
            "hidden_size": 8192,
            "intermediate_size": 29568,
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "vocab_size": 152064,
            "max_position_embeddings": 131072,
            "tie_word_embeddings": False,
        },
    ),
    "qwen3-0.6b": ("Qwen3-0.6B-Base", hf("Qwen/Qwen3-0.6B-Base", _QWEN3), _qwen3(1024, 3072, 28, 16, True)),
    "qwen3-8b": ("Qwen3-8B-Base", hf("Qwen/Qwen3-8B-Base", _QWEN3), _qwen3(4096, 12288, 36, 32, False)),
    "qwen3-32b": ("Qwen3-32B", hf("Qwen/Qwen3-32B", _QWEN3), _qwen3(5120, 25600, 64, 64, False)),
    "qwen3-30b-a3b": ("Qwen3-30B-A3B", hf("Qwen/Qwen3-30B-A3B", _QWEN3), _qwen3_moe(2048, 768, 6144, 48, 32)),
    "qwen3-235b-a22b": ("Qwen3-235B-A22B", hf("Qwen/Qwen3-235B-A22B", _QWEN3), _qwen3_moe(4096, 1536, 12288, 94, 64)),
}
