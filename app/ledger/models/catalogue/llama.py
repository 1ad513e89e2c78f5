"""The catalogue's Llama 2 and Llama 3.x (model_type llama): each entry's config.json facts and their source."""

from __future__ import annotations

from app.ledger.models.catalogue.sources import Entry, hf

_LLAMA3 = "; Llama Team, The Llama 3 Herd of Models, arXiv:2407.21783 (July 2024)"
# Llama 3.3 70B keeps Llama 3.1 70B's architecture: the two config.json files agree on every key read here.
_LLAMA_3_70B: dict[str, object] = {
    "model_type": "llama",
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
}

ENTRIES: dict[str, Entry] = {
    "llama-2-7b": (
        "Llama-2-7B",
        hf(
            "meta-llama/Llama-2-7b-hf",
            "; Touvron et al., Llama 2: Open Foundation and Fine-Tuned Chat Models, arXiv:2307.09288 (July 2023)",
        ),
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "intermediate_size": 11008,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "vocab_size": 32000,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": False,
        },
    ),
    "llama-2-13b": (
        "Llama-2-13B",
        hf("meta-llama/Llama-2-13b-hf", "; Touvron et al., arXiv:2307.09288 (July 2023)"),
        {
            "model_type": "llama",
            "hidden_size": 5120,
            "intermediate_size": 13824,
            "num_hidden_layers": 40,
            "num_attention_heads": 40,
            "num_key_value_heads": 40,
            "vocab_size": 32000,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": False,
        },
    ),
    "llama-2-70b": (
        "Llama-2-70B",
        hf("meta-llama/Llama-2-70b-hf", "; Touvron et al., arXiv:2307.09288 (July 2023), GQA with 8 KV heads"),
        {
            "model_type": "llama",
            "hidden_size": 8192,
            "intermediate_size": 28672,
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "vocab_size": 32000,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": False,
        },
    ),
    "llama-3.1-8b": (
        "Llama-3.1-8B",
        hf("meta-llama/Llama-3.1-8B", _LLAMA3),
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "vocab_size": 128256,
            "max_position_embeddings": 131072,
            "tie_word_embeddings": False,
        },
    ),
    "llama-3.1-70b": (
        "Llama-3.1-70B",
        hf("meta-llama/Llama-3.1-70B", _LLAMA3),
        _LLAMA_3_70B,
    ),
    "llama-3.1-405b": (
        "Llama-3.1-405B",
        hf("meta-llama/Llama-3.1-405B", _LLAMA3),
        {
            "model_type": "llama",
            "hidden_size": 16384,
            "intermediate_size": 53248,
            "num_hidden_layers": 126,
            "num_attention_heads": 128,
            "num_key_value_heads": 8,
            "vocab_size": 128256,
            "max_position_embeddings": 131072,
            "tie_word_embeddings": False,
        },
    ),
    "llama-3.2-1b": (
        "Llama-3.2-1B",
        hf("meta-llama/Llama-3.2-1B", "; Meta, Llama 3.2 model card (September 2024)"),
        {
            "model_type": "llama",
            "hidden_size": 2048,
            "intermediate_size": 8192,
            "num_hidden_layers": 16,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 64,
            "vocab_size": 128256,
            "max_position_embeddings": 131072,
            "tie_word_embeddings": True,
        },
    ),
    "llama-3.2-3b": (
        "Llama-3.2-3B",
        hf("meta-llama/Llama-3.2-3B", "; Meta, Llama 3.2 model card (September 2024)"),
        {
            "model_type": "llama",
            "hidden_size": 3072,
            "intermediate_size": 8192,
            "num_hidden_layers": 28,
            "num_attention_heads": 24,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 128256,
            "max_position_embeddings": 131072,
            "tie_word_embeddings": True,
        },
    ),
    "llama-3.3-70b": (
        "Llama-3.3-70B-Instruct",
        hf("meta-llama/Llama-3.3-70B-Instruct", "; Meta, Llama 3.3 model card (December 2024)"),
        _LLAMA_3_70B,
    ),
}
