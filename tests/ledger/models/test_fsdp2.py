"""FSDP2's dim-0 padded shard, worked by hand, beside the ⌈N ÷ D⌉ lower bound."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.ledger.models.architecture import Architecture
from app.ledger.models.fsdp2 import ShardInputError, fsdp2_shard, padded_rows_elements
from app.ledger.models.inventory import Tensor, inventory
from app.ledger.models.known import known_model
from app.ledger.models.readers import architecture_from_config
from tests.support.model_strategies import architectures


@pytest.mark.parametrize(
    ("shape", "dp", "expected"),
    [
        ((5, 3), 4, 6),  # ⌈5 ÷ 4⌉ = 2 rows × 3 = 6 (the unpadded share would be ⌈15 ÷ 4⌉ = 4)
        ((5, 3), 5, 3),  # 1 row × 3: dim 0 divides, no padding
        ((5, 3), 8, 3),  # ⌈5 ÷ 8⌉ = 1 row × 3: ranks 5-7 hold only padding
        ((5, 3), 1, 15),  # one rank holds everything
        ((7,), 2, 4),  # a 1-d tensor: ⌈7 ÷ 2⌉ = 4 elements
        ((50257, 768), 8, 4_825_344),  # GPT-2's wte: ⌈50257 ÷ 8⌉ = 6,283 rows × 768
        ((), 4, 1),  # a 0-d tensor is one row of one element
    ],
)
def test_one_tensor_by_hand(shape: tuple[int, ...], dp: int, expected: int) -> None:
    assert padded_rows_elements(Tensor("w", shape, math.prod(shape)), dp) == expected


def tiny() -> Architecture:
    """hidden 4, heads 2 (head_dim 2), 1 KV head, intermediate 6, vocab 10, one layer, untied."""
    return architecture_from_config(
        {
            "model_type": "llama",
            "hidden_size": 4,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "num_hidden_layers": 1,
            "intermediate_size": 6,
            "vocab_size": 10,
        }
    )


def test_a_tiny_model_by_hand() -> None:
    """dp = 4, per rank (rows ⌈dim0 ÷ 4⌉ × row length):
    embed [10, 4] → 3 × 4 = 12;
    q [4, 4] → 4; k [2, 4] → 1 × 4 = 4; v [2, 4] → 4; o [4, 4] → 4;
    gate [6, 4] → 2 × 4 = 8; up [6, 4] → 8; down [4, 6] → 1 × 6 = 6; two norms [4] → 1 + 1;
    final norm [4] → 1; lm_head [10, 4] → 12.
    Sum 12 + 40 + 13 = 65 elements. N = 40 + 128 + 44 = 212, ⌈212 ÷ 4⌉ = 53: padding 12 elements,
    24 bytes at BF16. Largest all-gather: the layer, 4 × 40 = 160 elements (its params: 128)."""
    inv = inventory(tiny())
    assert inv.params == 212
    shard = fsdp2_shard(inv, 4, 2)
    assert (shard.padded_elements, shard.lower_bound_elements) == (65, 53)
    assert (shard.padded_bytes, shard.lower_bound_bytes, shard.padding_bytes) == (130, 106, 24)
    assert (shard.largest_gather_unit, shard.largest_gather_elements) == ("layers.0", 160)
    assert shard.note == "dim-0 padding: +24 bytes (65 − ⌈212 ÷ 4⌉ = 12 elements × 2 B)"


def test_gpt2_at_eight_ranks() -> None:
    """Only wte's 50,257 rows do not divide by 8 (768, 1,024, 2,304 and 3,072 do): each rank holds
    ⌈50257 ÷ 8⌉ = 6,283 rows × 768 = 4,825,344 elements against 50,257 × 768 ÷ 8 = 4,824,672,
    i.e. +672. N ÷ 8 = 124,439,808 ÷ 8 = 15,554,976 exactly; padded 15,555,648; FP32: +2,688 bytes."""
    shard = fsdp2_shard(inventory(known_model("gpt2").architecture()), 8, 4)
    assert shard.lower_bound_elements == 15_554_976
    assert shard.padded_elements == 15_554_976 + 672
    assert shard.padding_bytes == 2_688
    assert shard.note.startswith("dim-0 padding: +2,688 bytes")


def test_llama_2_7b_at_512_ranks() -> None:
    """11,008 ÷ 512 = 21.5 and 32,000 ÷ 512 = 62.5; every other dim 0 (4,096) divides. Per layer
    gate and up pad 0.5 row × 4,096 = 2,048 each → 4,096; × 32 = 131,072; embed and lm_head
    2,048 each → 135,168 elements. N ÷ 512 = 6,738,415,616 ÷ 512 = 13,160,968 exactly, so the
    padded shard is 13,296,136 elements: +270,336 bytes at BF16."""
    shard = fsdp2_shard(inventory(known_model("llama-2-7b").architecture()), 512, 2)
    assert shard.lower_bound_elements == 13_160_968
    assert shard.padded_elements == 13_160_968 + 135_168
    assert shard.padding_bytes == 270_336


def test_no_padding_when_every_dim_0_divides() -> None:
    """Llama-2-7B at dp = 8: 4,096, 11,008 and 32,000 all divide by 8 → +0 bytes."""
    shard = fsdp2_shard(inventory(known_model("llama-2-7b").architecture()), 8, 2)
    assert shard.padding_bytes == 0
    assert shard.padded_elements == 6_738_415_616 // 8
    assert shard.note.startswith("dim-0 padding: +0 bytes")


@pytest.mark.parametrize(("dp", "width"), [(0, 2), (131_073, 2), (8, 3), (8, 0), (True, 2), (8, True)])
def test_bad_inputs_are_refused(dp: int, width: int) -> None:
    with pytest.raises(ShardInputError):
        fsdp2_shard(inventory(tiny()), dp, width)


@given(architectures(), st.one_of(st.integers(1, 64), st.integers(1, 131_072)), st.sampled_from([1, 2, 4, 8]))
def test_padding_is_named_and_bounded(arch: Architecture, dp: int, width: int) -> None:
    """⌈N ÷ dp⌉ ≤ padded shard < N ÷ dp + Σ row lengths (each tensor pads under one row per rank);
    it equals the tensor-by-tensor sum; dp = 1 has no padding; each gather holds at least its unit."""
    inv = inventory(arch)
    shard = fsdp2_shard(inv, dp, width)
    tensors = list(inv.tensors())
    assert shard.padded_elements == sum(padded_rows_elements(t, dp) for t in tensors)
    rows = sum(t.numel // t.shape[0] for t in tensors)
    assert shard.lower_bound_elements <= shard.padded_elements
    assert shard.padded_elements * dp < inv.params + rows * dp
    assert shard.padding_bytes == (shard.padded_elements - shard.lower_bound_elements) * width >= 0
    assert shard.padded_bytes - shard.lower_bound_bytes == shard.padding_bytes
    assert shard.largest_gather_elements >= inv.largest_unit.params
    assert fsdp2_shard(inv, 1, width).padding_bytes == 0


def test_fused_experts_are_padded_on_the_expert_dimension() -> None:
    """Qwen3-MoE's experts are one [E, 2·i, h] and one [E, h, i] tensor in transformers 5.23.0, which FSDP2 shards
    on dim 0, the experts: past D = E every rank holds one expert's rows, half of them padding at D = 2·E. Worked by
    hand for E = 8, i = 4, h = 6 at D = 16: gate_up 1 × 8 × 6 = 48, down 1 × 6 × 4 = 24 elements a rank, 72 in all,
    twice the ⌈8 · 72 ÷ 16⌉ = 36 an expert-per-tensor count (rows of i and h over 16 ranks) would give."""
    arch = architecture_from_config(
        {"model_type": "qwen3_moe", "hidden_size": 6, "num_attention_heads": 1, "num_hidden_layers": 1,
         "moe_intermediate_size": 4, "num_experts": 8, "num_experts_per_tok": 2, "vocab_size": 16}
    )  # fmt: skip
    experts = [t for t in inventory(arch).units[1].tensors if ".experts." in t.name]
    assert [(t.name, t.shape) for t in experts] == [("mlp.experts.gate_up_proj", (8, 8, 6)),
                                                    ("mlp.experts.down_proj", (8, 6, 4))]  # fmt: skip
    assert sum(padded_rows_elements(t, 16) for t in experts) == 72
    assert sum(padded_rows_elements(t, 8) for t in experts) == 72  # one expert a rank, no padding
    assert sum(padded_rows_elements(t, 4) for t in experts) == 144
