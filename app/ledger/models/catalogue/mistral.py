"""The catalogue's Mistral and Mixtral (mistral, mixtral): each entry's config.json facts and their source."""

from __future__ import annotations

from app.ledger.models.catalogue.sources import Entry, hf

ENTRIES: dict[str, Entry] = {
    "mistral-7b-v0.1": (
        "Mistral-7B-v0.1",
        hf("mistralai/Mistral-7B-v0.1", "; Jiang et al., Mistral 7B, arXiv:2310.06825 (October 2023)"),
        {
            "model_type": "mistral",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "vocab_size": 32000,
            "max_position_embeddings": 32768,
            "sliding_window": 4096,
            "tie_word_embeddings": False,
        },
    ),
    "mixtral-8x7b-v0.1": (
        "Mixtral-8x7B-v0.1",
        hf("mistralai/Mixtral-8x7B-v0.1", "; Jiang et al., Mixtral of Experts, arXiv:2401.04088 (January 2024)"),
        {
            "model_type": "mixtral",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "vocab_size": 32000,
            "max_position_embeddings": 32768,
            "tie_word_embeddings": False,
        },
    ),
    "mistral-small-24b": (
        "Mistral-Small-24B-Base-2501",
        hf("mistralai/Mistral-Small-24B-Base-2501", "; Mistral AI, Mistral Small 3 (January 2025)"),
        {
            "model_type": "mistral",
            "hidden_size": 5120,
            "intermediate_size": 32768,
            "num_hidden_layers": 40,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 131072,
            "max_position_embeddings": 32768,
            "sliding_window": None,  # null in the published config.json: transformers' default (4096) would apply
            "tie_word_embeddings": False,
        },
    ),
    "mixtral-8x22b": (
        "Mixtral-8x22B-v0.1",
        hf("mistralai/Mixtral-8x22B-v0.1", "; Mistral AI, Cheaper, Better, Faster, Stronger (April 2024)"),
        {
            "model_type": "mixtral",
            "hidden_size": 6144,
            "intermediate_size": 16384,
            "num_hidden_layers": 56,
            "num_attention_heads": 48,
            "num_key_value_heads": 8,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "vocab_size": 32768,
            "max_position_embeddings": 65536,
            "sliding_window": None,  # null in the published config.json: transformers' default (4096) would apply
            "tie_word_embeddings": False,
        },
    ),
}
