"""The torchtitan stack's rules by hand: its per-op checkpointing (``act_policy = op``), ``torch.nn.RMSNorm``'s
composite ops (``norms = composite``) and its per-layer RoPE caches (``buffers = rope-per-layer``), each against
arithmetic written out here from what torchtitan 0.3.0's code saves (tests/trace/test_titan_traced.py holds the
same rules to a trace of that code)."""

from __future__ import annotations

import pytest

from app.ledger.ledger import compute_ledger
from app.ledger.scenario import ScenarioError, parse_scenario

# Llama 2 7B: h 4,096, a 32 (d 128), kv 32, i 11,008, 32 layers; s = 4,096, b = 1: s·b = 4,096 tokens.
TOKENS, H, A, KV, D, INTER, L = 4096, 4096, 32, 32, 128, 11008, 32


def _layer(**raw: str) -> int:
    defaults = parse_scenario({"model": "llama-2-7b", **raw}).model_defaults()
    assert defaults is not None
    return defaults.activations.per_layer_bytes


def test_op_keeps_the_input_and_the_outputs_torchtitans_policy_saves() -> None:
    """The input; wqkv's (a + 2·kv)·d, w1's i and w2's h outputs (the 1st, 3rd, 5th matmul); attention's output
    and its FP32 log-sum-exp per head per token — 2-byte activations."""
    by_hand = TOKENS * (H + (A + 2 * KV) * D + A * D + INTER + H) * 2 + TOKENS * A * 4
    assert _layer(act_policy="op") == by_hand == 292_028_416


def test_op_sits_between_full_and_none() -> None:
    full, op, none = (_layer(act_policy=p) for p in ("full", "op", "none"))
    assert full == TOKENS * H * 2 < op < none


def test_composite_norms_keep_the_normalised_input_in_fp32() -> None:
    """Per norm, 2 per layer: the FP32 normalised input where unfused keeps it in the activation width, (4 − 2)
    bytes per element more; fused keeps the input instead of the upcast and the normalised input."""
    unfused, composite, fused = (_layer(norms=k) for k in ("unfused", "composite", "fused"))
    assert composite - unfused == 2 * TOKENS * H * (4 - 2)
    assert composite - fused == 2 * TOKENS * H * (4 + 4 - 2)


def test_the_rope_caches_are_state_every_instant_holds() -> None:
    """One complex64 (8 B) cache of s × d ÷ 2 per layer, whole on every rank: 32 × 4,096 × 64 × 8 B."""
    rope = L * 4096 * (D // 2) * 8
    with_caches = compute_ledger(parse_scenario({"model": "llama-2-7b", "stack": "torchtitan"})).stages[3].peak
    without = compute_ledger(parse_scenario({"model": "llama-2-7b", "stack": "torchtitan", "buffers": "none"}))
    assert with_caches.total - without.stages[3].peak.total == rope == 67_108_864
    assert with_caches.schedule is not None and with_caches.instant is not None
    assert any(e.what.startswith("RoPE caches") and e.bytes == rope for e in with_caches.instant.entries)


@pytest.mark.parametrize(("model", "says"), [
    ("gpt2", "not gpt2"),
    ("mixtral-8x7b-v0.1", "not mixtral with experts"),
])  # fmt: skip
def test_op_is_refused_where_torchtitans_block_is_not_the_model(model: str, says: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario({"model": model, "act_policy": "op"})
    assert [(e.field, says in e.message) for e in caught.value.errors] == [("act_policy", True)]
