"""What recomputation costs: extra forward FLOPs by hand, against the paper, and under a third for real models."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest

from app.ledger.models.activations import POLICIES, activation_ledger, forward_flops
from app.ledger.models.architecture import Architecture
from app.ledger.models.known import known_model
from app.ledger.models.readers import architecture_from_config


def gpt() -> Architecture:
    """The GPT-style example of ``test_ledger.py``: h = 4096, a = 32, one layer, 2,048 positions."""
    return architecture_from_config(
        {
            "model_type": "gpt2",
            "n_embd": 4096,
            "n_head": 32,
            "n_layer": 1,
            "n_positions": 2048,
            "vocab_size": 50257,
        }
    )


# --- recompute cost -------------------------------------------------------------------------


def tiny_gpt() -> Architecture:
    return architecture_from_config(
        {"model_type": "gpt2", "n_embd": 4, "n_head": 1, "n_layer": 1, "n_positions": 8, "vocab_size": 8, "n_inner": 16}
    )


def test_recompute_fractions_by_hand() -> None:
    """h = 4, i = 16, V = 8, s = 2, b = 1. Layer forward: 2·s·b·(3h² + h² + 2hi) = 4 × 192 = 768 +
    core 4·b·s²·h = 64 → 832; head 2·s·b·h·V = 128. Step = 3 × (832 + 128) = 2,880.
    Full: 832 ÷ 2,880 = 13/45 ≈ 0.289; selective: 64 ÷ 2,880 = 1/45 ≈ 0.022; none: 0."""
    get = {p: activation_ledger(tiny_gpt(), seq_len=2, micro_batch=1, policy=p) for p in POLICIES if p != "op"}
    assert forward_flops(tiny_gpt(), 2, 1) == (832, 64, 128)
    assert get["full"].recompute_flops == (13, 45)
    assert get["selective"].recompute_flops == (1, 45)
    assert get["none"].recompute_flops == (0, 1)
    assert (get["full"].recompute_fraction_text(), get["selective"].recompute_fraction_text()) == ("0.289", "0.022")
    assert get["none"].recompute_fraction_text() == "0.000"


def test_fraction_text_rounds_half_up() -> None:
    ledger = activation_ledger(tiny_gpt(), seq_len=2, micro_batch=1)
    assert dataclasses.replace(ledger, recompute_flops=(1, 8)).recompute_fraction_text(2) == "0.13"  # 0.125
    assert dataclasses.replace(ledger, recompute_flops=(1, 3)).recompute_fraction_text(4) == "0.3333"
    assert dataclasses.replace(ledger, recompute_flops=(2, 3)).recompute_fraction_text(0) == "1"


def test_selective_cost_matches_the_paper_without_the_head() -> None:
    """GPT layer, i = 4h: forward 24·s·b·h² + 4·b·s²·h; the core 4·b·s²·h over a step 3 × that
    = s ÷ (18h + 3s): 2048 ÷ (73,728 + 6,144) = 2048 ÷ 79,872 = 1/39."""
    layer, core, _ = forward_flops(gpt(), 2048, 1)
    assert layer == 24 * 2048 * 4096**2 + 4 * 2048**2 * 4096
    assert Fraction(core, 3 * layer) == Fraction(2048, 18 * 4096 + 3 * 2048) == Fraction(1, 39)


@pytest.mark.parametrize("model_id", ["llama-2-7b", "mixtral-8x7b-v0.1", "gpt-neox-20b", "qwen2-0.5b"])
def test_full_recomputation_costs_just_under_a_third(model_id: str) -> None:
    """L·F_layer ÷ 3·(L·F_layer + F_head): the LM head's share keeps it below 1/3 (most for
    Qwen2-0.5B, whose 151,936-word head is large against 24 narrow layers: ≈ 0.249)."""
    arch = known_model(model_id).architecture()
    full = activation_ledger(arch, seq_len=2048, micro_batch=1, policy="full")
    selective = activation_ledger(arch, seq_len=2048, micro_batch=1, policy="selective")
    assert Fraction(1, 5) < Fraction(*full.recompute_flops) < Fraction(1, 3)
    assert 0 < Fraction(*selective.recompute_flops) < Fraction(1, 10)
