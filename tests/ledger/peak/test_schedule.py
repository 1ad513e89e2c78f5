"""The schedule-aware peak: its instants by hand on the model reference, and the rules that hold for any model.

The hand computation uses only Llama-2-7B's shape (h = 4,096, i = 11,008, 32 layers, vocabulary 32,000,
32 heads without GQA) and FSDP2's layout; nothing here calls the schedule's helpers to get an expected number.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.ledger.estimate import estimate
from app.ledger.ledger import Ledger, compute_ledger
from app.ledger.models.reference import compact
from app.ledger.peak.fit import find_fit
from app.ledger.peak.schedule import CATEGORIES, Schedule, not_schedulable, schedule
from app.ledger.peak.schedule.step import Step
from app.ledger.peak.schedule.walk import floor, resident, summed
from app.ledger.scenario import Scenario, parse_scenario
from app.ledger.state.persistent import persistent_lines
from app.ledger.state.rules import PRODUCTION
from app.ledger.verify.frozen import FROZEN_MODEL_INSTANTS, FROZEN_MODEL_PEAK, FROZEN_MODEL_SCENARIO
from app.ledger.verify.mutants import MUTANTS
from app.receipts.receipt import Receipt, receipt
from app.receipts.sections.model import fsdp2_section

FSDP2: dict[str, Any] = {"param_bytes": 4, "master_bytes": 0, "grad_bytes": 4, "gather_bytes": 2}

# Llama-2-7B by hand
H, FFN, L, V, S = 4096, 11008, 32, 32000, 4096
LAYER = 4 * H * H + 3 * H * FFN + 2 * H  # q, k, v, o; gate, up, down; two RMSNorm weights
ROOT = V * H + H + V * H  # embedding, final norm, untied head
N = L * LAYER + ROOT
D = 8
SHARD = N // D  # every dim 0 (4,096, 11,008, 32,000) divides by 8: no padding
STATE = SHARD * (4 + 8)  # FP32 parameters and two FP32 AdamW moments
LAYER_SHARD = LAYER // D
SBH, SBI = S * H, S * FFN
FULL_SET = 16 * SBH + 136 * S + 8 * SBI  # one layer's saved set, bytes (the activation ledger's rows)


def test_the_hand_numbers_are_the_models() -> None:
    assert (LAYER, ROOT, N) == (202_383_360, 262_148_096, 6_738_415_616)
    md = FROZEN_MODEL_SCENARIO.model_defaults()
    assert md is not None
    assert md.activations.working_set_bytes == FULL_SET == 629_702_656
    assert md.activations.per_layer_bytes == 2 * SBH  # the checkpointed layer input


def test_backward_at_layer_1_by_hand() -> None:
    """The model reference's stage-3 peak: late in backward, at layer 1."""
    grads = 30 * LAYER_SHARD * 4  # layers 31 … 2 reduce-scattered into FP32 shards
    root = ROOT * 2  # the root unit unsharded in BF16, from forward to its post-backward
    layer, prefetch = LAYER * 2, LAYER * 2  # layer 1 unsharded, layer 0's all-gather output in flight
    head_grads = (H + V * H) * 2  # the final norm's and head's BF16 gradients, held to the root's post-backward
    reduce_scatter = LAYER * 4  # layer 2's reduce-scatter input, FP32
    layer_grads = H * FFN * 2  # layer 1's first BF16 weight gradient: its MLP's down projection
    activations = 2 * (2 * SBH) + FULL_SET  # layers 0 and 1's checkpointed inputs, layer 1 recomputed
    temporaries = 2 * SBH + 2 * (2 * SBI)  # the activation gradient, the MLP's gate and up gradients
    total = (STATE + grads + root + layer + prefetch + head_grads + reduce_scatter + layer_grads + activations
             + temporaries)  # fmt: skip
    assert total == 16_549_787_648 == FROZEN_MODEL_INSTANTS["backward-layer-1"] == FROZEN_MODEL_PEAK[3][1]
    walk = compute_ledger(FROZEN_MODEL_SCENARIO).stages[3].peak.schedule
    assert walk is not None and walk.peak.key == "backward-layer-1"
    # the same layer's other moments: its all-gather copy-out (its own output in flight, nothing computed) and
    # its end (its activations freed, every weight gradient computed, layer 0's all-gather still prefetched)
    base = STATE + grads + root + layer + head_grads + reduce_scatter
    assert FROZEN_MODEL_INSTANTS["backward-layer-1-unshard"] == base + LAYER * 2 + 2 * (2 * SBH) + 2 * SBH
    assert FROZEN_MODEL_INSTANTS["backward-layer-1-done"] == base + prefetch + LAYER * 2 + 2 * SBH + 2 * SBH
    entries = {e.what: e.bytes for e in walk.peak.entries}
    assert entries["gradients of the 30 layers after layer 1"] == grads
    assert walk.peak.bytes_of("reduce_scatter") == reduce_scatter
    assert walk.peak.bytes_of("all_gather") == prefetch
    assert walk.peak.bytes_of("unsharded_params") == root + layer


def test_the_other_instants_by_hand() -> None:
    logits = S * V  # s·b·V, b = 1
    saved = L * 2 * SBH + 2 * SBH + (2 * SBH + 4 * S)  # checkpointed inputs, residual, final norm (+ FP32 1/rms)
    assert FROZEN_MODEL_INSTANTS["loss-backward"] == STATE + ROOT * 2 + saved + 4 * logits + 8 * logits
    assert FROZEN_MODEL_INSTANTS["end-of-forward"] == STATE + ROOT * 2 + saved + 2 * logits
    # forward at the last layer: it is unsharded beside its own all-gather output and layer 30's, still held;
    # 31 checkpointed inputs and the hidden state entering it
    assert FROZEN_MODEL_INSTANTS["forward-layer-31"] == STATE + ROOT * 2 + 3 * LAYER * 2 + 31 * 2 * SBH + 2 * SBH
    # forward at layer 0: the root's all-gather output is the one still held
    assert FROZEN_MODEL_INSTANTS["forward-layer-0"] == STATE + ROOT * 2 + 2 * LAYER * 2 + ROOT * 2 + 2 * SBH
    # after the loss: the last layer prefetched, the logits' BF16 gradient, the head's and final norm's gradients
    head_grads = (H + V * H) * 2
    assert FROZEN_MODEL_INSTANTS["head-backward"] == (STATE + ROOT * 2 + LAYER * 2 + head_grads + saved + 2 * logits
                                                      + 2 * SBH)  # fmt: skip
    # the embedding's backward done: the root unsharded with its BF16 gradients, layer 0's FP32 reduce-scatter input
    assert FROZEN_MODEL_INSTANTS["root-gradients"] == STATE + L * LAYER_SHARD * 4 + ROOT * 2 + ROOT * 2 + LAYER * 4
    # after the root's backward: every layer's shard, the root's BF16 gradients and its FP32 reduce-scatter input
    assert FROZEN_MODEL_INSTANTS["root-post-backward"] == STATE + L * LAYER_SHARD * 4 + ROOT * 2 + ROOT * 4
    # every gradient, and AdamW's two temporaries of the largest tensor's shard (the embedding: 4,000 × 4,096 rows)
    assert FROZEN_MODEL_INSTANTS["optimizer-step"] == STATE + SHARD * 4 + 2 * (V // D) * H * 4


def test_frozen_model_reference_peaks_per_stage() -> None:
    ledger = compute_ledger(FROZEN_MODEL_SCENARIO)
    for st_ in ledger.stages:
        key, total = FROZEN_MODEL_PEAK[st_.stage]
        assert st_.peak.instant is not None
        assert (st_.peak.instant.key, st_.peak.total) == (key, total)


# --------------------------------------------------------------------------- rules that hold for any model

SMALL: dict[str, object] = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
                            "intermediate_size": 160, "vocab_size": 130}  # fmt: skip
MODELS = [
    compact(SMALL),
    compact({**SMALL, "tie_word_embeddings": True, "num_key_value_heads": 2}),
    compact({"model_type": "gpt2", "n_embd": 64, "n_layer": 3, "n_head": 4, "vocab_size": 131, "n_positions": 64}),
    compact({**SMALL, "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2}),
    "llama-2-7b",
]


def _scenario(**raw: Any) -> Scenario:
    return parse_scenario({"seq_len": 32, **FSDP2, **raw})


def _schedule(s: Scenario, stage: int = 3) -> Schedule:
    walk = compute_ledger(s).stages[stage].peak.schedule
    assert walk is not None
    return walk


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(MODELS[:4]),
    st.sampled_from([1, 2, 3, 7, 64]),
    st.integers(0, 8),
    st.sampled_from([0, 1]),
    st.sampled_from(["none", "selective", "full"]),
    st.sampled_from([0, 1, 2, 3]),
)
def test_the_worst_layer_is_among_the_candidates(
    model: str, dp: int, prefetch: int, reshard: int, policy: str, stage: int
) -> None:
    """Between k = max(1, P) and L − 2 the backward instant is linear in k: walking every layer finds
    nothing above the candidates."""
    s = _scenario(model=model, dp=dp, prefetch=prefetch, reshard_after_forward=reshard, act_policy=policy)
    lines = persistent_lines(s, stage, PRODUCTION)
    step = Step(s, stage, lines, PRODUCTION, True)
    base = resident(step)
    every = max(sum(summed(m, base)) for k in range(step.u.layers) for m in step.layer_moments(k))
    candidates = max(i.total for i in schedule(s, stage, lines, PRODUCTION).instants if i.phase == "backward"
                     and i.key.startswith("backward-layer"))  # fmt: skip
    assert candidates == every


# Precision layouts, reduce widths, optimizer states, micro-batches and norms for the entries' test.
LAYOUTS: list[dict[str, Any]] = [
    {},  # FSDP2's (the _scenario default)
    {"param_bytes": 2, "master_bytes": 4, "grad_bytes": 2, "gather_bytes": 2},  # DeepSpeed's mixed precision
    {"reduce_bytes": 2},  # a BF16 reduce-scatter of FP32 gradients
    {"opt_states": 0},
    {"opt_states": 1, "opt_bytes": 2},
    {"param_bytes": 2, "master_bytes": 8, "grad_bytes": 4, "gather_bytes": 1, "reduce_bytes": 4, "opt_states": 3},
]


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(MODELS),
    st.sampled_from([1, 2, 5, 64]),
    st.integers(0, 8),
    st.sampled_from([0, 1]),
    st.sampled_from(["none", "selective", "full"]),
    st.sampled_from([0, 1, 2, 3]),
    st.sampled_from([None, *MUTANTS]),
    st.booleans(),
    st.sampled_from([{}, {"bucket_bytes": 12_345, "overhead_bytes": 7}, {"activation_bytes": "3GB"}]),
    st.sampled_from(LAYOUTS),
    st.sampled_from([{}, {"micro_batch": 2}, {"norms": "fused"}, {"micro_batch": 3, "norms": "fused"}]),
    st.sampled_from(
        [
            {},
            {"offload_optimizer": "cpu"},
            {"offload_param": "nvme"},
            {"offload_optimizer": "nvme", "offload_param": "cpu"},
        ]
    ),
)
def test_the_entries_add_up_to_the_instants_numbers(
    model: str, dp: int, prefetch: int, reshard: int, policy: str, stage: int, mutant: Any, padded: bool,
    extra: dict[str, Any], layout: dict[str, Any], batch: dict[str, Any], offload: dict[str, Any],
) -> None:  # fmt: skip
    """An instant's entries, each with its formula, add up to its bytes, category by category, and to its
    total, under the production rules and every mutant's, in every precision layout and with offload."""
    s = _scenario(model=model, dp=dp, prefetch=prefetch, reshard_after_forward=reshard, act_policy=policy, **extra,
                  **layout, **batch, **offload)  # fmt: skip
    rules = PRODUCTION if mutant is None else mutant.rules
    walk = schedule(s, stage, persistent_lines(s, stage, rules), rules, padded=padded)
    for instant in walk.instants:
        assert instant.total == sum(instant.sums) == sum(e.bytes for e in instant.entries)
        assert [sum(e.bytes for e in instant.entries if e.category == c) for c in CATEGORIES] == list(instant.sums)
        assert all(e.formula.endswith(" B") for e in instant.entries)
    assert walk.peak is max(walk.instants, key=lambda i: i.total)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("dp", [1, 3, 8])
def test_gradients_appear_during_backward_and_all_are_there_for_the_step(model: str, dp: int) -> None:
    s = _scenario(model=model, dp=dp)
    ledger = compute_ledger(s)
    for st_ in ledger.stages:
        walk = st_.peak.schedule
        assert walk is not None
        by_key = {i.key: i for i in walk.instants}
        assert by_key["end-of-forward"].bytes_of("gradients") == by_key["loss-backward"].bytes_of("gradients") == 0
        backward = [i.bytes_of("gradients") for i in walk.instants if i.key.startswith("backward-layer")]
        assert backward == sorted(backward)  # later layers first: more gradients at each earlier one
        assert by_key["optimizer-step"].bytes_of("gradients") >= st_.bytes_of("gradients")
    step = {i.key: i for i in _schedule(s).instants}["optimizer-step"]
    padded = fsdp2_section(estimate(s))
    assert padded is not None
    # stage 3: the model state at the step is FSDP2's padded shard, to the byte (what the trace measures)
    assert step.bytes_of("state", "gradients") == padded["stage3_padded_bytes"]["total"]


def test_the_root_stays_unsharded_and_reshard_after_forward_0_keeps_every_layer() -> None:
    base = {i.key: i for i in _schedule(_scenario(model=MODELS[0], dp=4)).instants}
    kept = {i.key: i for i in _schedule(_scenario(model=MODELS[0], dp=4, reshard_after_forward=0)).instants}
    layer = 4 * 64 * 64 + 3 * 64 * 160 + 2 * 64
    root = 2 * 130 * 64 + 64  # vocabulary 130 pads to 132 rows over 4 ranks
    padded_root = 2 * 132 * 64 + 64
    assert base["end-of-forward"].bytes_of("unsharded_params") == padded_root * 2
    assert kept["end-of-forward"].bytes_of("unsharded_params") == padded_root * 2 + 4 * layer * 2
    # no all-gather in backward: every layer is still unsharded
    assert all(i.bytes_of("all_gather") == 0 for i in kept.values() if i.phase == "backward")
    assert base["backward-layer-3"].bytes_of("all_gather") == layer * 2  # layer 2, prefetched
    assert base["backward-layer-3-unshard"].bytes_of("all_gather") == layer * 2  # its own, during the copy-out
    assert kept["backward-layer-3"].bytes_of("unsharded_params") == padded_root * 2 + 4 * layer * 2
    assert root < padded_root


def test_the_reduce_width_is_the_reduce_scatter_inputs_width() -> None:
    fp32 = {i.key: i for i in _schedule(_scenario(model=MODELS[0], dp=4)).instants}
    bf16 = {i.key: i for i in _schedule(_scenario(model=MODELS[0], dp=4, reduce_bytes=2)).instants}
    layer = 4 * 64 * 64 + 3 * 64 * 160 + 2 * 64
    assert fp32["backward-layer-2"].bytes_of("reduce_scatter") == layer * 4
    assert bf16["backward-layer-2"].bytes_of("reduce_scatter") == layer * 2
    assert fp32["backward-layer-3"].bytes_of("reduce_scatter") == 0  # the last layer: none in flight yet
    for key, instant in fp32.items():
        assert instant.total - bf16[key].total == instant.bytes_of("reduce_scatter") // 2


def test_the_reduce_width_defaults_to_the_gradient_width() -> None:
    assert _scenario(model=MODELS[0]).reduce_bytes == 4
    assert parse_scenario({"model": "llama-2-7b"}).reduce_bytes == 2
    assert parse_scenario({"grad_bytes": 4, "reduce_bytes": 2}).non_default_items() == [
        ("grad_bytes", 4),
        ("reduce_bytes", 2),
    ]


def test_d_1_has_no_all_gather_output_but_an_unsharded_copy() -> None:
    walk = _schedule(_scenario(model=MODELS[0], dp=1))
    assert all(i.bytes_of("all_gather") == 0 for i in walk.instants)
    held = [i for i in walk.instants if i.key not in ("root-post-backward", "optimizer-step")]
    assert all(i.bytes_of("unsharded_params") > 0 for i in held)


def test_stages_0_to_2_gather_nothing() -> None:
    s = _scenario(model=MODELS[0], dp=4)
    for stage in (0, 1, 2):
        walk = _schedule(s, stage)
        assert all(i.part("gather") == 0 for i in walk.instants)
        assert "approximation" in walk.note
    assert all(i.bytes_of("reduce_scatter") == 0 for i in _schedule(s, 1).instants)


def test_the_peak_is_the_worst_instant_plus_contingency() -> None:
    s = _scenario(model=MODELS[0], dp=4, contingency_pct=7, bucket_bytes=1000, overhead_bytes=3)
    for st_ in compute_ledger(s).stages:
        p = st_.peak
        assert p.schedule is not None and p.instant is not None
        assert p.subtotal == max(i.total for i in p.schedule.instants) == p.instant.total
        assert p.total == p.subtotal + -(-p.subtotal * 7 // 100)
        assert p.persistent + p.gather + p.buckets + p.activations + p.overhead == p.subtotal
        assert all(i.bytes_of("buckets") == 1000 and i.bytes_of("overhead") == 3 for i in p.schedule.instants)
        assert set(CATEGORIES) >= {e.category for i in p.schedule.instants for e in i.entries}
        assert p.declared is not None and p.declared.kind == "declared"


def test_a_measured_activation_figure_scales_the_saved_activations() -> None:
    modelled = _scenario(model=MODELS[0], dp=4)
    doubled = _scenario(model=MODELS[0], dp=4, activation_bytes=2 * modelled.activation_bytes)
    a = {i.key: i.bytes_of("activations") for i in _schedule(modelled).instants}
    b = {i.key: i.bytes_of("activations") for i in _schedule(doubled).instants}
    assert all(b[k] == 2 * a[k] for k in a)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ({}, "no model"),
        ({"model": "llama-2-7b", "params": "7B"}, "params or unit_params typed"),
        ({"model": "llama-2-7b", "unit_params": "100M"}, "params or unit_params typed"),
        ({"model": "llama-2-7b", "tp": 2}, "tensor parallelism"),
    ],
)
def test_without_a_schedule_the_peak_is_the_declared_one(raw: dict[str, Any], why: str) -> None:
    s = parse_scenario(raw)
    assert (not_schedulable(s) or "").startswith(why)
    for st_ in compute_ledger(s).stages:
        assert st_.peak.kind == "declared" and st_.peak.declared_peak is st_.peak
        assert st_.peak.why_declared.startswith(why)


def test_the_seeds_worked_example_is_unchanged() -> None:
    """No model, so peak = declared peak: 132 / 58.5 / 46.25 / 34.7 GB."""
    totals = [st_.peak.total for st_ in compute_ledger(parse_scenario({})).stages]
    assert totals == [132_000_000_000, 58_500_000_000, 46_250_000_000, 34_700_000_000]


# --------------------------------------------------------------------------- the receipt and the fit finder


def test_the_receipt_names_the_instant_and_keeps_the_declared_peak() -> None:
    data = receipt(estimate(FROZEN_MODEL_SCENARIO))
    Receipt.model_validate(data)
    assert data["schema_version"] == 2
    stage3 = data["stages"][3]
    assert stage3["peak"]["kind"] == "schedule"
    assert (stage3["peak"]["instant"], stage3["peak"]["instant_key"]) == ("backward at layer 1", "backward-layer-1")
    assert stage3["peak"]["total"] == FROZEN_MODEL_PEAK[3][1]
    assert [i["key"] for i in stage3["peak"]["instants"]] == list(FROZEN_MODEL_INSTANTS)
    assert [i["total"] for i in stage3["peak"]["instants"]] == list(FROZEN_MODEL_INSTANTS.values())
    for instant in stage3["peak"]["instants"]:
        assert sum(e["bytes"] for e in instant["entries"]) == instant["total"] == sum(instant["parts"].values())
        assert all(e["formula"].endswith(" B") for e in instant["entries"])
    declared = stage3["declared_peak"]
    # the seed's declared sum: persistent + the largest unit's remote shards + the modelled activations
    assert declared["total"] == 13_476_831_232 + (LAYER - LAYER // D) * 2 + FROZEN_MODEL_SCENARIO.activation_bytes
    assert declared["peak_minus_declared"] == stage3["peak"]["total"] - declared["total"]
    assert stage3["fits"] is (stage3["peak"]["total"] <= FROZEN_MODEL_SCENARIO.capacity_bytes)
    assert stage3["headroom_bytes"] == FROZEN_MODEL_SCENARIO.capacity_bytes - stage3["peak"]["total"]


def _fits(s: Scenario, stage: int) -> bool:
    return compute_ledger(s).stages[stage].peak.fits


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(MODELS),
    st.sampled_from(["none", "full"]),
    st.integers(0, 3),
    st.sampled_from([0, 1]),
    st.integers(1, 2**37),
    st.sampled_from(["plain-fsdp2", "hf-fsdp2"]),  # the root recipe's walk and Accelerate's units'
)
def test_the_fit_finder_agrees_with_the_schedule(model: str, policy: str, prefetch: int, reshard: int,
                                                 capacity: int, stack: str) -> None:  # fmt: skip
    s = _scenario(model=model, act_policy=policy, prefetch=prefetch, reshard_after_forward=reshard,
                  capacity_bytes=capacity, stack=stack)  # fmt: skip
    fit = find_fit(s)
    for dp, peaks in fit.curve:
        assert list(peaks) == [st_.peak.total for st_ in compute_ledger(s.with_(dp=dp)).stages]
    for answer in fit.stages:
        if answer.smallest_dp is None:
            assert not _fits(s.with_(dp=131_072), answer.stage)
            continue
        assert _fits(s.with_(dp=answer.smallest_dp), answer.stage)
        below = range(max(1, answer.smallest_dp - 64), answer.smallest_dp)
        assert not any(_fits(s.with_(dp=d), answer.stage) for d in below)


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(MODELS),
    st.sampled_from(["none", "full"]),
    st.sampled_from(["plain-fsdp2", "hf-fsdp2"]),
    st.integers(1, 600),
    st.integers(1, 600),
)
def test_the_floor_never_grows_with_d(model: str, policy: str, stack: str, d1: int, d2: int) -> None:
    """The fit finder bisects the floor over D (a MoE model's padded experts may fit at no D): that rests on
    the floor never growing with D, padded experts (4 of them, D up to 600) included."""
    s = _scenario(model=model, act_policy=policy, stack=stack)
    low, high = sorted((d1, d2))

    def floor_at(dp: int) -> int:
        at = s.with_(dp=dp)
        return floor(at, 3, persistent_lines(at, 3, PRODUCTION), PRODUCTION)

    assert floor_at(high) <= floor_at(low)
    # and it is a floor: no instant of the walk holds less
    assert floor_at(high) <= compute_ledger(s.with_(dp=high)).stages[3].peak.subtotal


def _ledger(raw: dict[str, Any]) -> Ledger:
    return compute_ledger(parse_scenario(raw))


def test_the_largest_micro_batch_follows_the_schedule() -> None:
    raw = {"model": "llama-2-7b", **FSDP2, "capacity_bytes": "80GiB", "act_policy": "full", "dp": 8}
    e = estimate(parse_scenario(raw))
    for answer in e.fit.stages:
        b = answer.largest_micro_batch
        if b is None:
            assert not _ledger({**raw, "micro_batch": 1}).stages[answer.stage].peak.fits
            continue
        assert _ledger({**raw, "micro_batch": b}).stages[answer.stage].peak.fits
        assert not _ledger({**raw, "micro_batch": b + 1}).stages[answer.stage].peak.fits


@pytest.mark.parametrize("policy", ["none", "selective", "full"])
def test_unfused_norms_keep_4_s_b_h_bytes_more_per_rmsnorm(policy: str) -> None:
    """transformers' LlamaRMSNorm keeps an FP32 upcast and the normalised input instead of the input:
    4·s·b·h B more per norm, two per layer and the final one; LayerNorm models are unchanged."""
    raw = {"model": "llama-2-7b", "seq_len": 2048, "micro_batch": 2, "act_policy": policy}
    fused, unfused = (parse_scenario({**raw, "norms": n}).model_defaults() for n in ("fused", "unfused"))
    assert fused is not None and unfused is not None
    per_norm = 4 * 2048 * 2 * H
    a, b = fused.activations, unfused.activations
    full_set = (sum(x.bytes for x in a.saved), sum(x.bytes for x in b.saved))
    assert full_set[1] - full_set[0] == 2 * per_norm
    assert b.head_bytes - a.head_bytes == per_norm
    if policy == "full":
        assert b.per_layer_bytes == a.per_layer_bytes  # the checkpointed input only
        assert b.total_bytes - a.total_bytes == 2 * per_norm + per_norm  # one layer's recomputed set + the final
    else:
        assert b.total_bytes - a.total_bytes == L * 2 * per_norm + per_norm
    gpt = [parse_scenario({"model": "gpt2", "norms": n}).activation_bytes for n in ("fused", "unfused")]
    assert gpt[0] == gpt[1]


def test_a_layer_s_copy_out_holds_what_the_layer_above_prefetched() -> None:
    """Explicit prefetch P = 2, Llama-2-7B at D = 8: layer 2's pre-backward prefetches layers 1 and 0, so at
    layer 1's copy-out both all-gather outputs are in flight (its own and layer 0's), at layer 0's one. (A
    review found layer 1's copy-out holding one: min(P, k) where the layer above left min(P, k + 1).)"""
    s = parse_scenario({"model": "llama-2-7b", "dp": D, "prefetch": 2, **FSDP2})
    by_key = {i.key: i for i in _schedule(s).instants}
    layer_bf16 = LAYER * 2  # a whole layer in the gather width; 8 divides every dim 0, so no padding
    assert by_key["backward-layer-2-done"].bytes_of("all_gather") == 2 * layer_bf16  # layers 1 and 0 prefetched
    assert by_key["backward-layer-1-unshard"].bytes_of("all_gather") == 2 * layer_bf16
    assert by_key["backward-layer-1"].bytes_of("all_gather") == 1 * layer_bf16  # layer 0's, still in flight
    assert by_key["backward-layer-0-unshard"].bytes_of("all_gather") == 1 * layer_bf16
    assert by_key["backward-layer-0"].bytes_of("all_gather") == 0
