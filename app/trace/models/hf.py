"""transformers' own model class for a scenario's config: what the ``hf-fsdp2`` stack's trace runs.

The config.json facts the scenario names (:func:`app.ledger.models.reference.config_of`) become the
family's transformers config (``AutoConfig.for_model``) and ``AutoModelForCausalLM.from_config`` builds
the model class a Trainer run builds (transformers 5.23.0, ``attn_implementation="sdpa"``, its default, or
``"eager"`` for Gemma 2, whose class refuses SDPA;
build it under ``FakeTensorMode``: no weights, no storage). Its forward takes ``labels=`` and computes
the loss itself (``ForCausalLMLoss``: the logits upcast to FP32 inside the model).

Two things stand in for a real run on a GPU (:func:`as_real_tensors`): without a cache (training) transformers
checks the position ids for packed sequences (``masking_utils.find_packed_sequence_indices``), reading their values;
a fake tensor has none, so it would take the batch as packed, build an s × s mask and expand K and V
(``repeat_kv``) where a real run on the same inputs passes no mask and ``enable_gqa``. And where the query/key and
the value heads differ in size (DeepSeek's latent attention: 192 and 128), SDPA on a CPU has only its math kernel
(the s × s scores in FP32, kept), where on a GPU it takes the memory-efficient one (the flash kernel needs equal
sizes): transformers' own ``sdpa_attention_forward`` still runs, and its SDPA call goes to that kernel's ATen op,
whose autograd keeps what the GPU's does (q, k, v, output, FP32 log-sum-exp, RNG seed and offset).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from app.ledger.models.readers import architecture_from_config

# Keys transformers' config classes declare as floats, which the lab's links spell whole (Gemma 2's soft-caps)
_FLOAT_KEYS = ("attn_logit_softcapping", "final_logit_softcapping")


def hf_config(config: Mapping[str, object]) -> Any:
    """The family's transformers config for ``config``'s facts (``AutoConfig.for_model``), for training."""
    from transformers import AutoConfig

    facts = {k: float(v) if k in _FLOAT_KEYS and isinstance(v, int) else v for k, v in config.items()}
    if facts.get("q_lora_rank") == 0:  # how a link spells DeepSeek's null (no query latent): transformers' None
        facts["q_lora_rank"] = None
    model_type = str(facts.pop("model_type"))
    # use_cache=False: what the HF Trainer sets (trainer.py: model.config.use_cache = args.use_cache, default
    # False). Left True, a checkpointed layer's trace keeps s·b·i more bytes per layer to the end of backward.
    made = AutoConfig.for_model(model_type, **facts, use_cache=False)
    # The facts the lab keeps carry no pad_token_id, so the config class's default stands, and Phi3Config's
    # (32,000) lies outside a smaller vocabulary, which nn.Embedding refuses as its padding_idx. The padding row
    # only has its gradient zeroed: no memory changes with it.
    pad = getattr(made, "pad_token_id", None)
    if isinstance(pad, int) and pad >= int(made.vocab_size):
        made.pad_token_id = None
    return made


def build_hf_model(config: Mapping[str, object]) -> nn.Module:
    """transformers' causal-LM class for ``config`` (its ``model_type`` picks the family), in training mode."""
    from transformers import AutoModelForCausalLM

    # SDPA, transformers' default; Gemma 2's class refuses it (SDPA cannot soft-cap) and takes eager by default
    kernel = "eager" if architecture_from_config(config).eager_attention else "sdpa"
    model: nn.Module = AutoModelForCausalLM.from_config(  # type: ignore[no-untyped-call]
        hf_config(config), attn_implementation=kernel
    )
    model.train()
    return model


@contextmanager
def as_real_tensors() -> Iterator[None]:
    """While it lasts, transformers' check for packed sequences answers for the trace's fake position ids what it
    answers for the real ones they stand for: 0 … s − 1 in every row, one sequence per row, no packing (the
    check reads the ids' values, which a fake tensor does not have). A real run then passes no mask."""
    from transformers import masking_utils

    original = masking_utils.find_packed_sequence_indices

    def one_sequence_per_row(position_ids: Any) -> None:
        return None

    masking_utils.find_packed_sequence_indices = one_sequence_per_row
    sdpa = torch.nn.functional.scaled_dot_product_attention
    torch.nn.functional.scaled_dot_product_attention = _gpu_sdpa(sdpa)
    try:
        yield
    finally:
        masking_utils.find_packed_sequence_indices = original
        torch.nn.functional.scaled_dot_product_attention = sdpa


def _gpu_sdpa(sdpa: Callable[..., Any]) -> Callable[..., Any]:
    """SDPA as a GPU dispatches it for the shapes a CPU cannot run fused: unequal query/key and value head sizes
    without a mask or dropout go to the memory-efficient kernel (``_scaled_dot_product_efficient_attention``);
    everything else to SDPA itself."""

    def dispatched(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0,
                   is_causal: bool = False, scale: float | None = None, **kwargs: Any) -> Any:  # fmt: skip
        if query.shape[-1] == value.shape[-1] or attn_mask is not None or dropout_p or kwargs:
            return sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                        **kwargs)  # fmt: skip
        out = torch.ops.aten._scaled_dot_product_efficient_attention(
            query, key, value, None, True, 0.0, is_causal, scale=scale
        )
        return out[0]

    return dispatched
