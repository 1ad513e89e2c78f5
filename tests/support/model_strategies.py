"""Hypothesis strategies for model configs, shared by the ``test_models_*`` properties.

Configs are drawn as Hugging Face ``config.json`` dicts of every family and go through the real
reader, so the properties exercise the same path as an uploaded file. Sizes are kept small
(at most 6 layers, 8 experts) so that a property run stays fast; the bounds themselves are
tested separately with the largest allowed config.
"""

from __future__ import annotations

from hypothesis import strategies as st

from app.ledger.models.architecture import FAMILIES, Architecture
from app.ledger.models.readers import architecture_from_config

ANY_FAMILY: st.SearchStrategy[str] = st.sampled_from(FAMILIES)


@st.composite
def configs(draw: st.DrawFn, family: st.SearchStrategy[str] = ANY_FAMILY) -> dict[str, object]:
    """A valid config.json of a drawn family with small, often odd, dimensions."""
    model_type = draw(family)
    heads = draw(st.integers(1, 8))
    head_dim = draw(st.integers(1, 24))
    layers = draw(st.integers(1, 6))
    vocab = draw(st.integers(1, 700))
    inter = draw(st.integers(1, 200))
    tied = draw(st.booleans())
    if model_type == "gpt2":
        config: dict[str, object] = {
            "model_type": "gpt2",
            "n_embd": heads * head_dim,
            "n_head": heads,
            "n_layer": layers,
            "vocab_size": vocab,
            "n_positions": draw(st.integers(1, 300)),
            "tie_word_embeddings": tied,
        }
        if draw(st.booleans()):
            config["n_inner"] = inter
        return config
    config = {
        "model_type": model_type,
        "hidden_size": heads * head_dim,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "intermediate_size": inter,
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
    }
    if model_type == "gpt_neox":
        config["use_parallel_residual"] = draw(st.booleans())
        config["attention_bias"] = draw(st.booleans())
        return config
    if model_type == "deepseek_v3":
        return _deepseek(draw, config)
    config["num_key_value_heads"] = draw(st.sampled_from([k for k in range(1, heads + 1) if heads % k == 0]))
    if draw(st.booleans()):  # an explicit head_dim apart from hidden ÷ heads
        config["head_dim"] = draw(st.integers(1, 24))
    if model_type in ("llama", "qwen3", "olmo2", "qwen3_moe", "gemma2"):
        config["attention_bias"] = draw(st.booleans())
    if model_type == "llama":
        config["mlp_bias"] = draw(st.booleans())
    if model_type in ("mixtral", "qwen3_moe"):
        experts = draw(st.integers(1, 8))
        config["num_local_experts" if model_type == "mixtral" else "num_experts"] = experts
        config["num_experts_per_tok"] = draw(st.integers(1, experts))
    if model_type == "gemma2":  # soft-caps: absent (on), null (off) or a number
        for key in ("attn_logit_softcapping", "final_logit_softcapping"):
            cap = draw(st.sampled_from(["absent", None, 30.0, 50]))
            if cap != "absent":
                config[key] = cap
    if model_type == "qwen3_moe":  # the experts' width is its own key; intermediate_size sizes only dense layers
        config["moe_intermediate_size"] = draw(st.integers(1, 200))
        config["norm_topk_prob"] = draw(st.booleans())
    return config


def _deepseek(draw: st.DrawFn, config: dict[str, object]) -> dict[str, object]:
    """deepseek_v3's latent attention and its experts: groups of 2 or more experts, the k inside the chosen groups;
    the optional keys absent or drawn (q_lora_rank null: a plain q_proj)."""
    groups = draw(st.integers(1, 4))
    experts = groups * draw(st.integers(2, 4))
    top = draw(st.integers(1, groups))
    layers = config["num_hidden_layers"]
    assert isinstance(layers, int)
    config.update(
        num_key_value_heads=config["num_attention_heads"], n_routed_experts=experts, n_group=groups, topk_group=top,
        num_experts_per_tok=draw(st.integers(1, top * (experts // groups))),
        moe_intermediate_size=draw(st.integers(1, 200)), kv_lora_rank=draw(st.integers(1, 64)),
        qk_nope_head_dim=draw(st.integers(1, 24)), qk_rope_head_dim=2 * draw(st.integers(1, 8)),
        v_head_dim=draw(st.integers(1, 24)), first_k_dense_replace=draw(st.integers(0, layers - 1)),
    )  # fmt: skip
    for key, value in (("q_lora_rank", draw(st.sampled_from([None, 0, 16, 48]))), ("n_shared_experts", 2),
                       ("attention_bias", True), ("norm_topk_prob", False)):  # fmt: skip
        if draw(st.booleans()):
            config[key] = value
    return config


def architectures(family: st.SearchStrategy[str] = ANY_FAMILY) -> st.SearchStrategy[Architecture]:
    return configs(family).map(architecture_from_config)
