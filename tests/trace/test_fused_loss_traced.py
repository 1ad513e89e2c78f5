"""Liger Kernel 0.8.5's fused linear cross-entropy (``loss = fused``), walked step by step, against a trace of the same
step: transformers' own class whose forward is Liger's own ``lce_forward``, sharded by Accelerate's code, Liger's
Python run as it is with its Triton kernels and host syncs stood in for (:mod:`app.trace.liger`).

What is held: at each of the fused loss's instants the walk within 1 % of the trace, once the trace's loss forward
is rid of the one branch Liger takes on a CPU and not on a GPU (:func:`app.trace.liger.cpu_only_bytes`); the walked
peak within 5 % of the trace's so adjusted; and the fused loss's peak far below the whole logits' (``loss =
inside``), by what the trace's falls.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.ledger.models.reference import compact
from app.ledger.scenario import parse_scenario
from app.trace.setup import trace_setup
from tests.support.hf_trace import MARKS

pytestmark = [*MARKS, pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")]

# a vocabulary large beside the hidden size, as in the models Liger is used for (Llama 3: 128,256 over 4,096)
LLAMA = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 688, "vocab_size": 16384}  # fmt: skip
QWEN3_MOE = {**LLAMA, "model_type": "qwen3_moe", "head_dim": 64, "moe_intermediate_size": 128, "num_experts": 8,
             "num_experts_per_tok": 2}  # fmt: skip
RUN: dict[str, object] = {"model": compact(LLAMA), "stack": "hf-fsdp2", "dp": 4, "seq_len": 512, "loss": "fused"}
CASES: dict[str, dict[str, object]] = {
    "llama": {},
    "llama-b2-s1024": {"micro_batch": 2, "seq_len": 1024},
    "llama-full-d8": {"act_policy": "full", "dp": 8},
    "llama-accum-every": {"grad_accum": 2, "grad_sync": "every"},
    # without sync (the HF Trainer's default): Liger's head gradient is added into the one held since the first
    "llama-accum-last": {"grad_accum": 2, "grad_sync": "last"},
    "llama-accum-3-last-full": {"grad_accum": 3, "grad_sync": "last", "act_policy": "full"},
    "llama-wide": {"model": compact({**LLAMA, "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 2,
                                     "vocab_size": 8192})},
    "qwen3-moe": {"model": compact(QWEN3_MOE)},
}  # fmt: skip


def _scenario(case: str, **raw: object) -> Any:
    return parse_scenario({**RUN, **CASES[case], **raw})


@pytest.fixture(scope="module")
def traced() -> dict[str, Any]:
    from app.trace import import_torch

    import_torch()
    from app.trace.tracer import run_trace

    return {case: run_trace(trace_setup(_scenario(case))) for case in CASES}


def _cpu_only(case: str) -> int:
    from app.trace.liger import cpu_only_bytes

    s = _scenario(case)
    arch = s.model_defaults().model.architecture
    return cpu_only_bytes(arch.vocab, arch.hidden, s.gather_bytes)


FUSED_INSTANTS = ("loss-forward", "tail-unshard", "tail-gradients", "tail-reduce")


def _instants(result: Any, case: str) -> dict[str, tuple[int, int]]:
    """The fused loss's instants (the last micro batch's): (the lab's, the trace's, its loss forward less the CPU's
    branch)."""
    from app.trace.report import instants

    every = instants(result)
    lab = {i["key"]: int(i["modelled"]) for i in every}
    # the trace's stretch to the final norm's pre-backward opens at "loss computed": the lab's loss backward
    lab["tail-unshard"] = max(lab["tail-unshard"], lab["loss-backward"])
    out, cpu_only = {}, _cpu_only(case)
    for i in every:
        if i["key"] in FUSED_INSTANTS and i["traced"] is not None:
            traced = int(i["traced"]) - (cpu_only if i["key"] == "loss-forward" else 0)
            out[i["key"]] = (lab[i["key"]], traced)
    return out


def _gpu_peak(result: Any, case: str) -> int:
    """The trace's peak with the CPU's branch taken out of each loss forward (the stretch closed by "loss
    computed")."""
    cpu_only = _cpu_only(case)
    return max(
        max(int(i.total), int(i.peak_since_previous) - (cpu_only if i.label == "loss computed" else 0))
        for i in result.timeline
    )


@pytest.mark.parametrize("case", CASES)
def test_the_fused_loss_s_instants_are_the_trace_s(traced: dict[str, Any], case: str) -> None:
    """The last chunk of the loss forward, the final norm's pre-backward (the last layer prefetched), its backward
    at its widest (the head's gradient, Liger's, beside the norm's temporaries) and the tail's one reduce-scatter."""
    result = traced[case]
    at = _instants(result, case)
    assert set(at) == set(FUSED_INSTANTS)
    # the prefetch's all-gather input (each rank's shard, copied in), which the lab counts at no all-gather yet:
    # 1/D of the layer prefetched, in the trace's stretch before the final norm's pre-backward ends
    prefetched = [i.parts["all_gather"] for i in result.timeline if i.label == "backward tail: unsharded"][-1]
    copy_in = prefetched // int(str(_scenario(case).dp))
    for key, (lab, trace) in at.items():
        gap = copy_in if key == "tail-unshard" else 0
        assert abs(lab + gap - trace) * 100 <= trace, (key, lab, trace)


@pytest.mark.parametrize("case", CASES)
def test_the_walked_peak_is_within_5_percent_of_the_trace(traced: dict[str, Any], case: str) -> None:
    from app.ledger.estimate import estimate

    peak = estimate(_scenario(case)).ledger.stages[3].peak
    assert peak.schedule is not None
    trace = _gpu_peak(traced[case], case)
    assert abs(peak.total - trace) * 20 <= trace, (peak.total, trace)


def test_the_cpu_s_branch_is_all_the_trace_holds_more_at_the_loss(traced: dict[str, Any]) -> None:
    """On a CPU Liger accumulates the head's gradient through ``torch.mm(…).float()``: the trace's peak is in the
    loss forward, at that product and its FP32 copy, V·h·(2 + 4) bytes above the GPU's branch; without them the
    trace's loss forward is the walk's within the offset every forward instant of this model carries."""
    result = traced["llama"]
    assert result.peak_at.phase == "forward" and result.peak_at.op in ("aten._to_copy.default", "aten.mm.default")
    vocab, hidden = int(str(LLAMA["vocab_size"])), int(str(LLAMA["hidden_size"]))
    assert _cpu_only("llama") == vocab * hidden * (2 + 4)
    lab, trace = _instants(result, "llama")["loss-forward"]
    assert abs(lab - trace) * 200 <= trace


def test_the_fused_loss_keeps_no_logits(traced: dict[str, Any]) -> None:
    """The same step with transformers' own loss on whole logits (``loss = inside``): the lab's peak falls by what the
    fused loss saves, and the traced peak (the CPU's branch aside) falls by as much within 1 %."""
    from app.ledger.estimate import estimate
    from app.trace.tracer import run_trace

    inside = _scenario("llama", loss="inside")
    whole = run_trace(trace_setup(inside)).peak["total"]
    fused = _gpu_peak(traced["llama"], "llama")
    lab_whole = estimate(inside).ledger.stages[3].peak.total
    lab_fused = estimate(_scenario("llama")).ledger.stages[3].peak.total
    assert lab_fused < lab_whole // 2 + lab_whole // 4
    assert abs((whole - fused) - (lab_whole - lab_fused)) * 100 <= whole - fused
