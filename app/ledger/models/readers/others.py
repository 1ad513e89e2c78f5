"""The other families' readers: gemma2, gemma3_text, gpt2, gpt_neox (transformers 5.23.0)."""

from __future__ import annotations

from collections.abc import Mapping

from app.ledger.models.architecture import Architecture, Family, ModelConfigError
from app.ledger.models.readers.keys import (
    DEFAULT_POSITIONS,
    check_int,
    need_int,
    opt_bool,
    opt_int,
    read_kv_heads,
    softcap,
)

_GEMMA2_HEAD_DIM = 256  # Gemma2Config's head_dim when a config omits it


def gemma2(config: Mapping[str, object], family: Family) -> Architecture:
    """gemma2 as transformers 5.23.0 builds it (``Gemma2Config``, ``Gemma2DecoderLayer``, ``Gemma2Attention``): q, k,
    v and o projections (``attention_bias``, default false), ``head_dim`` 256 when absent, an RMSNorm before and after
    the attention and the MLP (four a layer, each weight used as 1 + w), a GeGLU MLP (gate, up, down: the same
    tensors as SwiGLU's), embeddings tied by default and scaled by √h (a constant: it sizes nothing), soft-capped
    attention scores (``attn_logit_softcapping``, default 50) and logits (``final_logit_softcapping``, default 30).
    ``sliding_window``, ``layer_types`` and ``query_pre_attn_scalar`` size nothing under its eager attention (the
    whole s×s scores either way; the window is a mask): they are not read."""
    hidden = need_int(config, "hidden_size", "hidden", family)
    heads = need_int(config, "num_attention_heads", "heads", family)
    attention_bias = opt_bool(config, "attention_bias", False)
    return Architecture(
        family=family,
        hidden=hidden,
        layers=need_int(config, "num_hidden_layers", "layers", family),
        heads=heads,
        kv_heads=read_kv_heads(config, heads),
        head_dim=opt_int(config, "head_dim", "head_dim", _GEMMA2_HEAD_DIM),  # type: ignore[arg-type]
        intermediate=need_int(config, "intermediate_size", "intermediate", family),
        vocab=need_int(config, "vocab_size", "vocab", family),
        tied_embeddings=opt_bool(config, "tie_word_embeddings", True),
        max_positions=opt_int(config, "max_position_embeddings", "max_positions", 8_192),  # type: ignore[arg-type]
        qkv_bias=attention_bias,
        o_bias=attention_bias,
        sandwich_norms=True,
        attn_softcap=softcap(config, "attn_logit_softcapping", True),
        logit_softcap=softcap(config, "final_logit_softcapping", True),
    )


_GEMMA3_HEAD_DIM = 256  # Gemma3TextConfig's head_dim, sliding_window and max_position_embeddings when absent
_GEMMA3_WINDOW = 4_096
_GEMMA3_POSITIONS = 131_072
_SLIDING, _GLOBAL = "sliding_attention", "full_attention"


def _global_every(config: Mapping[str, object], layers: int) -> int:
    """N where layers N − 1, 2N − 1, … attend globally and the others through the window: Gemma3TextConfig's
    ``layer_types`` when given (a list, which must follow such a pattern: any other is refused, by name), else its
    ``sliding_window_pattern`` (default 6), as ``Gemma3TextConfig.__post_init__`` spells the list from it."""
    kinds = config.get("layer_types")
    if kinds is None:
        every = opt_int(config, "sliding_window_pattern", "global_every", 6)
        if not every:  # 0: Gemma3TextConfig would divide by it
            raise ModelConfigError("'sliding_window_pattern' must be at least 1", "sliding_window_pattern")
        return every
    if not isinstance(kinds, list) or len(kinds) != layers or _GLOBAL not in kinds:
        raise ModelConfigError(f"'layer_types' must list {layers:,} layer kinds, some {_GLOBAL!r}", "layer_types")
    every = kinds.index(_GLOBAL) + 1
    if kinds != [_SLIDING if (i + 1) % every else _GLOBAL for i in range(layers)]:
        raise ModelConfigError("'layer_types' other than every N-th layer global is not modelled", "layer_types")
    return every


def gemma3_text(config: Mapping[str, object], family: Family) -> Architecture:
    """gemma3_text as transformers 5.23.0 builds it (``Gemma3TextConfig``, ``Gemma3DecoderLayer``, ``Gemma3Attention``):
    Gemma 2's layer (four norms with 1 + weight, GeGLU, tied and √h-scaled embeddings) with q/k RMSNorms per head and
    SDPA (no soft-capping: a non-null cap is refused, every published Gemma 3 config has none). Its layers attend
    through a ``sliding_window`` (default 4,096; null: none) but every N-th (:func:`_global_every`), which attends
    globally: from a sequence longer than the window the two kinds keep different sets (the sliding ones a mask and
    expanded K/V). ``query_pre_attn_scalar`` and ``rope_scaling`` size nothing: not read."""
    for key in ("attn_logit_softcapping", "final_logit_softcapping"):
        if softcap(config, key, False):
            raise ModelConfigError(f"{key!r} other than null is not modelled for gemma3_text", key)
    hidden = need_int(config, "hidden_size", "hidden", family)
    heads = need_int(config, "num_attention_heads", "heads", family)
    layers = need_int(config, "num_hidden_layers", "layers", family)
    # absent: the config class's 4,096; null (or 0, how a link spells null): no window
    window = opt_int(config, "sliding_window", "sliding_window", 0) if "sliding_window" in config else _GEMMA3_WINDOW
    attention_bias = opt_bool(config, "attention_bias", False)
    return Architecture(
        family=family,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=read_kv_heads(config, heads),
        head_dim=opt_int(config, "head_dim", "head_dim", _GEMMA3_HEAD_DIM),  # type: ignore[arg-type]
        intermediate=need_int(config, "intermediate_size", "intermediate", family),
        vocab=need_int(config, "vocab_size", "vocab", family),
        tied_embeddings=opt_bool(config, "tie_word_embeddings", True),
        max_positions=opt_int(config, "max_position_embeddings", "max_positions", _GEMMA3_POSITIONS),  # type: ignore[arg-type]
        qkv_bias=attention_bias,
        o_bias=attention_bias,
        sandwich_norms=True,
        qk_norm="head",
        sliding_window=window or 0,
        global_every=_global_every(config, layers),
    )


def gpt2(config: Mapping[str, object], family: Family) -> Architecture:
    """GPT-2: learned positions (``wpe``, n_positions rows), LayerNorm with bias, Conv1D layers
    with biases everywhere, GELU MLP of ``n_inner`` (null or absent: 4 × n_embd), LM head tied to
    ``wte`` unless ``tie_word_embeddings`` is false (the GPT2Config default is true)."""
    hidden = need_int(config, "n_embd", "hidden", family)
    heads = need_int(config, "n_head", "heads", family)
    if hidden % heads != 0:
        raise ModelConfigError(f"'n_embd' = {hidden:,} is not a multiple of 'n_head' = {heads:,}", "n_embd")
    inner = opt_int(config, "n_inner", "intermediate", None)
    if inner is None:
        inner = check_int(4 * hidden, "n_inner", "intermediate")
    return Architecture(
        family=family,
        hidden=hidden,
        layers=need_int(config, "n_layer", "layers", family),
        heads=heads,
        kv_heads=heads,
        head_dim=hidden // heads,
        intermediate=inner,
        vocab=need_int(config, "vocab_size", "vocab", family),
        tied_embeddings=opt_bool(config, "tie_word_embeddings", True),
        max_positions=need_int(config, "n_positions", "max_positions", family),
        learned_positions=True,
        norm="layernorm",
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        mlp="gelu",
    )


def gpt_neox(config: Mapping[str, object], family: Family) -> Architecture:
    """GPT-NeoX: rotary (on ``rotary_pct`` of each head; no parameters), two LayerNorms with bias
    per layer, fused ``query_key_value`` [3h, h] and ``dense`` with biases (``attention_bias``,
    default true), GELU MLP with biases, untied ``embed_out`` (``tie_word_embeddings`` default
    false), attention and MLP in parallel (``use_parallel_residual``, default true)."""
    hidden = need_int(config, "hidden_size", "hidden", family)
    heads = need_int(config, "num_attention_heads", "heads", family)
    if hidden % heads != 0:
        raise ModelConfigError(
            f"'hidden_size' = {hidden:,} is not a multiple of 'num_attention_heads' = {heads:,}", "hidden_size"
        )
    attention_bias = opt_bool(config, "attention_bias", True)
    positions = opt_int(config, "max_position_embeddings", "max_positions", DEFAULT_POSITIONS[family])
    assert positions is not None
    return Architecture(
        family=family,
        hidden=hidden,
        layers=need_int(config, "num_hidden_layers", "layers", family),
        heads=heads,
        kv_heads=heads,
        head_dim=hidden // heads,
        intermediate=need_int(config, "intermediate_size", "intermediate", family),
        vocab=need_int(config, "vocab_size", "vocab", family),
        tied_embeddings=opt_bool(config, "tie_word_embeddings", False),
        max_positions=positions,
        norm="layernorm",
        qkv_bias=attention_bias,
        o_bias=attention_bias,
        mlp_bias=True,
        mlp="gelu",
        parallel_residual=opt_bool(config, "use_parallel_residual", True),
    )
