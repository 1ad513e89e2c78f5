"""The catalogue's Gemma 2 and Gemma 3 (gemma2, gemma3_text): each entry's config.json facts and their source."""

from __future__ import annotations

from app.ledger.models.catalogue.sources import Entry, hf

_GEMMA2 = "; Gemma Team, Gemma 2: Improving Open Language Models at a Practical Size, arXiv:2408.00118 (July 2024)"
_GEMMA3 = "; Gemma Team, Gemma 3 Technical Report, arXiv:2503.19786 (March 2025)"


def _gemma2(hidden: int, intermediate: int, layers: int, heads: int, kv: int, head_dim: int) -> dict[str, object]:
    """A Gemma 2 config.json: the 256,000-token vocabulary, 8,192 positions, tied embeddings, no biases, the scores
    soft-capped at 50 and the logits at 30 (50.0 and 30.0 in the file: the core holds no float, and a cap's value
    sizes nothing), its sliding window and query scale left out (they size nothing under eager attention)."""
    return {
        "model_type": "gemma2", "hidden_size": hidden, "intermediate_size": intermediate, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": head_dim, "vocab_size": 256000,
        "max_position_embeddings": 8192, "attention_bias": False, "attn_logit_softcapping": 50,
        "final_logit_softcapping": 30, "tie_word_embeddings": True,
    }  # fmt: skip


def _gemma3(
    hidden: int, intermediate: int, layers: int, heads: int, kv: int, head_dim: int, vocab: int, window: int
) -> dict[str, object]:
    """A Gemma 3 text config.json (the 4B, 12B and 27B models' ``text_config``: their vision tower is not counted):
    tied embeddings, no biases, no soft-caps, five sliding-window layers to one global layer."""
    return {
        "model_type": "gemma3_text", "hidden_size": hidden, "intermediate_size": intermediate,
        "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": head_dim,
        "vocab_size": vocab, "max_position_embeddings": 32768 if layers == 26 else 131072, "attention_bias": False,
        "attn_logit_softcapping": None, "final_logit_softcapping": None, "sliding_window": window,
        "sliding_window_pattern": 6, "tie_word_embeddings": True,
    }  # fmt: skip


ENTRIES: dict[str, Entry] = {
    "gemma-2-2b": ("Gemma-2-2B", hf("google/gemma-2-2b", _GEMMA2), _gemma2(2304, 9216, 26, 8, 4, 256)),
    "gemma-2-9b": ("Gemma-2-9B", hf("google/gemma-2-9b", _GEMMA2), _gemma2(3584, 14336, 42, 16, 8, 256)),
    "gemma-2-27b": ("Gemma-2-27B", hf("google/gemma-2-27b", _GEMMA2), _gemma2(4608, 36864, 46, 32, 16, 128)),
    "gemma-3-1b": ("Gemma-3-1B", hf("google/gemma-3-1b-pt", _GEMMA3), _gemma3(1152, 6912, 26, 4, 1, 256, 262144, 512)),
    "gemma-3-4b": (
        "Gemma-3-4B (text)",
        hf("google/gemma-3-4b-pt", _GEMMA3),
        _gemma3(2560, 10240, 34, 8, 4, 256, 262208, 1024),
    ),
    "gemma-3-12b": (
        "Gemma-3-12B (text)",
        hf("google/gemma-3-12b-pt", _GEMMA3),
        _gemma3(3840, 15360, 48, 16, 8, 256, 262208, 1024),
    ),
    "gemma-3-27b": (
        "Gemma-3-27B (text)",
        hf("google/gemma-3-27b-pt", _GEMMA3),
        _gemma3(5376, 21504, 62, 32, 16, 128, 262208, 1024),
    ),
}
