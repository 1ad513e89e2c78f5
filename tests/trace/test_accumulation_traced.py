"""Gradient accumulation against a trace of real FSDP2 (torch 2.13 ``fully_shard`` on a fake process group,
FSDPMemTracker): two micro batches per step, reduce-scattered after each (``grad_sync every``) or only after the
last, the others run under ``set_requires_gradient_sync(False)`` as Accelerate's ``no_sync`` does (``last``).

The lab walks a micro batch after the first: with ``every`` every gradient shard is resident there, with ``last``
every unit's unsharded gradient in the reduce width. Both are held to the traced peak, on the lab's plain decoder
and on transformers' own class under Accelerate's units (the hf-fsdp2 stack, whose default is ``last``), with and
without recomputation; and the traced peak of ``last`` comes in the second micro batch, not at the step.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.ledger.models.reference import compact
from app.ledger.scenario import parse_scenario
from app.trace.setup import trace_setup
from tests.support.hf_trace import FSDP2, MARKS

pytestmark = MARKS

# Llama-style with GQA, untied and tied heads; a vocabulary large enough for the loss to matter.
LLAMA = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 3, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 688, "vocab_size": 16384}  # fmt: skip
TIED = {**LLAMA, "tie_word_embeddings": True}
# Layers outweighing the loss (a small vocabulary, recomputation): where units kept gathered after the first micro
# batch's backward make it the worst
LAYERS = {**LLAMA, "num_hidden_layers": 4, "vocab_size": 512}
KEPT: dict[str, object] = {"act_policy": "full", "reshard_after_backward": 0, "seq_len": 128}
RUN: dict[str, object] = {"dp": 4, "seq_len": 256, "micro_batch": 1, "reduce_bytes": 4, **FSDP2}
CASES: dict[str, dict[str, object]] = {
    "plain-every": {"model": compact(LLAMA), "grad_sync": "every"},
    "plain-last": {"model": compact(LLAMA), "grad_sync": "last"},
    "plain-last-full": {"model": compact(LLAMA), "grad_sync": "last", "act_policy": "full"},
    "plain-tied-every-full": {"model": compact(TIED), "grad_sync": "every", "act_policy": "full"},
    "hf-last": {"model": compact(LLAMA), "stack": "hf-fsdp2", "reduce_bytes": 2},
    "hf-every-full": {"model": compact(LLAMA), "stack": "hf-fsdp2", "grad_sync": "every", "act_policy": "full"},
    # set_reshard_after_backward(False) between micro batches: the units stay gathered after the first's backward
    "plain-last-full-kept": {"model": compact(TIED), "grad_sync": "last", "act_policy": "full",
                             "reshard_after_backward": 0},
    "plain-tied-last-kept-b16": {"model": compact({**LAYERS, "tie_word_embeddings": True}), "grad_sync": "last",
                                 "reduce_bytes": 2, **KEPT},
    "hf-last-kept": {"model": compact(LAYERS), "stack": "hf-fsdp2", **KEPT},
    "plain-every-full-kept-raf0": {"model": compact(LLAMA), "grad_sync": "every", "act_policy": "full",
                                   "reshard_after_backward": 0, "reshard_after_forward": 0},
    # a short sequence: the peak at a unit's post-backward (the tail's, the root's), where the micro batches differ
    "hf-last-s32": {"model": compact(LLAMA), "stack": "hf-fsdp2", "act_policy": "full", "seq_len": 32},
    "hf-last-s32-r4": {"model": compact(LLAMA), "stack": "hf-fsdp2", "act_policy": "full", "seq_len": 32,
                       "reduce_bytes": 4},
    "hf-every-s32": {"model": compact(LLAMA), "stack": "hf-fsdp2", "grad_sync": "every", "act_policy": "full",
                     "seq_len": 32},
    "plain-last-s32": {"model": compact(LLAMA), "grad_sync": "last", "act_policy": "full", "seq_len": 32},
}  # fmt: skip


def _scenario(case: str, accum: int) -> Any:
    return parse_scenario({**RUN, **CASES[case], "grad_accum": accum})


@pytest.fixture(scope="module")
def traced() -> dict[str, Any]:
    from app.trace import import_torch

    import_torch()
    from app.trace.tracer import run_trace

    return {case: run_trace(trace_setup(_scenario(case, 2))) for case in CASES}


def _lab(case: str, accum: int = 2) -> Any:
    from app.ledger.estimate import estimate

    peak = estimate(_scenario(case, accum)).ledger.stages[3].peak
    assert peak.schedule is not None
    return peak


@pytest.mark.parametrize("case", CASES)
def test_the_accumulating_peak_is_within_5_percent_of_the_trace(traced: dict[str, Any], case: str) -> None:
    measured, peak = traced[case].peak["total"], _lab(case)
    assert abs(peak.total - measured) * 20 <= measured, (peak.total, measured, peak.instant)


def test_without_sync_the_peak_comes_in_the_second_micro_batch(traced: dict[str, Any]) -> None:
    timeline = traced["plain-last"].timeline
    second = next(i for i, t in enumerate(timeline) if t.label.startswith("micro batch 2 of 2"))
    worst = max(range(len(timeline)), key=lambda i: timeline[i].peak_since_previous)
    assert second < worst and timeline[worst].phase != "optimizer"


def test_skipping_the_sync_holds_every_unit_unsharded_in_the_reduce_width(traced: dict[str, Any]) -> None:
    """The traced difference between the two syncs is the lab's: N × 4 B of unsharded FP32 gradients at the loss
    backward, against the gradient shards that ``every`` holds there instead."""
    last, every = _lab("plain-last"), _lab("plain-every")
    assert last.instant is not None and every.instant is not None
    unsharded = last.instant.bytes_of("unsharded_grads")
    assert unsharded >= last.scenario.params * 4
    traced_gap = traced["plain-last"].peak["total"] - traced["plain-every"].peak["total"]
    assert abs((last.total - every.total) - traced_gap) * 20 <= traced_gap


@pytest.mark.parametrize("case", [c for c in CASES if _scenario(c, 2).grad_sync == "last"])
def test_the_lab_and_the_trace_agree_on_the_worst_micro_batch(traced: dict[str, Any], case: str) -> None:
    """Without sync, the first micro batch holds the gradients of the units it has done, the last those not yet
    reduced; with reshard_after_backward 0 the first also keeps its units gathered. Each instant is walked for both
    and the larger kept: the micro batch the lab names is the one whose instant the trace peaks in."""
    timeline = traced[case].timeline
    second = next(i for i, t in enumerate(timeline) if t.label.startswith("micro batch 2 of 2"))
    worst = max(range(len(timeline)), key=lambda i: timeline[i].peak_since_previous)
    peak = _lab(case)
    assert peak.instant is not None
    lab_first = any("micro batch 1 of 2" in e.what for e in peak.instant.entries)
    assert lab_first == (worst <= second), (peak.instant.key, timeline[worst].label)


def test_three_micro_batches_hold_a_middle_one(traced: dict[str, Any]) -> None:
    """Three micro batches: the middle one (every unit's unsharded gradient, nothing reduced) and the last are walked;
    the trace of three agrees, and a fourth adds nothing (every middle micro batch is alike)."""
    from app.trace.tracer import run_trace

    for case in ("plain-last-s32", "hf-last-s32"):
        measured, peak = run_trace(trace_setup(_scenario(case, 3))).peak["total"], _lab(case, 3)
        assert abs(peak.total - measured) * 20 <= measured, (case, peak.total, measured, peak.instant)
        assert peak.total == _lab(case, 4).total
