"""The catalogue's Phi-3, Phi-3.5 and Phi-4 (phi3): each entry's config.json facts and their source."""

from __future__ import annotations

from app.ledger.models.catalogue.sources import Entry, hf

_PHI3 = "; Abdin et al., Phi-3 Technical Report, arXiv:2404.14219 (April 2024"
# Phi-3-mini-128k and Phi-3.5-mini share these facts (a 262,144-token window over 131,072 positions: never reached).
# Phi-3-mini-4k's 2,047-token window is reached within its 4,096 positions, which the lab does not model (refused).
_PHI3_MINI: dict[str, object] = {
    "model_type": "phi3",
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "vocab_size": 32064,
    "max_position_embeddings": 131072,
    "sliding_window": 262144,
    "tie_word_embeddings": False,
}

ENTRIES: dict[str, Entry] = {
    "phi-3-mini": ("Phi-3-mini-128k-instruct", hf("microsoft/Phi-3-mini-128k-instruct", _PHI3 + ")"), _PHI3_MINI),
    "phi-3.5-mini": (
        "Phi-3.5-mini-instruct",
        hf("microsoft/Phi-3.5-mini-instruct", _PHI3 + "; 3.5 in August 2024)"),
        _PHI3_MINI,
    ),
    "phi-4": (
        "Phi-4",
        hf("microsoft/phi-4", "; Abdin et al., Phi-4 Technical Report, arXiv:2412.08905 (December 2024)"),
        {
            "model_type": "phi3",
            "hidden_size": 5120,
            "intermediate_size": 17920,
            "num_hidden_layers": 40,
            "num_attention_heads": 40,
            "num_key_value_heads": 10,
            "vocab_size": 100352,
            "max_position_embeddings": 16384,
            "sliding_window": None,
            "tie_word_embeddings": False,
        },
    ),
}
