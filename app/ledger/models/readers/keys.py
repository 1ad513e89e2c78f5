"""Reading one key of a Hugging Face ``config.json``: bounded integers, booleans, soft-caps, the head sizes.

Each reader states the Hugging Face default it relies on when an optional key is absent, so an explicit key always
wins and a missing *required* key is an error naming it, never a silent default.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.ledger.arithmetic import shown_int
from app.ledger.models.architecture import BOUNDS, ModelConfigError

ABSENT = object()


def need_int(config: Mapping[str, object], key: str, bound: str, family: str) -> int:
    """A required integer key, bounded like the Architecture field ``bound``."""
    if key not in config:
        raise ModelConfigError(f"missing required key {key!r} for model_type {family!r}", key)
    return check_int(config[key], key, bound)


def opt_int(config: Mapping[str, object], key: str, bound: str, default: int | None) -> int | None:
    """An optional integer key: absent or null takes ``default`` (the Hugging Face default)."""
    raw = config.get(key, ABSENT)
    if raw is ABSENT or raw is None:
        return default
    return check_int(raw, key, bound)


def check_int(raw: object, key: str, bound: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        got = "null" if raw is None else "true/false" if isinstance(raw, bool) else type(raw).__name__
        raise ModelConfigError(f"{key!r} must be an integer, got {got}", key)
    lo, hi = BOUNDS[bound]
    if not lo <= raw <= hi:
        raise ModelConfigError(f"{key!r} = {shown_int(raw)} is out of bounds ({lo:,} … {hi:,})", key)
    return raw


def opt_bool(config: Mapping[str, object], key: str, default: bool) -> bool:
    raw = config.get(key, ABSENT)
    if raw is ABSENT or raw is None:
        return default
    if not isinstance(raw, bool):
        raise ModelConfigError(f"{key!r} must be true or false, got {type(raw).__name__}", key)
    return raw


def read_head_dim(config: Mapping[str, object], hidden: int, heads: int, hidden_key: str, heads_key: str) -> int:
    """``head_dim`` if given, else hidden ÷ heads (which must then divide exactly)."""
    explicit = opt_int(config, "head_dim", "head_dim", None)
    if explicit is not None:
        return explicit
    if hidden % heads != 0:
        raise ModelConfigError(
            f"{hidden_key!r} = {hidden:,} is not a multiple of {heads_key!r} = {heads:,} and no 'head_dim' is given",
            hidden_key,
        )
    return check_int(hidden // heads, "head_dim", "head_dim")


def read_kv_heads(config: Mapping[str, object], heads: int) -> int:
    kv = opt_int(config, "num_key_value_heads", "kv_heads", heads)
    assert kv is not None
    if heads % kv != 0:
        raise ModelConfigError(
            f"'num_attention_heads' = {heads:,} is not a multiple of 'num_key_value_heads' = {kv:,}",
            "num_key_value_heads",
        )
    return kv


_SOFTCAP_MAX = 10_000  # a soft-cap is a positive number; Gemma 2's are 50 (scores) and 30 (logits)


def softcap(config: Mapping[str, object], key: str, default: bool) -> bool:
    """Whether a soft-cap (``tanh(x ÷ cap) × cap``) is on: absent, the config class's default; null, off; a number
    in (0, 10,000], on. Its value sizes nothing: only whether the tanh runs (and keeps its output) does."""
    raw = config.get(key, ABSENT)
    if raw is ABSENT:
        return default
    if raw is None:
        return False
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 < raw <= _SOFTCAP_MAX:
        raise ModelConfigError(f"{key!r} must be null or a number in (0, {_SOFTCAP_MAX:,}]", key)
    return True


# Hugging Face defaults of max_position_embeddings when a config omits it (it sizes nothing
# for rotary models; it is read so that the Architecture states the context length).
DEFAULT_POSITIONS: dict[str, int] = {
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
