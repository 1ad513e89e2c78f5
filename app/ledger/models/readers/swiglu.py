"""The SwiGLU decoders' reader: llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, phi3, olmo2 (transformers 5.23.0)."""

from __future__ import annotations

from collections.abc import Mapping

from app.ledger.models.architecture import Architecture, Family, ModelConfigError
from app.ledger.models.readers.keys import (
    DEFAULT_POSITIONS,
    check_int,
    need_int,
    opt_bool,
    opt_int,
    read_head_dim,
    read_kv_heads,
)

# Qwen3Config's head_dim when a config omits it (transformers 5.23.0): 128, not hidden ÷ heads.
_QWEN3_HEAD_DIM = 128


# MistralConfig's sliding_window when a config omits the key (transformers 5.23.0); MixtralConfig's is None.
_DEFAULT_WINDOW: dict[str, int] = {"mistral": 4_096, "mixtral": 0}


def _window(config: Mapping[str, object], family: str) -> int:
    """``sliding_window``: absent, the config class's default (Mistral 4,096, Mixtral none); null or 0, none (0 is
    how the lab's links spell a null, which a link cannot omit: omitted reads as the default)."""
    if "sliding_window" not in config:
        return _DEFAULT_WINDOW[family]
    window = opt_int(config, "sliding_window", "sliding_window", 0)
    assert window is not None
    return window


def _phi3_window(config: Mapping[str, object], positions: int) -> int:
    """Phi3Config's ``sliding_window`` (default none): a window the context never reaches (Phi-3.5-mini's
    262,144 over 131,072 positions) is none; a shorter one (Phi-3-mini-4k's 2,047) makes transformers attend
    through a mask on a model without grouped K/V heads, which the lab does not model: refused, by name."""
    window = opt_int(config, "sliding_window", "sliding_window", 0)
    if window and window < positions:
        raise ModelConfigError(
            f"'sliding_window' = {window:,} below the {positions:,} positions is not modelled for phi3 "
            "(its attention mask; Phi-4's window is null)",
            "sliding_window",
        )
    return 0


# Per MoE family (transformers 5.23.0): the key of the experts per layer, and of each expert's intermediate width.
_EXPERT_KEYS: dict[str, tuple[str, str]] = {
    "mixtral": ("num_local_experts", "intermediate_size"),  # MixtralExperts
    "qwen3_moe": ("num_experts", "moe_intermediate_size"),  # Qwen3MoeExperts; intermediate_size is the dense MLP's
}


def _intermediate_key(family: Family) -> str:
    """The key of the MLP's width: a MoE family's expert width, else the dense MLP's."""
    return _EXPERT_KEYS[family][1] if family in _EXPERT_KEYS else "intermediate_size"


def _experts(config: Mapping[str, object], family: Family) -> dict[str, int]:
    """A MoE family's experts per layer and per token, each checked against the other. Qwen3MoeConfig maps
    ``num_experts`` (the Hub's config.json files) onto ``num_local_experts`` (what it writes itself): either is read,
    and both only if they agree."""
    experts_key, _ = _EXPERT_KEYS[family]
    alias = config.get("num_local_experts") if family == "qwen3_moe" else None
    if alias is not None and "num_experts" not in config:
        experts_key = "num_local_experts"
    experts = need_int(config, experts_key, "experts", family)
    aliased = None if alias is None else check_int(alias, "num_local_experts", "experts")
    if aliased is not None and aliased != experts:
        raise ModelConfigError(
            f"'num_local_experts' = {aliased:,} disagrees with 'num_experts' = {experts:,} (its alias)",
            "num_local_experts",
        )
    if experts < 1:
        raise ModelConfigError(f"{experts_key!r} must be at least 1 for {family}", experts_key)
    per_token = need_int(config, "num_experts_per_tok", "experts_per_token", family)
    if not 1 <= per_token <= experts:
        raise ModelConfigError(
            f"'num_experts_per_tok' = {per_token:,} must be 1 … {experts_key!r} ({experts:,})", "num_experts_per_tok"
        )
    return {"experts": experts, "experts_per_token": per_token}


def _qwen3_moe_layers(config: Mapping[str, object]) -> bool:
    """Qwen3MoeDecoderLayer (5.23.0) makes a layer dense when it is in ``mlp_only_layers`` or (layer + 1) is not a
    multiple of ``decoder_sparse_step``. Every published Qwen3-MoE config has every layer sparse (step 1, no dense
    layers), which is what the lab's one-layer-shape model counts: anything else is refused, by name. The router's
    auxiliary loss (``output_router_logits`` true) keeps every layer's router logits to the loss: refused too.
    Answers ``norm_topk_prob`` (default false): the k routing weights divided by their sum, which keeps that sum
    and the k FP32 weights for backward."""
    if opt_int(config, "decoder_sparse_step", "layers", 1) != 1:
        raise ModelConfigError(
            "'decoder_sparse_step' other than 1 (dense layers among the sparse) is not modelled for qwen3_moe",
            "decoder_sparse_step",
        )
    dense = config.get("mlp_only_layers")
    if dense is not None and dense != []:
        raise ModelConfigError(
            "'mlp_only_layers' other than [] (dense layers among the sparse) is not modelled for qwen3_moe",
            "mlp_only_layers",
        )
    if opt_bool(config, "output_router_logits", False):
        raise ModelConfigError(
            "'output_router_logits' = true (the router's auxiliary loss) is not modelled for qwen3_moe",
            "output_router_logits",
        )
    return opt_bool(config, "norm_topk_prob", False)


def swiglu(config: Mapping[str, object], family: Family) -> Architecture:
    """llama, mistral, mixtral, qwen2, qwen3, qwen3_moe: RMSNorm, rotary, SwiGLU MLP, optional GQA.

    Biases: llama and qwen3 read ``attention_bias`` (q, k, v and o) and llama ``mlp_bias`` (default
    false); qwen2 always has q, k, v biases and none on o or the MLP (``Qwen2Attention``); mistral and
    mixtral have none. ``tie_word_embeddings`` defaults to false in all five config classes. qwen3
    (transformers 5.23.0, ``Qwen3Attention``) adds ``q_norm`` and ``k_norm``, an RMSNorm of head_dim
    each, over every query and key head before RoPE; its ``head_dim`` defaults to 128 (Qwen3Config),
    and its sliding-window layers (``use_sliding_window``, default false; false in every published
    Qwen3 config) are refused, not modelled. mistral and mixtral read ``sliding_window`` (:func:`_window`):
    it sizes nothing, but from a sequence as long as the window transformers attends through a mask. phi3
    (``Phi3Attention``, ``Phi3MLP``) fuses q, k, v into one ``qkv_proj`` and gate, up into one ``gate_up_proj``,
    no biases; its window: :func:`_phi3_window`. olmo2 (``Olmo2Attention``, ``Olmo2DecoderLayer``) normalises
    the whole q and k projections (``q_norm`` [a·d], ``k_norm`` [kv·d]) and puts its two norms after the attention
    and the MLP (``post_attention_layernorm``, ``post_feedforward_layernorm``), none before; ``attention_bias``.
    qwen3_moe (``Qwen3MoeAttention``, ``Qwen3MoeSparseMoeBlock``) is qwen3's attention (its ``head_dim`` defaulting
    to hidden ÷ heads) over a MoE MLP of ``num_experts`` experts of ``moe_intermediate_size`` (:func:`_experts`,
    :func:`_qwen3_moe_layers`).
    """
    hidden = need_int(config, "hidden_size", "hidden", family)
    heads = need_int(config, "num_attention_heads", "heads", family)
    if family == "qwen3":
        head_dim: int | None = opt_int(config, "head_dim", "head_dim", _QWEN3_HEAD_DIM)
    else:
        head_dim = read_head_dim(config, hidden, heads, "hidden_size", "num_attention_heads")
    arch: dict[str, object] = {
        "family": family,
        "hidden": hidden,
        "layers": need_int(config, "num_hidden_layers", "layers", family),
        "heads": heads,
        "kv_heads": read_kv_heads(config, heads),
        "head_dim": head_dim,
        "intermediate": need_int(config, _intermediate_key(family), "intermediate", family),
        "vocab": need_int(config, "vocab_size", "vocab", family),
        "tied_embeddings": opt_bool(config, "tie_word_embeddings", False),
        "max_positions": opt_int(config, "max_position_embeddings", "max_positions", DEFAULT_POSITIONS[family]),
    }
    if family == "llama":
        attention_bias = opt_bool(config, "attention_bias", False)
        arch.update(qkv_bias=attention_bias, o_bias=attention_bias, mlp_bias=opt_bool(config, "mlp_bias", False))
    elif family == "qwen2":
        arch.update(qkv_bias=True)
    elif family in ("qwen3", "qwen3_moe"):
        if opt_bool(config, "use_sliding_window", False):
            raise ModelConfigError(
                f"'use_sliding_window' = true is not modelled for {family} (every published Qwen3 config has false)",
                "use_sliding_window",
            )
        attention_bias = opt_bool(config, "attention_bias", False)
        arch.update(qkv_bias=attention_bias, o_bias=attention_bias, qk_norm="head")
    elif family == "olmo2":
        attention_bias = opt_bool(config, "attention_bias", False)
        arch.update(
            qkv_bias=attention_bias, o_bias=attention_bias, qk_norm="projection", post_norms=True, fp32_rope=True
        )
    if family in ("mistral", "mixtral"):
        arch.update(sliding_window=_window(config, family))
    elif family == "phi3":
        arch.update(fused=True, sliding_window=_phi3_window(config, arch["max_positions"]))  # type: ignore[arg-type]
    if family == "qwen3_moe":
        arch.update(topk_renorm=_qwen3_moe_layers(config))
    if family in _EXPERT_KEYS:
        arch.update(_experts(config, family))
    if family == "mixtral":  # MixtralTopKRouter divides the k weights by their sum, always
        arch.update(topk_renorm=True)
    return Architecture(**arch)  # type: ignore[arg-type]
