"""The catalogue's DeepSeek-V3 (deepseek_v3): its config.json facts and their source."""

from __future__ import annotations

from app.ledger.models.catalogue.sources import Entry, hf

_V3 = "; DeepSeek-AI, DeepSeek-V3 Technical Report, arXiv:2412.19437 (December 2024)"

ENTRIES: dict[str, Entry] = {
    # The multi-token-prediction module of the checkpoint (num_nextn_predict_layers: 1, its layer 61) is not built
    # by transformers 5.23.0, which drops its weights on loading: 671B parameters, not the checkpoint's 685B.
    "deepseek-v3": (
        "DeepSeek-V3 (671B, 37B active)",
        hf("deepseek-ai/DeepSeek-V3", _V3),
        {
            "model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
            "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
            "num_key_value_heads": 128, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
            "first_k_dense_replace": 3, "moe_layer_freq": 1, "n_group": 8, "topk_group": 4, "norm_topk_prob": True,
            "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
            "v_head_dim": 128, "num_nextn_predict_layers": 1, "vocab_size": 129280,
            "max_position_embeddings": 163840, "attention_bias": False, "tie_word_embeddings": False,
        },
    ),
}  # fmt: skip
