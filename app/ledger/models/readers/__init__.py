"""Reading a Hugging Face ``config.json`` into an :class:`~app.ledger.models.architecture.Architecture`, every key
bounded.

Each family's reader states the Hugging Face defaults it relies on when an optional key is absent
(``num_key_value_heads`` = heads, ``head_dim`` = hidden ÷ heads, ...), so an explicit key always wins and a
missing *required* key is an error naming it, never a silent default. :data:`FAMILY_KEYS` lists the keys each
reader consults, and nothing else is read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from app.ledger.models.architecture import FAMILIES, Architecture, Family, ModelConfigError
from app.ledger.models.readers import deepseek
from app.ledger.models.readers.keys import ABSENT
from app.ledger.models.readers.others import gemma2, gemma3_text, gpt2, gpt_neox
from app.ledger.models.readers.swiglu import swiglu

# The keys each family's reader consults, and nothing else: a config is compacted to these keys
# only (reference.py), so a key a family never reads (a GPT-2 config's stray ``hidden_size``) is
# dropped, never kept unchecked. A test holds each reader to its list.
_SWIGLU_KEYS = (
    "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
    "intermediate_size", "vocab_size", "tie_word_embeddings", "max_position_embeddings",
)  # fmt: skip
FAMILY_KEYS: dict[Family, tuple[str, ...]] = {
    "deepseek_v3": deepseek.KEYS,
    "gemma2": (*_SWIGLU_KEYS, "attention_bias", "attn_logit_softcapping", "final_logit_softcapping"),
    "gemma3_text": (*_SWIGLU_KEYS, "attention_bias", "attn_logit_softcapping", "final_logit_softcapping",
                    "sliding_window", "layer_types", "sliding_window_pattern"),
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
    "deepseek_v3": deepseek.deepseek_v3,
    "gemma2": gemma2,
    "gemma3_text": gemma3_text,
    "gpt2": gpt2,
    "gpt_neox": gpt_neox,
    "llama": swiglu,
    "mistral": swiglu,
    "mixtral": swiglu,
    "qwen2": swiglu,
    "qwen3": swiglu,
    "qwen3_moe": swiglu,
    "phi3": swiglu,
    "olmo2": swiglu,
}
SUPPORTED = ", ".join(FAMILIES)


def config_family(config: Mapping[str, object]) -> Family:
    """The supported family a config's ``model_type`` names, or a :class:`ModelConfigError` saying why not."""
    if not isinstance(config, Mapping):
        raise ModelConfigError(f"a model config must be a JSON object, not {type(config).__name__}")
    model_type = config.get("model_type", ABSENT)
    if model_type is ABSENT:
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
