"""Reading a Hugging Face ``config.json`` into an :class:`~app.ledger.models.architecture.Architecture`, every key
bounded.

Each family's reader states the Hugging Face defaults it relies on when an optional key is absent
(``num_key_value_heads`` = heads, ``head_dim`` = hidden ÷ heads, ...), so an explicit key always wins and a
missing *required* key is an error naming it, never a silent default. :data:`FAMILY_KEYS` lists the keys each
reader consults, and nothing else is read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from app.ledger.arithmetic import shown_int
from app.ledger.models.architecture import BOUNDS, FAMILIES, Architecture, Family, ModelConfigError

_ABSENT = object()


def _need_int(config: Mapping[str, object], key: str, bound: str, family: str) -> int:
    """A required integer key, bounded like the Architecture field ``bound``."""
    if key not in config:
        raise ModelConfigError(f"missing required key {key!r} for model_type {family!r}", key)
    return _check_int(config[key], key, bound)


def _opt_int(config: Mapping[str, object], key: str, bound: str, default: int | None) -> int | None:
    """An optional integer key: absent or null takes ``default`` (the Hugging Face default)."""
    raw = config.get(key, _ABSENT)
    if raw is _ABSENT or raw is None:
        return default
    return _check_int(raw, key, bound)


def _check_int(raw: object, key: str, bound: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        got = "null" if raw is None else "true/false" if isinstance(raw, bool) else type(raw).__name__
        raise ModelConfigError(f"{key!r} must be an integer, got {got}", key)
    lo, hi = BOUNDS[bound]
    if not lo <= raw <= hi:
        raise ModelConfigError(f"{key!r} = {shown_int(raw)} is out of bounds ({lo:,} … {hi:,})", key)
    return raw


def _opt_bool(config: Mapping[str, object], key: str, default: bool) -> bool:
    raw = config.get(key, _ABSENT)
    if raw is _ABSENT or raw is None:
        return default
    if not isinstance(raw, bool):
        raise ModelConfigError(f"{key!r} must be true or false, got {type(raw).__name__}", key)
    return raw


def _head_dim(config: Mapping[str, object], hidden: int, heads: int, hidden_key: str, heads_key: str) -> int:
    """``head_dim`` if given, else hidden ÷ heads (which must then divide exactly)."""
    explicit = _opt_int(config, "head_dim", "head_dim", None)
    if explicit is not None:
        return explicit
    if hidden % heads != 0:
        raise ModelConfigError(
            f"{hidden_key!r} = {hidden:,} is not a multiple of {heads_key!r} = {heads:,} and no 'head_dim' is given",
            hidden_key,
        )
    return _check_int(hidden // heads, "head_dim", "head_dim")


def _kv_heads(config: Mapping[str, object], heads: int) -> int:
    kv = _opt_int(config, "num_key_value_heads", "kv_heads", heads)
    assert kv is not None
    if heads % kv != 0:
        raise ModelConfigError(
            f"'num_attention_heads' = {heads:,} is not a multiple of 'num_key_value_heads' = {kv:,}",
            "num_key_value_heads",
        )
    return kv


# Hugging Face defaults of max_position_embeddings when a config omits it (it sizes nothing
# for rotary models; it is read so that the Architecture states the context length).
_DEFAULT_POSITIONS: dict[str, int] = {
    "llama": 2_048,
    "mistral": 131_072,
    "mixtral": 131_072,
    "qwen2": 32_768,
    "qwen3": 32_768,
    "qwen3_moe": 32_768,
    "phi3": 4_096,
    "olmo2": 2_048,
    "gpt_neox": 2_048,
}
# Qwen3Config's head_dim when a config omits it (transformers 5.23.0): 128, not hidden ÷ heads; Gemma2Config's 256.
_QWEN3_HEAD_DIM = 128
_GEMMA2_HEAD_DIM = 256


# MistralConfig's sliding_window when a config omits the key (transformers 5.23.0); MixtralConfig's is None.
_DEFAULT_WINDOW: dict[str, int] = {"mistral": 4_096, "mixtral": 0}


def _window(config: Mapping[str, object], family: str) -> int:
    """``sliding_window``: absent, the config class's default (Mistral 4,096, Mixtral none); null or 0, none (0 is
    how the lab's links spell a null, which a link cannot omit: omitted reads as the default)."""
    if "sliding_window" not in config:
        return _DEFAULT_WINDOW[family]
    window = _opt_int(config, "sliding_window", "sliding_window", 0)
    assert window is not None
    return window


def _phi3_window(config: Mapping[str, object], positions: int) -> int:
    """Phi3Config's ``sliding_window`` (default none): a window the context never reaches (Phi-3.5-mini's
    262,144 over 131,072 positions) is none; a shorter one (Phi-3-mini-4k's 2,047) makes transformers attend
    through a mask on a model without grouped K/V heads, which the lab does not model: refused, by name."""
    window = _opt_int(config, "sliding_window", "sliding_window", 0)
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
    experts = _need_int(config, experts_key, "experts", family)
    aliased = None if alias is None else _check_int(alias, "num_local_experts", "experts")
    if aliased is not None and aliased != experts:
        raise ModelConfigError(
            f"'num_local_experts' = {aliased:,} disagrees with 'num_experts' = {experts:,} (its alias)",
            "num_local_experts",
        )
    if experts < 1:
        raise ModelConfigError(f"{experts_key!r} must be at least 1 for {family}", experts_key)
    per_token = _need_int(config, "num_experts_per_tok", "experts_per_token", family)
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
    if _opt_int(config, "decoder_sparse_step", "layers", 1) != 1:
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
    if _opt_bool(config, "output_router_logits", False):
        raise ModelConfigError(
            "'output_router_logits' = true (the router's auxiliary loss) is not modelled for qwen3_moe",
            "output_router_logits",
        )
    return _opt_bool(config, "norm_topk_prob", False)


def _swiglu(config: Mapping[str, object], family: Family) -> Architecture:
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
    hidden = _need_int(config, "hidden_size", "hidden", family)
    heads = _need_int(config, "num_attention_heads", "heads", family)
    if family == "qwen3":
        head_dim: int | None = _opt_int(config, "head_dim", "head_dim", _QWEN3_HEAD_DIM)
    else:
        head_dim = _head_dim(config, hidden, heads, "hidden_size", "num_attention_heads")
    arch: dict[str, object] = {
        "family": family,
        "hidden": hidden,
        "layers": _need_int(config, "num_hidden_layers", "layers", family),
        "heads": heads,
        "kv_heads": _kv_heads(config, heads),
        "head_dim": head_dim,
        "intermediate": _need_int(config, _intermediate_key(family), "intermediate", family),
        "vocab": _need_int(config, "vocab_size", "vocab", family),
        "tied_embeddings": _opt_bool(config, "tie_word_embeddings", False),
        "max_positions": _opt_int(config, "max_position_embeddings", "max_positions", _DEFAULT_POSITIONS[family]),
    }
    if family == "llama":
        attention_bias = _opt_bool(config, "attention_bias", False)
        arch.update(qkv_bias=attention_bias, o_bias=attention_bias, mlp_bias=_opt_bool(config, "mlp_bias", False))
    elif family == "qwen2":
        arch.update(qkv_bias=True)
    elif family in ("qwen3", "qwen3_moe"):
        if _opt_bool(config, "use_sliding_window", False):
            raise ModelConfigError(
                f"'use_sliding_window' = true is not modelled for {family} (every published Qwen3 config has false)",
                "use_sliding_window",
            )
        attention_bias = _opt_bool(config, "attention_bias", False)
        arch.update(qkv_bias=attention_bias, o_bias=attention_bias, qk_norm="head")
    elif family == "olmo2":
        attention_bias = _opt_bool(config, "attention_bias", False)
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


_SOFTCAP_MAX = 10_000  # a soft-cap is a positive number; Gemma 2's are 50 (scores) and 30 (logits)


def _softcap(config: Mapping[str, object], key: str, default: bool) -> bool:
    """Whether a soft-cap (``tanh(x ÷ cap) × cap``) is on: absent, the config class's default; null, off; a number
    in (0, 10,000], on. Its value sizes nothing: only whether the tanh runs (and keeps its output) does."""
    raw = config.get(key, _ABSENT)
    if raw is _ABSENT:
        return default
    if raw is None:
        return False
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 < raw <= _SOFTCAP_MAX:
        raise ModelConfigError(f"{key!r} must be null or a number in (0, {_SOFTCAP_MAX:,}]", key)
    return True


def _gemma2(config: Mapping[str, object], family: Family) -> Architecture:
    """gemma2 as transformers 5.23.0 builds it (``Gemma2Config``, ``Gemma2DecoderLayer``, ``Gemma2Attention``): q, k,
    v and o projections (``attention_bias``, default false), ``head_dim`` 256 when absent, an RMSNorm before and after
    the attention and the MLP (four a layer, each weight used as 1 + w), a GeGLU MLP (gate, up, down: the same
    tensors as SwiGLU's), embeddings tied by default and scaled by √h (a constant: it sizes nothing), soft-capped
    attention scores (``attn_logit_softcapping``, default 50) and logits (``final_logit_softcapping``, default 30).
    ``sliding_window``, ``layer_types`` and ``query_pre_attn_scalar`` size nothing under its eager attention (the
    whole s×s scores either way; the window is a mask): they are not read."""
    hidden = _need_int(config, "hidden_size", "hidden", family)
    heads = _need_int(config, "num_attention_heads", "heads", family)
    attention_bias = _opt_bool(config, "attention_bias", False)
    return Architecture(
        family=family,
        hidden=hidden,
        layers=_need_int(config, "num_hidden_layers", "layers", family),
        heads=heads,
        kv_heads=_kv_heads(config, heads),
        head_dim=_opt_int(config, "head_dim", "head_dim", _GEMMA2_HEAD_DIM),  # type: ignore[arg-type]
        intermediate=_need_int(config, "intermediate_size", "intermediate", family),
        vocab=_need_int(config, "vocab_size", "vocab", family),
        tied_embeddings=_opt_bool(config, "tie_word_embeddings", True),
        max_positions=_opt_int(config, "max_position_embeddings", "max_positions", 8_192),  # type: ignore[arg-type]
        qkv_bias=attention_bias,
        o_bias=attention_bias,
        sandwich_norms=True,
        attn_softcap=_softcap(config, "attn_logit_softcapping", True),
        logit_softcap=_softcap(config, "final_logit_softcapping", True),
    )


def _gpt2(config: Mapping[str, object], family: Family) -> Architecture:
    """GPT-2: learned positions (``wpe``, n_positions rows), LayerNorm with bias, Conv1D layers
    with biases everywhere, GELU MLP of ``n_inner`` (null or absent: 4 × n_embd), LM head tied to
    ``wte`` unless ``tie_word_embeddings`` is false (the GPT2Config default is true)."""
    hidden = _need_int(config, "n_embd", "hidden", family)
    heads = _need_int(config, "n_head", "heads", family)
    if hidden % heads != 0:
        raise ModelConfigError(f"'n_embd' = {hidden:,} is not a multiple of 'n_head' = {heads:,}", "n_embd")
    inner = _opt_int(config, "n_inner", "intermediate", None)
    if inner is None:
        inner = _check_int(4 * hidden, "n_inner", "intermediate")
    return Architecture(
        family=family,
        hidden=hidden,
        layers=_need_int(config, "n_layer", "layers", family),
        heads=heads,
        kv_heads=heads,
        head_dim=hidden // heads,
        intermediate=inner,
        vocab=_need_int(config, "vocab_size", "vocab", family),
        tied_embeddings=_opt_bool(config, "tie_word_embeddings", True),
        max_positions=_need_int(config, "n_positions", "max_positions", family),
        learned_positions=True,
        norm="layernorm",
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        mlp="gelu",
    )


def _gpt_neox(config: Mapping[str, object], family: Family) -> Architecture:
    """GPT-NeoX: rotary (on ``rotary_pct`` of each head; no parameters), two LayerNorms with bias
    per layer, fused ``query_key_value`` [3h, h] and ``dense`` with biases (``attention_bias``,
    default true), GELU MLP with biases, untied ``embed_out`` (``tie_word_embeddings`` default
    false), attention and MLP in parallel (``use_parallel_residual``, default true)."""
    hidden = _need_int(config, "hidden_size", "hidden", family)
    heads = _need_int(config, "num_attention_heads", "heads", family)
    if hidden % heads != 0:
        raise ModelConfigError(
            f"'hidden_size' = {hidden:,} is not a multiple of 'num_attention_heads' = {heads:,}", "hidden_size"
        )
    attention_bias = _opt_bool(config, "attention_bias", True)
    positions = _opt_int(config, "max_position_embeddings", "max_positions", _DEFAULT_POSITIONS[family])
    assert positions is not None
    return Architecture(
        family=family,
        hidden=hidden,
        layers=_need_int(config, "num_hidden_layers", "layers", family),
        heads=heads,
        kv_heads=heads,
        head_dim=hidden // heads,
        intermediate=_need_int(config, "intermediate_size", "intermediate", family),
        vocab=_need_int(config, "vocab_size", "vocab", family),
        tied_embeddings=_opt_bool(config, "tie_word_embeddings", False),
        max_positions=positions,
        norm="layernorm",
        qkv_bias=attention_bias,
        o_bias=attention_bias,
        mlp_bias=True,
        mlp="gelu",
        parallel_residual=_opt_bool(config, "use_parallel_residual", True),
    )


# The keys each family's reader consults, and nothing else: a config is compacted to these keys
# only (reference.py), so a key a family never reads (a GPT-2 config's stray ``hidden_size``) is
# dropped, never kept unchecked. A test holds each reader to its list.
_SWIGLU_KEYS = (
    "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
    "intermediate_size", "vocab_size", "tie_word_embeddings", "max_position_embeddings",
)  # fmt: skip
FAMILY_KEYS: dict[Family, tuple[str, ...]] = {
    "gemma2": (*_SWIGLU_KEYS, "attention_bias", "attn_logit_softcapping", "final_logit_softcapping"),
    "gpt2": ("model_type", "n_embd", "n_layer", "n_head", "n_inner", "vocab_size", "tie_word_embeddings",
             "n_positions"),
    "gpt_neox": ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                 "vocab_size", "tie_word_embeddings", "max_position_embeddings", "attention_bias",
                 "use_parallel_residual"),
    "llama": (*_SWIGLU_KEYS, "attention_bias", "mlp_bias"),
    "mistral": (*_SWIGLU_KEYS, "sliding_window"),
    "mixtral": (*_SWIGLU_KEYS, "num_local_experts", "num_experts_per_tok", "sliding_window"),
    "qwen2": _SWIGLU_KEYS,
    "qwen3": (*_SWIGLU_KEYS, "attention_bias", "use_sliding_window"),
    "qwen3_moe": (*(k for k in _SWIGLU_KEYS if k != "intermediate_size"), "attention_bias", "use_sliding_window",
                  "num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob",
                  "decoder_sparse_step", "mlp_only_layers", "output_router_logits"),
    "phi3": (*_SWIGLU_KEYS, "sliding_window"),
    "olmo2": (*_SWIGLU_KEYS, "attention_bias"),
}  # fmt: skip

_READERS: dict[str, Callable[[Mapping[str, object], Family], Architecture]] = {
    "gemma2": _gemma2,
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
    "llama": _swiglu,
    "mistral": _swiglu,
    "mixtral": _swiglu,
    "qwen2": _swiglu,
    "qwen3": _swiglu,
    "qwen3_moe": _swiglu,
    "phi3": _swiglu,
    "olmo2": _swiglu,
}
SUPPORTED = ", ".join(FAMILIES)


def config_family(config: Mapping[str, object]) -> Family:
    """The supported family a config's ``model_type`` names, or a :class:`ModelConfigError` saying why not."""
    if not isinstance(config, Mapping):
        raise ModelConfigError(f"a model config must be a JSON object, not {type(config).__name__}")
    model_type = config.get("model_type", _ABSENT)
    if model_type is _ABSENT:
        raise ModelConfigError(f"missing required key 'model_type' (supported families: {SUPPORTED})", "model_type")
    if not isinstance(model_type, str):
        raise ModelConfigError(f"'model_type' must be text (supported families: {SUPPORTED})", "model_type")
    if model_type not in _READERS:
        shown = repr(model_type[:40]) + ("…" if len(model_type) > 40 else "")
        raise ModelConfigError(f"model_type {shown} is not supported; supported families: {SUPPORTED}", "model_type")
    return FAMILIES[FAMILIES.index(model_type)]


def architecture_from_config(config: Mapping[str, object]) -> Architecture:
    """The Architecture a Hugging Face ``config.json`` (already parsed) describes.

    Raises :class:`ModelConfigError` for a config that is not an object, an absent or unknown
    ``model_type`` (the message lists the supported families), a missing required key (named),
    or a value that is not an integer / boolean or lies out of bounds (named, with the bounds).
    Keys the family's reader does not consult (``rms_norm_eps``, ``rope_theta``, a GPT-2 config's
    ``hidden_size``, ...) are ignored: :data:`FAMILY_KEYS` lists the ones it does.
    """
    family = config_family(config)
    return _READERS[family](config, family)
