"""Tensor parallelism's activation all-reduces and the pipeline's boundary sends, per rank per step: worked examples.

Llama-2-7B: h = 4,096, 32 layers; at s = 4,096, b = 1 and BF16 activations one boundary activation is
1 × 4,096 × 4,096 × 2 = 33,554,432 B.
"""

from __future__ import annotations

from app.ledger.scenario import parse_scenario
from app.ledger.state.parallel_traffic import model_parallel_traffic, pipeline, tensor_parallel

BOUNDARY = 4_096 * 4_096 * 2


def test_no_model_parallelism_moves_no_activations() -> None:
    assert model_parallel_traffic(parse_scenario({"model": "llama-2-7b"})) == ()


def test_tensor_parallel_all_reduces() -> None:
    """tp = 2: 32 layers × 4 all-reduces, each sending 2 × (2 − 1) ÷ 2 of the buffer: 128 × 33,554,432 B."""
    t = tensor_parallel(parse_scenario({"model": "llama-2-7b", "tp": 2}))
    assert t is not None and (t.bytes, t.group, t.span) == (128 * BOUNDARY, 2, 2)


def test_tensor_parallel_at_eight_ranks() -> None:
    """tp = 8: 128 × ⌈2 × 33,554,432 × 7 ÷ 8⌉ = 128 × 58,720,256 B."""
    t = tensor_parallel(parse_scenario({"model": "llama-2-7b", "tp": 8}))
    assert t is not None and t.bytes == 128 * 2 * BOUNDARY * 7 // 8


def test_full_recomputation_repeats_the_forward_all_reduces() -> None:
    """act_policy full: every layer's forward runs again in backward, its 2 all-reduces with it: 192 in all."""
    t = tensor_parallel(parse_scenario({"model": "llama-2-7b", "tp": 2, "act_policy": "full"}))
    assert t is not None and t.bytes == 192 * BOUNDARY
    every = tensor_parallel(parse_scenario({"model": "llama-2-7b", "tp": 2, "act_policy": "full", "ac_every": 4}))
    assert every is not None and every.bytes == (128 + 8 * 2) * BOUNDARY  # layers 0, 4, …, 28 checkpointed


def test_selective_recomputation_adds_no_collective() -> None:
    plain = tensor_parallel(parse_scenario({"model": "llama-2-7b", "tp": 2}))
    selective = tensor_parallel(parse_scenario({"model": "llama-2-7b", "tp": 2, "act_policy": "selective"}))
    assert plain == selective


def test_every_micro_batch_moves_its_activations() -> None:
    one = tensor_parallel(parse_scenario({"model": "llama-2-7b", "tp": 2}))
    four = tensor_parallel(parse_scenario({"model": "llama-2-7b", "tp": 2, "grad_accum": 4}))
    assert one is not None and four is not None and four.bytes == 4 * one.bytes


def test_pipeline_sends() -> None:
    """Each end sends one boundary tensor a micro batch: the first stage its activation forward, the last its input's
    gradient back (a middle stage, which sends both, is not budgeted)."""
    first = pipeline(parse_scenario({"model": "llama-2-7b", "pp": 4}))
    last = pipeline(parse_scenario({"model": "llama-2-7b", "pp": 4, "pp_stage": "last"}))
    assert first is not None and (first.bytes, first.group, first.span) == (BOUNDARY, 2, 8 * 4)
    assert last is not None and last.bytes == BOUNDARY and "gradients" in last.what and "activations" in first.what
    accumulated = pipeline(parse_scenario({"model": "llama-2-7b", "pp": 2, "grad_accum": 4}))
    assert accumulated is not None and accumulated.bytes == 4 * BOUNDARY


def test_pipeline_sends_with_sequence_parallelism_split_over_tp() -> None:
    s = parse_scenario({"model": "llama-2-7b", "pp": 4, "tp": 2, "sequence_parallel": 1})
    p = pipeline(s)
    assert p is not None and p.bytes == BOUNDARY // 2 and p.span == s.world
    assert len(model_parallel_traffic(s)) == 2
