"""Today's families against a trace of the code users run: transformers' own ``Qwen3ForCausalLM`` and
``Phi3ForCausalLM`` (5.23.0) under FSDP2 on a fake process group, called as the HF Trainer calls it
(``--stack hf-fsdp2``).

Qwen3's layer differs from Llama's by an RMSNorm of head_dim over every query and key head before RoPE (``q_norm``,
``k_norm``): two more parameter tensors per layer and their saved inputs, upcasts and 1/rms. Phi-3's fuses q, k, v
into one ``qkv_proj`` and gate, up into one ``gate_up_proj``: V, a view of the fused output, keeps all of it, and
SDPA's output is copied for o_proj. OLMo 2's normalises the whole q and k projections, puts its norms after the
sublayers (their weight's mul in FP32: ``norms = composite``, the hf-fsdp2 stack's for it), and its FP32 rotary
tables are cast by FSDP2 for every layer. The configs set ``head_dim`` apart from hidden ÷ heads (as Qwen3-0.6B does:
16 × 128 = 2,048 ≠ 1,024), so a query width mistaken for the hidden size shows too.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.ledger.models.reference import compact, resolve
from app.ledger.scenario import parse_scenario
from app.trace.setup import TraceSetupError, trace_setup
from tests.support.hf_trace import FSDP2, MARKS

pytestmark = MARKS

SMALL = {"hidden_size": 256, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 96, "intermediate_size": 688, "vocab_size": 16384}  # fmt: skip
RUN = {"dp": 4, "seq_len": 256, "micro_batch": 2, "reduce_bytes": 2, "stack": "hf-fsdp2", **FSDP2}
# The MoE families' experts: 8 a layer, 2 a token, 176 wide (Qwen3-MoE's intermediate_size, read by no sparse layer,
# drops; Mixtral's is its experts' width)
MOE = {
    "qwen3_moe": {"moe_intermediate_size": 176, "num_experts": 8, "num_experts_per_tok": 2},
    "mixtral": {"intermediate_size": 176, "num_local_experts": 8, "num_experts_per_tok": 2},
}


def _traced(family: str, **raw: Any) -> tuple[Any, Any]:
    """(the lab's stage-3 peak, transformers' class traced) for the scenario."""
    return _traced_model(compact({**SMALL, **MOE.get(family, {}), "model_type": family}), **raw)


def _traced_model(model: str, **raw: Any) -> tuple[Any, Any]:
    from app.ledger.estimate import estimate
    from app.trace import import_torch

    import_torch()
    from app.trace.tracer import run_trace

    s = parse_scenario({**RUN, "model": model, **raw})
    peak = estimate(s).ledger.stages[3].peak
    assert peak.schedule is not None
    return peak, run_trace(trace_setup(s))


def _kept_between(result: Any, first: int, last: int, lab: bool) -> int:
    """What layers first + 1 … last keep through forward: the step between the two forward instants (the lab's or
    the trace's)."""
    from app.trace.report import instants

    at = {i["key"]: (i["modelled"], i["traced"]) for i in instants(result)}
    (lab_a, traced_a), (lab_b, traced_b) = at[f"forward-layer-{first}"], at[f"forward-layer-{last}"]
    assert None not in (traced_a, traced_b), "the trace names both forward instants"
    return int(lab_b - lab_a) if lab else int(traced_b - traced_a)


@pytest.mark.parametrize("family", ["qwen3", "phi3", "olmo2", "qwen3_moe", "mixtral", "gemma2"])
@pytest.mark.parametrize("raw", [{}, {"act_policy": "full"}, {"wrap": "root", "loss": "outside"}],
                         ids=["embed-tail", "full", "root-outside"])  # fmt: skip
def test_the_family_as_transformers_runs_it(family: str, raw: dict[str, Any]) -> None:
    """The peak within 0.25 % (OLMo 2's FP32 rotary tables, made once a forward, are not counted: 2·s·d × 4 B, 0.2 %
    of this small model's peak under full recomputation, 4 MB at s = 4,096), and what one layer keeps through
    forward (the step from one forward instant to the next: its saved activations, the q/k norms', the fused
    projections' or the per-layer rotary tables' included) equal to the trace's to the byte."""
    peak, result = _traced(family, **raw)
    extra = MOE.get(family, {})
    assert result.params == resolve(compact({**SMALL, **extra, "model_type": family})).inventory.params
    measured = result.peak["total"]
    assert abs(peak.total - measured) * 400 <= measured, (peak.total, measured)
    assert _kept_between(result, 1, 2, lab=True) == _kept_between(result, 1, 2, lab=False) > 0


def test_qwen3_is_traced_with_transformers_class_only() -> None:
    """The lab's plain decoders have no q/k norms: a plain-fsdp2 trace of Qwen3 is refused, by name."""
    model = compact({**SMALL, "model_type": "qwen3"})
    s = parse_scenario({**RUN, "model": model, "stack": "plain-fsdp2", "wrap": "root", "loss": "outside"})
    with pytest.raises(TraceSetupError) as caught:
        trace_setup(s)
    assert any("traced with transformers' own class only" in p for p in caught.value.problems), caught.value.problems


MOE_RUNS = [
    ("qwen3_moe", {"dp": 16}),
    ("qwen3_moe", {"dp": 16, "act_policy": "full"}),
    ("qwen3_moe", {"norm_topk_prob": False}),
    ("mixtral", {"dp": 16}),
    ("mixtral", {"dp": 16, "act_policy": "full"}),
]


@pytest.mark.parametrize(
    ("family", "raw"), MOE_RUNS, ids=lambda x: x if isinstance(x, str) else "-".join(map(str, x.values()))
)
def test_moe_as_transformers_runs_it(family: str, raw: dict[str, Any]) -> None:
    """Qwen3MoeForCausalLM and MixtralForCausalLM with their default grouped-GEMM experts (fixed shapes: they trace on
    fake tensors, and what they keep does not depend on the routing). At D = 16 over 8 experts FSDP2 pads the fused
    expert tensors to one expert a rank (twice the experts' share a per-expert count gives); without norm_topk_prob
    the renormalising division and what it keeps are gone. The peak within 0.25 % and one layer's saved set to the
    byte."""
    raw = dict(raw)
    renorm = raw.pop("norm_topk_prob", True)
    peak, result = _traced_model(compact({**SMALL, **MOE[family], "norm_topk_prob": renorm, "model_type": family}),
                                 **raw)  # fmt: skip
    measured = result.peak["total"]
    assert abs(peak.total - measured) * 400 <= measured, (peak.total, measured)
    assert _kept_between(result, 1, 2, lab=True) == _kept_between(result, 1, 2, lab=False) > 0


GEMMA3 = {**SMALL, "num_hidden_layers": 6, "sliding_window": 64, "model_type": "gemma3_text"}


@pytest.mark.parametrize("raw", [{}, {"act_policy": "full"}, {"seq_len": 64}], ids=["s256", "s256-full", "s64"])
def test_gemma3_as_transformers_runs_it(raw: dict[str, Any]) -> None:
    """Gemma3ForCausalLM (SDPA) with a 64-token window and every 6th layer global: past the window its five sliding
    layers attend through a mask (K and V expanded, the mask kept per call) and the sixth natively, and what layers 2
    to 5 keep (three sliding, one global) equals the trace to the byte; within the window every layer is alike. The
    peak within 0.5 % (its second rotary tables and the model's masks, alive through forward, are not counted)."""
    peak, result = _traced_model(compact(GEMMA3), wrap="root", loss="outside", **raw)
    measured = result.peak["total"]
    assert abs(peak.total - measured) * 200 <= measured, (peak.total, measured)
    assert _kept_between(result, 1, 5, lab=True) == _kept_between(result, 1, 5, lab=False) > 0


DEEPSEEK = {
    "model_type": "deepseek_v3", "hidden_size": 256, "num_hidden_layers": 5, "first_k_dense_replace": 3,
    "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 96, "kv_lora_rank": 64, "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 16, "v_head_dim": 24, "n_routed_experts": 8, "n_shared_experts": 1, "moe_intermediate_size": 64,
    "intermediate_size": 384, "n_group": 2, "topk_group": 1, "num_experts_per_tok": 2, "vocab_size": 16384,
}  # fmt: skip


@pytest.mark.parametrize(
    "raw",
    [{}, {"act_policy": "full"}, {"q_lora_rank": None, "dp": 16}],
    ids=["none", "full", "no-q-latent-d16"],
)
def test_deepseek_v3_as_transformers_runs_it(raw: dict[str, Any]) -> None:
    """DeepseekV3ForCausalLM (SDPA, grouped-GEMM experts) with three dense layers before two MoE ones: its latent
    attention through the kernel a GPU takes for q/k heads of 48 and v heads of 24 (memory-efficient: the trace's
    stand-in for SDPA's CPU math fallback, app.trace.models.hf), its FP32 router and its shared expert. The peak
    within 0.25 %, and what a dense layer and a MoE layer keep through forward (with the step between the two kinds'
    all-gathers) equal to the trace's to the byte."""
    raw = dict(raw)
    config = {**DEEPSEEK, "q_lora_rank": raw.pop("q_lora_rank", DEEPSEEK["q_lora_rank"])}
    model = compact(config)
    peak, result = _traced_model(model, **raw)
    assert result.params == resolve(model).inventory.params
    measured = result.peak["total"]
    assert abs(peak.total - measured) * 400 <= measured, (peak.total, measured)
    for first, last in ((1, 2), (2, 3), (3, 4)):  # a dense layer; the last dense one, then a MoE one; a MoE one
        assert _kept_between(result, first, last, lab=True) == _kept_between(result, first, last, lab=False) > 0
