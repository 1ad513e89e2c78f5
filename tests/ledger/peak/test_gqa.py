"""``gqa = expand`` by hand (transformers 5.23.0's SDPA path with a mask it cannot drop: ``use_gqa_in_sdpa`` is false,
``repeat_kv`` expands K and V, SDPA keeps the mask converted to the activation width), and refused where a model has
no grouped heads."""

from __future__ import annotations

import pytest

from app.ledger.scenario import ScenarioError, parse_scenario


def _layer(model: str, gqa: str) -> int:
    defaults = parse_scenario({"model": model, "seq_len": 4096, "gqa": gqa}).model_defaults()
    assert defaults is not None
    return defaults.activations.per_layer_bytes


def test_mistral_expands_its_8_kv_heads_to_32_and_keeps_the_mask_per_layer() -> None:
    """Mistral 7B: a 32, kv 8, d 128; s 4,096, b 1, 2-byte activations."""
    extra = 2 * 4096 * (32 - 8) * 128 * 2 + 4096 * 4096 * 2
    assert _layer("mistral-7b-v0.1", "expand") - _layer("mistral-7b-v0.1", "native") == extra == 83_886_080


@pytest.mark.parametrize("model", ["llama-2-7b", "gpt2"])
def test_a_model_without_grouped_heads_cannot_expand(model: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario({"model": model, "gqa": "expand"})
    (error,) = caught.value.errors
    assert error.field == "gqa" and "grouped K/V heads" in error.message
