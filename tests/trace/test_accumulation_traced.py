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
RUN: dict[str, object] = {"dp": 4, "seq_len": 256, "micro_batch": 1, "reduce_bytes": 4, **FSDP2}
CASES: dict[str, dict[str, object]] = {
    "plain-every": {"model": compact(LLAMA), "grad_sync": "every"},
    "plain-last": {"model": compact(LLAMA), "grad_sync": "last"},
    "plain-last-full": {"model": compact(LLAMA), "grad_sync": "last", "act_policy": "full"},
    "plain-tied-every-full": {"model": compact(TIED), "grad_sync": "every", "act_policy": "full"},
    "hf-last": {"model": compact(LLAMA), "stack": "hf-fsdp2", "reduce_bytes": 2},
    "hf-every-full": {"model": compact(LLAMA), "stack": "hf-fsdp2", "grad_sync": "every", "act_policy": "full"},
}


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


def test_more_micro_batches_without_sync_add_nothing() -> None:
    """From the second micro batch on, each is alike: the lab's peak at 2 and at 4 is the same (the trace's too:
    the worst repeats, it does not grow)."""
    assert _lab("plain-last", 2).total == _lab("plain-last", 4).total
