"""What trains of DeepSeek-V3, walked step by step, against a trace of transformers' own ``DeepseekV3ForCausalLM``
(three dense layers, then two MoE ones) with PEFT 0.21.0's adapters or ``requires_grad_(False)``, under Accelerate's
FSDP2 units and FSDPMemTracker.

PEFT adapts its latent attention's linear modules and, in its MoE layers, its router and routed experts (folded into
their stacks); never its dense layers' MLP nor its shared experts, whose names it sends to the routed experts. So its
dense layers carry the attention's adapters alone, and none where only the experts are targeted: no gradient reaches
them, and they keep nothing. Modules frozen by name are walked per kind of layer; a frozen prefix of layers is a third
kind, walked as the larger of the layers each run stands for (an over-count, never an under-count).

What is held: every peak within 5 % of the trace (never more than 5 % low); what a dense layer and a MoE layer keep
equal to the trace to the byte but for one CPU-only copy, named where it is asserted.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.ledger.models.reference import compact
from app.ledger.scenario import parse_scenario
from app.trace.setup import trace_setup
from tests.support.hf_trace import MARKS
from tests.trace.test_families_traced import DEEPSEEK, RUN, _kept_between

pytestmark = [*MARKS, pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")]

CASES: dict[str, dict[str, object]] = {
    "lora-8-q-b-kv-b": {"lora_rank": 8, "lora_targets": "q_b_proj,kv_b_proj"},
    "lora-8-all-linear": {"lora_rank": 8, "lora_targets": "all-linear"},
    "lora-16-all-linear-full-accum": {"lora_rank": 16, "lora_targets": "all-linear", "act_policy": "full",
                                      "grad_accum": 2},
    "lora-8-down-o": {"lora_rank": 8, "lora_targets": "down_proj,o_proj"},
    "lora-8-router-q-a": {"lora_rank": 8, "lora_targets": "gate,q_a_proj"},
    "lora-8-latent-inputs": {"lora_rank": 8, "lora_targets": "q_a_proj,kv_a_proj_with_mqa"},
    "lora-8-experts": {"lora_rank": 8, "lora_targets": "gate_proj,up_proj,down_proj"},
    "modules-experts": {"frozen_modules": "experts"},
    "modules-self-attn-embed": {"frozen_modules": "self_attn", "freeze_embed": 1},
    "modules-mlp": {"frozen_modules": "mlp"},
    "modules-latent-norm-kv-b-router": {"frozen_modules": "q_a_layernorm,kv_b_proj,gate"},
    "modules-shared-experts-full": {"frozen_modules": "shared_experts", "act_policy": "full"},
    "frozen-2": {"frozen_layers": 2},
    "frozen-4": {"frozen_layers": 4},
    "frozen-3-embed": {"frozen_layers": 3, "freeze_embed": 1},
}  # fmt: skip


def _scenario(case: str) -> Any:
    return parse_scenario({**RUN, "model": compact(DEEPSEEK), **CASES[case]})


@pytest.fixture(scope="module")
def traced() -> dict[str, Any]:
    from app.trace import import_torch

    import_torch()
    from app.trace.tracer import run_trace

    return {case: run_trace(trace_setup(_scenario(case))) for case in CASES}


@pytest.mark.parametrize("case", CASES)
def test_the_walked_peak_is_within_5_percent_of_the_trace(traced: dict[str, Any], case: str) -> None:
    from app.ledger.estimate import estimate

    peak = estimate(_scenario(case)).ledger.stages[3].peak
    assert peak.schedule is not None, "part of the model trains: the schedule is walked"
    measured = traced[case].peak["total"]
    assert abs(peak.total - measured) * 20 <= measured, (peak.total, measured)


# the layers whose own figures the walk gives exactly: not the first layer a gradient enters (layer 3 where only the
# experts carry adapters: it is counted as one a gradient enters), nor a run standing for two kinds (frozen prefixes)
EXACT = [case for case in CASES if case not in ("lora-8-experts", "frozen-2", "frozen-4", "frozen-3-embed")]


@pytest.mark.parametrize("case", EXACT)
def test_what_a_dense_and_a_moe_layer_keep_is_the_traces(traced: dict[str, Any], case: str) -> None:
    """Layer 1 (dense) and layer 3 (the first MoE one) through forward, to the byte. Where the router carries an
    adapter, the trace's MoE layer keeps its lora_A and lora_B once more, in FP32: PEFT 0.21.0's
    ``lora.Linear.get_delta_weight`` (which a single-matrix ``ParamWrapper`` calls) casts BF16 factors to FP32 on a CPU
    device only (``cast_to_fp32 = device.type == "cpu"``), and the delta's matmul keeps them; on a GPU it does not.
    (Under full recomputation a layer keeps its checkpoint's input alone.)"""
    result, raw = traced[case], CASES[case]
    router = 0
    targets = str(raw.get("lora_targets", "")).split(",")
    if ("gate" in targets or targets == ["all-linear"]) and raw.get("act_policy") != "full":
        rank, experts, h = int(str(raw["lora_rank"])), DEEPSEEK["n_routed_experts"], DEEPSEEK["hidden_size"]
        router = 4 * rank * (int(str(experts)) + int(str(h)))
    dense, moe = _kept_between(result, 1, 2, lab=True), _kept_between(result, 3, 4, lab=True)
    assert (dense, moe + router) == (_kept_between(result, 1, 2, lab=False), _kept_between(result, 3, 4, lab=False))
    assert dense > 0 and moe > 0


def test_dense_layers_without_an_adapter_keep_nothing(traced: dict[str, Any]) -> None:
    """Adapters on the routed experts alone: the dense first layers hold none, and no gradient reaches them (the
    embedding is frozen too), so between their forward instants the trace keeps nothing new, and nor does the lab."""
    from app.ledger.estimate import estimate

    result = traced["lora-8-experts"]
    assert _kept_between(result, 1, 2, lab=False) == _kept_between(result, 1, 2, lab=True) == 0
    md = estimate(_scenario("lora-8-experts")).model
    assert md is not None and md.lora is not None
    assert (md.lora.dense_layers, md.lora.dense) == (DEEPSEEK["first_k_dense_replace"], ())
    assert md.activations.alt_per_layer_bytes == 0 < md.activations.per_layer_bytes


def test_a_frozen_prefix_is_counted_as_the_larger_kind(traced: dict[str, Any]) -> None:
    """Two frozen dense layers, a trained dense one, then the MoE ones (the embedding trained: a gradient flows
    through all of them): the frozen layer keeps what the trace's does; the trained dense layer is counted as the
    larger of a trained dense and a trained MoE layer, so at least what the trace's keeps."""
    result = traced["frozen-2"]
    assert _kept_between(result, 1, 2, lab=True) == _kept_between(result, 1, 2, lab=False) > 0
    assert _kept_between(result, 2, 3, lab=True) >= _kept_between(result, 2, 3, lab=False)
