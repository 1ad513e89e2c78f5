"""The activation ledger: Korthikanti et al. 2022 worked by hand, the SwiGLU / GQA count (recompute cost:
``test_recompute.py``).

GPT-style example throughout: h = 4096, a = 32, s = 2048, b = 1, i = 4h = 16384, so
s·b·h = 8,388,608 and a·s²·b = 32 × 4,194,304 = 134,217,728.
"""

from __future__ import annotations

import dataclasses
import inspect
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.ledger.arithmetic import ceil_div
from app.ledger.models.activations import (
    POLICIES,
    ActivationInputError,
    activation_ledger,
    layer_saved,
)
from app.ledger.models.activations.ledger import llama_block
from app.ledger.models.architecture import GPT_FAMILIES, Architecture
from app.ledger.models.known import known_model
from app.ledger.models.readers import architecture_from_config
from tests.support.model_strategies import architectures

SBH = 2048 * 1 * 4096  # 8,388,608
ASSB = 32 * 2048**2 * 1  # 134,217,728


def gpt(layers: int = 1) -> Architecture:
    return architecture_from_config(
        {
            "model_type": "gpt2",
            "n_embd": 4096,
            "n_head": 32,
            "n_layer": layers,
            "n_positions": 2048,
            "vocab_size": 50257,
        }
    )


def per_layer(policy: str = "none", tp: int = 1, sp: bool = False, act_bytes: int = 2) -> int:
    return activation_ledger(
        gpt(), seq_len=2048, micro_batch=1, policy=policy, tp=tp, sequence_parallel=sp, act_bytes=act_bytes
    ).per_layer_bytes


# --- Korthikanti et al. 2022, Table 2 -----------------------------------------------------------


def test_no_parallelism() -> None:
    """s·b·h·(34 + 5·a·s/h) = 34·2048·1·4096 + 5·32·2048²·1 = 285,212,672 + 671,088,640 = 956,301,312."""
    assert per_layer() == 34 * 2048 * 1 * 4096 + 5 * 32 * 2048**2 * 1 == 956_301_312


def test_tensor_parallel() -> None:
    """t = 8: s·b·h·(10 + 24/t + 5·a·s/(h·t)) = 10 × 8,388,608 + 3 × 8,388,608 + 671,088,640 ÷ 8
    = 83,886,080 + 25,165,824 + 83,886,080 = 192,937,984."""
    assert per_layer(tp=8) == 10 * SBH + 24 * SBH // 8 + 5 * ASSB // 8 == 192_937_984


def test_tensor_and_sequence_parallel() -> None:
    """t = 8 with SP: s·b·h·(34/t + 5·a·s/(h·t)) = 956,301,312 ÷ 8 = 119,537,664."""
    assert per_layer(tp=8, sp=True) == (34 * SBH + 5 * ASSB) // 8 == 119_537_664


def test_selective_recomputation() -> None:
    """The 5·a·s²·b attention-core bytes are recomputed: 34·s·b·h = 285,212,672; with t = 8
    s·b·h·(10 + 24/8) = 13 × 8,388,608 = 109,051,904; with SP 285,212,672 ÷ 8 = 35,651,584."""
    assert per_layer("selective") == 34 * SBH == 285_212_672
    assert per_layer("selective", tp=8) == 13 * SBH == 109_051_904
    assert per_layer("selective", tp=8, sp=True) == 34 * SBH // 8 == 35_651_584


def test_full_recomputation() -> None:
    """Each layer keeps its input, 2·s·b·h = 16,777,216 bytes, plus one layer's full set while it is
    recomputed (956,301,312); with t = 8 and SP both ÷ 8: 2,097,152 and 119,537,664."""
    ledger = activation_ledger(gpt(), seq_len=2048, micro_batch=1, policy="full")
    assert (ledger.per_layer_bytes, ledger.working_set_bytes) == (2 * SBH, 956_301_312)
    sp = activation_ledger(gpt(), seq_len=2048, micro_batch=1, policy="full", tp=8, sequence_parallel=True)
    assert (sp.per_layer_bytes, sp.working_set_bytes) == (2_097_152, 119_537_664)


def test_other_activation_widths_keep_one_byte_masks() -> None:
    """Per element: act_bytes × (8·s·b·h + 2·s·b·i + 2·a·s²·b) + 1 B × (2·s·b·h + a·s²·b).
    FP32 (i = 4h): 4 × (8 + 8)·s·b·h + 4 × 2·a·s²·b + 2·s·b·h + a·s²·b = 66·s·b·h + 9·a·s²·b
    = 553,648,128 + 1,207,959,552 = 1,761,607,680 (not twice the BF16 figure: masks stay 1 byte).
    FP8: (8 + 8 + 2)·s·b·h + (2 + 1)·a·s²·b = 150,994,944 + 402,653,184 = 553,648,128."""
    assert per_layer(act_bytes=4) == 66 * SBH + 9 * ASSB == 1_761_607_680
    assert per_layer(act_bytes=1) == 18 * SBH + 3 * ASSB == 553_648_128


def test_the_ends_and_the_total() -> None:
    """Embedding output 2·s·b·h + its dropout mask s·b·h = 25,165,824; head input 2·s·b·h =
    16,777,216; FP32 logits 2048 × 50257 × 4 = 411,705,344. One layer: 956,301,312 + 25,165,824
    + 16,777,216 + 411,705,344 = 1,409,949,696. With t = 8 the logits are vocab-parallel:
    2048 × ⌈50257 ÷ 8⌉ × 4 = 2048 × 6,283 × 4 = 51,470,336."""
    ledger = activation_ledger(gpt(), seq_len=2048, micro_batch=1)
    assert (ledger.embedding_bytes, ledger.head_bytes, ledger.logits_bytes) == (25_165_824, 16_777_216, 411_705_344)
    assert ledger.total_bytes == 1_409_949_696
    assert ledger.source == "modelled"
    assert activation_ledger(gpt(), seq_len=2048, micro_batch=1, tp=8).logits_bytes == 51_470_336
    assert activation_ledger(gpt(), seq_len=2048, micro_batch=1, logits_bytes=2).logits_bytes == 205_852_672


def test_per_rank_figures_round_up_once() -> None:
    """h = 3, a = 3, i = 1, s = b = 1, FP8, t = 3. Replicated: LN inputs 6 + QKV input 3 + MLP
    input 3 + two masks 3 + 3 = 18. Split: Q, K 6 + softmax 3 + its mask 3 + dropout output 3 + V 3
    + projection input 3 + GeLU in 1 + out 1 = 23 → ⌈23 ÷ 3⌉ = 8; per layer 26. With SP: ⌈41 ÷ 3⌉ = 14."""
    arch = architecture_from_config(
        {"model_type": "gpt2", "n_embd": 3, "n_head": 3, "n_layer": 1, "n_positions": 8, "vocab_size": 5, "n_inner": 1}
    )
    plain = activation_ledger(arch, seq_len=1, micro_batch=1, act_bytes=1, tp=3)
    assert plain.per_layer_bytes == 18 + 8
    sp = activation_ledger(arch, seq_len=1, micro_batch=1, act_bytes=1, tp=3, sequence_parallel=True)
    assert sp.per_layer_bytes == 14


def test_the_formula_substitutes_the_numbers() -> None:
    formula = activation_ledger(gpt(), seq_len=2048, micro_batch=1).formula.text
    assert "34·2,048·1·4,096 + 5·32·2,048²·1" in formula
    assert "956,301,312 B" in formula
    assert formula.endswith("= 1,409,949,696 B")


# --- SwiGLU / GQA ---------------------------------------------------------------------------


def test_llama_2_7b_per_layer() -> None:
    """s = 4096, b = 1, BF16: 2 × 4096 × (norm inputs 2 × 4096 + norm outputs 2 × 4096 + q 32 × 128
    + k, v 2 × 32 × 128 + attention output 32 × 128 + gate, up, SiLU, down input 4 × 11008)
    = 2 × 4096 × 76,800 = 629,145,600; + FP32 log-sum-exp 4 × 4096 × 32 = 524,288; + FP32 1/rms
    4 × 2 × 4096 = 32,768 → 629,702,656 per layer."""
    ledger = activation_ledger(known_model("llama-2-7b").architecture(), seq_len=4096, micro_batch=1)
    assert ledger.per_layer_bytes == 629_145_600 + 524_288 + 32_768 == 629_702_656
    assert {x.what for x in ledger.saved} >= {"SiLU output", "down_proj input (SiLU(gate) × up)"}
    assert "FlashAttention" in ledger.assumptions


def test_llama_2_7b_total() -> None:
    """32 × 629,702,656 = 20,150,484,992; embedding output 4096 × 4096 × 2 = 33,554,432; head
    input 33,554,432 + FP32 1/rms 16,384 = 33,570,816; FP32 logits 4096 × 32000 × 4 = 524,288,000
    → 20,741,898,240 bytes."""
    ledger = activation_ledger(known_model("llama-2-7b").architecture(), seq_len=4096, micro_batch=1)
    assert (ledger.embedding_bytes, ledger.head_bytes, ledger.logits_bytes) == (33_554_432, 33_570_816, 524_288_000)
    assert ledger.total_bytes == 20_150_484_992 + 33_554_432 + 33_570_816 + 524_288_000 == 20_741_898_240


def test_llama_2_7b_with_tensor_parallelism() -> None:
    """t = 2: replicated norm inputs and outputs 4 × 33,554,432 + 1/rms 32,768 = 134,250,496;
    split (q, k, v, output 134,217,728 + log-sum-exp 524,288 + MLP 360,710,144) ÷ 2 = 247,726,080
    → 381,976,576."""
    ledger = activation_ledger(known_model("llama-2-7b").architecture(), seq_len=4096, micro_batch=1, tp=2)
    assert ledger.per_layer_bytes == 134_250_496 + 495_452_160 // 2 == 381_976_576


def test_grouped_query_attention_keeps_narrow_k_and_v() -> None:
    """Qwen2-0.5B per token, BF16: 2 × (4 × 896 + q 14 × 64 + k, v 2 × 2 × 64 + output 14 × 64
    + 4 × 4864) = 2 × 25,088 = 50,176; + log-sum-exp 4 × 14 = 56 + 1/rms 8 → 50,240."""
    arch = known_model("qwen2-0.5b").architecture()
    assert activation_ledger(arch, seq_len=1, micro_batch=1).per_layer_bytes == 50_240
    assert activation_ledger(arch, seq_len=1000, micro_batch=3).per_layer_bytes == 50_240 * 3000


def test_mixtral_keeps_each_tokens_top_k_experts() -> None:
    """Per token, BF16, k = 2 of E = 8, as transformers 5.23.0's grouped-GEMM experts keep them: norm inputs 16,384
    + 1/rms 8 + norm outputs 16,384 + q 8,192 + k, v 4,096 + attention output 8,192 + log-sum-exp 128; router FP32
    probabilities 32, top-k weights in FP32 (Mixtral's router keeps them so) 2 × 4 = 8, int64 indices 16, the sort,
    gather and scatter indices 3 × 2 × 8 = 48, the renormalising division's FP32 weights and sum (2 + 1) × 4 = 12;
    expert inputs 2 × 4096 × 2 = 16,384; gate and up 2 × 2 × 14336 × 2 = 114,688; SiLU 57,344; down inputs 57,344;
    expert outputs 16,384 → 315,644 bytes a token, and one int32 offset per expert, 32 bytes a layer."""
    arch = known_model("mixtral-8x7b-v0.1").architecture()
    assert activation_ledger(arch, seq_len=1, micro_batch=1).per_layer_bytes == 315_644 + 32
    assert activation_ledger(arch, seq_len=4096, micro_batch=1).per_layer_bytes == 315_644 * 4096 + 32


def test_selective_saves_only_the_log_sum_exp_with_flash_attention() -> None:
    """No s×s scores to drop: selective = none − 4 × s·b·a = 629,702,656 − 524,288 (Llama-2-7B, s = 4096)."""
    arch = known_model("llama-2-7b").architecture()
    ledger = activation_ledger(arch, seq_len=4096, micro_batch=1, policy="selective")
    assert ledger.per_layer_bytes == 629_702_656 - 524_288
    assert "saves only the log-sum-exp" in ledger.assumptions


# --- properties -----------------------------------------------------------------------------


def test_there_is_no_dp_input() -> None:
    """Activations are never divided by dp: the function cannot even be told dp."""
    names = set(inspect.signature(activation_ledger).parameters)
    assert names == {
        "arch",
        "seq_len",
        "micro_batch",
        "act_bytes",
        "policy",
        "tp",
        "sequence_parallel",
        "logits_bytes",
        "norms",
        "pp",
        "pp_stage",
        "ep",
        "every",
        "gqa",
        "imbalance_pct",
        "cp",  # the sequence's split over context-parallel ranks, not the data-parallel degree
        "trains",  # what trains (LoRA, frozen layers): which tensors a layer keeps
    }
    assert not any("dp" in name or "data" in name or "world" in name for name in names)


@st.composite
def settings(draw: st.DrawFn) -> tuple[Architecture, dict[str, object], int]:
    """An architecture, valid ledger inputs, and a seq_len limit (GPT-2's learned positions)."""
    arch = draw(architectures())
    tp = draw(st.sampled_from([t for t in range(1, arch.heads + 1) if arch.heads % t == 0]))
    kwargs: dict[str, object] = {
        "act_bytes": draw(st.sampled_from([1, 2, 4])),
        # op: torchtitan's per-op checkpointing of its dense Llama-style block, refused for other families
        "policy": draw(st.sampled_from([p for p in POLICIES if p != "op" or llama_block(arch)])),
        "tp": tp,
        "sequence_parallel": draw(st.booleans()),
        "logits_bytes": draw(st.sampled_from([2, 4])),
    }
    top = arch.max_positions if arch.learned_positions else 4096
    return arch, kwargs, top


@given(settings(), st.data())
def test_monotone_in_seq_len_and_micro_batch(
    case: tuple[Architecture, dict[str, object], int], data: st.DataObject
) -> None:
    arch, kwargs, top = case
    s = data.draw(st.integers(1, top))
    s2 = data.draw(st.integers(s, top))
    b = data.draw(st.integers(1, 64))
    b2 = data.draw(st.integers(b, 64))
    base = activation_ledger(arch, seq_len=s, micro_batch=b, **kwargs)  # type: ignore[arg-type]
    for bigger in (
        activation_ledger(arch, seq_len=s2, micro_batch=b, **kwargs),  # type: ignore[arg-type]
        activation_ledger(arch, seq_len=s, micro_batch=b2, **kwargs),  # type: ignore[arg-type]
    ):
        assert bigger.per_layer_bytes >= base.per_layer_bytes
        assert bigger.working_set_bytes >= base.working_set_bytes
        assert bigger.total_bytes >= base.total_bytes
    assert base.total_bytes == (
        base.kept_before(base.layers)  # L × per_layer_bytes, or each kind's layers at theirs
        + max(base.working_set_bytes, base.alt_working_set_bytes)  # one layer recomputes at a time: the larger kind's
        + base.embedding_bytes
        + base.head_bytes
        + base.logits_bytes
    )


@given(architectures(), st.integers(1, 256), st.integers(1, 8), st.sampled_from([1, 2, 4]), st.booleans())
def test_tp_1_is_no_parallelism(arch: Architecture, s: int, b: int, w: int, sp: bool) -> None:
    """With t = 1 the TP and TP+SP forms reduce to the plain sum of every saved tensor."""
    s = min(s, arch.max_positions) if arch.learned_positions else s
    ledger = activation_ledger(arch, seq_len=s, micro_batch=b, act_bytes=w, tp=1, sequence_parallel=sp)
    assert ledger.per_layer_bytes == sum(x.bytes for x in layer_saved(arch, s, b, w))


@given(architectures(st.sampled_from(sorted(GPT_FAMILIES))), st.integers(1, 300), st.integers(1, 4), st.data())
def test_gpt_blocks_follow_table_2_for_every_tp(arch: Architecture, s: int, b: int, data: st.DataObject) -> None:
    """At 2-byte activations and i = 4h, each Table 2 row, each ÷ t rounded up once (GPT-2: dropout 0.1).

    GPT-NeoX trains without dropout, and its parallel residual has both LayerNorms read one input: per
    layer 2·s·b·h (a LayerNorm input, 2 B) + 2·s·b·h (two h-wide 1-byte masks) fewer bytes outside the
    tensor-parallel region, and a·s²·b (the score mask) + 2·a·s²·b (the dropout output) fewer inside it:
    replicated 6·s·b·h (8 without the parallel residual), split 24·s·b·h + 2·a·s²·b (softmax output)."""
    arch = dataclasses.replace(arch, intermediate=4 * arch.hidden, max_positions=max(arch.max_positions, 300))
    t = data.draw(st.sampled_from([k for k in range(1, arch.heads + 1) if arch.heads % k == 0]))
    sbh, assb = s * b * arch.hidden, arch.heads * s * s * b

    def got(policy: str, sp: bool) -> int:
        return activation_ledger(
            arch, seq_len=s, micro_batch=b, policy=policy, tp=t, sequence_parallel=sp
        ).per_layer_bytes

    rep, split, scores = (10, 24, 5) if arch.family == "gpt2" else (6 if arch.parallel_residual else 8, 24, 2)
    assert got("none", False) == rep * sbh + ceil_div(split * sbh + scores * assb, t)
    assert got("none", True) == ceil_div((rep + split) * sbh + scores * assb, t)
    assert got("selective", False) == rep * sbh + ceil_div(split * sbh, t)
    assert got("selective", True) == ceil_div((rep + split) * sbh, t)
    assert got("full", False) == 2 * sbh
    assert got("full", True) == ceil_div(2 * sbh, t)
    if t == 1 and arch.family == "gpt2":
        assert got("none", False) == 34 * sbh + 5 * assb


@given(settings())
def test_policies_and_parallelism_only_shrink_a_layer(case: tuple[Architecture, dict[str, object], int]) -> None:
    arch, kwargs, top = case
    s = min(top, 64)

    def layer(**change: object) -> int:
        return activation_ledger(arch, seq_len=s, micro_batch=2, **{**kwargs, **change}).per_layer_bytes  # type: ignore[arg-type]

    assert layer(policy="full") <= layer(policy="selective") <= layer(policy="none")
    assert layer(sequence_parallel=True) <= layer(sequence_parallel=False) <= layer(tp=1)
    assert Fraction(*activation_ledger(arch, seq_len=s, micro_batch=2, policy="full").recompute_flops) < Fraction(1, 3)


# --- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"seq_len": 0}, "seq_len"),
        ({"seq_len": 2**20 + 1}, "seq_len"),
        ({"seq_len": 2049}, "seq_len"),  # past the 2,048 learned positions of this model
        ({"micro_batch": 0}, "micro_batch"),
        ({"tp": 3}, "tp"),  # 32 heads do not split 3 ways
        ({"tp": 0}, "tp"),
        ({"act_bytes": 3}, "act_bytes"),
        ({"act_bytes": True}, "act_bytes"),
        ({"logits_bytes": 1}, "logits_bytes"),
        ({"policy": "partial"}, "act_policy"),
        ({"sequence_parallel": "yes"}, "sequence_parallel"),
    ],
)
def test_bad_inputs_name_their_field(change: dict[str, object], field: str) -> None:
    kwargs: dict[str, object] = {"seq_len": 2048, "micro_batch": 1, **change}
    with pytest.raises(ActivationInputError) as caught:
        activation_ledger(gpt(), **kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")


def test_an_imbalanced_routing_grows_the_busiest_expert_parallel_rank() -> None:
    """Mixtral-8x7B, ep = 4, s = 4,096, BF16: at 150 % the busiest rank computes on 1.5 × k·s·b = 12,288 token slots
    a layer: its experts' per-slot tensors (inputs and outputs 2 × h, gate/up, SiLU and down inputs 4 × i) grow by
    4,096 slots × (2 × 4,096 + 4 × 14,336) × 2 B = 536,870,912 B a layer, and the all-to-all receive buffer by 4,096
    × 4,096 × 2 B = 33,554,432 B. At ep = 1 (every rank runs all experts on its own tokens) nothing moves."""
    arch = known_model("mixtral-8x7b-v0.1").architecture()
    base = activation_ledger(arch, seq_len=4096, micro_batch=1, ep=4)
    busy = activation_ledger(arch, seq_len=4096, micro_batch=1, ep=4, imbalance_pct=150)
    assert busy.per_layer_bytes - base.per_layer_bytes == 536_870_912
    assert busy.all_to_all_bytes - base.all_to_all_bytes == 33_554_432
    assert busy.total_bytes - base.total_bytes == 32 * 536_870_912 + 33_554_432
    alone = activation_ledger(arch, seq_len=4096, micro_batch=1, imbalance_pct=150)
    assert alone == activation_ledger(arch, seq_len=4096, micro_batch=1)
    with pytest.raises(ActivationInputError, match="routing_imbalance_pct"):
        activation_ledger(arch, seq_len=4096, micro_batch=1, ep=4, imbalance_pct=99)


def test_gemma3_keeps_two_kinds_of_layer_past_its_window() -> None:
    """Gemma-3-27B (62 layers, every 6th global: layers 5, 11, …, 59, ten of them), s = 4,096 past its 1,024-token
    window, BF16: a sliding layer attends through a mask, so it keeps K and V expanded to every head, 2·s·(a − kv)·d
    × 2 B = 2·4,096·16·128·2 = 33,554,432 B more, and the mask SDPA converts per call, s² × 2 B = 33,554,432 B; a
    global layer neither. The total counts 52 sliding and 10 global layers; with native attention (gqa) all alike."""
    arch = known_model("gemma-3-27b").architecture()
    two = activation_ledger(arch, seq_len=4096, micro_batch=1, gqa="expand", norms="composite")
    one = activation_ledger(arch, seq_len=4096, micro_batch=1, gqa="native", norms="composite")
    assert (two.alt_every, one.alt_every) == (6, 0)
    assert two.per_layer_bytes - two.alt_per_layer_bytes == 2 * 33_554_432
    assert two.alt_per_layer_bytes == one.per_layer_bytes
    ends = two.embedding_bytes + two.head_bytes + two.logits_bytes
    assert two.total_bytes == 52 * two.per_layer_bytes + 10 * two.alt_per_layer_bytes + ends
    assert one.total_bytes == 62 * one.per_layer_bytes + ends
