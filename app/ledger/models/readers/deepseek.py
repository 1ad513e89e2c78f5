"""The deepseek_v3 reader (transformers 5.23.0: ``DeepseekV3Config``, ``DeepseekV3Attention``, ``DeepseekV3MoE``)."""

from __future__ import annotations

from collections.abc import Mapping

from app.ledger.models.architecture import Architecture, Family, ModelConfigError
from app.ledger.models.readers.keys import ABSENT, check_int, need_int, opt_bool, opt_int, read_kv_heads

# DeepseekV3Config's defaults (transformers 5.23.0) for the optional keys the reader consults
_Q_LORA_RANK = 1_536
_SHARED = 1
_DENSE_FIRST = 3
_GROUPS, _TOPK_GROUPS = 8, 4
_POSITIONS = 4_096
_DENSE_WIDTH = 18_432

KEYS = (
    "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "intermediate_size", "moe_intermediate_size", "vocab_size", "tie_word_embeddings", "max_position_embeddings",
    "attention_bias", "n_routed_experts", "num_local_experts", "n_shared_experts", "num_experts_per_tok",
    "first_k_dense_replace", "n_group", "topk_group", "norm_topk_prob", "q_lora_rank", "kv_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "moe_layer_freq", "output_router_logits",
    "num_nextn_predict_layers", "num_mtp_layers",
)  # fmt: skip


def _q_lora_rank(config: Mapping[str, object]) -> int:
    """``q_lora_rank``: absent, the config class's 1,536; null or 0 (how a link spells null), no query latent (a
    plain ``q_proj``, DeepSeek-V2-Lite's choice)."""
    raw = config.get("q_lora_rank", ABSENT)
    if raw is ABSENT:
        return _Q_LORA_RANK
    return 0 if raw is None else check_int(raw, "q_lora_rank", "q_lora_rank")


def _experts(config: Mapping[str, object], family: Family) -> tuple[int, int]:
    """The routed experts per layer and per token, and the group routing's consistency: ``n_group`` must divide the
    experts (the router views the scores as [tokens, n_group, E ÷ n_group] and takes each group's top 2), and
    ``topk_group`` ≤ ``n_group`` groups must hold the k experts. The groups size nothing: they only choose."""
    aliased = "n_routed_experts" not in config and "num_local_experts" in config
    key = "num_local_experts" if aliased else "n_routed_experts"
    experts = need_int(config, key, "experts", family)
    if experts < 1:
        raise ModelConfigError(f"{key!r} must be at least 1 for deepseek_v3", key)
    alias = config.get("num_local_experts")
    if key == "n_routed_experts" and alias is not None and check_int(alias, "num_local_experts", "experts") != experts:
        raise ModelConfigError("'num_local_experts' disagrees with 'n_routed_experts' (its alias)", "num_local_experts")
    per_token = need_int(config, "num_experts_per_tok", "experts_per_token", family)
    groups = opt_int(config, "n_group", "experts", _GROUPS)
    top_groups = opt_int(config, "topk_group", "experts", _TOPK_GROUPS)
    assert groups is not None and top_groups is not None
    if groups < 1 or experts % groups or experts // groups < 2:
        raise ModelConfigError(
            f"'n_group' = {groups:,} must divide 'n_routed_experts' = {experts:,} into groups of 2 or more", "n_group"
        )
    if not 1 <= top_groups <= groups:
        raise ModelConfigError(f"'topk_group' = {top_groups:,} must be 1 … 'n_group' ({groups:,})", "topk_group")
    if not 1 <= per_token <= top_groups * (experts // groups):
        raise ModelConfigError(
            f"'num_experts_per_tok' = {per_token:,} must be 1 … the experts of the 'topk_group' groups "
            f"({top_groups * (experts // groups):,})",
            "num_experts_per_tok",
        )
    return experts, per_token


def _refused(config: Mapping[str, object]) -> None:
    """Keys that would make a model the lab does not count: MoE layers other than every one after the dense ones
    (``moe_layer_freq`` ≠ 1: transformers 5.23.0 ignores it and builds every layer past the dense ones as MoE, so a
    config that relies on it describes another model), and the router's auxiliary loss (its logits kept)."""
    freq = opt_int(config, "moe_layer_freq", "layers", 1)
    if freq != 1:
        raise ModelConfigError("'moe_layer_freq' other than 1 is not built by transformers 5.23.0's DeepseekV3Model",
                               "moe_layer_freq")  # fmt: skip
    if opt_bool(config, "output_router_logits", False):
        raise ModelConfigError("'output_router_logits' = true (the router's auxiliary loss) is not modelled",
                               "output_router_logits")  # fmt: skip
    for key in ("num_nextn_predict_layers", "num_mtp_layers"):  # read and bounded: transformers builds no MTP module
        opt_int(config, key, "layers", 0)


def deepseek_v3(config: Mapping[str, object], family: Family) -> Architecture:
    """deepseek_v3 as transformers 5.23.0 builds it.

    Attention (``DeepseekV3Attention``, multi-head latent attention): ``q_a_proj`` [q_lora_rank, h] → RMSNorm →
    ``q_b_proj`` [a·(nope + rope), q_lora_rank] (or one ``q_proj`` when ``q_lora_rank`` is null);
    ``kv_a_proj_with_mqa`` [kv_lora_rank + rope, h] → RMSNorm over the kv_lora_rank latent → ``kv_b_proj``
    [a·(nope + v), kv_lora_rank]; ``o_proj`` [h, a·v]. ``attention_bias`` puts biases on q_a, kv_a and o.
    MLP (``DeepseekV3DecoderLayer``): layers below ``first_k_dense_replace`` (default 3) a dense SwiGLU of
    ``intermediate_size``, the others ``DeepseekV3MoE``: ``n_routed_experts`` fused experts of
    ``moe_intermediate_size``, a router [E, h] (its ``e_score_correction_bias`` is a buffer, not a parameter) and
    one SwiGLU of ``n_shared_experts`` × ``moe_intermediate_size``. The multi-token-prediction module
    (``num_nextn_predict_layers``, the checkpoint's layer 61) is not built: transformers drops its weights on
    loading, so it is read, bounded and counted nowhere."""
    hidden = need_int(config, "hidden_size", "hidden", family)
    heads = need_int(config, "num_attention_heads", "heads", family)
    layers = need_int(config, "num_hidden_layers", "layers", family)
    nope = need_int(config, "qk_nope_head_dim", "head_dim", family)
    rope = need_int(config, "qk_rope_head_dim", "rope_dim", family)
    experts, per_token = _experts(config, family)
    dense_first = opt_int(config, "first_k_dense_replace", "dense_layers", _DENSE_FIRST)
    assert dense_first is not None
    if dense_first >= layers:
        raise ModelConfigError(
            f"'first_k_dense_replace' = {dense_first:,} must be below 'num_hidden_layers' = {layers:,} (a MoE layer "
            "at least)",
            "first_k_dense_replace",
        )
    _refused(config)
    dense_width = opt_int(config, "intermediate_size", "dense_intermediate", _DENSE_WIDTH)
    assert dense_width is not None
    if nope + rope > 2_048:
        raise ModelConfigError("'qk_nope_head_dim' + 'qk_rope_head_dim' must be at most 2,048", "qk_nope_head_dim")
    bias = opt_bool(config, "attention_bias", False)
    return Architecture(
        family=family,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=read_kv_heads(config, heads),
        head_dim=nope + rope,
        intermediate=need_int(config, "moe_intermediate_size", "intermediate", family),
        vocab=need_int(config, "vocab_size", "vocab", family),
        tied_embeddings=opt_bool(config, "tie_word_embeddings", False),
        max_positions=opt_int(config, "max_position_embeddings", "max_positions", _POSITIONS),  # type: ignore[arg-type]
        experts=experts,
        experts_per_token=per_token,
        qkv_bias=bias,
        o_bias=bias,
        topk_renorm=opt_bool(config, "norm_topk_prob", True),
        dense_layers=dense_first,
        dense_intermediate=dense_width if dense_first else 0,
        shared_experts=opt_int(config, "n_shared_experts", "shared_experts", _SHARED),  # type: ignore[arg-type]
        q_lora_rank=_q_lora_rank(config),
        kv_lora_rank=need_int(config, "kv_lora_rank", "kv_lora_rank", family),
        rope_dim=rope,
        v_head_dim=need_int(config, "v_head_dim", "v_head_dim", family),
    )
