"""The catalogue's GPT-2 and GPT-NeoX (gpt2, gpt_neox): each entry's config.json facts and their source."""

from __future__ import annotations

from app.ledger.models.catalogue.sources import Entry, hf

ENTRIES: dict[str, Entry] = {
    "gpt2": (
        "GPT-2 (124M)",
        hf(
            "openai-community/gpt2",
            "; Radford et al., Language Models are Unsupervised Multitask Learners, OpenAI (February 2019)",
        ),
        {
            "model_type": "gpt2",
            "n_embd": 768,
            "n_layer": 12,
            "n_head": 12,
            "n_positions": 1024,
            "n_ctx": 1024,
            "vocab_size": 50257,
        },
    ),
    "gpt-neox-20b": (
        "GPT-NeoX-20B",
        hf(
            "EleutherAI/gpt-neox-20b",
            "; Black et al., GPT-NeoX-20B: An Open-Source Autoregressive Language Model, arXiv:2204.06745 (April 2022)",
        ),
        {
            "model_type": "gpt_neox",
            "hidden_size": 6144,
            "intermediate_size": 24576,
            "num_hidden_layers": 44,
            "num_attention_heads": 64,
            "vocab_size": 50432,
            "max_position_embeddings": 2048,
            "use_parallel_residual": True,
            "tie_word_embeddings": False,
        },
    ),
}
