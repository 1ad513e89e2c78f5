"""transformers' own model class for a scenario's config: what the ``hf-fsdp2`` stack's trace runs.

The config.json facts the scenario names (:func:`app.ledger.models.reference.config_of`) become the
family's transformers config (``AutoConfig.for_model``) and ``AutoModelForCausalLM.from_config`` builds
the model class a Trainer run builds (transformers 5.23.0, ``attn_implementation="sdpa"``, its default;
build it under ``FakeTensorMode``: no weights, no storage). Its forward takes ``labels=`` and computes
the loss itself (``ForCausalLMLoss``: the logits upcast to FP32 inside the model).
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn


def build_hf_model(config: Mapping[str, object]) -> nn.Module:
    """transformers' causal-LM class for ``config`` (its ``model_type`` picks the family), in training mode."""
    from transformers import AutoConfig, AutoModelForCausalLM

    facts = dict(config)
    model_type = str(facts.pop("model_type"))
    hf_config = AutoConfig.for_model(model_type, **facts)
    model: nn.Module = AutoModelForCausalLM.from_config(  # type: ignore[no-untyped-call]
        hf_config, attn_implementation="sdpa"
    )
    model.train()
    return model
