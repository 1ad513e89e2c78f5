"""The catalogue's OLMo 2 (olmo2): each entry's config.json facts and their source."""

from __future__ import annotations

from app.ledger.models.catalogue.sources import Entry, hf

_OLMO2 = "; Team OLMo, 2 OLMo 2 Furious, arXiv:2501.00656 (January 2025)"


def _olmo2(hidden: int, intermediate: int, layers: int, heads: int) -> dict[str, object]:
    """An OLMo 2 (November 2024) config.json: multi-head attention without biases, the 100,352-token vocabulary,
    4,096 positions, an untied head."""
    return {
        "model_type": "olmo2", "hidden_size": hidden, "intermediate_size": intermediate, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": heads, "vocab_size": 100352,
        "max_position_embeddings": 4096, "attention_bias": False, "tie_word_embeddings": False,
    }  # fmt: skip


ENTRIES: dict[str, Entry] = {
    "olmo-2-7b": ("OLMo-2-1124-7B", hf("allenai/OLMo-2-1124-7B", _OLMO2), _olmo2(4096, 11008, 32, 32)),
    "olmo-2-13b": ("OLMo-2-1124-13B", hf("allenai/OLMo-2-1124-13B", _OLMO2), _olmo2(5120, 13824, 40, 40)),
}
