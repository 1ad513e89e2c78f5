"""Mistral's sliding window against transformers' own ``MistralForCausalLM`` (5.23.0) under FSDP2 on a fake process
group (``--stack hf-fsdp2``).

transformers skips a sliding-window model's causal mask (SDPA's ``is_causal``, K and V read grouped) only while the
sequence is shorter than the window; from ``seq_len ≥ sliding_window`` it builds the windowed mask, and SDPA given a
mask takes ``repeat_kv``: K and V expanded to every head, the mask kept in the activation width. The hf-fsdp2 stack's
``gqa`` follows the window (``app.ledger.scenario.stacks.preset``); both sides of it are traced here.
"""

from __future__ import annotations

import pytest

from app.ledger.models.reference import compact
from app.ledger.scenario import parse_scenario
from app.trace.setup import trace_setup
from tests.support.hf_trace import FSDP2, MARKS

pytestmark = MARKS

# Mistral-7B-v0.1's shapes with 2 of its 32 layers (each layer alike; CI time) and its 4,096-token window.
MISTRAL = {"model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 2, "num_attention_heads": 32,
           "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000,
           "sliding_window": 4096}  # fmt: skip
RUN = {"model": compact(MISTRAL), "dp": 4, "micro_batch": 1, "reduce_bytes": 2, "stack": "hf-fsdp2", **FSDP2}


@pytest.mark.parametrize(("seq_len", "gqa"), [(2048, "native"), (4096, "expand"), (8192, "expand")])
def test_the_window_decides_how_attention_reads_k_and_v(seq_len: int, gqa: str) -> None:
    """Shorter than the window: K and V read grouped (within 0.5 %: two layers leave the model's fixed offsets
    visible). From the window on: expanded, within 0.1 %, where the grouped reading is 2.9 % (4,096) and 5.0 %
    (8,192) low."""
    from app.ledger.estimate import estimate
    from app.trace import import_torch

    import_torch()
    from app.trace.tracer import run_trace

    s = parse_scenario({**RUN, "seq_len": seq_len})
    assert s.gqa == gqa  # the stack's default, from the model's window and the sequence
    measured = run_trace(trace_setup(s)).peak["total"]
    peak = estimate(s).ledger.stages[3].peak.total
    if gqa == "native":
        assert abs(peak - measured) * 200 <= measured, (peak, measured)
        return
    assert abs(peak - measured) * 1000 <= measured, (peak, measured)
    grouped = estimate(parse_scenario({**RUN, "seq_len": seq_len, "gqa": "native"})).ledger.stages[3].peak.total
    assert (measured - grouped) * 50 > measured, (grouped, measured)  # more than 2 % low: the rule is what agrees


def test_a_null_window_survives_the_link() -> None:
    """A config with ``"sliding_window": null`` (Mistral-Small-24B's) has no window; its link keeps that (omitted,
    MistralConfig's default of 4,096 would apply on reading it back)."""
    s = parse_scenario({**RUN, "model": compact({**MISTRAL, "sliding_window": None}), "seq_len": 8192})
    assert "sliding_window=0" in s.model
    assert s.gqa == "native"
