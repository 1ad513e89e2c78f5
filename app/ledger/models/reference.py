"""A model as one scenario input: a known id (``llama-2-7b``) or a pasted config in compact form.

The address bar is the lab's state, so a config pasted into the page must fit in a link. Only
the keys the config's family reader consults are kept, as ``cfg:model_type=llama;hidden_size=4096;...``
(integers and true/false only; qwen3_moe's ``mlp_only_layers`` is read only as [], and left out): bounded,
readable, and read back by the same reader as a file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from app.ledger.bounds import MODEL_MAX_CHARS
from app.ledger.models.architecture import Architecture, ModelConfigError
from app.ledger.models.inventory import Inventory, inventory
from app.ledger.models.known import KNOWN_BY_ID, KNOWN_MODELS
from app.ledger.models.readers import FAMILY_KEYS, architecture_from_config, config_family

PREFIX = "cfg:"
MAX_REFERENCE_CHARS = MODEL_MAX_CHARS  # the scenario's model field holds the reference
# Every key some family reader consults (readers.FAMILY_KEYS), in the order links spell them:
# the order is part of every shared cfg: link, so it is written out rather than derived.
CONFIG_KEYS: tuple[str, ...] = (
    "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "head_dim", "intermediate_size", "vocab_size", "tie_word_embeddings", "max_position_embeddings",
    "attention_bias", "mlp_bias", "num_local_experts", "num_experts_per_tok", "n_embd", "n_layer", "n_head",
    "n_inner", "n_positions", "use_parallel_residual", "use_sliding_window", "sliding_window", "num_experts",
    "moe_intermediate_size", "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers", "output_router_logits",
    "attn_logit_softcapping", "final_logit_softcapping", "sliding_window_pattern", "layer_types",
    "n_routed_experts", "n_shared_experts", "first_k_dense_replace", "moe_layer_freq", "n_group", "topk_group",
    "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "num_nextn_predict_layers",
    "num_mtp_layers",
)  # fmt: skip
assert set(CONFIG_KEYS) == {key for keys in FAMILY_KEYS.values() for key in keys}
MAX_IGNORED_SHOWN = 20  # ignored keys named back to the user; the rest are counted


@dataclass(frozen=True, slots=True)
class ModelRef:
    """A resolved model input: what it is called, where its facts come from, and its shape."""

    reference: str  # the scenario's ``model`` text, canonical
    title: str
    source: str
    architecture: Architecture

    @property
    def inventory(self) -> Inventory:
        return inventory(self.architecture)


def compact(config: Mapping[str, object]) -> str:
    """``cfg:`` + the keys ``config``'s family reads, in a fixed order, validated by reading it back.

    Keys the family does not read are dropped (:func:`ignored_keys` names them), so nothing
    unchecked travels in a link; the reference is read back through :func:`resolve`, so a
    reference this returns always resolves.
    """
    family = config_family(config)
    arch = architecture_from_config(config)  # refuse a bad config here, naming its key
    if arch.global_every:  # gemma3_text's layer kinds travel as their pattern (a link holds no list)
        config = {k: v for k, v in config.items() if k != "layer_types"} | {"sliding_window_pattern": arch.global_every}
    parts = []
    for key in CONFIG_KEYS:
        value = config.get(key)
        if key in ("sliding_window", "q_lora_rank") and key in config and value is None:
            value = 0  # null is none (no window, no query latent); omitted, the default would apply on reading back
        if value is None or value == [] or key not in FAMILY_KEYS[family]:
            continue  # absent, null or qwen3_moe's no dense layers (mlp_only_layers []: the reader refuses any other)
        if isinstance(value, bool):
            parts.append(f"{key}={'true' if value else 'false'}")
        elif isinstance(value, float):  # a soft-cap (gemma2): its value sizes nothing, so a link spells it whole
            parts.append(f"{key}={math.ceil(value)}")
        else:  # model_type (a family name) or an integer the reader has bounded
            parts.append(f"{key}={value}")
    reference = PREFIX + ";".join(parts)
    resolve(reference)  # the round trip: a pasted config and its link read the same
    return reference


def ignored_keys(config: Mapping[str, object]) -> tuple[list[str], int]:
    """The keys of ``config`` its family's reader does not consult (the first few, shortened), and
    how many there are: shown back so that a stray key is not silently taken as meaningful."""
    keys = FAMILY_KEYS[config_family(config)]
    ignored = sorted(k for k in config if k not in keys)
    shown = [k if len(k) <= 40 else k[:40] + "…" for k in ignored[:MAX_IGNORED_SHOWN]]
    return shown, len(ignored)


def _expand(text: str) -> dict[str, object]:
    config: dict[str, object] = {}
    for part in text.split(";"):
        key, sep, raw = part.partition("=")
        if not sep or key not in CONFIG_KEYS:
            raise ModelConfigError(f"{part[:40]!r} is not one of the config keys {', '.join(CONFIG_KEYS)}")
        if raw in ("true", "false"):
            config[key] = raw == "true"
        elif raw.isascii() and raw.isdigit() and len(raw) <= 12:
            config[key] = int(raw)
        elif key == "model_type":
            config[key] = raw
        else:
            raise ModelConfigError(f"{key}={raw[:20]!r}: expected an integer or true/false", key)
    family = config_family(config)
    stray = [key for key in config if key not in FAMILY_KEYS[family]]
    if stray:
        raise ModelConfigError(f"{stray[0]!r} is not a key that model_type {family!r} reads", stray[0])
    return config


@lru_cache(maxsize=256)
def config_of(reference: str) -> dict[str, object]:
    """The config.json facts a resolvable ``reference`` names (a known model's, or the pasted keys): what
    transformers' own model class is built from (the hf-fsdp2 trace)."""
    known = KNOWN_BY_ID.get(reference)
    if known is not None:
        return dict(known.config)
    resolve(reference)  # refuse what does not resolve, as resolve words it
    return _expand(reference[len(PREFIX) :])


# Cached: a scenario asks for its model's default sequence length, and every model-defaults miss for the model,
# dozens of times an answer; a pasted config would be parsed again each time. Refusals raise and are not kept.
@lru_cache(maxsize=64)
def resolve(reference: str) -> ModelRef:
    """The model a scenario names; ``ModelConfigError`` says what is accepted when it names none."""
    if len(reference) > MAX_REFERENCE_CHARS:
        raise ModelConfigError(f"is longer than {MAX_REFERENCE_CHARS} characters")
    known = KNOWN_BY_ID.get(reference)
    if known is not None:
        return ModelRef(known.id, known.title, known.source, known.architecture())
    if reference.startswith(PREFIX):
        arch = architecture_from_config(_expand(reference[len(PREFIX) :]))
        return ModelRef(reference, f"custom {arch.family} config", "pasted config.json", arch)
    ids = ", ".join(m.id for m in KNOWN_MODELS)
    raise ModelConfigError(f"{reference[:40]!r} is neither a known model ({ids}) nor a pasted config (cfg:…)")
